#pragma once
// Capacity plans ("vitsim.plan/1"): the points of a search space with their predictions, the constraints
// that excluded some, a ranking, the Pareto front of time against cost and an explanation of the top
// pick. Pure data and arithmetic: sim::plan fills the points, rank_plan() does the rest, so a plan
// simulated in shards (on several machines) and merged ranks exactly like one simulated in one piece.
#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vitsim/core/model/comm_regime.hpp"
#include "vitsim/core/results/report.hpp"

namespace vitsim {

struct PlanConstraints {
  std::optional<long long> global_batch;      // exactly this many images per optimizer step
  std::optional<long long> global_batch_min;  // bounds on it
  std::optional<long long> global_batch_max;
  std::optional<double> deadline_s;  // time to train `epochs` epochs
  std::optional<double> budget;      // cost of those epochs (price unit, or GPU-hours without a price)
  bool must_fit = true;              // drop points whose memory per GPU exceeds a GPU's memory
};

struct PlanPoint {
  int index = 0;  // position in the enumerated space (sweeps in file order), the same on every shard
  std::map<std::string, std::string>
      params;  // every swept or derived key, plus nodes, gpus, micro_batch, grad_accum
  int nodes = 0, gpus_per_node = 0, gpus = 0, micro_batch = 0, grad_accum = 0, zero = 0,
      sequence_parallel = 1;
  std::string precision, collective;
  bool overlap = false;
  long long global_batch = 0;
  double memory_per_gpu_bytes = 0;  // the largest over the ranks (core memory model)
  double gpu_memory_bytes = 0;      // the smallest GPU memory among the ranks
  // The largest micro-batch that fits at each ZeRO stage (index 0..3), every other setting as this
  // point's, by the core memory model (not the values swept); 0 when not even one image fits. Known
  // only for points that reached the memory check (largest_known).
  bool largest_known = false;
  std::array<long long, 4> largest_micro_batch{};
  bool simulated = false;
  ReportPoint result;  // the simulation's prediction (per_rank left out), when simulated
  // Its gradient reduction in numbers (core/model/comm_regime.hpp), when simulated on 2 ranks or more; with
  // plan --interval, the top candidates' result.interval and result.sensitivity (sim/predict/interval.hpp).
  CommRegime comm;
  // Filled by rank_plan:
  std::string excluded;  // "" when the point meets every constraint; else why not
  double time_to_train_s = 0, gpu_hours = 0, cost = 0;
  double energy_kwh = 0,
         energy_cost = 0;  // GPU energy of the epochs and its price (0: no power figures / no price)
  bool pareto = false;
  int rank = 0;  // 1 = best by the objective among feasible points; 0 = excluded
};

struct PlanResult {
  std::string scenario;
  // Provenance (schema vitsim.plan/2): "sha256:" of what the plan answers: every point's scenario identity,
  // the platforms' content, what-ifs, calibration, epochs, objective, constraints, price. Shards of one
  // plan share it; --merge refuses shards whose identities differ.
  std::string plan_id;
  std::string vitsim_version;  // filled by plan_from_json
  std::string origin;          // the file plan_from_json read it from
  std::map<std::string, std::string> provenance;
  std::vector<std::string> what_ifs;         // the edits, one line each
  std::vector<std::string> what_if_changes;  // what they changed in the platform
  int epochs = 1;
  double price_per_gpu_hour = 0;  // 0: the platform states none; cost is then in GPU-hours
  double price_per_kwh = 0;  // energy price (--price-per-kwh, else the platform's price_per_kwh); 0: none
  std::string objective = "time";  // time, cost, throughput, energy (kWh of the epochs)
  PlanConstraints constraints;
  // The global batch past which the top pick is flagged (explain_plan): the scenario's DeepSpeed
  // train_batch_size, else the largest batch of the published ViT ImageNet recipes; 0: no flag.
  long long batch_reference = 0;
  std::string batch_reference_source;
  int space_size = 0;  // points in the whole space (all shards)
  // How the space was made, printed first: the one-line form's search (sim/predict/plan_search.hpp), what
  // --global-batch replaced in a DeepSpeed config. Empty for most plans (then absent from the JSON).
  std::vector<std::string> space_notes;
  int shard_index = 0, shard_count = 1;
  bool ranked = false;  // false for a shard's raw points
  std::vector<PlanPoint> points;
  std::vector<std::string> explanation;
  // With `vitsim plan --what-if ... --baseline`: the same space planned without the what-ifs (ranked, no
  // what-ifs, no baseline of its own), written in the JSON as "baseline" so that `vitsim plot` draws it
  // beside the plan's curves. Null otherwise (and absent from the JSON).
  std::shared_ptr<PlanResult> baseline;
  std::string cost_unit() const { return price_per_gpu_hour > 0 ? "$" : "GPU-h"; }
};

// Applies the post-simulation constraints (fit, deadline, budget), fills time, GPU-hours, cost,
// scaling efficiency, ranks and the Pareto front, orders the points (ranked first, then excluded by
// index) and writes the explanation. Idempotent.
void rank_plan(PlanResult& plan);
// Shards of one plan (same space, constraints, what-ifs) into one ranked plan; throws Error when the
// shards do not belong together or a point is missing or twice.
// Each shard's errors name its origin (the file it was read from).
PlanResult merge_plans(const std::vector<PlanResult>& shards);
// The Pareto front of time against cost among feasible points, by increasing time.
std::vector<const PlanPoint*> pareto_front(const PlanResult& plan);
// Why a ranked plan has no feasible point, in one line: "no point meets the constraints: 48 points, 12
// excluded by memory, 30 by deadline, 6 by budget; relax them or widen the space" (the constraint each point
// failed first, counts in decreasing order). "" when some point is feasible or the plan is unranked.
std::string infeasible_reason(const PlanResult& plan);
// The top pick in words a user can act on: what bounds it, how much memory it leaves, what would move it
// (its gradient reduction in numbers: core/src/results/plan_advice.cpp), and with intervals whether the
// runner-up overlaps it.
std::vector<std::string> explain_plan(const PlanResult& plan);
// What the what-ifs changed, in words: the baseline's top pick against the edited plan's, and the
// baseline's top pick's own settings under the what-ifs. Both plans span the same space (same indices).
std::vector<std::string> compare_plans(const PlanResult& baseline, const PlanResult& edited);

std::string plan_to_json(const PlanResult& plan);  // deterministic
// A point's CommRegime as the plan's JSON holds it ("comm"), for a child's hand-over to sim::plan; the reader
// checks it as plan_from_json does, naming `origin`.
std::string comm_regime_to_json(const CommRegime& c);
CommRegime comm_regime_from_json(const std::string& text, const std::string& origin);
// The one plan reader (plan --merge, plot): schema vitsim.plan/2, every field's type and range, each
// simulated point's result through the report reader's checks, derived figures (time to train, GPU-hours,
// cost) against the result, indices unique and in the space. Throws Error "ORIGIN: /json/pointer: ...".
PlanResult plan_from_json(const std::string& text, const std::string& origin);
std::string plan_to_table(const PlanResult& plan, int top);  // top: feasible rows shown (0 = all)
std::string plan_to_csv(const PlanResult& plan);

}  // namespace vitsim
