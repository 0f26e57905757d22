// What `vitsim fit` writes (sim/src/fit/fit_detail.hpp; docs/fit.md "Outputs"): the fitted platform file, the
// summary table and its JSON.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "fit/fit_detail.hpp"
#include "vitsim/core/base/json_reader.hpp"
#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/base/system.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/platform/figure_range.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/platform/platform_props.hpp"
#include "vitsim/core/results/json_file.hpp"
#include "vitsim/core/results/report.hpp"

namespace vitsim::sim {

namespace {

using json = nlohmann::json;

// A figure's text read back to SI, as the platform reader reads a quantity or a number.
double prop_si(const PlatformProp& p, const std::string& text) {
  return p.type == PropType::Quantity ? units::parse(text, p.unit) : units::parse_number(text, p.range);
}

// No "--" inside an XML comment.
std::string comment_safe(std::string s) {
  for (size_t at = s.find("--"); at != std::string::npos; at = s.find("--", at)) s.replace(at, 2, "- -");
  return s;
}

std::string date_of(const FitOptions& opt) {
  return opt.date.empty() ? now_utc().substr(0, 10) : opt.date;
}

std::string readable(const RangedFigure& f, double si) {
  return std::isnan(si) ? "-" : readable_prop_value(*f.prop, si);
}

std::string signed_pct(double x) {
  return fmt::format("{:+.2f}%", 100 * x);
}

// Columns padded to their widest cell, two spaces apart.
std::string aligned(const std::vector<std::vector<std::string>>& rows, const std::string& indent) {
  std::vector<size_t> width;
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  std::string out;
  for (const auto& row : rows) {
    std::string line = indent;
    for (size_t c = 0; c < row.size(); ++c)
      line += c + 1 == row.size() ? row[c] : fmt::format("{:<{}}  ", row[c], width[c]);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string params_text(const std::map<std::string, std::string>& params) {
  std::string out;
  for (const auto& [k, v] : params)
    if (k != "nodes" && k != "gpus" && k != "micro_batch" && k != "grad_accum")
      out += (out.empty() ? "" : " ") + k + "=" + v;
  return out.empty() ? "(the scenario as written)" : out;
}

}  // namespace

std::string fitted_platform(const std::string& text, const std::string& path, const FitResult& r,
                            const FitOptions& opt) {
  const std::string date = date_of(opt);
  const std::string from = opt.measured_label.empty() ? r.measured : opt.measured_label;
  const long long n = static_cast<long long>(r.points.size());
  std::vector<RangedFigure> figures;
  std::vector<std::pair<std::string, std::string>> texts;
  std::string summary;
  for (const FittedFigure& f : r.figures) {
    const PlatformProp& p = *f.figure.prop;
    const std::string why =
        std::isnan(f.sigma_low)
            ? fmt::format(
                  "fitted by vitsim fit from {} on {}: {} and as many figures, no uncertainty; the range "
                  "stated before kept: {}; {}",
                  from, date, count_noun(n, "measured configuration"), f.figure.text, f.figure.why)
            : fmt::format(
                  "fitted by vitsim fit from {} on {}: the fit's 2-sigma interval over {}; stated before: "
                  "{} at {}; {}",
                  from, date, count_noun(n, "measured configuration"), readable(f.figure, f.stated),
                  f.figure.text, f.figure.why);
    // The value as people write it (4 digits) when it reads back within the new range, else exactly.
    std::string value = readable_prop_value(p, f.value);
    std::pair<std::string, std::string> range;
    try {
      const double shown = prop_si(p, value);
      range = range_prop(p.key, shown, std::min(f.range_low, shown), std::max(f.range_high, shown), why);
    } catch (const Error&) {
      value = exact_prop_value(p, f.value);
      range =
          range_prop(p.key, f.value, std::min(f.range_low, f.value), std::max(f.range_high, f.value), why);
    }
    figures.push_back(f.figure);
    texts.emplace_back(value, range.second);
    summary += fmt::format("\n  {} ({}): {} (stated {}; range {} -> {})", p.key, f.figure.where(), value,
                           readable(f.figure, f.stated), f.figure.text,
                           range.second.substr(0, range.second.find(';')));
  }
  std::string out = platform_with_texts(text, path, figures, texts);
  const std::string note = comment_safe(fmt::format(
      "\n  fitted by vitsim fit from {} on {} (docs/fit.md): {} of {}, {} simulated with the scenario '{}'; "
      "the residuals' rms {:.2f}%{}{}\n",
      from, date, count_noun(static_cast<long long>(r.figures.size()), "figure"), path,
      count_noun(n, "measured configuration"), r.scenario, 100 * r.rms_fitted,
      r.rms_left_out >= 0 ? fmt::format(", leave-one-out {:.2f}%", 100 * r.rms_left_out) : "", summary));
  const size_t root = out.find("<platform");
  out.insert(root == std::string::npos ? 0 : root, "<!--" + note + "-->\n");
  // The one reader accepts what we write, and every fitted figure is in it: a figure a what-if made (the
  // fit simulates the edited copy, the output is the file itself) is not.
  const PlatformFacts back = read_platform_text(path + " (fitted)", out);
  for (size_t j = 0; j < figures.size(); ++j)
    if (std::none_of(back.ranges.begin(), back.ranges.end(), [&](const FigureRange& g) {
          return g.key == figures[j].key && g.raw == texts[j].second;
        }))
      throw Error(
          fmt::format("{} ({}) is not stated in {} itself (a what-if stated it): fit it without the "
                      "what-if, or apply the what-if to the file first",
                      figures[j].key, figures[j].where(), path));
  return out;
}

std::string fit_to_table(const FitResult& r) {
  std::string out = fmt::format(
      "vitsim fit: scenario '{}' on {}, {} from {} ({})\n\n", r.scenario, r.platform,
      count_noun(static_cast<long long>(r.points.size()), "measured configuration"), r.measured, r.metric);
  out +=
      fmt::format("fitted figures (Levenberg-Marquardt on log time within the ranges; {}, {}):\n",
                  count_noun(r.iterations, "iteration"), r.converged ? "converged" : "stopped at the limit");
  std::vector<std::vector<std::string>> rows{
      {"figure", "where", "range", "stated", "fitted", "1-sigma", "written range", "swing"}};
  for (const FittedFigure& f : r.figures)
    rows.push_back({f.figure.key, f.figure.where(), f.figure.text, readable(f.figure, f.stated),
                    readable(f.figure, f.value) + (f.at_bound.empty() ? "" : " (" + f.at_bound + " end)"),
                    std::isnan(f.sigma_low)
                        ? "-"
                        : readable(f.figure, f.sigma_low) + ".." + readable(f.figure, f.sigma_high),
                    readable(f.figure, f.range_low) + ".." + readable(f.figure, f.range_high),
                    fmt::format("{:.1f}%", 100 * std::expm1(f.swing))});
  out += aligned(rows, "  ");
  out += fmt::format("\nmeasured configurations ({}):\n", r.metric);
  rows = {{"#", "where", "configuration", "measured", "stated", "fitted", "residual", "left out"}};
  for (size_t i = 0; i < r.points.size(); ++i) {
    const FitPoint& p = r.points[i];
    rows.push_back({std::to_string(i + 1), p.where, params_text(p.params), units::format_time(p.measured_s),
                    fmt::format("{} ({})", units::format_time(p.stated_s), signed_pct(p.stated_error())),
                    units::format_time(p.fitted_s), signed_pct(p.residual()),
                    p.left_out_s < 0 ? "-" : signed_pct(p.left_out_error())});
  }
  out += aligned(rows, "  ");
  out +=
      fmt::format("\nerror (rms of the relative errors): stated {:.2f}%, fitted {:.2f}%, leave-one-out {}\n",
                  100 * r.rms_stated, 100 * r.rms_fitted,
                  r.rms_left_out < 0 ? std::string("- (needs more configurations than figures)")
                                     : fmt::format("{:.2f}%", 100 * r.rms_left_out));
  if (!r.not_free.empty()) {
    out += "left at their values:";
    for (size_t j = 0; j < r.not_free.size(); ++j)
      out += fmt::format("{} {} ({}{})", j ? "," : "", r.not_free[j].key, r.not_free[j].where(),
                         r.not_free_swing[j] < 0
                             ? ""
                             : fmt::format(", swing {:.1f}%", 100 * std::expm1(r.not_free_swing[j])));
    out += "\n";
  }
  for (const auto& n : r.notes) out += "note: " + n + "\n";
  out += fmt::format("cost: {} in {:.1f} s\n", count_noun(r.simulations, "simulation"), r.wall_s);
  return out;
}

namespace {
using detail::non_negative, detail::finite;

// The JSON mapping of each struct of a fit (vitsim/core/base/json_reader.hpp), written by fit_to_json (no
// vitsim command reads a fit back). A figure that is not known (NaN, or < 0 where it means none) is null;
// a swing is written as a factor less one (expm1 of the log-time swing).
const auto kFittedFigureFields = [](auto& io, auto& f) {
  io.string("figure", f.figure.key);
  io.put("where", f.figure.where());
  io.string("range", f.figure.text);
  io.number("stated", f.stated, finite());
  io.number("value", f.value, finite());
  if (io.non_null("sigma_low", !std::isnan(f.sigma_low))) io.number("sigma_low", f.sigma_low, finite());
  if (io.non_null("sigma_high", !std::isnan(f.sigma_high))) io.number("sigma_high", f.sigma_high, finite());
  io.number("range_low", f.range_low, finite());
  io.number("range_high", f.range_high, finite());
  io.string("at_bound", f.at_bound);
  io.put("swing", std::expm1(f.swing));
};

const auto kFitPointFields = [](auto& io, auto& p) {
  io.string("where", p.where);
  io.string_map("params", p.params);
  io.number("measured_s", p.measured_s, non_negative("a time"));
  io.number("stated_s", p.stated_s, non_negative("a time"));
  io.number("fitted_s", p.fitted_s, non_negative("a time"));
  io.put("residual", p.residual());
  if (io.non_null("left_out_s", p.left_out_s >= 0))
    io.number("left_out_s", p.left_out_s, non_negative("a time"));
  if (io.non_null("left_out_error", p.left_out_s >= 0)) io.put("left_out_error", p.left_out_error());
};

// A ranged figure left at its value, with its swing (< 0: none).
struct LeftAtValue {
  const RangedFigure* figure = nullptr;
  double swing = -1;
};
const auto kLeftAtValueFields = [](auto& io, auto& l) {
  io.put("figure", l.figure->key);
  io.put("where", l.figure->where());
  if (io.non_null("swing", !(l.swing < 0))) io.put("swing", std::expm1(l.swing));
};

const auto kFitFields = [](auto& io, auto& r) {
  io.string("scenario", r.scenario);
  io.string("platform", r.platform);
  io.string("measured", r.measured);
  io.string("metric", r.metric);
  io.string("written", r.written);
  io.list("figures", r.figures, kFittedFigureFields);
  io.list("points", r.points, kFitPointFields);
  std::vector<LeftAtValue> left;
  for (size_t q = 0; q < r.not_free.size(); ++q) left.push_back({&r.not_free[q], r.not_free_swing[q]});
  io.list("left_at_values", left, kLeftAtValueFields);
  io.number("rms_stated", r.rms_stated, finite());
  io.number("rms_fitted", r.rms_fitted, finite());
  if (io.non_null("rms_left_out", !(r.rms_left_out < 0))) io.number("rms_left_out", r.rms_left_out, finite());
  if (io.non_null("sigma_log", !(r.sigma_log < 0))) io.number("sigma_log", r.sigma_log, finite());
  io.integer("iterations", r.iterations, 0, 1 << 30);
  io.boolean("converged", r.converged);
  io.integer("simulations", r.simulations, 0, std::numeric_limits<long long>::max());
  io.number("wall_s", r.wall_s, non_negative("a time"));
  io.strings("notes", r.notes);
};
}  // namespace

std::string fit_to_json(const FitResult& r) {
  return json_file_text("vitsim.fit/1", "fit", r, kFitFields);
}

}  // namespace vitsim::sim
