// predict's CSV (core/results/report.hpp, report_to_csv): the whole run's columns beside the per-epoch ones,
// and a row for each failed point in its place with its reason (issue 28 item 1's CSV half; issue 27's
// failed points: nothing lost when the output is CSV).
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "vitsim/core/results/report.hpp"

using namespace vitsim;

namespace {

// The CSV's rows as cells (no quoted commas in these fixtures but the one checked).
std::vector<std::vector<std::string>> rows_of(const std::string& csv) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(csv);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::string cell;
    bool quoted = false;
    for (char c : line) {
      if (c == '"')
        quoted = !quoted;
      else if (c == ',' && !quoted)
        cells.push_back(std::exchange(cell, ""));
      else
        cell += c;
    }
    cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

std::string cell(const std::vector<std::vector<std::string>>& rows, size_t row, const std::string& column) {
  const auto& header = rows.at(0);
  const auto it = std::find(header.begin(), header.end(), column);
  REQUIRE(it != header.end());
  return rows.at(row).at(static_cast<size_t>(it - header.begin()));
}

ReportPoint point(int nodes, double epoch_s) {
  ReportPoint p;
  p.nodes = nodes;
  p.gpus = 8 * nodes;
  p.micro_batch = 32;
  p.grad_accum = 1;
  p.params = {{"cluster.nodes", std::to_string(nodes)}, {"nodes", std::to_string(nodes)}};
  p.epoch_time_s = epoch_s;
  p.step_time_s.mean = epoch_s / 100;
  return p;
}

}  // namespace

TEST_CASE("predict's CSV carries the whole run's time, GPU-hours, cost and energy", "[report][csv]") {
  Report r;
  r.points = {point(1, 3600), point(2, 1800)};
  for (auto& p : r.points) {
    p.total_epochs = 300;
    p.price_per_gpu_hour = 2.5;
  }
  r.points[0].energy.epoch_kwh = 1.5;  // known: GPU power figures
  r.points[0].energy.busy_w = 300;
  const auto rows = rows_of(report_to_csv(r));
  REQUIRE(rows.size() == 3);
  for (const auto& row : rows) CHECK(row.size() == rows[0].size());
  // Closed forms: time = epoch x epochs; GPU-hours = time x GPUs / 3600; cost = GPU-hours x price.
  CHECK(cell(rows, 1, "epochs") == "300");
  CHECK(std::stod(cell(rows, 1, "total_time_s")) == Approx(3600.0 * 300));
  CHECK(std::stod(cell(rows, 1, "gpu_hours")) == Approx(300.0 * 8));
  CHECK(std::stod(cell(rows, 2, "gpu_hours")) == Approx(1800.0 * 300 * 16 / 3600));
  CHECK(std::stod(cell(rows, 1, "total_cost")) == Approx(300.0 * 8 * 2.5));
  CHECK(std::stod(cell(rows, 1, "total_kwh")) == Approx(1.5 * 300));
  CHECK(cell(rows, 2, "total_kwh").empty());  // no GPU power figures: an empty cell, not 0
  CHECK(rows[0].back() == "total_kwh");       // no failed point: no failed column
  // A point without totals (a measured report): the columns stay, empty.
  r.points[1].total_epochs = 0;
  const auto rows2 = rows_of(report_to_csv(r));
  CHECK(cell(rows2, 2, "epochs").empty());
  CHECK(rows2[2].size() == rows2[0].size());
  // No point with totals: no such columns (a measured report's CSV as before).
  r.points[0].total_epochs = 0;
  const auto rows3 = rows_of(report_to_csv(r));
  CHECK(std::find(rows3[0].begin(), rows3[0].end(), "epochs") == rows3[0].end());
}

TEST_CASE("predict's CSV keeps a failed point's row, in its place, with its reason",
          "[report][csv][failed]") {
  Report r;
  r.points = {point(1, 100), point(4, 30)};
  for (auto& p : r.points) p.total_epochs = 1;
  FailedPoint f;
  f.point = 2;  // between the two others in the sweep
  f.params = {{"cluster.nodes", "2"}, {"nodes", "2"}, {"gpus", "16"}};
  f.reason = "died of signal 9 (SIGKILL, as the out-of-memory killer sends), no result";
  r.failed = {f};
  FailedPoint last = f;
  last.point = 4;
  last.params = {{"cluster.nodes", "8"}, {"nodes", "8"}};
  last.reason = "simulation: thrown";
  r.failed.push_back(last);
  const auto rows = rows_of(report_to_csv(r));
  REQUIRE(rows.size() == 5);
  for (const auto& row : rows) CHECK(row.size() == rows[0].size());
  CHECK(rows[0].back() == "failed");
  CHECK(cell(rows, 1, "cluster.nodes") == "1");
  CHECK(cell(rows, 1, "failed").empty());
  CHECK(cell(rows, 2, "cluster.nodes") == "2");
  CHECK(cell(rows, 2, "gpus") == "16");
  CHECK(cell(rows, 2, "epoch_time_s").empty());
  CHECK(cell(rows, 2, "total_time_s").empty());
  CHECK(cell(rows, 2, "failed") == f.reason);  // the comma in it quoted
  CHECK(cell(rows, 3, "cluster.nodes") == "4");
  CHECK(cell(rows, 4, "cluster.nodes") == "8");
  CHECK(cell(rows, 4, "failed") == "simulation: thrown");
}
