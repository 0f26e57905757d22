// Intervals and sensitivity of a prediction (sim/predict/interval.hpp; docs/predict.md "Intervals and
// sensitivity").
#include "vitsim/sim/predict/interval.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <pugixml.hpp>
#include <set>
#include <sstream>

#include "predict/interval_corpus.hpp"
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

std::string platform_with_texts(const std::string& text, const std::string& path,
                                const std::vector<RangedFigure>& figures,
                                const std::vector<std::pair<std::string, std::string>>& texts) {
  pugi::xml_document doc;
  if (!doc.load_buffer(text.data(), text.size(), pugi::parse_full))
    throw Error(fmt::format("{}: cannot be read again to sample its ranges", path));
  std::map<std::string, size_t> index;
  for (size_t j = 0; j < figures.size(); ++j) index[figures[j].key + "=" + figures[j].raw] = j;
  for (pugi::xpath_node hit : doc.select_nodes("//prop")) {
    pugi::xml_node range = hit.node();
    const std::string id = range.attribute("id").value();
    const std::string_view base = range_base_key(id);
    if (base.empty()) continue;
    auto it = index.find(std::string(base) + "=" + range.attribute("value").value());
    if (it == index.end() || texts[it->second].first.empty()) continue;
    pugi::xml_node owner = range.parent();
    pugi::xml_node value = owner.find_child_by_attribute("prop", "id", std::string(base).c_str());
    if (!value) {
      value = owner.insert_child_before("prop", range);
      value.append_attribute("id") = std::string(base).c_str();
      value.append_attribute("value");
    }
    value.attribute("value").set_value(texts[it->second].first.c_str());
    if (!texts[it->second].second.empty())
      range.attribute("value").set_value(texts[it->second].second.c_str());
  }
  std::ostringstream out;
  doc.save(out, "  ");
  return out.str();
}

std::string platform_with_values(const std::string& text, const std::string& path,
                                 const std::vector<RangedFigure>& figures,
                                 const std::vector<double>& values) {
  std::vector<std::pair<std::string, std::string>> texts(figures.size());
  for (size_t j = 0; j < figures.size(); ++j)
    if (!std::isnan(values[j])) texts[j].first = exact_prop_value(*figures[j].prop, values[j]);
  return platform_with_texts(text, path, figures, texts);
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

// The slots of one platform: the design's samples, then each figure at its low and high end (platform
// figures first, then the calibration's spans), the others at their values.
std::vector<Slot> plan_slots(PlatformPlan& pp, const std::string& path, size_t index,
                             const Calibration* calib, const IntervalOptions& io, const TempDir& dir) {
  const size_t k = pp.figures.size(), ks = pp.spans.size();
  std::vector<Slot> slots;
  auto slot = [&](const std::vector<double>& values) {
    Slot sl{path, calib};
    const bool platform_varies = std::any_of(values.begin(), values.begin() + static_cast<long>(k),
                                             [](double v) { return !std::isnan(v); });
    if (platform_varies) {
      sl.file = fmt::format("{}/p{}-{}.xml", dir.path(), index, slots.size());
      write_file_atomic(sl.file,
                        platform_with_values(pp.text, path, pp.figures,
                                             std::vector<double>(values.begin(), values.begin() + k)));
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
  auto low = [&](size_t j) { return j < k ? pp.figures[j].low : pp.spans[j - k].low; };
  auto high = [&](size_t j) { return j < k ? pp.figures[j].high : pp.spans[j - k].high; };
  // The platform's columns come first, so that a calibration without spans leaves its design as it was.
  // Surrogate mode: no sample simulated (add_intervals evaluates the design on the ends).
  const int simulated = io.mode == IntervalMode::Sampled && k + ks > 0 ? io.samples : 0;
  for (const auto& row : latin_hypercube(simulated, static_cast<int>(k + ks), io.seed)) {
    std::vector<double> v(k + ks);
    for (size_t j = 0; j < k + ks; ++j) v[j] = low(j) + row[j] * (high(j) - low(j));
    slot(v);
  }
  auto value = [&](size_t j) { return j < k ? pp.figures[j].value : pp.spans[j - k].value; };
  for (size_t j = 0; j < k + ks; ++j)
    for (double end : {low(j), high(j)}) {
      if (end == value(j)) {
        slots.push_back({path, calib, true});
        continue;
      }
      std::vector<double> v(k + ks, std::numeric_limits<double>::quiet_NaN());
      v[j] = end;
      slot(v);
    }
  return slots;
}

IntervalRuns plan_runs(const std::vector<Scenario>& points, const Calibration* calib,
                       const IntervalOptions& io, const TempDir& dir, PlatformCache& platforms) {
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
      slots[path] = plan_slots(pp, path, r.plans.size(), calib, io, dir);
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
      r.scenarios.push_back(std::move(s));
      r.runs.push_back(run);
    };
    const size_t figures = pp.figures.size() + pp.spans.size();
    const size_t samples =
        figures == 0 || io.mode != IntervalMode::Sampled ? 0 : static_cast<size_t>(io.samples);
    for (size_t s = 0; s < samples; ++s) add(f[s], {i, static_cast<int>(s), -1, 0});
    for (size_t j = 0; j < figures; ++j)
      for (int end = 0; end < 2; ++end)
        if (!f[samples + 2 * j + end].centre)
          add(f[samples + 2 * j + end], {i, -1, static_cast<int>(j), end});
  }
  return r;
}

}  // namespace

namespace {
// Each figure's range and value, platform figures then the calibration's spans (the design's columns), the
// output at both ends `centre` until simulated.
std::vector<FigureEnds> figure_ends(const PlatformPlan& pp, double centre) {
  std::vector<FigureEnds> out;
  for (const RangedFigure& f : pp.figures) out.push_back({f.low, f.value, f.high, centre, centre});
  for (const SpanFigure& f : pp.spans) out.push_back({f.low, f.value, f.high, centre, centre});
  return out;
}
}  // namespace

std::vector<MeasuredRun> measured_runs(const ScenarioFile& f, const std::vector<std::string>& files) {
  std::vector<MeasuredRun> out;
  std::vector<std::string> seen;  // the files read, to refuse one given twice (its runs would count twice)
  PlatformCache platforms;
  for (const std::string& path : files) {
    for (const std::string& earlier : seen) {
      std::error_code ec;
      if (earlier == path || std::filesystem::equivalent(earlier, path, ec))
        throw Error(
            fmt::format("--runs: '{}' is the same file as '{}': its runs would count twice and the "
                        "interval's level would claim more than they hold; give each file once",
                        path, earlier));
    }
    seen.push_back(path);
    const std::string text = read_input_file(path, "measured runs (--runs)");
    if (is_validation(text)) {
      for (const ValidatedTime& v : read_validated_times(path, text))
        out.push_back({Scenario{}, v.measured, MeasuredMetric::StepTime, v.where, path, v.predicted});
      continue;
    }
    const MeasuredTimes m = read_measured_times(path, text);
    std::vector<Scenario> scenarios = measured_scenarios(f, m, true);
    for (size_t i = 0; i < scenarios.size(); ++i) {
      scenarios[i].what_ifs.clear();
      try {  // what the simulation of the run would refuse, refused now, naming the row
        check_epoch(scenarios[i]);
        check_point(scenarios[i], platforms.of(scenarios[i]));
      } catch (const Error& e) {
        throw Error(row_message(m.rows[i], e.what()));
      }
      out.push_back({std::move(scenarios[i]), m.rows[i].seconds, m.metric, m.rows[i].where, path, 0});
    }
  }
  return out;
}

namespace {

// The runs' measured / predicted ratios: each configuration (identity and platform file) simulated once.
std::vector<double> run_ratios(const std::vector<MeasuredRun>& runs, const Calibration* calib,
                               const PredictOptions& opt, const std::string& who) {
  std::map<std::string, size_t> index;  // configuration -> its simulation
  std::vector<Scenario> unique;
  std::vector<size_t> of(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].predicted > 0) continue;  // a validation's: its ratio is the validated one
    const std::string key = scenario_id(runs[i].scenario) + " " + runs[i].scenario.cluster.platform;
    auto [it, fresh] = index.emplace(key, unique.size());
    if (fresh) unique.push_back(runs[i].scenario);
    of[i] = it->second;
  }
  const std::vector<SimulatedTimes> predicted =
      unique.empty() ? std::vector<SimulatedTimes>{}
                     : simulate_points(unique, calib, opt, who + " (the measured runs)");
  std::vector<double> ratios;
  for (size_t i = 0; i < runs.size(); ++i) {
    double model = runs[i].predicted;
    if (!(model > 0)) {
      const SimulatedTimes& p = predicted[of[i]];
      model = runs[i].metric == MeasuredMetric::StepTime ? p.step_time_s : p.epoch_time_s;
    }
    // The report reader's range for a ratio (core/src/results/report_json.cpp): what is written reads back.
    check_time_ratio(runs[i].where, runs[i].seconds, model);
    ratios.push_back(runs[i].seconds / model);
  }
  return ratios;
}

// The measured runs as the sensitivity's last figure: the point's central epoch times the conformal ends.
FigureSensitivity runs_figure(const RunsSpread& spread, const std::vector<MeasuredRun>& runs,
                              const ReportPoint& p) {
  FigureSensitivity e;
  e.figure = "measured runs";
  std::vector<std::string> files;  // in the order given
  for (const MeasuredRun& r : runs)
    if (std::find(files.begin(), files.end(), r.file) == files.end()) files.push_back(r.file);
  e.where = fmt::format("{} run{} of {}", runs.size(), runs.size() == 1 ? "" : "s", files.front());
  if (files.size() > 1)
    e.where += fmt::format(" and {} more file{}", files.size() - 1, files.size() == 2 ? "" : "s");
  e.range = fmt::format("x{:.3f}..x{:.3f}", spread.ratio_low, spread.ratio_high);
  e.why = fmt::format(
      "measured: each run's measured / predicted time (a validation's point: as predicted when validated; "
      "another run: its configuration simulated with this platform and calibration); the ratios at ranks {} "
      "and {} of the {} in order (split conformal): a new run like them "
      "falls between at least {:.0f}% of the time. What no figure of the model holds: the machine's "
      "run-to-run spread and drift, and the model's own error",
      spread.k_low, spread.k_high, spread.count, 100 * spread.level);
  e.measure =
      "more measured runs (vitsim train, or a CSV of your training logs) move the ends inward; a quieter "
      "machine narrows the spread";
  e.epoch_at_low_s = p.epoch_time_s * spread.ratio_low;
  e.epoch_at_high_s = p.epoch_time_s * spread.ratio_high;
  return e;
}

}  // namespace

void add_intervals(Report& report, const std::vector<Scenario>& points, const Calibration* calib,
                   const PredictOptions& opt, const std::string& who, const std::vector<MeasuredRun>& runs,
                   PlatformCache* platforms) {
  const IntervalOptions& io = opt.interval;
  TempDir dir("vitsim-interval-");
  PlatformCache own;
  PlatformCache& cache = platforms ? *platforms : own;
  const IntervalRuns r = plan_runs(points, calib, io, dir, cache);
  const std::vector<SimulatedTimes> results =
      simulate_points(r.scenarios, calib, opt, who, r.engine_of, r.calibs, &cache);
  RunsSpread spread;
  if (!runs.empty()) spread = conformal_spread(run_ratios(runs, calib, opt, who), io.p_low, io.p_high);
  // A point that no calibration measured and no run was held against: the model's own error on the public
  // corpus (predict/interval_corpus.hpp); the measured runs, where given, are this machine's own measure of
  // it.
  const CorpusSpread corpus = runs.empty() ? corpus_spread(io.p_low, io.p_high) : CorpusSpread{};
  for (size_t i = 0; i < points.size(); ++i) {
    ReportPoint& p = report.points[i];
    const PlatformPlan& pp = r.plans.at(points[i].cluster.platform);
    std::vector<double> epochs, steps;
    std::vector<FigureSensitivity> sens(pp.figures.size() + pp.spans.size());
    // An end not simulated (Slot::centre) is the point itself.
    for (FigureSensitivity& e : sens) e.epoch_at_low_s = e.epoch_at_high_s = p.epoch_time_s;
    std::vector<FigureEnds> epoch_ends = figure_ends(pp, p.epoch_time_s),
                            step_ends = figure_ends(pp, p.step_time_s.mean);
    for (size_t n = 0; n < r.runs.size(); ++n) {
      const Run& run = r.runs[n];
      if (run.point != i) continue;
      if (run.sample >= 0) {
        epochs.push_back(results[n].epoch_time_s);
        steps.push_back(results[n].step_time_s);
      } else {
        (run.end == 0 ? sens[run.figure].epoch_at_low_s : sens[run.figure].epoch_at_high_s) =
            results[n].epoch_time_s;
        (run.end == 0 ? epoch_ends[run.figure].at_low : epoch_ends[run.figure].at_high) =
            results[n].epoch_time_s;
        (run.end == 0 ? step_ends[run.figure].at_low : step_ends[run.figure].at_high) =
            results[n].step_time_s;
      }
    }
    p.interval.surrogate = io.mode == IntervalMode::Surrogate && !sens.empty();
    if (p.interval.surrogate)
      for (const auto& row : latin_hypercube(io.samples, static_cast<int>(sens.size()), io.seed)) {
        std::vector<double> x(row.size());
        for (size_t j = 0; j < x.size(); ++j)
          x[j] = epoch_ends[j].low + row[j] * (epoch_ends[j].high - epoch_ends[j].low);
        epochs.push_back(additive_surrogate(p.epoch_time_s, epoch_ends, x));
        steps.push_back(additive_surrogate(p.step_time_s.mean, step_ends, x));
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
