#pragma once
// `vitsim plan`: searches the space a scenario opens (its sweeps and --set lists) under constraints,
// simulating every point that passes the checks made without simulating (placement, global batch,
// memory) in its own process, up to `jobs` at once, and ranks the result (core/results/plan.hpp).
#include <string>

#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/results/plan.hpp"
#include "vitsim/sim/predict/predict.hpp"

namespace vitsim::sim {

struct PlanOptions {
  std::string calibration;  // path, "" = none
  int jobs = 0;             // 0 = the machine's cores
  bool progress = true;     // a progress line with the time left on stderr for runs longer than a second
  PlanConstraints constraints;
  std::string objective = "time";  // time, cost, throughput, energy
  double price_per_kwh = -1;       // >= 0: the energy price, over the platform's price_per_kwh
  int epochs = 0;                  // 0 = the scenario's training.epochs
  // Distributed plans: this process simulates the points whose index % shard_count == shard_index and
  // returns them unranked; merge_plans() ranks the union (docs/plan.md).
  int shard_index = 0, shard_count = 1;
  // plan --interval (docs/plan.md "Intervals"): after ranking, the top `interval_top` feasible points by the
  // objective's central value get predict's interval and sensitivity (sim/predict/interval.hpp), and the
  // explanation says whether the pick's interval overlaps the runner-up's. samples 0: none. Not with shards.
  IntervalOptions interval;
  int interval_top = 3;
  // Lines the plan prints first (PlanResult::space_notes): the one-line form's searched space
  // (plan_search.hpp).
  std::vector<std::string> space_notes;
};

// With a fixed global batch and no sweep over training.grad_accum, each point's accumulation is
// derived: global_batch / (micro_batch x data-parallel replicas), when that is a whole number; the global
// batch also wins over a DeepSpeed config's train_batch_size and gradient_accumulation_steps (noted in
// space_notes).
PlanResult plan(const ScenarioFile& file, const PlanOptions& opt);

}  // namespace vitsim::sim
