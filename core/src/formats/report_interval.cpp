// The interval's and sensitivity's parts of a report's table and CSV (report_interval.hpp; docs/predict.md
// "Intervals and sensitivity").
#include "formats/report_interval.hpp"

#include <fmt/format.h>

#include <cmath>

#include "vitsim/core/base/units.hpp"

namespace vitsim {

namespace {
// How many figures a point's sensitivity section lists (the rest move the time less).
constexpr size_t kFiguresShown = 5;

std::string quantile_name(double p) {
  return fmt::format("p{:g}", std::round(p * 1000) / 10);
}
}  // namespace

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
                     p.sensitivity.empty() ? std::string() : p.sensitivity.front().figure);
}

std::string sensitivity_text(const Report& r) {
  std::string out;
  for (size_t i = 0; i < r.points.size(); ++i) {
    const ReportPoint& p = r.points[i];
    if (p.interval.samples == 0) continue;
    const PointInterval& v = p.interval;
    out += fmt::format(
        "\npoint {} ({} node{}, {} GPU{}, micro-batch {}): epoch {} ({} {} .. {} {}; {} samples of {} "
        "ranged figure{}, seed {})\n",
        i + 1, p.nodes, p.nodes == 1 ? "" : "s", p.gpus, p.gpus == 1 ? "" : "s", p.micro_batch,
        units::format_time(p.epoch_time_s), quantile_name(v.p_low), units::format_time(v.epoch_low_s),
        quantile_name(v.p_high), units::format_time(v.epoch_high_s), v.samples, v.figures,
        v.figures == 1 ? "" : "s", v.seed);
    if (p.sensitivity.empty()) {
      out += "  no figure of the platform states a range: the interval is the point\n";
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
