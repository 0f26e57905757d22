// `vitsim fit` (sim/fit/fit.hpp; docs/fit.md): the free figures fitted to measured times by bounded
// Levenberg-Marquardt on log time (sim/fit/least_squares.hpp), each evaluation a batch of simulations.
#include "vitsim/sim/fit/fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <set>

#include "collectives/nccl_comm.hpp"
#include "fit/fit_detail.hpp"
#include "predict/interval_corpus.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/formats/calibration.hpp"
#include "vitsim/core/formats/whatif.hpp"
#include "vitsim/core/platform/figure_range.hpp"
#include "vitsim/core/platform/platform_props.hpp"
#include "vitsim/sim/engine/process_pool.hpp"
#include "vitsim/sim/fit/least_squares.hpp"
#include "vitsim/sim/point/simulate.hpp"

namespace vitsim::sim {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The measured points as simulated, on one platform file, and the simulations of platform copies.
class FitRunner {
 public:
  FitRunner(std::vector<Scenario> points, const std::string& path, const Calibration* calib,
            const PredictOptions& opt, MeasuredMetric metric)
      : points_(std::move(points)), path_(path), calib_(calib), opt_(opt), metric_(metric) {
    text_ = read_file(path_);
    const PlatformFacts facts = read_platform_text(path_, text_);
    figures_ = ranged_figures(facts);
    for (const auto& [host, g] : facts.gpu) gpu_models_.insert(g.model);
    range_texts_.assign(figures_.size(), "");
  }
  const std::vector<RangedFigure>& figures() const { return figures_; }
  const std::set<std::string>& gpu_models() const { return gpu_models_; }
  // Uncalibrated (docs/fit.md "Uncalibrated: the corpus' reach"): each figure's range moved out at both ends
  // by the corpus band's larger factor, within the values its property may take; whole numbers and ranges
  // reaching to 0 or below (a ratio does not widen them) kept. The copies state the wider range. A note.
  std::string widen(const CorpusSpread& c) {
    const double factor = std::max(c.ratio_high, 1 / c.ratio_low);
    int widened = 0;
    for (size_t j = 0; j < figures_.size(); ++j) {
      RangedFigure& f = figures_[j];
      // A capacity (bytes) sets what fits, not how long a step takes: the corpus says nothing of it.
      if (f.prop->type == PropType::Integer || !(f.low > 0) ||
          (f.prop->type == PropType::Quantity && f.prop->unit == units::Kind::Bytes))
        continue;
      const units::Range& valid = f.prop->range;
      double low = f.low / factor, high = f.high * factor;
      if (!valid.contains(low)) low = valid.lo_open ? f.low : std::min(f.low, valid.lo);
      if (!valid.contains(high)) high = valid.hi_open ? f.high : std::max(f.high, valid.hi);
      if (low == f.low && high == f.high) continue;
      const std::string why = fmt::format(
          "widened by x{:.3f} at both ends, the public corpus' band of the model's own error (uncalibrated; "
          "docs/fit.md); stated: {}; {}",
          factor, f.text, f.why);
      range_texts_[j] = range_prop(f.key, f.value, low, high, why).second;
      // The ends as the copies' reader reads them back (the text has 4 digits): every value the fit writes
      // lies within what it reads.
      const FigureRange back =
          parse_figure_range(*f.prop, range_texts_[j], f.value, Origin{"the widened range of " + f.key, 0});
      f.low = back.low;
      f.high = back.high;
      f.text = back.text;
      f.why = why;
      ++widened;
    }
    return fmt::format(
        "uncalibrated (no calibration measured the GPUs of {}): {} of {} widened by x{:.3f} at both ends, "
        "within their properties' values, so that the fit can reach as far as the model's error on the "
        "public corpus goes (measured / predicted x{:.3f}..x{:.3f}, {} rows of {} origins, each origin one "
        "vote; docs/fit.md)",
        path_, count_noun(widened, "ranged figure"),
        count_noun(static_cast<long long>(figures_.size()), "figure"), factor, c.ratio_low, c.ratio_high,
        c.rows, c.origins);
  }
  long long simulations() const { return simulations_; }
  // Every point's time with each values vector (one per figure, SI; NaN: as written): out[b][point]. One
  // batch of forked simulations; a copy whose changed figures SimGrid never sees runs on the file's engine.
  std::vector<std::vector<double>> times(const std::vector<std::vector<double>>& values) {
    std::vector<Scenario> runs;
    std::vector<std::string> engine_of, files;
    for (const auto& v : values) {
      std::vector<RangedFigure> changed;
      for (size_t j = 0; j < figures_.size(); ++j)
        if (!std::isnan(v[j])) changed.push_back(figures_[j]);
      const std::string file = fmt::format("{}/c{}.xml", dir_.path(), copies_++);
      std::vector<std::pair<std::string, std::string>> texts(figures_.size());
      for (size_t j = 0; j < figures_.size(); ++j)
        if (!std::isnan(v[j])) texts[j] = {exact_prop_value(*figures_[j].prop, v[j]), range_texts_[j]};
      write_file_atomic(file, platform_with_texts(text_, path_, figures_, texts));
      files.push_back(file);
      for (const Scenario& p : points_) {
        Scenario s = p;
        s.cluster.platform = file;
        s.what_ifs.clear();  // applied already: the file is the edited copy
        runs.push_back(std::move(s));
        engine_of.push_back(needs_own_engine(changed) ? file : path_);
      }
    }
    const std::vector<SimulatedTimes> got = simulate_points(runs, calib_, opt_, "vitsim fit", engine_of);
    simulations_ += static_cast<long long>(got.size());
    for (const auto& f : files) std::filesystem::remove(f);  // a fit's hundreds of copies are not kept
    std::vector<std::vector<double>> out(values.size());
    for (size_t b = 0; b < values.size(); ++b)
      for (size_t i = 0; i < points_.size(); ++i) {
        const SimulatedTimes& p = got[b * points_.size() + i];
        out[b].push_back(metric_ == MeasuredMetric::StepTime ? p.step_time_s : p.epoch_time_s);
      }
    return out;
  }

 private:
  std::vector<Scenario> points_;
  std::string path_, text_;
  const Calibration* calib_;
  PredictOptions opt_;
  MeasuredMetric metric_;
  std::vector<RangedFigure> figures_;
  std::set<std::string> gpu_models_;
  std::vector<std::string>
      range_texts_;  // per figure: its range prop as the copies state it ("": as written)
  TempDir dir_{"vitsim-fit-"};
  int copies_ = 0;
  long long simulations_ = 0;
};

// The measured points resolved, what-ifs applied, all on one platform file.
struct Resolved {
  std::vector<Scenario> points;
  std::string original;   // the platform file the scenario names (the output's base)
  std::string simulated;  // the file simulated: the original, or its copy edited by the what-ifs
  std::string what_ifs;   // the edits, "; "-separated ("" none)
};

Resolved resolve_points(const ScenarioFile& file, const MeasuredTimes& measured, EditedPlatforms& edited) {
  Resolved r;
  r.points = measured_scenarios(file, measured);
  // One platform file: the first row's, and each row on another named beside it (issue 39 item 20).
  for (size_t i = 1; i < r.points.size(); ++i)
    if (r.points[i].cluster.platform != r.points.front().cluster.platform)
      throw Error(fmt::format(
          "{}: runs on the platform {}, {} on {}: vitsim fit fits one platform's figures; fit each "
          "platform's measurements on their own",
          measured.rows[i].where, r.points[i].cluster.platform, measured.rows.front().where,
          r.points.front().cluster.platform));
  PlatformCache platforms;  // the platform file read (a missing one named with the first row)
  try {
    platforms.of(r.points.front());
  } catch (const Error& e) {
    throw Error(row_message(measured.rows.front(), e.what()));
  }
  r.original = r.points.front().cluster.platform;
  for (const auto& w : r.points.front().what_ifs) r.what_ifs += (r.what_ifs.empty() ? "" : "; ") + w;
  edited.apply(r.points);
  std::set<std::string> simulated;
  for (const Scenario& s : r.points) simulated.insert(s.cluster.platform);
  if (simulated.size() > 1)
    throw Error(
        "the measured configurations have different what-ifs: vitsim fit fits one platform's figures");
  r.simulated = *simulated.begin();
  // What the simulations would refuse (a batch larger than the dataset, more nodes than the platform has),
  // refused now naming the row, as predict --runs does (issue 39 item 20).
  for (size_t i = 0; i < r.points.size(); ++i) try {
      check_epoch(r.points[i]);
      Scenario s = r.points[i];
      s.what_ifs.clear();  // applied already: the file is the edited copy
      check_point(s, platforms.of(s));
    } catch (const Error& e) {
      throw Error(row_message(measured.rows[i], e.what()));
    }
  return r;
}

// --free KEY or KEY@ID: the figures of that key (stated in the element whose id is ID).
std::vector<size_t> named_free(const std::vector<RangedFigure>& figures,
                               const std::vector<std::string>& names, const std::string& platform) {
  std::vector<size_t> out;
  std::vector<std::string> keys;
  for (const auto& f : figures) keys.push_back(f.key);
  for (const std::string& name : names) {
    const size_t at = name.find('@');
    const std::string key = name.substr(0, at), id = at == std::string::npos ? "" : name.substr(at + 1);
    bool any = false;
    for (size_t j = 0; j < figures.size(); ++j) {
      if (figures[j].key != key) continue;
      const bool here =
          id.empty() ||
          std::any_of(figures[j].elements.begin(), figures[j].elements.end(), [&](const std::string& e) {
            return e.size() > id.size() && e.compare(e.size() - id.size(), id.size(), id) == 0 &&
                   e[e.size() - id.size() - 1] == ' ';
          });
      if (!here) continue;
      any = true;
      if (std::find(out.begin(), out.end(), j) == out.end()) out.push_back(j);
    }
    if (any) continue;
    if (!find_platform_prop(key))
      throw Error(fmt::format("--free {}: '{}' is no platform property{}", echo(name), echo(key),
                              did_you_mean(key, keys)));
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      throw Error(
          fmt::format("--free {}: {} has no range in {}: the fit stays within a figure's range; state "
                      "one beside it (<prop id=\"{}.range\" value=\"LOW..HIGH; WHY\"/>, "
                      "docs/platform-properties.md){}",
                      echo(name), key, platform, key,
                      keys.empty() ? "" : "; ranged here: " + fmt::format("{}", fmt::join(keys, ", "))));
    throw Error(fmt::format("--free {}: no element with id '{}' states the range of {} (it is stated in: {})",
                            echo(name), echo(id), key,
                            figures[std::find(keys.begin(), keys.end(), key) - keys.begin()].where()));
  }
  for (size_t j : out) {
    const RangedFigure& f = figures[j];
    if (f.prop->type == PropType::Integer)
      throw Error(
          fmt::format("--free {}: {} is a whole number: the fit moves figures continuously (its time is a "
                      "step function of it)",
                      f.key, f.key));
    if (!(f.high > f.low))
      throw Error(fmt::format("--free {}: the range of {} ({}, {}) is one value: nothing to fit", f.key,
                              f.key, f.where(), f.text));
  }
  return out;
}

std::string percent(double x) {
  return fmt::format("{:.2f}%", 100 * x);
}

// The figures that cannot be pinned down: no effect on the measured points.
void refuse_no_effect(const std::vector<RangedFigure>& figures, const std::vector<size_t>& free,
                      const std::vector<double>& swing) {
  std::string list;
  for (size_t j : free)
    if (swing[j] < kNoEffectLogSwing)
      list += fmt::format("{}{} ({}, range {}): moves the measured times by {} at most over its range",
                          list.empty() ? "" : "; ", figures[j].key, figures[j].where(), figures[j].text,
                          percent(std::expm1(swing[j])));
  if (!list.empty())
    throw Error(
        fmt::format("unidentifiable: {}; a figure with no effect on the measured points cannot be "
                    "fitted from them: leave it out of --free, or measure a configuration it shapes",
                    list));
}

}  // namespace

FitResult fit(const ScenarioFile& file, const MeasuredTimes& measured, const FitOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  EditedPlatforms edited;
  edited.set_link_connections(nccl_link_connections());
  const Resolved res = resolve_points(file, measured, edited);
  std::unique_ptr<Calibration> calib;
  if (!opt.predict.calibration.empty())
    calib = std::make_unique<Calibration>(read_calibration(opt.predict.calibration));
  FitRunner runner(res.points, res.simulated, calib.get(), opt.predict, measured.metric);
  std::string reach;  // the note of the ranges widened, last among the notes
  if (opt.corpus_reach && !std::all_of(res.points.begin(), res.points.end(), [&](const Scenario& s) {
        return point_calibrated(s, calib.get(), runner.gpu_models());
      }))
    reach = runner.widen(corpus_spread(kCorpusPLow, kCorpusPHigh));
  FitProblem p;
  p.figures = runner.figures();
  p.measured_path = measured.path;
  p.metric = measured_metric_column(measured.metric);
  for (const MeasuredTime& m : measured.rows) {
    p.measured_s.push_back(m.seconds);
    p.where.push_back(m.where);
  }
  const size_t n = res.points.size(), nf = p.figures.size();
  auto say = [&](const std::string& line) {
    if (opt.predict.progress) fmt::print(stderr, "vitsim fit: {}\n", line);
  };
  if (nf == 0)
    throw Error(
        fmt::format("{} states no ranges: the fit moves figures within their ranges (KEY.range props, "
                    "docs/platform-properties.md); `vitsim platform` writes the catalogue's",
                    res.original));
  p.free = named_free(p.figures, opt.free, res.original);
  if (p.free.size() > n)
    throw Error(
        fmt::format("{} cannot pin down {} free figures: fit at most {} (--free), or measure more "
                    "configurations",
                    count_noun(static_cast<long long>(n), "measured configuration"), p.free.size(), n));
  // Sensitivity at the measured points: each candidate figure at the ends of its range.
  std::vector<size_t> candidates = p.free;
  if (candidates.empty())
    for (size_t j = 0; j < nf; ++j) candidates.push_back(j);
  say(fmt::format("{}, {} ranged; the stated figures and each {} at the ends of its range ({} simulations)",
                  count_noun(static_cast<long long>(n), "measured configuration"),
                  count_noun(static_cast<long long>(nf), "figure"), p.free.empty() ? "figure" : "free figure",
                  n * (1 + 2 * candidates.size())));
  std::vector<std::vector<double>> batch{std::vector<double>(nf, kNaN)};
  for (size_t j : candidates)
    for (double end : {p.figures[j].low, p.figures[j].high}) {
      batch.emplace_back(nf, kNaN);
      batch.back()[j] = end;
    }
  const auto ends = runner.times(batch);
  p.stated_s = ends.front();
  // The measured times against the model's as stated: the plausibility bound predict --runs applies.
  for (size_t i = 0; i < n; ++i) check_time_ratio(p.where[i], p.measured_s[i], p.stated_s[i]);
  p.swing.assign(nf, 0.0);
  std::vector<std::vector<double>> secants(n, std::vector<double>(nf, 0.0));
  for (size_t c = 0; c < candidates.size(); ++c)
    for (size_t i = 0; i < n; ++i) {
      const double s = std::log(ends[2 + 2 * c][i]) - std::log(ends[1 + 2 * c][i]);
      secants[i][candidates[c]] = s;
      p.swing[candidates[c]] = std::max(p.swing[candidates[c]], std::fabs(s));
    }
  std::vector<std::string> notes;
  if (!p.free.empty()) {
    refuse_no_effect(p.figures, p.free, p.swing);
  } else {
    p.free = default_free(p, secants, notes);
    p.by_default = true;
  }
  FitResult out = solve_fit(
      p, [&](const auto& values) { return runner.times(values); }, opt, say);
  out.notes.insert(out.notes.begin(), notes.begin(), notes.end());  // p.free: as the solver left it
  if (!reach.empty()) out.notes.push_back(reach);
  out.scenario = file.name;
  if (!res.what_ifs.empty())
    out.notes.push_back(
        fmt::format("the measurements were simulated with the what-ifs '{}': the file written is "
                    "the platform file itself, fitted; predict it with the same what-ifs",
                    res.what_ifs));
  out.platform = res.original;
  for (size_t j = 0; j < nf; ++j)
    if (std::find(p.free.begin(), p.free.end(), j) == p.free.end()) {
      out.not_free.push_back(p.figures[j]);
      out.not_free_swing.push_back(
          std::find(candidates.begin(), candidates.end(), j) == candidates.end() ? -1 : p.swing[j]);
    }
  for (size_t i = 0; i < n; ++i) out.points[i].params = res.points[i].params;
  out.platform_text = fitted_platform(read_file(res.original), res.original, out, opt);
  out.simulations = runner.simulations();
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace vitsim::sim
