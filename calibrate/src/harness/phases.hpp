#pragma once
// The phases of one `vitsim calibrate` run (calibrate.cpp run), one file each, and what they share: the job,
// this rank's device, the scenario's model, the details document and the terminal (RunContext). No Torch: the
// phases time through the LibTorch benchmarks of measure.hpp and the communicator of real/comm.hpp.
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/harness.hpp"
#include "harness/measure.hpp"
#include "vitsim/calibrate/calibrate.hpp"
#include "vitsim/real/comm.hpp"

namespace vitsim::calibrate {

using json = nlohmann::json;

// Stage 1 of the op-model fit weights each op sample by its measured time (docs/calibrate-validate.md).
constexpr bool kWeightByTime = false;
// Passes over the op list (measure_ops): an op's time is the median of its rounds' means.
constexpr int kOpRounds = 3;
// Rounds of the compute phase over the micro-batches: a micro-batch's figure is its median round's.
constexpr int kComputeRounds = 3;
// Rounds of the step phase over the micro-batches: a micro-batch's sync rest is its median round's. As many
// as the compute phase's: the two phases' rounds take turns (calibrate.cpp, run_rounds).
constexpr int kStepRounds = kComputeRounds;
// All-reduce timing: warm-up runs thrown away, then at least this many timed runs per size.
constexpr int kAllreduceWarmup = 5, kAllreduceMinIters = 10;

// What every phase of one run shares.
struct RunContext {
  RunContext(const Scenario& scenario, const Options& options, real::World& w)
      : s(scenario), o(options), world(w) {}
  const Scenario& s;
  const Options& o;
  real::World& world;
  int rank = 0, nranks = 1;
  bool root = true;
  std::vector<std::string> devices;     // the device type of each rank
  std::vector<std::string> type_order;  // the distinct device types, in rank order
  DeviceInfo dev;
  Environment env;
  Workload workload;
  std::vector<int> mbs;  // calibration micro-batches, ascending
  json details;

  // `--warmup` and `--iters`: the repeats of compute and copies.
  Repeats repeats() const { return {o.warmup, o.iters}; }
  void say(const std::string& text) const;                  // on rank 0 unless quiet
  std::vector<int> members(const std::string& type) const;  // the ranks of one device type
};

// The environment of this process (harness.cpp).
Environment record_environment();
// A spread as the details file writes it.
json spread_json(const Spread& s);
std::string pct(double x);  // "12.3%"
double median_of(std::vector<double> v);

// ---- compute (phase_compute.cpp) ----
struct ComputePhase {
  std::map<std::string, DeviceCalibration> by_type;  // one entry per device type, its points by micro-batch
  std::vector<double> rank_rates;                    // achieved FLOP/s per rank at the largest micro-batch
  std::vector<double> rank_peaks;                    // best GEMM FLOP/s per rank (measure_gemm_rate)
  double worst_rel_iqr = 0, worst_rank_gap = 0;
  int rounds = 0;  // rounds measured per micro-batch
};
// The compute phase's rounds (calibrate.cpp runs them interleaved with the step phase's, run_rounds): each
// round times every micro-batch once on all ranks at once; its spread (RoundedPhase::spread) is the worst
// round_spread of a rank's forward + backward means over the ranks and micro-batches.
struct ComputeRounds {
  Repeats per_round;
  std::map<int, std::vector<ComputeSample>> by_mb;  // this rank's rounds per micro-batch
};
ComputeRounds start_compute(RunContext& x);
void compute_round(RunContext& x, ComputeRounds& r);
double compute_spread(RunContext& x, const ComputeRounds& r);
// The figures of the rounds measured: per micro-batch the median round. The compute phase's span of each
// device type (DeviceCalibration::compute_span, set in by_type): its rounds' forward + backward means over
// the kept round's, lowest and highest over its ranks and micro-batches; none with one round. The files take
// the step phase's and the occupancy's in (outputs.cpp settle_compute_span). Each device type's step_cv:
// the median over its ranks and micro-batches of step_cv_of the rank's rounds.
ComputePhase finish_compute(RunContext& x, const ComputeRounds& r);

// ---- op model (phase_op_model.cpp) ----
std::vector<OpModelCalibration> op_model_phase(RunContext& x, const ComputePhase& compute);

// ---- occupancy (phase_occupancy.cpp) ----
double occupancy_phase(RunContext& x, const ComputePhase& compute);

// ---- host-to-device copies (phase_copy.cpp) ----
struct CopyRates {  // one rank's copy bandwidths (bytes/s)
  double pinned = 0, pageable = 0;
};
struct HostToDevice {
  CopyRates median;  // over the ranks
  bool on_cpu = true;
};
HostToDevice copy_phase(RunContext& x);

// ---- loader (phase_loader.cpp) ----
LoaderCalibration loader_phase(RunContext& x);

// ---- all-reduce (phase_allreduce.cpp) ----
struct AllreducePhase {
  std::vector<LinkCalibration> links;  // none with one rank
  RingFit fit;
};
AllreducePhase allreduce_phase(RunContext& x);

// ---- the trainer's own steps (phase_step.cpp) ----
// What a step costs at its gradient sync beyond the all-reduce on the fitted edge `fit` and the wait for a
// slower device type that `compute` gives the simulator, measured with the trainer at every calibration
// micro-batch (none with one rank or --no-step).
// `span`: each round's rest summed over the micro-batches over the sync fit's, lowest and highest
// (calibrate.hpp sync_span_of: the sync figures' span; empty with one round or nothing fitted).
// trainer_low..trainer_high: the trainer's own forward + backward in every round over the ranks' calibrated
// figure at that micro-batch (trainer_rounds of them; the compute span takes them in: what the calibrated
// compute misses of the trainer's).
struct StepPhase {
  SyncCalibration sync;
  MeasuredSpan span;
  double trainer_low = 1, trainer_high = 1;
  int trainer_rounds = 0;
  int rounds = 0;  // rounds measured per micro-batch
};
// One micro-batch's step in one round, as the trainer measured it on every rank (the means over its timed
// steps, the same on every rank), and what the finish adds from the compute and all-reduce phases.
struct StepRow {
  int micro_batch = 0;
  double compute = 0;  // forward + backward, mean over the ranks
  double exposed = 0;  // exposed gradient sync, mean over the ranks
  double optimizer = 0, data = 0;
  double allreduce = 0;   // the step's bucket all-reduces on the fitted ring edge, back to back (finish)
  double imbalance = 0;   // the slowest type's calibrated compute - the ranks' mean of it (finish)
  double calibrated = 0;  // the ranks' calibrated forward + backward at this micro-batch, their mean (finish)
  double extra() const { return exposed - allreduce - imbalance; }
};
// The step phase's rounds (none with one rank or --no-step: `active` false). Its spread: the worst
// round_spread over the micro-batches of the trainer's forward + backward + exposed sync (the rest the
// phase keeps is a small difference of those, whose own spread the sync span records).
struct StepRounds {
  bool active = false;
  int steps = 0;  // timed steps per round
  std::map<int, std::vector<StepRow>> by_mb;
};
StepRounds start_step(RunContext& x);
void step_round(RunContext& x, StepRounds& r);
double step_spread(const StepRounds& r);
StepPhase finish_step(RunContext& x, StepRounds& sr, const ComputePhase& compute, const RingFit& fit);

// ---- the files (outputs.cpp) ----
// Everything one run measured and fitted.
struct Measured {
  ComputePhase compute;
  std::vector<OpModelCalibration> op_models;
  double alone_ratio = 1;
  HostToDevice h2d;
  LoaderCalibration loader;
  AllreducePhase allreduce;
  StepPhase step;
  RoundChecks rounds;  // how the compute and step rounds agreed (run_rounds)
};
// The calibration of this run: `c` (empty, or the file appended to) with this run's entries merged in
// and its provenance.
void complete_calibration(Calibration& c, const RunContext& x, const Measured& m,
                          const std::vector<std::string>& hosts);
// Rank 0 writes the calibration, the details and the platform file.
void write_outputs(RunContext& x, const Calibration& c, const Measured& m,
                   const std::vector<std::string>& hosts);

}  // namespace vitsim::calibrate
