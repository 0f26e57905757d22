// Measured runs in the interval (issue 26 item 3 and item 5's "intervals that contain the measured times at
// their stated rate"; predict and plan --runs, sim/predict/interval.hpp MeasuredRun, core conformal_spread):
// each run's measured / predicted ratio, the ratios' split-conformal ends (Vovk, Gammerman and Shafer 2005;
// Lei et al. 2018: sorted r_1..r_n, k_low = floor((n+1) p_low), k_high = ceil((n+1) p_high), a new
// exchangeable ratio between them with probability (k_high - k_low) / (n+1)), and the point's interval taking
// in its central value times those ends. Each number below follows from that formula and from the times the
// test writes: the simulator is deterministic, so runs written as the model's own time times a factor have
// that factor as their ratio.
#include <catch2/catch.hpp>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim_test_util.hpp"
#include "test_util.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/results/report.hpp"

using namespace vitsim;
using json = nlohmann::json;
using Catch::Contains;

namespace {

// The shipped local calibration (platforms/local/calibrated.json: no spans) on its platform (no ranged
// figure): without runs, the interval is the point.
const std::string kCalib = vt::source("platforms/local/calibrated.json");

// A validation (`vitsim validate --format json`) with one point per (predicted, measured) pair, each point
// its own (validate holds a point once, and --runs refuses a point repeated: issue 39 item 14).
std::string validation(const vt::TempDir& d, const std::string& name,
                       const std::vector<std::pair<double, double>>& times) {
  json v = {{"schema", "vitsim.validation/2"}, {"kind", "validation"}, {"points", json::array()}};
  int micro_batch = 1;
  for (const auto& [p, m] : times)
    v["points"].push_back(
        {{"params", {{"gpus", "2"}, {"training.micro_batch", std::to_string(micro_batch++)}}},
         {"metrics",
          {{{"metric", "step_time"}, {"predicted", p}, {"measured", m}, {"rel_error", p / m - 1}}}}});
  return d.file(name, v.dump(1));
}

// The local point (2 ranks, micro-batch 64 unless `extra` says otherwise) with `extra` flags.
json point(const vt::TempDir& d, const std::string& extra, int ranks = 2) {
  return vt::predict_local_point(d, kCalib, ranks, extra);
}

std::string csv_number(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

}  // namespace

TEST_CASE("runs: split-conformal ends by their closed form", "[interval][runs]") {
  // n = 12 at p10-p90: k_low = floor(13 x 0.1) = 1, k_high = ceil(13 x 0.9) = 12: the smallest and the
  // largest, level 11/13. Given out of order: the ends are order statistics.
  std::vector<double> r = {1.05, 0.97, 1.01, 0.92, 1.10, 0.99, 1.00, 1.03, 0.95, 1.02, 0.98, 1.04};
  RunsSpread s = conformal_spread(r, 0.1, 0.9);
  CHECK(s.count == 12);
  CHECK(s.k_low == 1);
  CHECK(s.k_high == 12);
  CHECK(s.ratio_low == 0.92);
  CHECK(s.ratio_high == 1.10);
  CHECK(s.level == Approx(11.0 / 13).epsilon(1e-15));
  // n = 9: exactly the 80% (k 1 and 9 of 10 ranks); n = 8 cannot state it: min and max hold 7/9.
  s = conformal_spread({1, 2, 3, 4, 5, 6, 7, 8, 9}, 0.1, 0.9);
  CHECK(s.k_low == 1);
  CHECK(s.k_high == 9);
  CHECK(s.level == Approx(0.8).epsilon(1e-15));
  s = conformal_spread({1, 2, 3, 4, 5, 6, 7, 8}, 0.1, 0.9);
  CHECK(s.level == Approx(7.0 / 9).epsilon(1e-15));
  CHECK(runs_for_level(0.1, 0.9) == 9);
  CHECK(runs_for_level(0.05, 0.95) == 19);  // floor(20 x 0.05) = 1, ceil(20 x 0.95) = 19
  // A narrow stated rate (5%) that 2 runs already hold, clamped: k 1 and 2 of 3 ranks, level 1/3.
  CHECK(runs_for_level(0.3, 0.35) == 2);
  // From 10 on (the text's "more runs" counts from one above the runs given): n = 10 holds 9/11 >= 80%.
  CHECK(runs_for_level(0.1, 0.9, 10) == 10);
  CHECK(conformal_spread({1, 2}, 0.3, 0.35).level == Approx(1.0 / 3).epsilon(1e-15));
  // n = 60 (the local set's five validations): k_low = floor(6.1) = 6, k_high = ceil(54.9) = 55, level 49/61.
  std::vector<double> sixty;
  for (int i = 60; i >= 1; --i) sixty.push_back(i);
  s = conformal_spread(sixty, 0.1, 0.9);
  CHECK(s.k_low == 6);
  CHECK(s.k_high == 55);
  CHECK(s.ratio_low == 6);
  CHECK(s.ratio_high == 55);
  CHECK(s.level == Approx(49.0 / 61).epsilon(1e-15));
  // A single run: both ends the run, level 0.
  s = conformal_spread({1.3}, 0.1, 0.9);
  CHECK(s.ratio_low == 1.3);
  CHECK(s.level == 0);
  CHECK_THROWS_AS(conformal_spread({}, 0.1, 0.9), Error);
}

TEST_CASE("runs: the interval's runs round-trip through a report, and bad ones are refused",
          "[interval][runs][negative]") {
  vt::TempDir d;
  std::vector<std::pair<double, double>> times;
  for (int i = 0; i < 12; ++i) times.push_back({0.05, 0.05 * (0.9 + 0.02 * i)});
  const std::string out = d / "r.json";
  auto r = vt::vitsim("predict " + vt::source("scenarios/local/validate-homog.xml") +
                      " --set training.micro_batch=64 --set cluster.gpus_per_node=2 --calibration " + kCalib +
                      " -q --format json --out " + out + " --runs " + validation(d, "v.json", times));
  INFO(r.out);
  REQUIRE(r.status == 0);
  const std::string text = vt::run("cat " + out).out;
  const Report back = report_from_json(text, "r.json");
  const RunsSpread& s = back.points.at(0).interval.runs;
  CHECK(s.count == 12);
  CHECK(s.k_low == 1);
  CHECK(s.k_high == 12);
  CHECK(s.ratio_low == Approx(0.9).epsilon(1e-12));
  CHECK(s.ratio_high == Approx(1.12).epsilon(1e-12));
  CHECK(s.level == Approx(11.0 / 13).epsilon(1e-12));
  CHECK(report_from_json(report_to_json(back), "again.json").points[0].interval.runs.k_high == 12);
  auto error_of = [&](const std::string& key, const json& value) {
    json j = json::parse(text);
    j["points"][0]["interval"]["runs"][key] = value;
    try {
      report_from_json(j.dump(), "bad.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of("k_low", 13), Contains("above k_high"));
  CHECK_THAT(error_of("k_high", 13), Contains("above count"));
  CHECK_THAT(error_of("ratio_low", 1.2), Contains("above ratio_high"));
  CHECK_THAT(error_of("level", 1.5), Contains("level"));
  CHECK_THAT(error_of("ratio_high", 0), Contains("ratio"));
}

TEST_CASE("runs: validations widen the interval to the central value times their conformal ends",
          "[interval][runs]") {
  vt::TempDir d;
  const json plain = point(d, "--interval");
  // Nothing ranged: the interval is the point (docs/predict.md).
  REQUIRE(plain["interval"]["step_low_s"].get<double>() == plain["step_time_s"]["mean"].get<double>());
  // Twelve validated runs over two files, ratios 0.90 .. 1.12 (measured / predicted as validated).
  std::vector<std::pair<double, double>> a, b;
  for (int i = 0; i < 12; ++i) (i % 2 ? a : b).push_back({0.05, 0.05 * (0.90 + 0.02 * i)});
  const std::string va = validation(d, "va.json", a), vb = validation(d, "vb.json", b);
  const json p = point(d, "--runs " + va + " " + vb);  // --runs implies --interval
  const double step = p["step_time_s"]["mean"].get<double>(), epoch = p["epoch_time_s"].get<double>();
  CHECK(step == plain["step_time_s"]["mean"].get<double>());  // the central value is the model's
  const json& iv = p["interval"];
  CHECK(iv["runs"]["count"] == 12);
  CHECK(iv["runs"]["k_low"] == 1);
  CHECK(iv["runs"]["k_high"] == 12);
  CHECK(iv["runs"]["level"].get<double>() == Approx(11.0 / 13).epsilon(1e-12));
  CHECK(iv["step_low_s"].get<double>() == Approx(step * 0.90).epsilon(1e-12));
  CHECK(iv["step_high_s"].get<double>() == Approx(step * 1.12).epsilon(1e-12));
  CHECK(iv["epoch_low_s"].get<double>() == Approx(epoch * 0.90).epsilon(1e-12));
  CHECK(iv["epoch_high_s"].get<double>() == Approx(epoch * 1.12).epsilon(1e-12));
  REQUIRE(p["sensitivity"].size() == 1);
  CHECK(p["sensitivity"][0]["figure"] == "measured runs");
  CHECK(p["sensitivity"][0]["epoch_at_high_s"].get<double>() == Approx(epoch * 1.12).epsilon(1e-12));
  CHECK_THAT(p["sensitivity"][0]["where"].get<std::string>(),
             Contains("12 runs of") && Contains("1 more file"));

  // Four runs cannot state 80%: the ends are the smallest and largest, level (4 - 1) / 5, and the table says
  // how many runs would (runs_for_level: 9).
  const std::string few = validation(d, "few.json", {{1, 0.95}, {1, 1.0}, {1, 1.04}, {1, 0.98}});
  const json q = point(d, "--runs " + few);
  CHECK(q["interval"]["runs"]["level"].get<double>() == Approx(0.6).epsilon(1e-12));
  CHECK(q["interval"]["step_low_s"].get<double>() == Approx(step * 0.95).epsilon(1e-12));
  auto t = vt::vitsim("predict " + vt::source("scenarios/local/validate-homog.xml") +
                      " --set training.micro_batch=64 --set cluster.gpus_per_node=2 --calibration " + kCalib +
                      " --runs " + few + " -q");
  INFO(t.out);
  REQUIRE(t.status == 0);
  CHECK_THAT(t.out,
             Contains("and 4 measured runs: x0.950 .. x1.040 of the model, a new run like them between "
                      "at least 60% of the time, under the stated 80%: 5 more runs state it"));
}

TEST_CASE("runs: measured times are held against the model now, each configuration as it ran",
          "[interval][runs]") {
  vt::TempDir d;
  const json plain = point(d, "");
  const double step = plain["step_time_s"]["mean"].get<double>(), epoch = plain["epoch_time_s"].get<double>();
  // Ten runs of the same configuration (repeats are runs, where fit wants one time each), written as the
  // model's step times x factors 0.93 .. 1.11: their ratios are the factors, n = 10: the ends are the
  // smallest and largest factor (k 1 and 10), level 9/11.
  const std::vector<double> f = {1.00, 0.93, 1.05, 0.97, 1.11, 1.02, 0.99, 1.03, 0.96, 1.01};
  std::string csv =
      "# ten runs of one configuration\ncluster.gpus_per_node,training.micro_batch,step_time_s\n";
  for (double x : f) csv += "2,64," + csv_number(step * x) + "\n";
  const std::string runs = d.file("runs.csv", csv);
  const json p = point(d, "--runs " + runs);
  CHECK(p["interval"]["runs"]["count"] == 10);
  CHECK(p["interval"]["runs"]["level"].get<double>() == Approx(9.0 / 11).epsilon(1e-12));
  CHECK(p["interval"]["runs"]["ratio_low"].get<double>() == Approx(0.93).epsilon(1e-9));
  CHECK(p["interval"]["runs"]["ratio_high"].get<double>() == Approx(1.11).epsilon(1e-9));
  CHECK(p["interval"]["step_low_s"].get<double>() == Approx(step * 0.93).epsilon(1e-9));
  CHECK(p["interval"]["epoch_high_s"].get<double>() == Approx(epoch * 1.11).epsilon(1e-9));

  // Epoch times: the ratio to the model's epoch.
  std::string ecsv = "cluster.gpus_per_node,training.micro_batch,epoch_time_s\n";
  for (double x : f) ecsv += "2,64," + csv_number(epoch * x) + "\n";
  const json e = point(d, "--runs " + d.file("epochs.csv", ecsv));
  CHECK(e["interval"]["epoch_low_s"].get<double>() == Approx(epoch * 0.93).epsilon(1e-9));

  // A what-if on the prediction: the runs were measured on the machine as it is, so they are simulated
  // without it. The link 400x slower moves the 2-rank step (its all-reduce); the runs' ratios stay the
  // factors and the ends are the what-if's central value times them (simulated with the what-if, the ratios
  // would be step x f / the what-if's step).
  const std::string slow = "--what-if link:vm.backbone:bandwidth=10MBps";
  const json w = point(d, slow + " --runs " + runs);
  const double wstep = w["step_time_s"]["mean"].get<double>();
  REQUIRE(wstep > 1.5 * step);
  CHECK(w["interval"]["runs"]["ratio_low"].get<double>() == Approx(0.93).epsilon(1e-9));
  CHECK(w["interval"]["step_high_s"].get<double>() == Approx(wstep * 1.11).epsilon(1e-9));
}

TEST_CASE("runs: bad runs are refused before any simulation, naming the file and row",
          "[interval][runs][negative]") {
  vt::TempDir d;
  const std::string base = "predict " + vt::source("scenarios/local/validate-homog.xml") +
                           " --set training.micro_batch=64 --set cluster.gpus_per_node=2 --calibration " +
                           kCalib + " -q --runs ";
  auto err = [&](const std::string& runs) {
    auto r = vt::vitsim(base + runs);
    CHECK(r.status != 0);
    return r.out;
  };
  CHECK_THAT(err(d / "absent.csv"), Contains("absent.csv"));
  // A validation's point without a step time.
  json v = json::parse(vt::run("cat " + validation(d, "v.json", {{1, 1}})).out);
  v["points"][0]["metrics"][0]["metric"] = "epoch_time";
  CHECK_THAT(err(d.file("nostep.json", v.dump())),
             Contains("nostep.json: /points/0/metrics: no step_time metric"));
  v["points"][0]["metrics"][0]["metric"] = "step_time";
  v["points"][0]["metrics"][0]["measured"] = -1;
  CHECK_THAT(err(d.file("neg.json", v.dump())),
             Contains("neg.json: /points/0/metrics/0/measured: not a positive step time"));
  // A CSV's column that is no scenario key (fit's reader: docs/fit.md "Measured times").
  CHECK_THAT(err(d.file("key.csv", "cluster.gpus_per_node,micro_batch,step_time_s\n2,64,0.02\n")),
             Contains("key.csv:1") && Contains("did you mean 'training.micro_batch'"));
  CHECK_THAT(err(d.file("bad.csv", "cluster.gpus_per_node,training.micro_batch,step_time_s\n2,64,-1\n")),
             Contains("bad.csv:2"));
  // A run whose configuration its platform cannot run: refused naming the row (as its simulation would).
  CHECK_THAT(err(d.file("gpus.csv",
                        "cluster.gpus_per_node,training.micro_batch,step_time_s\n2,64,0.02\n"
                        "64,64,0.02\n")),
             Contains("gpus.csv:3") && Contains("64 GPUs per node"));
  // The same file twice would count its runs twice (and claim a level they do not hold).
  const std::string once = validation(d, "once.json", {{1, 1}, {1, 1.02}});
  CHECK_THAT(err(once + " " + once), Contains("is the same file as") && Contains("once.json"));
  // A ratio the report could not hold (measured 1e300 s against 1e-300 s).
  CHECK_THAT(err(validation(d, "huge.json", {{1e-300, 1e300}})),
             Contains("huge.json: /points/0: measured") && Contains("outside 1e-12 .. 1e12"));
  // --runs takes every value after it: a scenario given after it is taken as a run, and said so.
  auto swallowed =
      vt::vitsim("predict --runs " + once + " " + vt::source("scenarios/local/validate-homog.xml"));
  CHECK(swallowed.status == 2);
  CHECK_THAT(swallowed.out, Contains("--runs took '") && Contains("validate-homog.xml' as a measured run") &&
                                Contains("give the scenario before --runs"));
  // A predicted report is no measurement.
  const std::string predicted = d / "predicted.json";
  REQUIRE(vt::vitsim(base.substr(0, base.size() - 8) + " --format json --out " + predicted).status == 0);
  CHECK_THAT(err(predicted), Contains("predicted.json"));
  // plan --merge simulates nothing: --runs is refused there as the other interval flags are.
  auto m = vt::vitsim("plan --merge " + predicted + " --runs " + predicted);
  CHECK(m.status == 2);
  CHECK_THAT(m.out, Contains("--runs: an interval is simulated for the ranked plan's top candidates"));
}

TEST_CASE("runs: plan --runs gives the top candidates the runs' ends, and says they do not reorder them",
          "[interval][runs][plan]") {
  vt::TempDir d;
  // Twelve validated ratios 0.90 .. 1.12: ends x0.90 and x1.12 (n = 12: the smallest and the largest).
  std::vector<std::pair<double, double>> times;
  for (int i = 0; i < 12; ++i) times.push_back({0.05, 0.05 * (0.90 + 0.02 * i)});
  const std::string v = validation(d, "v.json", times), out = d / "plan.json";
  const std::string plan = "plan " + vt::source("scenarios/local/validate-homog.xml") + " --calibration " +
                           kCalib + " -q --runs " + v;
  auto r = vt::vitsim(plan + " --format json --out " + out);
  INFO(r.out);
  REQUIRE(r.status == 0);
  const json j = json::parse(vt::run("cat " + out).out);
  int with = 0;
  for (const auto& p : j["points"]) {
    if (!p["result"].contains("interval")) continue;
    ++with;
    const json& iv = p["result"]["interval"];
    const double epoch = p["result"]["epoch_time_s"].get<double>();
    CHECK(iv["runs"]["count"] == 12);
    CHECK(iv["epoch_low_s"].get<double>() == Approx(epoch * 0.90).epsilon(1e-12));
    CHECK(iv["epoch_high_s"].get<double>() == Approx(epoch * 1.12).epsilon(1e-12));
  }
  CHECK(with == 3);  // the top 3 (--interval-top's default)
  auto t = vt::vitsim(plan);
  INFO(t.out);
  REQUIRE(t.status == 0);
  CHECK_THAT(t.out, Contains("the widest part is the measured runs' spread") &&
                        Contains("which a run of either meets alike: it does not reorder them"));
}
