#pragma once
// `vitsim predict`: every point of a scenario simulated in its own process (SimGrid allows one engine
// per process), up to `jobs` at once, gathered into one Report.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vitsim/core/base/enum_names.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/results/report.hpp"

namespace vitsim {
struct Calibration;
}

namespace vitsim::sim {

class PlatformCache;  // sim/engine/process_pool.hpp

// How an interval's Latin hypercube is evaluated (`--interval-mode`; docs/predict.md "Intervals and
// sensitivity"): Surrogate, on the additive surrogate of the one-at-a-time ends the sensitivity simulates
// anyway (2 x figures simulations per point); Sampled, every sample simulated (samples + 2 x figures).
enum class IntervalMode { Surrogate, Sampled };
inline constexpr EnumNames<IntervalMode, 2> kIntervalModeNames{
    {{IntervalMode::Surrogate, "surrogate"}, {IntervalMode::Sampled, "sampled"}}};

// `--interval`: an interval and a sensitivity ranking per point (sim/predict/interval.hpp); samples 0 = none.
struct IntervalOptions {
  int samples = 0;
  IntervalMode mode = IntervalMode::Surrogate;
  std::uint64_t seed = 26;  // any fixed value: the design is reproducible, not tuned
  double p_low = 0.1, p_high = 0.9;
  // --runs FILE...: measured runs (sim/predict/interval.hpp MeasuredRun) whose ratios to the model widen the
  // interval.
  std::vector<std::string> runs;
};

struct PredictOptions {
  std::string calibration;  // path, "" = none
  int jobs = 0;             // 0 = the machine's cores
  std::string trace_path;   // "" = no trace; else a Chrome trace JSON of every point (core/results/trace.hpp)
  std::string
      trace_ranks;       // --trace-ranks LIST (core's parse_rank_list); "" = the first 64 ranks of each point
  bool progress = true;  // a progress line on stderr for runs longer than a second
  double price_per_kwh = -1;  // >= 0: the energy price, over the platforms' price_per_kwh (docs/model.md
                              // "Energy and cost per epoch")
  long long epochs = 0;       // > 0: the whole run's epochs (predict --epochs), over training.epochs
  IntervalOptions interval;
};

Report predict(const ScenarioFile& file, const PredictOptions& opt);

// What the interval, the measured runs' ratios and `vitsim fit` read of a simulated point: its child hands
// back these two numbers (exactly: JSON's doubles round-trip), not the whole point (per-rank figures: tens of
// kilobytes a point at 256 ranks, parsed again in the parent).
struct SimulatedTimes {
  double epoch_time_s = 0;
  double step_time_s = 0;  // the mean step (ReportPoint::step_time_s.mean)
};

// Resolved points (what-ifs already applied) simulated as predict simulates them, without a trace: their
// times in order. `who` names the progress line. `engine_of` (empty, or one path per point): the
// platform file whose loaded engine point i runs on, when the point's own file differs from it only in
// figures SimGrid never sees (a GPU's or a node's <prop>s: the compute, loader and copy figures vitsim reads
// from its facts); the point's facts are read from its own file. One zygote then serves every such copy.
// `calib_of` (empty, or one per point): the calibration point i runs with instead of `calib` (the interval's
// sampled copies). `platforms`: the caller's cache of the files already read and load-checked (predict's),
// so that they are not read and checked again; nullptr: a cache of its own. A copy's facts are read in its
// own child; `copy_facts` (empty, or called in point i's child for a point on a copy): the copy's facts,
// read there without a file the parent wrote (the interval's copies: PlatformDocument,
// docs/benchmarks.md "Prediction intervals (issue 26)").
std::vector<SimulatedTimes> simulate_points(const std::vector<Scenario>& points, const Calibration* calib,
                                            const PredictOptions& opt, const std::string& who,
                                            const std::vector<std::string>& engine_of = {},
                                            const std::vector<const Calibration*>& calib_of = {},
                                            PlatformCache* platforms = nullptr,
                                            const std::function<PlatformFacts(size_t)>& copy_facts = {});

}  // namespace vitsim::sim
