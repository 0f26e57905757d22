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

// What one simulation of the interval is: point `point`, sample `sample` (or figure `figure` at an end).
// Figures 0..k-1 are the platform's ranged figures, k.. the calibration's measured spans.
struct Run {
  size_t point = 0;
  int sample = -1;  // >= 0: a sample of the design
  int figure = -1;  // >= 0 with sample < 0: figure at its low (end 0) or high (end 1)
  int end = 0;
};

// A measured span of the calibration (core/formats/calibration.hpp) that a platform's points may use: a
// device type the platform has; its compute or sync figures (MeasuredSpan, a factor), or its occupancy
// factor (the alone factor drawn between the measured one and 1: the occupancy phase timed the largest
// calibration micro-batch only, how much of it holds at another is not measured), or its step cv (the
// straggler figure, drawn in the least..most of calibrate's per-rank, per-micro-batch cvs).
struct SpanFigure {
  enum Kind { Compute, Sync, Occupancy, StepCv };
  size_t device = 0;
  Kind kind = Compute;
  double low = 1, high = 1;
  std::string why, device_type;
  double value = 1;  // where the point as predicted has it (a factor of 1; the occupancy, the cv as measured)
};

// One platform file of the points: its figures, the calibration's spans, and the design over both.
struct PlatformPlan {
  std::vector<RangedFigure> figures;
  std::vector<SpanFigure> spans;
  std::string text;
  std::set<std::string> gpu_models;                  // the GPU types of the platform
  std::vector<std::unique_ptr<Calibration>> calibs;  // the sampled and one-at-a-time calibrations
  // `text` parsed once, for the copies read in their children (Slot::platform_values); null when they are
  // written (figures that need their own engine) or there are none.
  std::unique_ptr<PlatformDocument> doc;
};

// Where one simulation of the interval runs: a platform file (the points' own, or a sampled copy) and
// the calibration (the one given, or a sampled copy).
struct Slot {
  std::string file;
  const Calibration* calib = nullptr;
  // A figure's end that is its value (an occupancy factor, a range up to the value): the copy would be the
  // point's own platform and calibration, so its simulation would be the point's; not run (add_intervals
  // takes the point's times).
  bool centre = false;
  // A copy on the engine of the points' own file (figures SimGrid never sees): its platform figures' values
  // (NaN: as written), the copy made in its simulation's child (simulate_points' copy_facts); `file` names it
  // but is not written. Empty: `file` is the points' own, or written (a copy that needs its own engine).
  std::vector<double> platform_values;
};

std::vector<SpanFigure> span_figures(const Calibration* calib, const PlatformFacts& facts) {
  std::vector<SpanFigure> out;
  if (!calib) return out;
  std::set<std::string> models;
  for (const auto& [host, g] : facts.gpu) models.insert(g.model);
  for (size_t d = 0; d < calib->devices.size(); ++d) {
    const DeviceCalibration& dc = calib->devices[d];
    if (!models.count(dc.device_type)) continue;
    for (const auto& [kind, span] :
         {std::pair{SpanFigure::Compute, &dc.compute_span}, std::pair{SpanFigure::Sync, &dc.sync_span}})
      if (!span->empty()) out.push_back({d, kind, span->low, span->high, span->why, dc.device_type, 1});
    if (dc.occupancy_busy_ranks > 0 && dc.occupancy_alone_factor != 1)
      out.push_back(
          {d, SpanFigure::Occupancy, std::min(1.0, dc.occupancy_alone_factor),
           std::max(1.0, dc.occupancy_alone_factor),
           fmt::format("measured: vitsim calibrate's occupancy phase, one rank alone x{:.3f} of {} busy "
                       "at its largest micro-batch; how much of it holds at another micro-batch is "
                       "not measured (a point with {} or more busy ranks per host: no effect)",
                       dc.occupancy_alone_factor, dc.occupancy_busy_ranks, dc.occupancy_busy_ranks),
           dc.device_type, dc.occupancy_alone_factor});
    // The step cv where predict uses it: the device type's first (Calibration::step_cv), and no step
    // phase's sync figures, which hold the measured wait instead (sim/src/point/rank_setup.cpp).
    if (dc.step_cv.ranged() && calib->step_cv(dc.device_type) == &dc.step_cv && !calib->sync(dc.device_type))
      out.push_back(
          {d, SpanFigure::StepCv, dc.step_cv.low, dc.step_cv.high,
           fmt::format("measured: vitsim calibrate's compute rounds, step cv {:.3g} (the median) "
                       "within {:.3g}..{:.3g} (the least and most over its ranks and micro-batches); "
                       "a point waits cv x forward + backward x E[max of N normals] for the "
                       "slowest of its N ranks",
                       dc.step_cv.value, dc.step_cv.low, dc.step_cv.high),
           dc.device_type, dc.step_cv.value});
  }
  return out;
}

}  // namespace

std::string RangedFigure::where() const {
  if (elements.size() <= 1) return elements.empty() ? "" : elements.front();
  return fmt::format("{} and {} more", elements.front(), elements.size() - 1);
}

std::vector<RangedFigure> ranged_figures(const PlatformFacts& facts) {
  std::vector<RangedFigure> out;
  std::map<std::string, size_t> index;
  for (const FigureRange& r : facts.ranges) {
    auto [it, added] = index.emplace(r.identity(), out.size());
    if (added) {
      RangedFigure f;
      f.prop = &platform_prop(r.key);
      f.key = r.key;
      f.raw = r.raw;
      f.text = r.text;
      f.why = r.why;
      f.low = r.low;
      f.high = r.high;
      f.value = r.value;
      out.push_back(std::move(f));
    }
    out[it->second].elements.push_back(r.element);
  }
  return out;
}

bool needs_own_engine(const std::vector<RangedFigure>& figures) {
  return std::any_of(figures.begin(), figures.end(), [](const RangedFigure& g) {
    return g.prop->owner == PropOwner::Link || g.key.rfind("vitsim_", 0) == 0;
  });
}

namespace {

// The sampled and one-at-a-time platform files and calibrations of every platform of the points, and the
// runs over them.
struct IntervalRuns {
  std::vector<Scenario> scenarios;
  std::vector<std::string> engine_of;      // per scenario: the platform whose engine it runs on
  std::vector<const Calibration*> calibs;  // per scenario: the calibration it runs with
  std::vector<Run> runs;
  std::map<std::string, PlatformPlan> plans;  // by the points' platform path
  // per scenario: its platform copy's figure values where its child makes the copy (Slot::platform_values)
  std::vector<std::vector<double>> copy_values;
  std::vector<std::string> plan_of;  // per scenario: the points' platform path (its key in `plans`)
  // Scenario n's copy as its child reads it: the points' file with the copy's values in effect. Called for
  // the copies on the points' engine only (simulate_points' copy_facts), which all have values: a written
  // copy runs on its own engine and is read as a file.
  PlatformFacts copy_facts(size_t n) const {
    const PlatformPlan& pp = plans.at(plan_of[n]);
    std::vector<FigureValue> values;
    for (size_t j = 0; j < pp.figures.size(); ++j)
      if (!std::isnan(copy_values[n][j]))
        values.push_back(
            {pp.figures[j].key, pp.figures[j].raw, exact_prop_value(*pp.figures[j].prop, copy_values[n][j])});
    return pp.doc->with(values);
  }
};

// `c` with span figure `f` at `v`.
Calibration sampled(const Calibration& c, const SpanFigure& f, double v) {
  if (f.kind == SpanFigure::Occupancy || f.kind == SpanFigure::StepCv) {
    Calibration out = c;
    (f.kind == SpanFigure::Occupancy ? out.devices.at(f.device).occupancy_alone_factor
                                     : out.devices.at(f.device).step_cv.value) = v;
    return out;
  }
  return with_span_factors(c, f.device, f.kind == SpanFigure::Compute ? v : 1.0,
                           f.kind == SpanFigure::Sync ? v : 1.0);
}

// Each figure's range and value, platform figures then the calibration's spans (the design's columns), the
// output at both ends `centre` until simulated. A measured compute or sync span is drawn two-sided
// (figure_at): its figure is the median of calibrate's rounds, which lie on both sides of it.
std::vector<FigureEnds> figure_ends(const PlatformPlan& pp, double centre) {
  std::vector<FigureEnds> out;
  for (const RangedFigure& f : pp.figures) out.push_back({f.low, f.value, f.high, centre, centre});
  for (const SpanFigure& f : pp.spans)
    out.push_back({f.low, f.value, f.high, centre, centre,
                   f.kind == SpanFigure::Compute || f.kind == SpanFigure::Sync});
  return out;
}

// The slots of one platform: the design's samples, then each figure at its low and high end (platform
// figures first, then the calibration's spans), the others at their values.
std::vector<Slot> plan_slots(PlatformPlan& pp, const std::string& path, size_t index,
                             const Calibration* calib, const IntervalOptions& io, const TempDir& dir,
                             const std::vector<int>& rows, bool ends) {
  const size_t k = pp.figures.size(), ks = pp.spans.size();
  const bool own_engine = needs_own_engine(pp.figures);
  std::vector<Slot> slots;
  auto slot = [&](const std::vector<double>& values) {
    Slot sl{path, calib, false, {}};
    const bool platform_varies = std::any_of(values.begin(), values.begin() + static_cast<long>(k),
                                             [](double v) { return !std::isnan(v); });
    if (platform_varies) {
      sl.file = fmt::format("{}/p{}-{}.xml", dir.path(), index, slots.size());
      std::vector<double> platform_values(values.begin(), values.begin() + static_cast<long>(k));
      if (own_engine)
        write_file_atomic(sl.file, platform_with_values(pp.text, path, pp.figures, platform_values));
      else
        sl.platform_values = std::move(platform_values);
    }
    if (std::any_of(values.begin() + static_cast<long>(k), values.end(),
                    [](double v) { return !std::isnan(v); })) {
      auto c = std::make_unique<Calibration>(*calib);
      for (size_t j = 0; j < ks; ++j)
        if (!std::isnan(values[k + j])) *c = sampled(*c, pp.spans[j], values[k + j]);
      sl.calib = c.get();
      pp.calibs.push_back(std::move(c));
    }
    slots.push_back(sl);
  };
  const std::vector<FigureEnds> ranges = figure_ends(pp, 0);
  auto low = [&](size_t j) { return ranges[j].low; };
  auto high = [&](size_t j) { return ranges[j].high; };
  // The platform's columns come first, so that a calibration without spans leaves its design as it was.
  // The design's rows asked for (all in sampled mode; in surrogate mode the ones that check it).
  const auto design = latin_hypercube(k + ks ? io.samples : 0, static_cast<int>(k + ks), io.seed);
  for (int row : rows) {
    std::vector<double> v(k + ks);
    for (size_t j = 0; j < k + ks; ++j) v[j] = figure_at(ranges[j], design.at(row)[j]);
    slot(v);
  }
  auto value = [&](size_t j) { return ranges[j].value; };
  for (size_t j = 0; j < (ends ? k + ks : 0); ++j)
    for (double end : {low(j), high(j)}) {
      if (end == value(j)) {
        slots.push_back({path, calib, true, {}});
        continue;
      }
      std::vector<double> v(k + ks, std::numeric_limits<double>::quiet_NaN());
      v[j] = end;
      slot(v);
    }
  return slots;
}

// The runs of one batch: per platform, the design rows `rows_of(path)` and, with `ends`, the figures' ends.
IntervalRuns plan_runs(const std::vector<Scenario>& points, const Calibration* calib,
                       const IntervalOptions& io, const TempDir& dir, PlatformCache& platforms,
                       const std::function<std::vector<int>(const std::string&)>& rows_of, bool ends) {
  IntervalRuns r;
  std::map<std::string, std::vector<Slot>> slots;  // platform -> samples..., then low/high per figure
  for (size_t i = 0; i < points.size(); ++i) {
    const std::string& path = points[i].cluster.platform;
    if (!r.plans.count(path)) {
      PlatformPlan pp;
      pp.text = read_file(path);
      const PlatformFacts& facts = platforms.of(points[i]);  // read (and load-checked) once
      pp.figures = ranged_figures(facts);
      pp.spans = span_figures(calib, facts);
      for (const auto& [host, g] : facts.gpu) pp.gpu_models.insert(g.model);
      if (!pp.figures.empty() && !needs_own_engine(pp.figures))
        pp.doc = std::make_unique<PlatformDocument>(path, pp.text);
      slots[path] =
          plan_slots(pp, path, r.plans.size(), calib, io, dir,
                     pp.figures.size() + pp.spans.size() ? rows_of(path) : std::vector<int>{}, ends);
      r.plans[path] = std::move(pp);
    }
    const PlatformPlan& pp = r.plans[path];
    const std::vector<Slot>& f = slots[path];
    const bool own_engine = needs_own_engine(pp.figures);
    auto add = [&](const Slot& slot, Run run) {
      Scenario s = points[i];
      s.cluster.platform = slot.file;
      s.what_ifs.clear();  // applied already: the file is the edited copy
      r.engine_of.push_back(own_engine ? slot.file : path);
      r.calibs.push_back(slot.calib);
      r.copy_values.push_back(slot.platform_values);
      r.plan_of.push_back(path);
      r.scenarios.push_back(std::move(s));
      r.runs.push_back(run);
    };
    const size_t figures = pp.figures.size() + pp.spans.size();
    const std::vector<int> rows = figures ? rows_of(path) : std::vector<int>{};
    const size_t samples = rows.size();
    for (size_t s = 0; s < samples; ++s) add(f[s], {i, rows[s], -1, 0});
    for (size_t j = 0; j < (ends ? figures : 0); ++j)
      for (int end = 0; end < 2; ++end)
        if (!f[samples + 2 * j + end].centre)
          add(f[samples + 2 * j + end], {i, -1, static_cast<int>(j), end});
  }
  return r;
}

}  // namespace

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
                     PlatformCache& cache, std::vector<PointSamples>& ps) {
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
      points, calib, io, dir, cache, [&](const std::string& path) { return rows_in(check[path]); }, false);
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
    const IntervalRuns f = plan_runs(points, calib, io, dir, cache, rest, false);
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
struct IntervalPlan::Impl {
  TempDir dir{"vitsim-interval-"};
  IntervalRuns r;
};

IntervalPlan::IntervalPlan(const std::vector<Scenario>& points, const Calibration* calib,
                           const PredictOptions& opt, PlatformCache& platforms)
    : impl_(std::make_unique<Impl>()) {
  const IntervalOptions& io = opt.interval;
  const bool sampled = io.mode == IntervalMode::Sampled;
  std::vector<int> all_rows(static_cast<size_t>(io.samples));
  std::iota(all_rows.begin(), all_rows.end(), 0);
  impl_->r = plan_runs(
      points, calib, io, impl_->dir, platforms,
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
  plan.finish(report, points, calib, opt, who, runs, cache, times);
}

void IntervalPlan::finish(Report& report, const std::vector<Scenario>& points, const Calibration* calib,
                          const PredictOptions& opt, const std::string& who,
                          const std::vector<MeasuredRun>& runs, PlatformCache& cache,
                          const std::vector<SimulatedTimes>& times) {
  const IntervalOptions& io = opt.interval;
  const bool sampled = io.mode == IntervalMode::Sampled;
  const TempDir& dir = impl_->dir;
  const IntervalRuns& r = impl_->r;
  std::vector<PointSamples> ps(points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    const PlatformPlan& pp = r.plans.at(points[i].cluster.platform);
    ps[i].epoch_ends = figure_ends(pp, report.points[i].epoch_time_s);
    ps[i].step_ends = figure_ends(pp, report.points[i].step_time_s.mean);
  }
  collect(r, times, ps);
  if (!sampled) check_surrogate(report, points, calib, opt, who, dir, cache, ps);
  RunsSpread spread;
  if (!runs.empty()) spread = conformal_spread(run_ratios(runs, calib, opt, who), io.p_low, io.p_high);
  // A point that no calibration measured and no run was held against: the model's own error on the public
  // corpus (predict/interval_corpus.hpp); the measured runs, where given, are this machine's own measure of
  // it.
  const CorpusSpread corpus = runs.empty() ? corpus_spread(io.p_low, io.p_high) : CorpusSpread{};
  for (size_t i = 0; i < points.size(); ++i) {
    ReportPoint& p = report.points[i];
    const PlatformPlan& pp = r.plans.at(points[i].cluster.platform);
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
