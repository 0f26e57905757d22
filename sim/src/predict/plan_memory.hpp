#pragma once
// The plan's memory checks made without simulating (plan.cpp's screen, plan_search.cpp's micro-batch axis):
// the core memory model with the inputs simulate_point gives it, so that the pre-check and the simulation
// agree.
#include <cmath>

#include "vitsim/core/formats/placement.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/model/vit.hpp"
#include "vitsim/core/platform/platform.hpp"

namespace vitsim::sim {

// The memory per GPU of `s` on each distinct GPU model of the placement, against that GPU's memory: the
// largest need, the smallest memory, and whether every GPU holds its ranks.
struct MemoryFit {
  double need = 0, have = INFINITY;
  bool fits = true;
};
MemoryFit memory_fit(const Scenario& s, const Workload& w, const PlatformFacts& facts,
                     const RankPlacement& place);

// The largest micro-batch that fits at ZeRO stage `zero`, the rest as `s` (memory grows with the
// micro-batch: doubling, then bisection); 0 when not even one image fits.
long long largest_fitting_micro_batch(const Scenario& s, int zero, const Workload& w,
                                      const PlatformFacts& facts, const RankPlacement& place);

}  // namespace vitsim::sim
