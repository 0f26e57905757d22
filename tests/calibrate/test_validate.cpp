// vitsim validate: the comparison arithmetic and the command's exit status.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "test_util.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/validate/validate.hpp"

using namespace vitsim;

namespace {
ReportPoint point(int gpus, double step, double bwd) {
  ReportPoint p;
  p.nodes = 1;
  p.gpus = gpus;
  p.micro_batch = 16;
  p.grad_accum = 1;
  p.params = {{"cluster.gpus_per_node", std::to_string(gpus)}, {"gpus", std::to_string(gpus)}};
  p.step_time_s = {step, step, step};
  p.epoch_time_s = 100 * step;
  p.breakdown_s.compute_bwd = bwd;
  p.breakdown_s.h2d = 1e-5;  // far below 2% of the step: not scored
  return p;
}
}  // namespace

TEST_CASE("validate: relative errors and MAPE by hand", "[validate]") {
  Report pred, meas;
  pred.points = {point(1, 1.10, 0.50), point(2, 0.90, 0.40)};
  meas.points = {point(2, 1.00, 0.50), point(1, 1.00, 0.50)};  // order does not matter
  auto v = validate::compare(pred, meas, 0.10);
  REQUIRE(v.points.size() == 2);
  // Point gpus=2: predicted 0.90 vs 1.00 -> -10%; gpus=1: 1.10 vs 1.00 -> +10%. MAPE = 10%.
  CHECK(v.points[0].metrics[0].metric == "step_time");
  CHECK(v.points[0].metrics[0].rel_error == Approx(-0.10));
  CHECK(v.points[1].metrics[0].rel_error == Approx(0.10));
  CHECK(v.mape.at("step_time") == Approx(0.10));
  // compute_bwd: -20% and 0% -> 10%. h2d is 0.001% of the step: left out of the MAPE.
  CHECK(v.mape.at("compute_bwd") == Approx(0.10));
  CHECK(v.mape.count("h2d") == 0);
  CHECK(v.pass);  // 10% <= 10%
  CHECK_FALSE(validate::compare(pred, meas, 0.09).pass);
}

TEST_CASE("validate: a measured point without a predicted twin is an error", "[validate][negative]") {
  Report pred, meas;
  pred.points = {point(1, 1, 0.5)};
  meas.points = {point(4, 1, 0.5)};
  CHECK_THROWS_WITH(
      validate::compare(pred, meas, 0.1),
      "measured point cluster.gpus_per_node=4 gpus=4 has no predicted point with the same parameters");
}

TEST_CASE("validate: exit status 0 within the tolerance, 4 beyond it", "[validate][cli]") {
  vt::TempDir d;
  const std::string sc = vt::source("scenarios/study/vector-strong-b64.xml");
  auto pred =
      vt::vitsim("predict " + sc + " --set cluster.gpus_per_node=1,2 --format json -q --out " + d / "p.json");
  REQUIRE(pred.status == 0);
  // The "measured" report is the prediction itself, relabelled as what `vitsim train` writes (a predicted
  // report is refused as a measurement): every error is zero.
  auto measured = [&](double k) {
    nlohmann::json j = nlohmann::json::parse(vt::run("cat " + d / "p.json").out);
    j["kind"] = j["source"] = "measured";
    for (auto& p : j["points"]) {
      p["simulated_steps"] = 0;
      p.erase("energy");  // the trainer measures no power (and the reader checks kWh against the epoch)
      p.erase("totals");  // nor predict's whole run (the reader checks it against the epoch and energy)
      // Every time scaled by k: step statistics (the point's and each rank's), the epoch; throughput / k.
      for (const char* q : {"mean", "p50", "p95"})
        p["step_time_s"][q] = p["step_time_s"][q].get<double>() * k;
      for (auto& r : p["per_rank"])
        for (const char* q : {"mean", "p50", "p95"})
          r["step_time_s"][q] = r["step_time_s"][q].get<double>() * k;
      p["epoch_time_s"] = p["epoch_time_s"].get<double>() * k;
      p["throughput_img_s"] = p["throughput_img_s"].get<double>() / k;
    }
    return j.dump(2);
  };
  d.file("m1.json", measured(1));
  auto same =
      vt::vitsim("validate " + sc + " --set cluster.gpus_per_node=1,2 --measured " + d / "m1.json" + " -q");
  CHECK(same.status == 0);
  CHECK(same.out.find("step-time MAPE is within the tolerance of 10.0%: PASS") != std::string::npos);
  // Scaled by 1.25, the prediction is 20% low: 0.8/1.0 - 1 = -20%.
  d.file("m.json", measured(1.25));
  auto off =
      vt::vitsim("validate " + sc + " --set cluster.gpus_per_node=1,2 --measured " + d / "m.json" + " -q");
  CHECK(off.status == 4);
  CHECK(off.out.find("step_time 20.0%") != std::string::npos);
  CHECK(off.out.find("FAIL") != std::string::npos);
  auto none = vt::vitsim("validate " + sc + " -q");
  CHECK(none.status == 2);  // the command line (docs/errors.md)
  CHECK(none.out == "vitsim: error: validate needs --measured REPORT.json or --run\n");
}
