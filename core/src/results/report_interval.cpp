// The interval's and sensitivity's parts of a report's table and CSV (report_interval.hpp; docs/predict.md
// "Intervals and sensitivity").
#include "results/report_interval.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "vitsim/core/base/csv.hpp"
#include "vitsim/core/base/error.hpp"

#include "vitsim/core/base/units.hpp"

namespace vitsim {

namespace {
// How many figures a point's sensitivity section lists (the rest move the time less).
constexpr size_t kFiguresShown = 5;

std::string quantile_name(double p) {
  return fmt::format("p{:g}", std::round(p * 1000) / 10);
}

// "; and 12 measured runs: x0.97 .. x1.05 of the model, a new run between at least 85% of the time"
std::string runs_text(const PointInterval& v) {
  const RunsSpread& r = v.runs;
  if (r.count == 0) return "";
  std::string out = fmt::format(
      "; and {} measured run{}: x{:.3f} .. x{:.3f} of the model, a new run like them between at least "
      "{:.0f}% "
      "of the time",
      r.count, r.count == 1 ? "" : "s", r.ratio_low, r.ratio_high, 100 * r.level);
  if (r.level + 1e-9 < v.p_high - v.p_low)
    out += fmt::format(", under the stated {:.0f}%: {} more runs state it", 100 * (v.p_high - v.p_low),
                       runs_for_level(v.p_low, v.p_high, r.count + 1) - r.count);
  return out;
}

// "; and the model's error on the public corpus (uncalibrated): x0.92 .. x2.31 ..."
std::string corpus_text(const PointInterval& v) {
  const CorpusSpread& c = v.corpus;
  if (c.rows == 0) return "";
  return fmt::format(
      "; and, uncalibrated, the model's own error on the public corpus: x{:.3f} .. x{:.3f} of the model ({} "
      "rows of {} origins, each origin one vote; left out one at a time, an origin's rows fell inside the "
      "others' band {:.0f}% of the time, where {:.0f}% is stated)",
      c.ratio_low, c.ratio_high, c.rows, c.origins, 100 * c.held_out, 100 * (v.p_high - v.p_low));
}

// The ranks of n ratios' conformal ends and the level they hold: k_low = floor((n + 1) p_low), k_high =
// ceil((n + 1) p_high), clamped to 1..n (a rounding of the product aside: (9 + 1) x 0.9 is 9, not
// 9.000000000000002).
RunsSpread conformal_ranks(int n, double p_low, double p_high) {
  RunsSpread r;
  r.count = n;
  r.k_low = std::clamp(static_cast<int>(std::floor((n + 1) * p_low + 1e-9)), 1, n);
  r.k_high = std::clamp(static_cast<int>(std::ceil((n + 1) * p_high - 1e-9)), r.k_low, n);
  r.level = static_cast<double>(r.k_high - r.k_low) / (n + 1);
  return r;
}
}  // namespace

RunsSpread conformal_spread(std::vector<double> ratios, double p_low, double p_high) {
  if (ratios.empty()) throw Error("no measured run to take an interval's ends from");
  std::sort(ratios.begin(), ratios.end());
  RunsSpread r = conformal_ranks(static_cast<int>(ratios.size()), p_low, p_high);
  r.ratio_low = ratios[static_cast<size_t>(r.k_low - 1)];
  r.ratio_high = ratios[static_cast<size_t>(r.k_high - 1)];
  return r;
}

int runs_for_level(double p_low, double p_high, int at_least) {
  int n = std::max(at_least, 1);
  while (n < (1 << 20) && conformal_ranks(n, p_low, p_high).level + 1e-9 < p_high - p_low) ++n;
  return n;
}

bool has_intervals(const Report& r) {
  for (const auto& p : r.points)
    if (p.interval.samples > 0) return true;
  return false;
}

std::string quantile_range(const PointInterval& v) {
  return fmt::format("{}-{}", quantile_name(v.p_low), quantile_name(v.p_high));
}

std::string interval_column(const Report& r) {
  for (const auto& p : r.points)
    if (p.interval.samples > 0) return "epoch " + quantile_range(p.interval);
  return "epoch interval";
}

std::string interval_cell(const ReportPoint& p) {
  if (p.interval.samples == 0) return "-";
  return fmt::format("{} .. {}", units::format_time(p.interval.epoch_low_s),
                     units::format_time(p.interval.epoch_high_s));
}

std::string interval_csv_header() {
  return "interval_p_low,interval_p_high,interval_samples,epoch_time_low_s,epoch_time_high_s,step_low_s,"
         "step_high_s,most_sensitive_figure";
}

std::string interval_csv_cells(const ReportPoint& p) {
  if (p.interval.samples == 0) return ",,,,,,,";
  const PointInterval& v = p.interval;
  return fmt::format("{:g},{:g},{},{:.9g},{:.9g},{:.9g},{:.9g},{}", v.p_low, v.p_high, v.samples,
                     v.epoch_low_s, v.epoch_high_s, v.step_low_s, v.step_high_s,
                     p.sensitivity.empty() ? std::string() : csv_cell(p.sensitivity.front().figure));
}

std::string sensitivity_text(const Report& r) {
  std::string out;
  for (size_t i = 0; i < r.points.size(); ++i) {
    const ReportPoint& p = r.points[i];
    if (p.interval.samples == 0) continue;
    const PointInterval& v = p.interval;
    out += fmt::format(
        "\npoint {} ({} node{}, {} GPU{}, micro-batch {}): epoch {} ({} {} .. {} {}; {} samples of {} "
        "ranged figure{}{}, seed {}{})\n",
        i + 1, p.nodes, p.nodes == 1 ? "" : "s", p.gpus, p.gpus == 1 ? "" : "s", p.micro_batch,
        units::format_time(p.epoch_time_s), quantile_name(v.p_low), units::format_time(v.epoch_low_s),
        quantile_name(v.p_high), units::format_time(v.epoch_high_s), v.samples, v.figures,
        v.figures == 1 ? "" : "s",
        v.surrogate ? fmt::format(" on the additive surrogate of their {} one-at-a-time ends", 2 * v.figures)
                    : std::string(),
        v.seed, runs_text(v) + corpus_text(v));
    if (v.corpus.rows > 0)
      out += fmt::format(
          "  of which the public corpus: the figures alone give {} .. {}; a calibration of these GPUs "
          "(vitsim calibrate) or measured runs (--runs) take the place of the corpus' band\n",
          units::format_time(v.corpus.figures_epoch_low_s),
          units::format_time(v.corpus.figures_epoch_high_s));
    if (p.sensitivity.empty()) {
      out += v.corpus.rows > 0
                 ? "  no figure of the platform states a range: the interval is the corpus' band alone\n"
                 : "  no figure of the platform states a range: the interval is the point\n";
      continue;
    }
    out +=
        "  what to measure first (the epoch with each figure at the ends of its range, the others at "
        "their values):\n";
    for (size_t k = 0; k < p.sensitivity.size() && k < kFiguresShown; ++k) {
      const FigureSensitivity& s = p.sensitivity[k];
      out += fmt::format("  {}. {} ({}) {}: epoch {} .. {} (moves {}); {}\n", k + 1, s.figure, s.where,
                         s.range, units::format_time(s.epoch_at_low_s), units::format_time(s.epoch_at_high_s),
                         units::format_time(s.swing_s()),
                         s.measure.empty() ? "no command measures it" : "measure: " + s.measure);
    }
    if (p.sensitivity.size() > kFiguresShown)
      out += fmt::format("  ({} more in the JSON report)\n", p.sensitivity.size() - kFiguresShown);
  }
  return out;
}

}  // namespace vitsim
