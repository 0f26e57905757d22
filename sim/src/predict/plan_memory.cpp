// The plan's memory checks made without simulating (predict/plan_memory.hpp).
#include "predict/plan_memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "vitsim/core/model/memory.hpp"
#include "vitsim/sim/point/simulate.hpp"

namespace vitsim::sim {

// The memory per GPU of `s` on each distinct GPU model of the placement, against that GPU's memory, by the
// core memory model with the inputs simulate_point gives it (so that the pre-check and the simulation
// agree): the largest need, the smallest memory, and whether every GPU holds its ranks.
MemoryFit memory_fit(const Scenario& s, const Workload& w, const PlatformFacts& facts,
                     const RankPlacement& place) {
  MemoryFit f;
  std::set<std::string> seen;
  for (const auto& host : place.hosts) {
    const GpuFacts& g = facts.gpu.at(host);
    if (!seen.insert(fmt::format("{}/{}/{}", g.model, g.mem_bytes, g.reserved_bytes)).second) continue;
    const double need = memory_per_gpu(w, memory_inputs(s, g.reserved_bytes)).total();
    f.need = std::max(f.need, need);
    f.have = std::min(f.have, g.mem_bytes);
    if (need > g.mem_bytes) f.fits = false;
  }
  return f;
}

// The largest micro-batch that fits at ZeRO stage `zero`, the rest as `s` (memory grows with the
// micro-batch: doubling, then bisection); 0 when not even one image fits.
long long largest_fitting_micro_batch(const Scenario& s, int zero, const Workload& w,
                                      const PlatformFacts& facts, const RankPlacement& place) {
  constexpr long long kMost = 1 << 24;  // training.micro_batch's range (scenario_keys.cpp)
  Scenario t = s;
  t.parallel.zero = zero;
  auto fits = [&](long long mb) {
    t.training.micro_batch = static_cast<int>(mb);
    return memory_fit(t, w, facts, place).fits;
  };
  if (!fits(1)) return 0;
  long long lo = 1, hi = 2;
  while (hi <= kMost && fits(hi)) lo = hi, hi *= 2;
  if (hi > kMost) return lo;
  while (hi - lo > 1) {
    const long long mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace vitsim::sim
