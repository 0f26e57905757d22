// `vitsim plot` drawing comparisons (issue 38 item 5): reports a what-if or a --set apart as one labelled
// curve each, a report's interval as a band, the efficiency panel without a 1-GPU point, and a validation as
// predicted beside measured. These read the gnuplot script and data files the plot writes (make_script,
// make_validation_script: no gnuplot needed); the command-line cases run gnuplot as a user would.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/results/report.hpp"
#include "vitsim/core/results/validation.hpp"
#include "vitsim/plot/plot.hpp"
#include "vitsim/plot/validation_plot.hpp"

using namespace vitsim;

namespace {

// The tesla study scenario (five single-GPU nodes: a prediction of under a second), predicted through the
// command line with `extra` flags and read back as the plot reads it.
Report tesla(const vt::TempDir& d, const std::string& name, const std::string& extra) {
  const std::string out = d / name;
  auto r = vt::vitsim(fmt::format("predict {} -q {} --format json --out {}",
                                  vt::source("scenarios/study/tesla-strong-b16.xml"), extra, out));
  INFO(r.out);
  REQUIRE(r.status == 0);
  return report_from_json(read_file(out), out);
}

// The parts that run gnuplot are skipped (with a warning) where it is not installed; the scripts are
// checked either way.
bool have_gnuplot() {
  return vt::run("command -v gnuplot").status == 0;
}

std::vector<std::string> labels_of(const std::vector<plot::Series>& series) {
  std::vector<std::string> out;
  for (const auto& s : series) out.push_back(s.label);
  return out;
}

// The plot command's line that draws `file` (a script has one per panel).
std::string line_with(const plot::Script& sc, const std::string& file) {
  const size_t at = sc.text.find("\"" + file + "\"");
  REQUIRE(at != std::string::npos);
  const size_t begin = sc.text.rfind('\n', at) + 1;
  return sc.text.substr(begin, sc.text.find('\n', at) - begin);
}

}  // namespace

TEST_CASE("plot: reports a what-if or a --set apart get one curve each, labelled by it", "[study][plot]") {
  vt::TempDir d;
  const std::string edit = "link:tesla3-nic:bandwidth=1.25GBps";
  const Report base = tesla(d, "base.json", "");
  const Report edited = tesla(d, "edited.json", "--what-if " + edit);
  // One scenario twice: before, the points of both fell into one curve titled "tesla-strong-b16 vs
  // tesla-strong-b16".
  const Report merged = plot::merge_reports({base, edited});
  CHECK(merged.scenario == "tesla-strong-b16");
  auto series = plot::make_series(merged, plot::Kind::Scaling);
  CHECK(labels_of(series) == std::vector<std::string>{"no what-if", "what-if " + edit});
  for (const auto& s : series) CHECK(s.time.size() == base.points.size());
  // Each curve holds its own report's epoch times: the fifth node (tesla3) is the edited NIC's.
  REQUIRE(series[1].time.size() == edited.points.size());
  for (size_t i = 0; i < edited.points.size(); ++i)
    CHECK(series[1].time[i].second == Approx(edited.points[i].epoch_time_s / 60.0));
  const plot::Script sc = plot::make_script(merged, plot::Kind::Auto, "x.svg");
  CHECK(line_with(sc, "time1.dat").find("title \"what-if " + edit + "\"") != std::string::npos);
  CHECK(sc.text.find(" vs ") == std::string::npos);

  // A --set in one report and not in the other: the key's value tells the curves apart, the other runs
  // the scenario's own value.
  const Report bucket = tesla(d, "bucket.json", "--set parallelism.bucket_size=5MB");
  series = plot::make_series(plot::merge_reports({base, bucket}), plot::Kind::Scaling);
  CHECK(labels_of(series) == std::vector<std::string>{"parallelism.bucket_size as in the scenario",
                                                      "parallelism.bucket_size=5MB"});
  // Reports alike in every way (two runs of one scenario): each file's name, still one curve each.
  series = plot::make_series(plot::merge_reports({base, tesla(d, "again.json", "")}), plot::Kind::Scaling);
  CHECK(labels_of(series) == std::vector<std::string>{"base.json", "again.json"});
  // Through the command line, gnuplot drawing it.
  if (!have_gnuplot()) {
    WARN("gnuplot is not installed: the SVG is not drawn");
    return;
  }
  auto p = vt::vitsim(fmt::format("plot {} {} --out {}", d / "base.json", d / "edited.json", d / "c.svg"));
  INFO(p.out);
  CHECK(p.status == 0);
  CHECK(read_file(d / "c.svg").find("what-if " + edit) != std::string::npos);
}

TEST_CASE("plot: a report with intervals draws its band under the curve", "[study][plot]") {
  vt::TempDir d;
  // tesla.xml states ranges (docs/platforms.md): two samples are enough for an interval to exist.
  const Report r = tesla(d, "interval.json", "--interval --samples 2");
  REQUIRE(r.points.front().interval.samples == 2);
  const plot::Script sc = plot::make_script(r, plot::Kind::Scaling, "x.svg");
  // One row per point: GPUs, then the epoch's low and high ends in minutes, as the report holds them.
  std::string rows;
  for (const auto& p : r.points)
    rows += fmt::format("{:.9g} {:.9g} {:.9g}\n", static_cast<double>(p.gpus), p.interval.epoch_low_s / 60,
                        p.interval.epoch_high_s / 60);
  CHECK(sc.data.at("time0_band.dat") == rows);
  const std::string line = line_with(sc, "time0_band.dat");
  CHECK(line.find("\"time0_band.dat\" using 1:2:3 with filledcurves") != std::string::npos);
  CHECK(line.find("title \"p10-p90: tesla-strong-b16\"") != std::string::npos);  // predict's default ends
  CHECK(line.find("time0_band.dat") < line.find("time0.dat"));                   // under the curve
  // The efficiency panel has no band (an efficiency's interval would need its reference's too).
  CHECK(sc.data.count("efficiency0_band.dat") == 0);

  // A batch plot's band in its unit: the step's ends per sample, in ms, at the report's own quantiles.
  Report batch = r;
  for (size_t i = 0; i < batch.points.size(); ++i) {
    ReportPoint& p = batch.points[i];
    p.gpus = 2;
    p.micro_batch = 8 << i;
    p.params["micro_batch"] = std::to_string(p.micro_batch);
    p.params.erase("gpus");
    p.params.erase("nodes");
    p.params.erase("cluster.nodes");
    p.params.erase("cluster.hosts");
    p.interval.p_low = 0.25;
    p.interval.p_high = 0.75;
  }
  const plot::Script bs = plot::make_script(batch, plot::Kind::Batch, "x.svg");
  const ReportPoint& first = batch.points.front();
  const std::string want =
      fmt::format("8 {:.9g} {:.9g}\n", 1e3 * first.interval.step_low_s / first.global_batch,
                  1e3 * first.interval.step_high_s / first.global_batch);
  CHECK(bs.data.at("batch0_band.dat").rfind(want, 0) == 0);
  CHECK(line_with(bs, "batch0_band.dat").find("title \"p25-p75: ") != std::string::npos);
  // A report without intervals draws no band.
  const Report plain = tesla(d, "plain.json", "");
  const plot::Script ps = plot::make_script(plain, plot::Kind::Scaling, "x.svg");
  CHECK(ps.data.count("time0_band.dat") == 0);
  CHECK(ps.text.find("filledcurves") == std::string::npos);
}

TEST_CASE("plot: without a 1-GPU point the efficiency is against the smallest point, said on the axis",
          "[study][plot]") {
  vt::TempDir d;
  // Nodes 2..5 of the tesla scenario: the report has no 1-GPU point, so no efficiency of its own (-1).
  const Report r = tesla(d, "from2.json", "--set cluster.nodes=2,3,4,5");
  for (const auto& p : r.points) REQUIRE(p.scaling_efficiency < 0);
  auto series = plot::make_series(r, plot::Kind::Scaling);
  REQUIRE(series.size() == 1);
  CHECK(series[0].efficiency_reference == 2);
  // throughput(g) x 2 / (g x throughput(2)), from the report's own throughputs: 100% at 2 GPUs.
  const ReportPoint* two = nullptr;
  for (const auto& p : r.points)
    if (p.gpus == 2) two = &p;
  REQUIRE(two);
  REQUIRE(series[0].efficiency.size() == r.points.size());
  for (const auto& p : r.points) {
    const double want = 100.0 * p.throughput_img_s * 2 / (p.gpus * two->throughput_img_s);
    auto it = std::find_if(series[0].efficiency.begin(), series[0].efficiency.end(),
                           [&](const auto& xy) { return xy.first == p.gpus; });
    REQUIRE(it != series[0].efficiency.end());
    CHECK(it->second == Approx(want));
  }
  CHECK(series[0].efficiency.front().second == Approx(100));
  plot::Script sc = plot::make_script(r, plot::Kind::Scaling, "x.svg");
  CHECK(sc.text.find("set ylabel \"efficiency against 2 GPUs (%): no 1-GPU point\"") != std::string::npos);
  CHECK(sc.text.find("no efficiency") == std::string::npos);
  CHECK(sc.data.count("efficiency0.dat") == 1);

  // Beside a report that has its 1-GPU point: each curve against its own reference, the other's named.
  const Report whole = tesla(d, "whole.json", "");
  sc = plot::make_script(plot::merge_reports({whole, r}), plot::Kind::Scaling, "x.svg");
  CHECK(sc.text.find("set ylabel \"efficiency against 1 GPU, else the fewest (%)\"") != std::string::npos);
  // (Their points at 2..5 nodes are alike: the files' names tell the reports apart.)
  const std::string line = line_with(sc, "efficiency1.dat");
  CHECK(line.find(
            "\"efficiency0.dat\" using 1:2 with linespoints linetype 1 linewidth 2 title \"whole.json\",") !=
        std::string::npos);
  CHECK(line.find("\"efficiency1.dat\" using 1:2 with linespoints linetype 2 linewidth 2 title \"from2.json "
                  "(against 2 GPUs)\"") != std::string::npos);
  // The report's own efficiencies where it has them: every point against the 1-GPU one.
  series = plot::make_series(whole, plot::Kind::Scaling);
  CHECK(series[0].efficiency_reference == 1);
  CHECK(series[0].efficiency.back().second == Approx(100 * whole.points.back().scaling_efficiency));
}

namespace {

ValidationMetric metric(const std::string& name, double predicted, double measured) {
  ValidationMetric m{name, predicted, measured};
  m.scored = measured > 0;
  if (m.scored) m.rel_error = (predicted - measured) / measured;
  return m;
}

// Two points a GPU count apart, as validate compares them: step times 0.5 s predicted against 0.4 s
// measured (25% high), and 0.6 s against a step the run did not time (not scored).
Validation two_points() {
  Validation v;
  v.scenario = "val";
  v.tolerance = 0.1;
  v.points.resize(2);
  v.points[0].params = {{"gpus", "1"}, {"micro_batch", "64"}, {"cluster.gpus_per_node", "1"}};
  v.points[1].params = {{"gpus", "2"}, {"micro_batch", "64"}, {"cluster.gpus_per_node", "2"}};
  v.points[0].metrics = {metric("step_time", 0.5, 0.4), metric("epoch_time", 50, 40)};
  v.points[1].metrics = {metric("epoch_time", 60, 0), metric("step_time", 0.6, 0)};
  v.mape["step_time"] = 0.25;
  v.pass = false;
  return v;
}

}  // namespace

TEST_CASE("plot: a validation is drawn as predicted beside measured", "[study][plot]") {
  const Validation v = two_points();
  const plot::Script sc = plot::make_validation_script(v, "x.svg");
  // Label, predicted and measured step time (ms), error (%): 25% for the first, NaN (not scored) after.
  CHECK(sc.data.at("validation.dat") == "\"1 GPU\" 500 400 25\n\"2 GPUs\" 600 0 NaN\n");
  CHECK(sc.text.find("using 2:xtic(1) linetype 1 title \"predicted\", \"\" using 3 linetype 2 title "
                     "\"measured\"") != std::string::npos);
  CHECK(sc.text.find("step-time MAPE 25.0% against a tolerance of 10.0%: FAIL") != std::string::npos);
  CHECK(sc.text.find(", 10 with lines") != std::string::npos);  // +/- the tolerance, in %
  CHECK(sc.text.find(", -10 with lines") != std::string::npos);
  Validation none = v;
  for (auto& p : none.points) p.metrics.clear();
  CHECK_THROWS_WITH(plot::make_validation_script(none, "x.svg"),
                    "validation 'val': no point has a step time to plot");

  // Through the command line: the validation's JSON, as validate --format json writes it.
  vt::TempDir d;
  const std::string path = d.file("v.json", validation_to_json(v));
  if (have_gnuplot()) {
    auto p = vt::vitsim(fmt::format("plot {} --out {}", path, d / "v.svg"));
    INFO(p.out);
    CHECK(p.status == 0);
    const std::string svg = read_file(d / "v.svg");
    CHECK(svg.find(">predicted<") != std::string::npos);
    CHECK(svg.find(">measured<") != std::string::npos);
  } else {
    WARN("gnuplot is not installed: the SVG is not drawn");
  }
  // Alone: it holds both sides already (refused before gnuplot runs).
  auto two = vt::vitsim(fmt::format("plot {} {} --out {}", path, path, d / "w.svg"));
  CHECK(two.status == 2);
  CHECK(two.out == "vitsim: error: " + path +
                       ": a validation holds the predicted and the measured times: plot it alone, without "
                       "other files or --measured\n");
  auto kind = vt::vitsim(fmt::format("plot {} --kind scaling --out {}", path, d / "w.svg"));
  CHECK(kind.status == 2);
  CHECK(kind.out == "vitsim: error: --kind scaling: a validation has one plot; leave --kind out\n");
}
