// Intervals and sensitivity of a prediction (sim/predict/interval.hpp; docs/predict.md "Intervals and
// sensitivity").
#include "vitsim/sim/predict/interval.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <set>

#include "predict/interval_corpus.hpp"
#include "predict/interval_plan.hpp"
#include "predict/interval_runs.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/calibration.hpp"
#include "vitsim/core/formats/identity.hpp"
#include "vitsim/core/platform/figure_range.hpp"
#include "vitsim/core/platform/platform_props.hpp"
#include "vitsim/sim/engine/process_pool.hpp"
#include "vitsim/sim/point/simulate.hpp"
#include "vitsim/sim/predict/predict.hpp"

namespace vitsim::sim {

namespace {

// ASSUMPTION: the surrogate's samples at the interval's two quantiles, simulated, must lie within 1% of the
// central value of its own (small against the widths an interval is read for: issue 37's target, 25-40% of
// the central value); beyond, every sample of the platform is simulated. What would replace it: the
// surrogate's distance measured on more platforms (docs/benchmarks.md "Prediction intervals (issue 26)").
constexpr double kSurrogateTolerance = 0.01;

// What a point's interval reads: its figures' ends (simulated, or the point itself), the design rows
// simulated, and the surrogate's values of every row.
struct PointSamples {
  std::vector<FigureEnds> epoch_ends, step_ends;
  std::map<int, SimulatedTimes> simulated;  // by design row
  std::vector<double> surrogate_epochs, surrogate_steps;
  std::vector<int> checked;  // the rows simulated to check the surrogate
  bool surrogate = false;
  double off = 0;  // the surrogate's largest distance at its checked rows, of the central value
};

void collect(const IntervalRuns& r, const std::vector<SimulatedTimes>& results,
             std::vector<PointSamples>& ps) {
  for (size_t n = 0; n < r.runs.size(); ++n) {
    const Run& run = r.runs[n];
    PointSamples& q = ps[run.point];
    if (run.sample >= 0) {
      q.simulated[run.sample] = results[n];
      continue;
    }
    FigureEnds &e = q.epoch_ends[run.figure], &t = q.step_ends[run.figure];
    (run.end == 0 ? e.at_low : e.at_high) = results[n].epoch_time_s;
    (run.end == 0 ? t.at_low : t.at_high) = results[n].step_time_s;
  }
}

// Surrogate mode: each point's design rows on the surrogate; the rows at its two quantiles simulated; a
// platform where one is off by more than kSurrogateTolerance gets every row simulated (and says so).
void check_surrogate(Report& report, const std::vector<Scenario>& points, const Calibration* calib,
                     const PredictOptions& opt, const std::string& who, const TempDir& dir,
                     PlatformCache& cache, PlatformPlans& plans, std::vector<PointSamples>& ps) {
  const IntervalOptions& io = opt.interval;
  std::map<std::string, std::set<int>> check;
  for (size_t i = 0; i < points.size(); ++i) {
    PointSamples& q = ps[i];
    if (q.epoch_ends.empty()) continue;
    const ReportPoint& p = report.points[i];
    for (const auto& row : latin_hypercube(io.samples, static_cast<int>(q.epoch_ends.size()), io.seed)) {
      std::vector<double> x(row.size());
      for (size_t j = 0; j < x.size(); ++j) x[j] = figure_at(q.epoch_ends[j], row[j]);
      q.surrogate_epochs.push_back(additive_surrogate(p.epoch_time_s, q.epoch_ends, x));
      q.surrogate_steps.push_back(additive_surrogate(p.step_time_s.mean, q.step_ends, x));
    }
    std::vector<int> order(q.surrogate_epochs.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return q.surrogate_epochs[a] < q.surrogate_epochs[b]; });
    for (double pq : {io.p_low, io.p_high})
      q.checked.push_back(order[static_cast<size_t>(std::lround((order.size() - 1) * pq))]);
    check[points[i].cluster.platform].insert(q.checked.begin(), q.checked.end());
  }
  auto rows_in = [](const std::set<int>& rows) { return std::vector<int>(rows.begin(), rows.end()); };
  const IntervalRuns c = plan_runs(
      points, calib, io, dir, cache, plans, [&](const std::string& path) { return rows_in(check[path]); },
      false);
  collect(c,
          simulate_points(c.scenarios, calib, opt, who, c.engine_of, c.calibs, &cache,
                          [&c](size_t n) { return c.copy_facts(n); }),
          ps);
  std::set<std::string> fallback;
  std::map<std::string, double> worst;  // per platform, the largest q.off
  for (size_t i = 0; i < points.size(); ++i) {
    PointSamples& q = ps[i];
    const ReportPoint& p = report.points[i];
    for (int row : q.checked) {
      const SimulatedTimes& t = q.simulated.at(row);
      q.off = std::max({q.off, std::abs(t.epoch_time_s - q.surrogate_epochs[row]) / p.epoch_time_s,
                        std::abs(t.step_time_s - q.surrogate_steps[row]) / p.step_time_s.mean});
    }
    worst[points[i].cluster.platform] = std::max(worst[points[i].cluster.platform], q.off);
    if (q.off > kSurrogateTolerance) fallback.insert(points[i].cluster.platform);
  }
  if (!fallback.empty()) {
    auto rest = [&](const std::string& path) {
      std::vector<int> rows;
      for (int row = 0; row < (fallback.count(path) ? io.samples : 0); ++row)
        if (!check[path].count(row)) rows.push_back(row);
      return rows;
    };
    const IntervalRuns f = plan_runs(points, calib, io, dir, cache, plans, rest, false);
    collect(f,
            simulate_points(f.scenarios, calib, opt, who, f.engine_of, f.calibs, &cache,
                            [&f](size_t n) { return f.copy_facts(n); }),
            ps);
  }
  for (size_t i = 0; i < points.size(); ++i) {
    PointSamples& q = ps[i];
    q.surrogate = !q.epoch_ends.empty() && !fallback.count(points[i].cluster.platform);
    if (!q.epoch_ends.empty() && !q.surrogate)
      report.points[i].notes.push_back(fmt::format(
          "interval: every sample simulated: the additive surrogate of the figures' ends was off by up to "
          "{:.1f}% of the central value at the checked samples of this platform's points (this point: "
          "{:.1f}%; "
          "held to {:g}%: the figures interact); --interval-mode sampled does so from the start",
          100 * worst[points[i].cluster.platform], 100 * q.off, 100 * kSurrogateTolerance));
  }
}

}  // namespace

// The interval's first simulations, planned before the points are simulated (IntervalPlan).
// What it was made from (the caller's, alive until finish), the platforms' plans that every batch shares, and
// the first batch's runs.
struct IntervalPlan::Impl {
  Impl(const std::vector<Scenario>& p, const Calibration* c, const PredictOptions& o, PlatformCache& pc)
      : points(p), calib(c), opt(o), platforms(pc) {}
  const std::vector<Scenario>& points;
  const Calibration* calib;
  const PredictOptions& opt;
  PlatformCache& platforms;
  TempDir dir{"vitsim-interval-"};
  PlatformPlans plans;
  IntervalRuns r;
};

IntervalPlan::IntervalPlan(const std::vector<Scenario>& points, const Calibration* calib,
                           const PredictOptions& opt, PlatformCache& platforms)
    : impl_(std::make_unique<Impl>(points, calib, opt, platforms)) {
  const IntervalOptions& io = opt.interval;
  const bool sampled = io.mode == IntervalMode::Sampled;
  std::vector<int> all_rows(static_cast<size_t>(io.samples));
  std::iota(all_rows.begin(), all_rows.end(), 0);
  impl_->r = plan_runs(
      points, calib, io, impl_->dir, platforms, impl_->plans,
      [&](const std::string&) { return sampled ? all_rows : std::vector<int>{}; }, true);
}
IntervalPlan::~IntervalPlan() = default;
const std::vector<Scenario>& IntervalPlan::scenarios() const {
  return impl_->r.scenarios;
}
const std::vector<std::string>& IntervalPlan::engine_of() const {
  return impl_->r.engine_of;
}
const std::vector<const Calibration*>& IntervalPlan::calib_of() const {
  return impl_->r.calibs;
}
PlatformFacts IntervalPlan::copy_facts(size_t n) const {
  return impl_->r.copy_facts(n);
}

void add_intervals(Report& report, const std::vector<Scenario>& points, const Calibration* calib,
                   const PredictOptions& opt, const std::string& who, const std::vector<MeasuredRun>& runs,
                   PlatformCache* platforms) {
  PlatformCache own;
  PlatformCache& cache = platforms ? *platforms : own;
  IntervalPlan plan(points, calib, opt, cache);
  const std::vector<SimulatedTimes> times =
      simulate_points(plan.scenarios(), calib, opt, who, plan.engine_of(), plan.calib_of(), &cache,
                      [&plan](size_t n) { return plan.copy_facts(n); });
  plan.finish(report, who, runs, times);
}

void IntervalPlan::finish(Report& report, const std::string& who, const std::vector<MeasuredRun>& runs,
                          const std::vector<SimulatedTimes>& times) {
  const std::vector<Scenario>& points = impl_->points;
  const Calibration* calib = impl_->calib;
  const PredictOptions& opt = impl_->opt;
  const IntervalOptions& io = opt.interval;
  const bool sampled = io.mode == IntervalMode::Sampled;
  const IntervalRuns& r = impl_->r;
  std::vector<PointSamples> ps(points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    const PlatformPlan& pp = impl_->plans.at(points[i].cluster.platform);
    ps[i].epoch_ends = figure_ends(pp, report.points[i].epoch_time_s);
    ps[i].step_ends = figure_ends(pp, report.points[i].step_time_s.mean);
  }
  collect(r, times, ps);
  if (!sampled)
    check_surrogate(report, points, calib, opt, who, impl_->dir, impl_->platforms, impl_->plans, ps);
  RunsSpread spread;
  if (!runs.empty()) spread = conformal_spread(run_ratios(runs, calib, opt, who), io.p_low, io.p_high);
  // A point that no calibration measured and no run was held against: the model's own error on the public
  // corpus (predict/interval_corpus.hpp); the measured runs, where given, are this machine's own measure of
  // it.
  const CorpusSpread corpus = runs.empty() ? corpus_spread(io.p_low, io.p_high) : CorpusSpread{};
  for (size_t i = 0; i < points.size(); ++i) {
    ReportPoint& p = report.points[i];
    const PlatformPlan& pp = impl_->plans.at(points[i].cluster.platform);
    const PointSamples& q = ps[i];
    std::vector<FigureSensitivity> sens(pp.figures.size() + pp.spans.size());
    for (size_t j = 0; j < sens.size(); ++j) {  // an end not simulated (Slot::centre) is the point itself
      sens[j].epoch_at_low_s = q.epoch_ends[j].at_low;
      sens[j].epoch_at_high_s = q.epoch_ends[j].at_high;
    }
    p.interval.surrogate = q.surrogate;
    std::vector<double> epochs = q.surrogate_epochs, steps = q.surrogate_steps;
    if (!q.surrogate) {
      epochs.clear(), steps.clear();
      for (const auto& [row, t] : q.simulated)
        epochs.push_back(t.epoch_time_s), steps.push_back(t.step_time_s);
    }
    // No ranged figure: nothing varies, the interval is the point.
    if (epochs.empty()) epochs.push_back(p.epoch_time_s), steps.push_back(p.step_time_s.mean);
    p.interval.samples = io.samples;
    p.interval.seed = static_cast<long long>(io.seed);
    p.interval.p_low = io.p_low;
    p.interval.p_high = io.p_high;
    p.interval.figures = static_cast<int>(sens.size());
    p.interval.epoch_low_s = quantile(epochs, io.p_low);
    p.interval.epoch_high_s = quantile(epochs, io.p_high);
    p.interval.step_low_s = quantile(steps, io.p_low);
    p.interval.step_high_s = quantile(steps, io.p_high);
    for (size_t j = 0; j < pp.figures.size(); ++j) {
      const RangedFigure& f = pp.figures[j];
      sens[j].figure = f.key;
      sens[j].where = f.where();
      sens[j].range = f.text;
      sens[j].why = f.why;
      sens[j].measure = std::string(f.prop->measure);
    }
    for (size_t j = 0; j < pp.spans.size(); ++j) {
      const SpanFigure& f = pp.spans[j];
      FigureSensitivity& e = sens[pp.figures.size() + j];
      static constexpr const char* kNames[] = {"calibration compute", "calibration sync",
                                               "calibration occupancy", "calibration step_cv"};
      static constexpr const char* kMeasure[] = {
          "vitsim calibrate (its step phase's trainer rounds, or its compute rounds; more --iters, a quieter "
          "machine narrow it)",
          "vitsim calibrate on the ranks of the run (its step phase; more --iters narrows it)",
          "vitsim calibrate with the busy ranks per host you predict",
          "vitsim calibrate on a quiet machine (its compute rounds; the step phase's sync figures on the "
          "ranks of the run take its place)"};
      e.figure = kNames[f.kind];
      e.where = fmt::format("device {} of {}", f.device_type, calib->path);
      e.range = f.kind == SpanFigure::StepCv ? fmt::format("{:.3g}..{:.3g}", f.low, f.high)
                                             : fmt::format("x{:.3g}..x{:.3g}", f.low, f.high);
      e.why = f.why;
      e.measure = kMeasure[f.kind];
    }
    if (spread.count > 0) {
      p.interval.runs = spread;
      p.interval.epoch_low_s = std::min(p.interval.epoch_low_s, p.epoch_time_s * spread.ratio_low);
      p.interval.epoch_high_s = std::max(p.interval.epoch_high_s, p.epoch_time_s * spread.ratio_high);
      p.interval.step_low_s = std::min(p.interval.step_low_s, p.step_time_s.mean * spread.ratio_low);
      p.interval.step_high_s = std::max(p.interval.step_high_s, p.step_time_s.mean * spread.ratio_high);
      sens.push_back(runs_figure(spread, runs, p));
    }
    if (corpus.rows > 0 && !point_calibrated(points[i], calib, pp.gpu_models)) {
      p.interval.corpus = corpus;
      p.interval.corpus.figures_epoch_low_s = p.interval.epoch_low_s;
      p.interval.corpus.figures_epoch_high_s = p.interval.epoch_high_s;
      p.interval.corpus.figures_step_low_s = p.interval.step_low_s;
      p.interval.corpus.figures_step_high_s = p.interval.step_high_s;
      p.interval.epoch_low_s = std::min(p.interval.epoch_low_s, p.epoch_time_s * corpus.ratio_low);
      p.interval.epoch_high_s = std::max(p.interval.epoch_high_s, p.epoch_time_s * corpus.ratio_high);
      p.interval.step_low_s = std::min(p.interval.step_low_s, p.step_time_s.mean * corpus.ratio_low);
      p.interval.step_high_s = std::max(p.interval.step_high_s, p.step_time_s.mean * corpus.ratio_high);
    }
    std::stable_sort(sens.begin(), sens.end(),
                     [](const auto& a, const auto& b) { return a.swing_s() > b.swing_s(); });
    p.sensitivity = std::move(sens);
  }
}

}  // namespace vitsim::sim
