// The interval's surrogate (issue 37 Targets: an interval at most 2x a plain predict;
// sim/predict/interval.hpp additive_surrogate, `--interval-mode`): exact on what it assumes (each figure
// piecewise linear on each side of its value, no interactions), against the 1/P of a compute-bound figure by
// its closed form, and against the sampled interval on a shipped scenario. And a calibrated step cv's
// measured spread sampled like any ranged figure (issue 37 item 2), against the straggler wait's closed form.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "sim_test_util.hpp"
#include "test_util.hpp"
#include "tiny_scenario.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/formats/calibration.hpp"
#include "vitsim/sim/predict/interval.hpp"

using namespace vitsim;
using json = nlohmann::json;

namespace {

json predict_json(const vt::TempDir& d, const std::string& args) {
  const std::string out = d / "r.json";
  const vt::CmdResult r = vt::vitsim(fmt::format("predict {} -q --format json --out '{}'", args, out));
  INFO(r.out);
  REQUIRE(r.status == 0);
  return json::parse(vt::run("cat '" + out + "'").out);
}

// The figures' own interval of a point (the corpus' band apart: corpus.figures_*, else the interval).
double figures_epoch(const json& p, bool high) {
  const json& v = p["interval"];
  if (v.contains("corpus")) return v["corpus"][high ? "figures_epoch_high_s" : "figures_epoch_low_s"];
  return v[high ? "epoch_high_s" : "epoch_low_s"];
}
double figures_step(const json& p, bool high) {
  const json& v = p["interval"];
  if (v.contains("corpus")) return v["corpus"][high ? "figures_step_high_s" : "figures_step_low_s"];
  return v[high ? "step_high_s" : "step_low_s"];
}

}  // namespace

TEST_CASE("the additive surrogate is exact on piecewise-linear figures without interactions",
          "[interval][surrogate]") {
  // f(x) = 10 + 2 (x0 - 1) + (3 if x1 > 0.5: 4 (x1 - 0.5), else -(0.5 - x1)): figure 0 over [0, 3] valued 1,
  // figure 1 over [0, 1] valued 0.5 with a kink at its value; ends: f(0, .5) = 8, f(3, .5) = 14,
  // f(1, 0) = 9.5, f(1, 1) = 12.
  const std::vector<sim::FigureEnds> ends{{0, 1, 3, 8, 14}, {0, 0.5, 1, 9.5, 12}};
  auto f = [](double x0, double x1) { return 10 + 2 * (x0 - 1) + (x1 > 0.5 ? 4 * (x1 - 0.5) : -(0.5 - x1)); };
  for (double x0 : {0.0, 0.3, 1.0, 2.2, 3.0})
    for (double x1 : {0.0, 0.1, 0.5, 0.8, 1.0})
      CHECK(sim::additive_surrogate(10, ends, {x0, x1}) == Approx(f(x0, x1)).margin(1e-12));
  // A figure whose value is its high end (an occupancy factor): the low side only.
  const std::vector<sim::FigureEnds> one_sided{{0.5, 1, 1, 4, 0}};
  CHECK(sim::additive_surrogate(2, one_sided, {0.75}) == Approx(3));
  CHECK(sim::additive_surrogate(2, one_sided, {1}) == 2);
}

TEST_CASE("a surrogate off by the curvature of 1/P gives way to the sampled interval, by its closed form",
          "[interval][surrogate]") {
  vt::TempDir d;
  // One compute-bound GPU (tests/sim/test_interval.cpp's platform: memory 1000TBps, efficiency 1, no launch
  // cost, one rank), gpu_flops_fp32 over 0.5Tf..1Tf at 1Tf: T(P) = T x 1Tf / P (to under 1%, that test's
  // margin). The surrogate draws the straight line from T (P = 1Tf) to 2T (P = 0.5Tf): at P = 0.5Tf + u x
  // 0.5Tf it is T (2 - u), above the curve T / (0.5 + 0.5 u) in between (1/P is convex: by up to 17% of T at
  // u = 0.41). p90 (h = 15 x 0.9 = 13.5) lies between the samples of strata 1 and 2 of 16: u in [1/16,
  // 3/16], so the sampled p90 is in [T / (0.5 + 0.5 x 3/16), T / (0.5 + 0.5 x 1/16)].
  std::string x = vt::platform_xml(1, 1, "100GBps", "0us", {"10GBps"}, {"1Tf"});
  x.insert(x.find("</cluster>"), "<prop id=\"gpu_flops_fp32.range\" value=\"0.5Tf..1Tf; wide\"/>");
  d.file("p.xml", x);
  const std::string s = d.file(
      "s.xml", vt::tiny_cifar_scenario("surrogate", 1,
                                       "  <parallelism collective=\"ring\"/>\n  <loader workers=\"2\"/>\n"));
  const json surrogate = predict_json(d, "'" + s + "' --interval")["points"][0];
  const json sampled = predict_json(d, "'" + s + "' --interval-mode sampled")["points"][0];
  const double t = surrogate["epoch_time_s"];
  // The surrogate's p90 sample (u in [1/16, 2/16)) is T (2 - u) on the line and T / (0.5 + 0.5 u) simulated:
  // 5.5% to 9.7% of T apart, over the 1% it is held to, so every sample is simulated.
  CHECK_FALSE(surrogate["interval"].contains("surrogate"));
  CHECK_FALSE(sampled["interval"].contains("surrogate"));  // as before the surrogate: the JSON unchanged
  CHECK(surrogate["interval"] == sampled["interval"]);
  CHECK(figures_epoch(sampled, true) >= 0.99 * t / (0.5 + 0.5 * 3 / 16.0));
  CHECK(figures_epoch(sampled, true) <= 1.01 * t / (0.5 + 0.5 * 1 / 16.0));
  // The ends are simulated alike in both modes: the sensitivity is the same.
  CHECK(surrogate["sensitivity"] == sampled["sensitivity"]);
}

// The surrogate against the sampled interval on a shipped scenario: the study's Vector strong-scaling sweep
// (platforms/vector.xml's T4s with the catalogue's ranges, 1 to 8 GPUs). The tolerance: the surrogate may
// move p10 or p90 of the figures' interval by at most 1% of the central value, ASSUMPTION: small against what
// an interval is read for (issue 37's target width, 25-40% of the central value; the T4's corpus band alone
// spans x0.92..x2.3); measured at 0.02% on this sweep, 0.16% at most over the study's scenarios (docs/
// benchmarks.md "Prediction intervals (issue 26)").
TEST_CASE("the surrogate's p10 and p90 against the sampled ones on the study's Vector sweep",
          "[interval][surrogate]") {
  vt::TempDir d;
  const std::string s = "'" + vt::source("scenarios/study/vector-strong-b64.xml") + "'";
  const json a = predict_json(d, s + " --interval");
  const json b = predict_json(d, s + " --interval-mode sampled");
  REQUIRE(a["points"].size() == b["points"].size());
  for (size_t i = 0; i < a["points"].size(); ++i) {
    const json &p = a["points"][i], &q = b["points"][i];
    const double centre = p["epoch_time_s"], step = p["step_time_s"]["mean"];
    INFO("point " << i + 1 << ": centre " << centre);
    REQUIRE(p["interval"]["figures"].get<int>() > 0);
    // The surrogate stood its own check here (else the comparison below would be of the sampled with itself).
    REQUIRE(p["interval"].value("surrogate", false));
    CHECK(q["epoch_time_s"] == centre);
    for (bool high : {false, true}) {
      CHECK(std::abs(figures_epoch(p, high) - figures_epoch(q, high)) <= 0.01 * centre);
      CHECK(std::abs(figures_step(p, high) - figures_step(q, high)) <= 0.01 * step);
    }
  }
}

namespace {

// The shipped local calibration (platforms/local/calibrated.json: vit_fmnist_tiny on "cpu") with nothing
// sampled but its step cv: no spans, no occupancy, no step phase's sync figures (they would take the step
// cv's place, sim/src/point/rank_setup.cpp); the step cv `cv` with its spread low..high (none: not written).
std::string cv_calibration(const vt::TempDir& d, const std::string& name, double cv, double low,
                           double high) {
  json c = json::parse(vt::run("cat " + vt::source("platforms/local/calibrated.json")).out);
  for (auto& dev : c["devices"]) {
    for (const char* key : {"sync", "spans", "occupancy"}) dev.erase(key);
    dev["step_cv"] = {{"value", cv}, {"why", "measured: a test's figure"}};
    if (high > 0) dev["step_cv"]["low"] = low, dev["step_cv"]["high"] = high;
  }
  return d.file(name, c.dump(1));
}

}  // namespace

TEST_CASE(
    "a calibrated step cv's spread round-trips, older files read, and a spread without its value is "
    "refused",
    "[interval][calib][straggler][negative]") {
  vt::TempDir d;
  const Calibration c = read_calibration(cv_calibration(d, "c.json", 0.03, 0.01, 0.08));
  const MeasuredFigure* cv = c.step_cv("cpu");
  REQUIRE(cv != nullptr);
  CHECK(cv->value == 0.03);
  CHECK(cv->low == 0.01);
  CHECK(cv->high == 0.08);
  CHECK(cv->ranged());
  const Calibration again = read_calibration_text(calibration_to_json(c), "again.json");
  CHECK(again.step_cv("cpu")->high == 0.08);
  const Calibration old = read_calibration(cv_calibration(d, "old.json", 0.03, 0, 0));  // no low, high
  CHECK_FALSE(old.step_cv("cpu")->ranged());
  CHECK(calibration_to_json(old).find("\"low\"") == std::string::npos);
  auto error_of = [&](double value, double low, double high) {
    try {
      read_calibration(cv_calibration(d, "bad.json", value, low, high));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  using Catch::Contains;
  CHECK_THAT(error_of(0.03, 0.04, 0.08), Contains("step_cv: low and high must hold the value"));
  CHECK_THAT(error_of(0.03, 0.01, 0.02), Contains("step_cv: low and high must hold the value"));
  CHECK_THAT(error_of(0.03, 0.01, 1.5), Contains("step_cv: low and high must hold the value"));
  CHECK_THAT(error_of(0.03, -0.01, 0.05), Contains("step_cv: low and high must hold the value"));
}

// On 2 ranks the step waits cv x C x e_2 for the slower (C: forward + backward, e_2 = 1/sqrt(pi); tests/sim/
// test_loop_model.cpp), linear in cv: the step cv at its ends moves the step by (end - value) x C x e_2, and
// the interval's p10 (h = 15 x 0.1 = 1.5: between the samples of strata 1 and 2 of 16 when sorted, and the
// straggler wait grows with cv) lies in [step(low + w/16), step(low + 3w/16)], w = high - low; p90 in
// [step(low + 13w/16), step(low + 15w/16)]. The surrogate is exact on a straight line: both modes agree.
TEST_CASE("a calibrated step cv's spread is sampled, ranked, and moves the interval by the straggler wait",
          "[interval][calib][straggler]") {
  vt::TempDir d;
  const double cv = 0.03, low = 0.01, high = 0.09, w = high - low;
  const std::string cal = cv_calibration(d, "cv.json", cv, low, high);
  for (const char* mode : {"surrogate", "sampled"}) {
    INFO("mode " << mode);
    const json p = vt::predict_local_point(d, cal, 2, std::string("--interval-mode ") + mode);
    const double c =
        p["breakdown_s"]["compute_fwd"].get<double>() + p["breakdown_s"]["compute_bwd"].get<double>();
    const double e2 = 1 / std::sqrt(M_PI), step = p["step_time_s"]["mean"];
    auto step_at = [&](double x) { return step + (x - cv) * c * e2; };
    REQUIRE(p["sensitivity"].size() == 1);
    const json& s = p["sensitivity"][0];
    CHECK(s["figure"] == "calibration step_cv");
    CHECK(s["range"] == "0.01..0.09");
    // The epoch: its optimizer steps of that step each (and what is not a step, the same at both ends).
    const double n = p["steps_per_epoch"].get<double>(), epoch = p["epoch_time_s"];
    CHECK(s["epoch_at_low_s"].get<double>() - epoch == Approx(n * (step_at(low) - step)).epsilon(1e-6));
    CHECK(s["epoch_at_high_s"].get<double>() - epoch == Approx(n * (step_at(high) - step)).epsilon(1e-6));
    CHECK(figures_step(p, false) >= step_at(low + w / 16) * (1 - 1e-9));
    CHECK(figures_step(p, false) <= step_at(low + 3 * w / 16) * (1 + 1e-9));
    CHECK(figures_step(p, true) >= step_at(low + 13 * w / 16) * (1 - 1e-9));
    CHECK(figures_step(p, true) <= step_at(low + 15 * w / 16) * (1 + 1e-9));
  }
  // One rank waits for no one: the figure is sampled and moves nothing.
  const json one = vt::predict_local_point(d, cal, 1, "--interval");
  REQUIRE(one["sensitivity"].size() == 1);
  CHECK(one["sensitivity"][0]["epoch_at_low_s"] == one["epoch_time_s"]);
  CHECK(one["sensitivity"][0]["epoch_at_high_s"] == one["epoch_time_s"]);
}

// Where the figures interact the surrogate checks itself and gives way: on one rank a compute span and the
// occupancy factor both scale the step's compute, so their ends multiply: x1.4 and x1/0.6 together are
// x2.33, where the sum of their effects is x2.07, 11% of the central value short at the p90 sample. The
// surrogate's samples at p10 and p90 are simulated, found off by more than the 1% they are held to, and every
// sample is simulated: the interval is the sampled one, and a note says why.
TEST_CASE("the surrogate gives way to every sample simulated where its checked samples are off",
          "[interval][surrogate][calib]") {
  vt::TempDir d;
  json c = json::parse(vt::run("cat " + vt::source("platforms/local/calibrated.json")).out);
  for (auto& dev : c["devices"]) {
    for (const char* key : {"sync", "spans", "occupancy", "step_cv"}) dev.erase(key);
    dev["spans"] = {{"compute", {{"low", 0.85}, {"high", 1.4}, {"why", "a test's span"}}}};
    dev["occupancy"] = {{"busy_ranks", 2}, {"alone_factor", 0.6}};
  }
  const std::string cal = d.file("c.json", c.dump(1));
  const json a = vt::predict_local_point(d, cal, 1, "--interval");
  const json b = vt::predict_local_point(d, cal, 1, "--interval-mode sampled");
  CHECK_FALSE(a["interval"].contains("surrogate"));
  CHECK(a["interval"] == b["interval"]);
  CHECK(a["sensitivity"] == b["sensitivity"]);
  bool noted = false;
  for (const auto& n : a["notes"])
    noted |= n.get<std::string>().rfind("interval: every sample simulated: the additive surrogate", 0) == 0;
  CHECK(noted);
}
