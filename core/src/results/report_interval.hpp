#pragma once
// Internal to core's report (report.cpp): the interval's and sensitivity's parts of the table and the CSV
// (issue 26 item 3), written only when a point has an interval, so that a report without one prints byte
// for byte as before.
#include <string>

#include "vitsim/core/results/report.hpp"

namespace vitsim {

bool has_intervals(const Report& r);
std::string quantile_range(const PointInterval& v);  // "p10-p90"
std::string interval_column(const Report& r);        // "epoch p10-p90"
std::string interval_cell(const ReportPoint& p);     // "9.8 s-12.1 s"
std::string interval_csv_header();
std::string interval_csv_cells(const ReportPoint& p);
// "what to measure first": per point, its figures by swing, widest first, each with its command.
std::string sensitivity_text(const Report& r);

}  // namespace vitsim
