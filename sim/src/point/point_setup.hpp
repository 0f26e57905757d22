#pragma once
// A point's set-up, before its engine runs and between loading the platform and starting the actors: the
// steps to simulate within the memory limit (point_setup.cpp), then each rank's device, loader, copy path and
// communication stream, and the groups its collectives run over (rank_setup.cpp).
#include <simgrid/s4u.hpp>

#include <string>
#include <vector>

#include "point/rank_state.hpp"
#include "vitsim/core/formats/calibration.hpp"
#include "vitsim/core/formats/placement.hpp"
#include "vitsim/core/model/epoch.hpp"
#include "vitsim/core/model/memory.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/sim/fabric/latency_model.hpp"
#include "vitsim/sim/point/simulate.hpp"

namespace vitsim::sim {

// check_point without the compute model's check: the placement, then the collective (simulate_point's own
// checks, in its order). Throws Error.
PointSetup setup_point(const Scenario& s, const PlatformFacts& facts);

// The SimGrid host of each placed rank (simulate_point; vitsim collective, collective_bench.cpp).
std::vector<simgrid::s4u::Host*> rank_hosts(simgrid::s4u::Engine& e, const RankPlacement& place,
                                            const PlatformFacts& facts);

// The compute model's inputs per device type; with patch parallelism a rank computes 1/sp of every token-wise
// layer (the head sees only the class token and runs whole).
ComputeInputs compute_inputs(const Scenario& s);

// How many steps to simulate: the set window (or the whole epoch), and the bound of the steady-state search,
// within the memory limit (`h`'s steps, warmup and bound). Throws Error when the set steps do not fit.
struct StepBudget {
  EpochShape epoch;
  bool full = false;
};
// The memory limit of a simulation: simulation.max_memory, else half of this machine's memory (or 90% of an
// address-space limit, under which every actor's stack counts whole: added to `need`).
double memory_limit(const Scenario& s, double& need);

StepBudget budget_steps(StepHorizon& h, const Scenario& s, const PlatformFacts& facts);

// The ranks' SimGrid hosts, in rank order, with the placement they come from and the platform's latencies.
struct RankHosts {
  const RankPlacement& place;
  std::vector<simgrid::s4u::Host*> hosts;
  const LatencyModel& latency;
};

// The data-parallel group and, with patch parallelism, the Ulysses groups of sp consecutive ranks.
void make_groups(PointRun& run, const RankHosts& rh, std::vector<std::string>& notes);

// Memory per GPU (the largest over ranks) and whether every rank's fits its GPU.
struct MemoryVerdict {
  MemoryBreakdown max;
  bool fits = true;
};
// Every rank's state: its device, loader, copy path and communication stream; the memory each GPU needs.
MemoryVerdict setup_ranks(PointRun& run, const PlatformFacts& facts, const Calibration* calib,
                          const RankHosts& rh, std::vector<std::string>& notes);

// The data-parallel group's transfers without flows where that gives the flows' own instants: the group as
// the only traffic (Group::set_only_traffic), the lone ring (Group::set_lone_ring).
void choose_fast_paths(PointRun& run, const PlatformFacts& facts, const RankHosts& rh,
                       std::vector<std::string>& notes);

}  // namespace vitsim::sim
