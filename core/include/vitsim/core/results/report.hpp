#pragma once
// The one result schema ("vitsim.report/2") written by the simulator and the real trainer alike.
// Schema 2 adds provenance (docs/reports.md): the report's kind (predicted or measured), the vitsim
// version that wrote it and, per point, the identity of the scenario point it answers
// (core/formats/identity.hpp).
#include <algorithm>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "vitsim/core/model/energy.hpp"
#include "vitsim/core/model/memory.hpp"

namespace vitsim {

struct StepStats {
  double mean = 0, p50 = 0, p95 = 0;
};
StepStats step_stats(std::vector<double> samples);  // empty -> zeros

// Seconds per optimizer step, averaged over steps (a rank's view; the point's is the slowest rank's
// for the step time and the mean over ranks for the terms).
struct Breakdown {
  double data = 0;  // waiting for the loader
  double h2d = 0;   // host->device copies
  double compute_fwd = 0;
  double compute_bwd = 0;
  double optimizer = 0;
  double comm_total = 0;    // time collectives were in flight
  double comm_exposed = 0;  // part of it nothing else overlapped (the rank waited)
  // Waiting at the gradient sync for the expected slowest rank (the platform's gpu_step_cv; docs/model.md
  // "Stragglers"); apart from comm_exposed. The step is the sum of every term but comm_total.
  double straggler_wait = 0;
};
// The breakdown's terms that add up to the step: data + h2d + forward + backward + optimizer + exposed
// communication + straggler wait.
double breakdown_sum_s(const Breakdown& b);
// Seconds per step one GPU is busy, from its breakdown (core/model/energy.hpp says what counts as busy):
// forward, backward, the optimizer step and exposed communication.
double gpu_busy_s(const Breakdown& b);

struct RankReport {
  int rank = 0;
  std::string host;
  std::string device;
  StepStats step_time_s;
  Breakdown breakdown_s;
};

// A point's interval (issue 26 item 3, docs/predict.md "Intervals and sensitivity"): the epoch and step
// times at the p_low and p_high quantiles of `samples` simulations, the platform's ranged figures sampled
// by a Latin hypercube of seed `seed`. samples == 0: no interval (written only with `--interval`).
//
// With measured runs (`--runs`, docs/predict.md "Measured runs"): `runs` holds how the runs' measured times
// stood against the model (measured / predicted, each run's own configuration simulated as the point is), and
// the interval's ends take in the central value times the runs' split-conformal ends as well: a new run like
// those falls between them at least `level` of the time.
struct RunsSpread {
  int count = 0;                         // runs held against the model (0: none given)
  int k_low = 0, k_high = 0;             // the order statistics taken, 1-based among `count`
  double ratio_low = 1, ratio_high = 1;  // measured / predicted at k_low and k_high
  double level = 0;                      // (k_high - k_low) / (count + 1)
};
// Split conformal ends (Vovk, Gammerman and Shafer, "Algorithmic Learning in a Random World", 2005; Lei et
// al., "Distribution-free predictive inference for regression", JASA 2018) of measured / predicted ratios:
// sorted r_1 <= .. <= r_n, k_low = floor((n + 1) p_low) and k_high = ceil((n + 1) p_high), clamped to 1..n; a
// new ratio exchangeable with them falls below r_(k_low) with probability k_low / (n + 1) and above
// r_(k_high) with (n + 1 - k_high) / (n + 1), so between them with `level` = (k_high - k_low) / (n + 1).
// ratios not empty, each > 0.
RunsSpread conformal_spread(std::vector<double> ratios, double p_low, double p_high);
// The fewest runs, `at_least` or more, whose conformal ends hold p_high - p_low (9 for p10-p90).
int runs_for_level(double p_low, double p_high, int at_least = 1);
// The model's own error on the public corpus (issue 37 item 3; docs/predict.md "The model's own error"): a
// point whose figures no calibration measured, and that no measured run was held against, takes in its
// central value times the band of measured / predicted ratios of the corpus' rows
// (core/results/corpus_error.hpp: each origin one vote). held_out is what the band held when each origin was
// left out and judged in the others' band.
struct CorpusSpread {
  int rows = 0, origins = 0;  // rows == 0: not applied
  double ratio_low = 1, ratio_high = 1;
  double held_out = 0;  // share of held-out rows inside (leave one origin out)
  // The interval of the figures (and spans) alone, before the band was taken in: which part is the corpus'.
  double figures_epoch_low_s = 0, figures_epoch_high_s = 0, figures_step_low_s = 0, figures_step_high_s = 0;
};
struct PointInterval {
  int samples = 0;
  // The samples evaluated on the additive surrogate of the one-at-a-time ends (predict --interval-mode
  // surrogate, the default) rather than each simulated; JSON "surrogate": true, absent when sampled.
  bool surrogate = false;
  long long seed = 0;
  double p_low = 0, p_high = 0;  // 0.1, 0.9 by default
  int figures = 0;               // ranged figures sampled
  double epoch_low_s = 0, epoch_high_s = 0;
  double step_low_s = 0, step_high_s = 0;
  RunsSpread runs;      // runs.count == 0: no measured runs
  CorpusSpread corpus;  // corpus.rows == 0: calibrated or measured runs given, the corpus not applied
};
// How far one ranged figure moves the point's epoch time: the point simulated with the figure at each end
// of its range, every other figure at its value. A point's list is sorted by swing, widest first.
struct FigureSensitivity {
  std::string figure;   // the property ("socket_bw")
  std::string where;    // where the range is stated ("cluster node-0", "link n0-nic and 3 more")
  std::string range;    // as written ("1GBps..3GBps")
  std::string why;      // the range's reason as written
  std::string measure;  // the command that measures it (the property table's column)
  double epoch_at_low_s = 0, epoch_at_high_s = 0;
  double swing_s() const {
    return epoch_at_high_s > epoch_at_low_s ? epoch_at_high_s - epoch_at_low_s
                                            : epoch_at_low_s - epoch_at_high_s;
  }
};

struct ReportPoint {
  std::map<std::string, std::string>
      params;  // swept/overridden values + nodes, gpus, micro_batch, grad_accum
  int nodes = 0, gpus = 0, micro_batch = 0, grad_accum = 0;
  long long global_batch = 0;
  long long steps_per_epoch = 0;  // optimizer steps per epoch
  // The epoch's training samples (core/model/epoch.hpp), from which steps_per_epoch follows with the global
  // batch: written by the simulator, checked when read; 0 when unknown (measured runs, older reports).
  long long epoch_samples = 0;
  StepStats step_time_s;
  Breakdown breakdown_s;
  double epoch_time_s = 0;
  double throughput_img_s = 0;
  double scaling_efficiency = -1;  // -1: no 1-GPU reference in the sweep
  double memory_per_gpu_bytes = 0;
  MemoryBreakdown memory;
  bool fits_in_memory = true;
  std::string bound;         // what dominates the step: compute, exposed_comm, data, h2d, optimizer
  bool extrapolated = true;  // epoch time extrapolated from steady-state steps
  int simulated_steps = 0;
  std::vector<double> test_accuracy;  // per epoch (real runs)
  std::vector<std::string> notes;
  std::vector<RankReport> per_rank;
  std::string scenario_id;  // "sha256:..." of the resolved point (scenario_id()); "" in schema-1 reports
  // Model FLOPs utilisation (docs/reports.md): per GPU and optimizer step, the op model's forward +
  // backward FLOPs (core/ops pass_ops x grad_accum, 1/sequence_parallel of the token-wise layers), the
  // activation-checkpointing recompute (hardware FLOPs only), and the GPUs' dense peak in the precision
  // used (mean over ranks). 0 when unknown (older reports, measured runs without a platform).
  double model_flops = 0;
  double recompute_flops = 0;
  double peak_flops = 0;
  double tflops_per_gpu() const { return step_time_s.mean > 0 ? model_flops / step_time_s.mean / 1e12 : 0; }
  double mfu() const {
    return step_time_s.mean > 0 && peak_flops > 0 ? model_flops / (step_time_s.mean * peak_flops) : 0;
  }
  double hfu() const {
    return step_time_s.mean > 0 && peak_flops > 0
               ? (model_flops + recompute_flops) / (step_time_s.mean * peak_flops)
               : 0;
  }
  PointEnergy
      energy;  // per epoch (docs/model.md "Energy and cost per epoch"); unknown without GPU power figures
  // The whole training run (predict's closing summary, docs/predict.md): the scenario's epochs (or
  // predict --epochs) and the platform's price per GPU-hour. 0 epochs: not computed (measured reports,
  // older files); the figures below derive from them as plan's do (core/results/plan.hpp).
  long long total_epochs = 0;
  double price_per_gpu_hour = 0;  // the zone property price_per_gpu_hour; 0: the platform states none
  double total_time_s() const { return epoch_time_s * total_epochs; }
  double total_gpu_hours() const { return total_time_s() * gpus / 3600.0; }
  double total_cost() const { return total_gpu_hours() * price_per_gpu_hour; }
  double total_kwh() const { return energy.epoch_kwh * total_epochs; }  // 0 without GPU power figures
  PointInterval interval;                                               // samples == 0 without `--interval`
  std::vector<FigureSensitivity> sensitivity;  // with `--interval`: widest swing first
};

// A point of a sweep that has no result: its simulation threw or its process died (an out-of-memory kill).
// The report keeps the other points and lists these with their reason; vitsim exits 6 (docs/errors.md).
struct FailedPoint {
  int point = 0;  // 1-based, in the sweep's order (as "point 3" in messages)
  std::map<std::string, std::string> params;
  std::string reason;
};

struct Report {
  std::string scenario;
  std::string source = "simulated";  // or "measured"; written as the kind "predicted" or "measured"
  std::map<std::string, std::string> provenance;
  std::vector<ReportPoint> points;
  std::vector<FailedPoint> failed;  // points without a result, with why ("failed_points" in JSON)
  // Filled by report_from_json:
  int schema_version = 2;      // 1: an older vitsim's report, without kind or identities
  std::string vitsim_version;  // of the vitsim that wrote it ("" in schema 1)
  std::string origin;          // the file it was read from
  std::string kind() const { return source == "measured" ? "measured" : "predicted"; }
};

// Which rank bounds the step on a heterogeneous point (ranks on more than one kind of device): the rank
// busiest outside communication (loader wait, copies, forward, backward, optimizer; the others wait for
// it in the all-reduce), as "rank 3 (T4 on n1)". "" when the point's ranks all have one device or the
// report holds no per-rank figures. The predict table's "straggler" column.
std::string straggler(const ReportPoint& p);

// The report's own identity: "sha256:" of its points' scenario identities, in order.
std::string report_scenario_id(const Report& r);

// Plausibility limits of the report reader (docs/reports.md). 16 TiB: no accelerator or host of
// 2026 holds that much per device (the largest GPUs have 288 GB; large hosts a few TiB).
inline constexpr double kMaxMemoryPerGpuBytes = 16.0 * 1024 * 1024 * 1024 * 1024;
// An epoch simulated or measured in full takes at least one mean step and at most this many times
// mean step x steps_per_epoch (warm-up steps are slower and left out of the mean; a measured epoch also
// holds the loader's start, checkpoints and replica checks, which a tiny model's steps may not outweigh).
inline constexpr double kFullEpochMaxFactor = 20;
inline constexpr double kMeasuredEpochMaxFactor = 100;
// An extrapolated epoch is mean step x steps_per_epoch, within this fraction plus kWarmupSteps steps
// (the tail and warm-up steps may be counted at their own cost).
inline constexpr double kEpochTolerance = 0.05;
inline constexpr double kWarmupSteps = 20;
// A ratio of times (a measured time over the model's, an interval's conformal ends): within 1e-12 .. 1e12.
// ASSUMPTION: no model is off by twelve orders of magnitude; a time that far from the model's is another
// unit or a typing error (1e300 s), not a measurement. One bound for the report reader, predict --runs and
// vitsim fit (check_time_ratio, measured_times.hpp; issue 39 item 12).
inline constexpr double kMinTimeRatio = 1e-12;
inline constexpr double kMaxTimeRatio = 1e12;
// Throughput is global_batch / mean step within this fraction (below: a partial last batch may count).
inline constexpr double kThroughputTolerance = 0.01;

// Fills scaling_efficiency for every point that has a 1-GPU point with the same other parameters:
// throughput / (gpus * throughput of that point), valid for strong and weak scaling alike.
void fill_scaling_efficiency(Report& r);
std::string bound_of(const Breakdown& b);

std::string report_to_json(const Report& r);  // deterministic: sorted keys, fixed number format
// The one reader of reports (validate, plan, plot, predict's children): parses schema 1 or 2 and checks
// every field's type and range and the figures' consistency (docs/reports.md). Throws Error, one
// line: "ORIGIN: /json/pointer: what is wrong".
Report report_from_json(const std::string& text, const std::string& origin);
// The same report as JSON values, without the text (a forked child's report to its parent: both read and
// write the same fields as the text forms, with the same checks).
nlohmann::json report_to_json_value(const Report& r);
Report report_from_json_value(const nlohmann::json& j, const std::string& origin);
// One point as a report holds it, read and checked the same way; `pointer` is where it sits in the file
// (a plan's "/points/3/result"). `measured`: the point is a real run's.
ReportPoint report_point_from_json(const nlohmann::json& j, const std::string& origin,
                                   const std::string& pointer, bool measured, int schema_version = 2);
// One point as report_to_json writes it (a plan's simulated results).
nlohmann::json report_point_to_json(const ReportPoint& p);
// Throws Error unless `r` is of `kind` ("predicted" or "measured"), naming what it is instead and where
// it came from; a schema-1 report (no kind, no identities) is refused with a line saying so.
void require_report_kind(const Report& r, const std::string& kind, const std::string& purpose);
std::string report_to_csv(const Report& r);
// The parameter columns of a CSV of `points` (report or plan points): every key of their params, in the
// order first seen, but nodes, gpus, micro_batch and grad_accum (fixed columns carry them; repeating them
// as parameter columns gave duplicate names).
template <class Points>
std::vector<std::string> csv_param_keys(const Points& points) {
  std::vector<std::string> keys;
  const std::vector<std::string> fixed{"nodes", "gpus", "micro_batch", "grad_accum"};
  for (const auto& p : points)
    for (const auto& [k, v] : p.params)
      if (std::find(keys.begin(), keys.end(), k) == keys.end() &&
          std::find(fixed.begin(), fixed.end(), k) == fixed.end())
        keys.push_back(k);
  return keys;
}
std::string report_to_table(const Report& r);

// The params keys that get a column of their own in a table (predict's, plan's): every key of `points`'
// params in sorted order, but the fixed columns' (`shown`) and, with `only_varying`, keys whose value is the
// same in every point. Sweeping parallelism.collective or cluster.platform without such a column printed
// rows that could not be told apart (issue 28).
template <class Points>
std::vector<std::string> param_columns(const Points& points, const std::vector<std::string>& shown,
                                       bool only_varying) {
  std::map<std::string, std::vector<std::string>> values;
  for (const auto& p : points)
    for (const auto& [k, v] : p.params) {
      auto& vs = values[k];
      if (std::find(vs.begin(), vs.end(), v) == vs.end()) vs.push_back(v);
    }
  std::vector<std::string> out;
  for (const auto& [k, vs] : values)
    if ((!only_varying || vs.size() > 1) && std::find(shown.begin(), shown.end(), k) == shown.end())
      out.push_back(k);
  return out;
}
// A param column's head: the key without its element ("parallelism.collective" -> "collective").
std::string param_column_head(const std::string& key);
// Rows of cells as a table: each column right-aligned to its widest cell, two spaces apart.
std::string align_columns(const std::vector<std::vector<std::string>>& rows);
// The price per GPU-hour a platform states (its zone property price_per_gpu_hour; 0 when absent), read
// strictly; `path` names the platform in the error.
double parse_price_per_gpu_hour(const std::map<std::string, std::string>& props, const std::string& path);

}  // namespace vitsim
