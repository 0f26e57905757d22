#pragma once
// Intervals and sensitivity of a prediction (issue 26 item 3; docs/predict.md "Intervals and sensitivity").
// The platform's ranged figures (core/platform/figure_range.hpp) and the calibration's measured spans of
// the platform's device types (core/formats/calibration.hpp MeasuredSpan: its compute and sync figures, as
// factors; its occupancy factor; its step cv's measured spread) are sampled by a Latin hypercube of a fixed
// seed, each figure shared by every rank that has it; every point is simulated once with each figure at each
// end of its range (the others at their values), and the samples are evaluated on the additive surrogate of
// those ends (IntervalMode::Surrogate) or each simulated (Sampled). A point's interval is the p_low..p_high
// quantiles of its samples' epoch and step times; its
// sensitivity, the figures by how far their ends move its epoch time, widest first, each with the command
// that measures it.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/results/measured_times.hpp"
#include "vitsim/core/results/report.hpp"

namespace vitsim {
struct Calibration;
struct PlatformProp;
}  // namespace vitsim

namespace vitsim::sim {

struct PredictOptions;
struct SimulatedTimes;  // sim/predict/predict.hpp
class PlatformCache;    // sim/engine/process_pool.hpp

// One ranged figure of a platform file: the range prop stated word for word in one or more elements.
struct RangedFigure {
  const PlatformProp* prop = nullptr;
  std::string key;   // "socket_bw"
  std::string raw;   // the range prop's value as written
  std::string text;  // "1GBps..3GBps"
  std::string why;
  double low = 0, high = 0;           // SI
  double value = 0;                   // SI: the value in effect where it is first stated
  std::vector<std::string> elements;  // where it is stated, file order
  std::string where() const;          // "link n0-nic", "link n0-nic and 3 more"
};
// The figures of `facts`, in the order they are first stated.
std::vector<RangedFigure> ranged_figures(const PlatformFacts& facts);

// A Latin hypercube design: n rows of k coordinates in [0, 1); in each coordinate every one of the n strata
// [i/n, (i+1)/n) holds exactly one row. Deterministic for a seed (splitmix64; no library distribution).
std::vector<std::vector<double>> latin_hypercube(int n, int k, std::uint64_t seed);

// The quantile p of `v` (linear between order statistics, "type 7"); v not empty.
double quantile(std::vector<double> v, double p);

// One figure's one-at-a-time simulations, for one output (epoch or step time): its range, its value (where
// the point as predicted has it) and the output with the figure at each end, the others at their values.
struct FigureEnds {
  double low = 0, value = 0, high = 0;
  double at_low = 0, at_high = 0;
  bool two_sided = false;  // drawn half each side of its value (figure_at): a calibration's measured span
};
// Where a design coordinate u in [0, 1) puts figure e. A platform's range, an occupancy factor, a step cv:
// uniform over [low, high]. `two_sided` (a calibration's compute and sync spans, docs/predict.md "Intervals
// and sensitivity"): half the draws each side of the value, uniform over [low, value] for u < 1/2 and over
// [value, high] above, so the figure is the median of its draws as it is of calibrate's rounds (the kept
// figure is the median round's); a span skewed to one side no longer moves the interval's middle that way.
double figure_at(const FigureEnds& e, double u);
// The additive surrogate of the output at x (one value per figure; `--interval-mode surrogate`, docs/
// predict.md "Intervals and sensitivity"): `centre` (the point as predicted) plus, per figure, the straight
// line from its value to the end on x's side: exact where each figure moves the output linearly on each side
// of its value and independently of the others (a compute time's terms); off by the figures' interactions
// elsewhere (tests/sim/test_interval_surrogate.cpp holds it against the sampled interval).
double additive_surrogate(double centre, const std::vector<FigureEnds>& ends, const std::vector<double>& x);

// The platform XML `text` with figure j's value set to values[j] (SI) wherever its range is stated;
// a NaN leaves figure j as written. `path` names the file in messages.
std::string platform_with_values(const std::string& text, const std::string& path,
                                 const std::vector<RangedFigure>& figures, const std::vector<double>& values);
// The same with figure j's value prop written as texts[j].first ("0.7Tf") and its range prop as
// texts[j].second ("0.65Tf..0.75Tf; WHY") wherever its range is stated; an empty pair leaves figure j as
// written (`vitsim fit`'s output).
std::string platform_with_texts(const std::string& text, const std::string& path,
                                const std::vector<RangedFigure>& figures,
                                const std::vector<std::pair<std::string, std::string>>& texts);
// Whether a copy of the platform with other values of `figures` needs a SimGrid engine of its own: link
// settings are applied to the engine as it loads (link transports), as are a flat-star file's vitsim_* zone
// props; GPU, node and the other zone figures are read from the copy's facts in the child.
bool needs_own_engine(const std::vector<RangedFigure>& figures);

// Measured runs held against the model (predict and plan --runs; docs/predict.md "Measured runs"): a run's
// configuration as it ran (the scenario's what-ifs left out: the run was measured on the machine as it is),
// its measured time and which time that is.
struct MeasuredRun {
  Scenario scenario;
  double seconds = 0;
  MeasuredMetric metric = MeasuredMetric::StepTime;
  std::string where;  // "runs.csv:4", "measured-1.json: /points/2"
  std::string file;   // the file as given
  // > 0: a validation's point (`vitsim validate --format json`): the step time its prediction stated when it
  // was validated; the ratio is taken against it (the whole procedure's error: calibrate, predict, run) and
  // nothing is simulated. 0: the run is held against the model as it is now (its configuration simulated).
  double predicted = 0;
};
// The runs of `files`: validations (core read_validated_times), or measured reports and CSVs as `vitsim fit`
// reads them (core/results/measured_times.hpp) as configurations of `f`, a configuration measured more than
// once kept once per run, each checked against its platform as its simulation would be. Throws Error naming
// the file and row, or a file given twice.
std::vector<MeasuredRun> measured_runs(const ScenarioFile& f, const std::vector<std::string>& files);

// Fills each point's interval and sensitivity; `points` are the report's points as simulated (what-ifs
// applied). Runs 2 x figures x points simulations (the ends), and samples x points more where the options'
// mode is Sampled, forked as predict forks; `who` names
// the progress line (predict's, plan's). With `runs`: each run's configuration is simulated as well (once
// per configuration), its measured / predicted ratio taken, and every point's interval widened to take in
// its central value times the ratios' split-conformal ends (core conformal_spread), which the sensitivity
// lists as "measured runs".
// `platforms`: the caller's cache of the points' platform files (read and load-checked once; nullptr: read
// again).
void add_intervals(Report& report, const std::vector<Scenario>& points, const Calibration* calib,
                   const PredictOptions& opt, const std::string& who = "vitsim predict --interval",
                   const std::vector<MeasuredRun>& runs = {}, PlatformCache* platforms = nullptr);

// add_intervals in two halves, for a caller that simulates the interval's first simulations (the figures'
// ends, and in Sampled mode every sample) in its own batch: `vitsim predict` runs them beside its points, in
// the points' zygote, before the points' times are known (they need none of them). Made from the points,
// calibration, options and platform cache as add_intervals takes them (the caller keeps them alive until
// finish); scenarios(), engine_of(), calib_of() and copy_facts() are simulate_points' arguments;
// finish(times), with their times in order, does the rest of add_intervals (the surrogate's checks, the
// measured runs, the corpus' band) on the report of those points.
class IntervalPlan {
 public:
  IntervalPlan(const std::vector<Scenario>& points, const Calibration* calib, const PredictOptions& opt,
               PlatformCache& platforms);
  ~IntervalPlan();
  IntervalPlan(const IntervalPlan&) = delete;
  IntervalPlan& operator=(const IntervalPlan&) = delete;
  const std::vector<Scenario>& scenarios() const;
  const std::vector<std::string>& engine_of() const;
  const std::vector<const Calibration*>& calib_of() const;
  PlatformFacts copy_facts(size_t n) const;  // called in simulation n's child
  void finish(Report& report, const std::string& who, const std::vector<MeasuredRun>& runs,
              const std::vector<SimulatedTimes>& times);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vitsim::sim
