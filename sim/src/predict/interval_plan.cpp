// The interval's simulations planned (predict/interval_plan.hpp): each platform's ranged figures and the
// calibration's spans, the design's rows and the figures' ends as platform copies (written, or read in their
// children) and calibration copies, and the runs over them.
#include "predict/interval_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <set>

#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/calibration.hpp"
#include "vitsim/core/platform/figure_range.hpp"
#include "vitsim/core/platform/platform_props.hpp"
#include "vitsim/sim/engine/process_pool.hpp"
#include "vitsim/sim/predict/predict.hpp"

namespace vitsim::sim {

namespace {

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

}  // namespace

PlatformFacts IntervalRuns::copy_facts(size_t n) const {
  const PlatformPlan& pp = plans->at(plan_of[n]);
  std::vector<FigureValue> values;
  for (size_t j = 0; j < pp.figures.size(); ++j)
    if (!std::isnan(copy_values[n][j]))
      values.push_back(
          {pp.figures[j].key, pp.figures[j].raw, exact_prop_value(*pp.figures[j].prop, copy_values[n][j])});
  return pp.doc->with(values);
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

// The runs of one batch: per platform, the design rows `rows_of(path)` and, with `ends`, the figures' ends.
IntervalRuns plan_runs(const std::vector<Scenario>& points, const Calibration* calib,
                       const IntervalOptions& io, const TempDir& dir, PlatformCache& platforms,
                       PlatformPlans& plans,
                       const std::function<std::vector<int>(const std::string&)>& rows_of, bool ends) {
  IntervalRuns r;
  r.plans = &plans;
  std::map<std::string, std::vector<Slot>> slots;  // platform -> samples..., then low/high per figure
  for (size_t i = 0; i < points.size(); ++i) {
    const std::string& path = points[i].cluster.platform;
    if (!plans.count(path)) {
      PlatformPlan pp;
      pp.text = read_file(path);
      const PlatformFacts& facts = platforms.of(points[i]);  // read (and load-checked) once
      pp.figures = ranged_figures(facts);
      pp.spans = span_figures(calib, facts);
      for (const auto& [host, g] : facts.gpu) pp.gpu_models.insert(g.model);
      if (!pp.figures.empty() && !needs_own_engine(pp.figures))
        pp.doc = std::make_unique<PlatformDocument>(path, pp.text);
      plans[path] = std::move(pp);
    }
    PlatformPlan& pp = plans.at(path);
    if (!slots.count(path)) {
      const size_t index = slots.size();  // the batch's copies are named by its platforms' order
      slots[path] =
          plan_slots(pp, path, index, calib, io, dir,
                     pp.figures.size() + pp.spans.size() ? rows_of(path) : std::vector<int>{}, ends);
    }
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

}  // namespace vitsim::sim
