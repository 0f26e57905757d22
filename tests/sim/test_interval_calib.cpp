// Intervals of calibrated predictions (issue 26 items 2 and 3; sim/predict/interval.hpp): a calibration's
// measured spans (core/formats/calibration.hpp MeasuredSpan: calibrate's rounds, as factors on the compute
// and the sync figures it kept) round-trip through the file and are refused when wrong; predict --interval
// samples them beside the platform's ranges. Each sampled figure against its closed form: a compute factor f
// scales the step's forward + backward (and, on 2 ranks, the sync wait's share of it); a sync factor scales
// the wait at the gradient sync (tests/sim/test_loop_model.cpp: fixed_s + per_compute x forward + backward).
#include <catch2/catch.hpp>

#include <cmath>
#include <nlohmann/json.hpp>

#include "sim_test_util.hpp"
#include "test_util.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/formats/calibration.hpp"
#include "vitsim/sim/predict/interval.hpp"

using namespace vitsim;
using json = nlohmann::json;

namespace {

// The shipped local calibration (platforms/local/calibrated.json: vit_fmnist_tiny on "cpu") with its sync
// figures set and the spans `spans` (a JSON object; null: none).
std::string calibration(const vt::TempDir& d, const std::string& name, const json& spans) {
  json c = json::parse(vt::run("cat " + vt::source("platforms/local/calibrated.json")).out);
  for (auto& dev : c["devices"]) {
    dev["sync"] = {{"ranks", 2}, {"fixed_s", 2e-4}, {"per_compute", 0.01}};
    dev.erase("spans");
    if (!spans.is_null()) dev["spans"] = spans;
  }
  return d.file(name, c.dump(1));
}

json span(double low, double high) {
  return {{"low", low}, {"high", high}, {"why", "a test's span"}};
}

json predict(const vt::TempDir& d, const std::string& calib, int ranks, const std::string& extra = "") {
  return vt::predict_local_point(d, calib, ranks, extra);  // tests/sim/sim_test_util.hpp
}

double compute_s(const json& p) {
  return p["breakdown_s"]["compute_fwd"].get<double>() + p["breakdown_s"]["compute_bwd"].get<double>();
}

const json* sensitivity_of(const json& p, const std::string& figure) {
  for (const auto& s : p["sensitivity"])
    if (s["figure"] == figure) return &s;
  return nullptr;
}

}  // namespace

TEST_CASE("interval: a calibration's measured spans round-trip, and bad ones are refused",
          "[interval][calib][negative]") {
  vt::TempDir d;
  const Calibration c =
      read_calibration(calibration(d, "c.json", {{"compute", span(0.97, 1.08)}, {"sync", span(0.4, 3)}}));
  REQUIRE(c.devices.size() == 1);
  CHECK(c.devices[0].compute_span.low == 0.97);
  CHECK(c.devices[0].compute_span.high == 1.08);
  CHECK(c.devices[0].sync_span.high == 3);
  CHECK(c.devices[0].sync_span.why == "a test's span");
  const Calibration again = read_calibration_text(calibration_to_json(c), "again.json");
  CHECK(again.devices[0].compute_span.low == 0.97);
  CHECK(again.devices[0].sync_span.low == 0.4);
  CHECK(read_calibration(calibration(d, "none.json", nullptr)).devices[0].compute_span.empty());

  auto error_of = [&](const json& spans) {
    try {
      read_calibration(calibration(d, "bad.json", spans));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  using Catch::Contains;
  CHECK_THAT(error_of({{"compute", span(1.1, 1.2)}}), Contains("low must be a factor in [0.001, 1]"));
  CHECK_THAT(error_of({{"compute", span(0, 1.2)}}), Contains("low must be a factor in [0.001, 1]"));
  CHECK_THAT(error_of({{"compute", span(0.9, 0.95)}}), Contains("high must be a factor in [1, 100]"));
  CHECK_THAT(error_of({{"compute", {{"low", 0.9}, {"high", 1.1}, {"why", ""}}}}),
             Contains("why must say where the span comes from"));
  CHECK_THAT(error_of({{"compute", {{"low", 0.9}, {"high", 1.1}, {"why", "x"}, {"mid", 1}}}}),
             Contains("unknown key 'mid'; valid: low, high, why"));
  CHECK_THAT(error_of({{"loader", span(0.9, 1.1)}}), Contains("unknown key 'loader'; valid: compute, sync"));
  CHECK_THAT(error_of({{"compute", {{"low", 0.9}, {"why", "x"}}}}), Contains("high"));
}

TEST_CASE("interval: spans of zero width give the point as its interval", "[interval][calib]") {
  vt::TempDir d;
  const std::string c = calibration(d, "c.json", {{"compute", span(1, 1)}, {"sync", span(1, 1)}});
  const json p = predict(d, c, 2, "--interval");
  CHECK(p["interval"]["figures"] == 2);
  CHECK(p["interval"]["epoch_low_s"].get<double>() == Approx(p["epoch_time_s"].get<double>()).epsilon(1e-12));
  CHECK(p["interval"]["epoch_high_s"].get<double>() ==
        Approx(p["epoch_time_s"].get<double>()).epsilon(1e-12));
  // Without spans the calibration has nothing to sample: no figure, the point as its interval.
  const json none = predict(d, calibration(d, "n.json", nullptr), 2, "--interval");
  CHECK(none["interval"]["figures"] == 0);
  CHECK(none["epoch_time_s"].get<double>() == Approx(p["epoch_time_s"].get<double>()).epsilon(1e-12));
}

TEST_CASE("interval: the compute and sync spans move the epoch by their closed forms", "[interval][calib]") {
  vt::TempDir d;
  const double lo = 0.9, hi = 1.2, slo = 0.5, shi = 2.5;  // factors chosen for the test
  const std::string c = calibration(d, "c.json", {{"compute", span(lo, hi)}, {"sync", span(slo, shi)}});
  SECTION("one rank: the compute alone (no sync)") {
    const json p = predict(d, c, 1, "--interval");
    const double steps = p["steps_per_epoch"].get<double>();
    const json* s = sensitivity_of(p, "calibration compute");
    REQUIRE(s);
    CHECK((*s)["epoch_at_high_s"].get<double>() - (*s)["epoch_at_low_s"].get<double>() ==
          Approx((hi - lo) * compute_s(p) * steps).epsilon(1e-6));
    const json* y = sensitivity_of(p, "calibration sync");
    REQUIRE(y);
    CHECK((*y)["epoch_at_high_s"].get<double>() == (*y)["epoch_at_low_s"].get<double>());
    // The interval lies between the ends of the one figure that moves it, around the point.
    CHECK(p["interval"]["epoch_low_s"].get<double>() >= (*s)["epoch_at_low_s"].get<double>());
    CHECK(p["interval"]["epoch_high_s"].get<double>() <= (*s)["epoch_at_high_s"].get<double>());
    CHECK(p["interval"]["epoch_low_s"].get<double>() < p["epoch_time_s"].get<double>());
    CHECK(p["interval"]["epoch_high_s"].get<double>() > p["epoch_time_s"].get<double>());
  }
  SECTION("two ranks: compute with the wait's share of it, and the wait") {
    const json p = predict(d, c, 2, "--interval");
    const double steps = p["steps_per_epoch"].get<double>();
    const double wait = 2e-4 + 0.01 * compute_s(p);  // sync_wait_s on 2 ranks (test_loop_model.cpp)
    const json* s = sensitivity_of(p, "calibration compute");
    const json* y = sensitivity_of(p, "calibration sync");
    REQUIRE(s);
    REQUIRE(y);
    CHECK((*s)["epoch_at_high_s"].get<double>() - (*s)["epoch_at_low_s"].get<double>() ==
          Approx((hi - lo) * compute_s(p) * (1 + 0.01) * steps).epsilon(1e-6));
    CHECK((*y)["epoch_at_high_s"].get<double>() - (*y)["epoch_at_low_s"].get<double>() ==
          Approx((shi - slo) * wait * steps).epsilon(1e-6));
    CHECK((*s)["range"] == "x0.9..x1.2");
    CHECK((*s)["why"] == "a test's span");
    // The wider swing first.
    CHECK(p["sensitivity"][0]["figure"] == "calibration compute");
  }
}

TEST_CASE("interval: the occupancy factor spans the measured alone factor to none on fewer busy ranks",
          "[interval][calib][occupancy]") {
  vt::TempDir d;
  json c = json::parse(vt::run("cat " + calibration(d, "plain.json", nullptr)).out);
  for (auto& dev : c["devices"]) dev["occupancy"] = {{"busy_ranks", 2}, {"alone_factor", 0.9}};
  const std::string occ = d.file("occ.json", c.dump(1));
  const json plain = predict(d, calibration(d, "plain.json", nullptr), 1, "");
  // One rank where 2 were calibrated: the central value at the alone factor, the figure's ends at 0.9 and 1
  // of the compute (tests/sim/test_loop_model.cpp has the mechanism).
  const json p = predict(d, occ, 1, "--interval");
  const double steps = p["steps_per_epoch"].get<double>();
  CHECK(compute_s(p) == Approx(0.9 * compute_s(plain)).epsilon(1e-9));
  const json* o = sensitivity_of(p, "calibration occupancy");
  REQUIRE(o);
  CHECK((*o)["range"] == "x0.9..x1");
  CHECK((*o)["epoch_at_high_s"].get<double>() - (*o)["epoch_at_low_s"].get<double>() ==
        Approx(0.1 * compute_s(plain) * steps).epsilon(1e-6));
  CHECK(p["interval"]["epoch_high_s"].get<double>() > p["epoch_time_s"].get<double>());
  // Two ranks, as calibrated: the figure moves nothing.
  const json two = predict(d, occ, 2, "--interval");
  const json* t = sensitivity_of(two, "calibration occupancy");
  REQUIRE(t);
  CHECK((*t)["epoch_at_high_s"].get<double>() == (*t)["epoch_at_low_s"].get<double>());
}

TEST_CASE("interval: a calibration repeated over time widens the compute span by the earlier figures",
          "[interval][calib]") {
  // Two calibrations of one device: the earlier measured 5% slower at both micro-batches (the machine's
  // speed between them), closed forms of calibration.hpp widen_by_earlier.
  auto device = [](double scale, double low, double high) {
    DeviceCalibration d;
    d.device_type = "cpu";
    d.points = {{48, 0.010 * scale, 0.020 * scale, 0.001, {}}, {96, 0.020 * scale, 0.040 * scale, 0.001, {}}};
    if (low > 0) d.compute_span = {low, high, "measured: rounds"};
    return d;
  };
  DeviceCalibration fresh = device(1.0, 0.98, 1.02);
  widen_by_earlier(fresh, device(1.05, 0, 0));
  CHECK(fresh.compute_span.low == Approx(0.98));
  CHECK(fresh.compute_span.high == Approx(1.05));
  CHECK_THAT(fresh.compute_span.why, Catch::Contains("an earlier calibration of this device"));
  // The earlier one's own span comes along at the mean ratio: repeated calibrations accumulate.
  DeviceCalibration again = device(1.0, 0.98, 1.02);
  widen_by_earlier(again, device(1.05, 0.9, 1.1));
  CHECK(again.compute_span.low == Approx(0.9 * 1.05));
  CHECK(again.compute_span.high == Approx(1.1 * 1.05));
  // A faster earlier calibration widens the low end; no span to widen (a single round): nothing.
  DeviceCalibration faster = device(1.0, 0.98, 1.02);
  widen_by_earlier(faster, device(0.9, 0, 0));
  CHECK(faster.compute_span.low == Approx(0.9));
  CHECK(faster.compute_span.high == Approx(1.02));
  DeviceCalibration none = device(1.0, 0, 0);
  widen_by_earlier(none, device(1.05, 0, 0));
  CHECK(none.compute_span.empty());
}

TEST_CASE("interval: a measured span is drawn half each side of its figure, however skewed",
          "[interval][calib]") {
  // sim/predict/interval.hpp figure_at, two-sided: u in [0, 1/2) over [low, value], [1/2, 1) over [value,
  // high]; a platform's range stays uniform over [low, high].
  const sim::FigureEnds skewed{0.99, 1, 1.5, 0, 0, true};
  CHECK(sim::figure_at(skewed, 0) == 0.99);
  CHECK(sim::figure_at(skewed, 0.25) == Approx(0.995));
  CHECK(sim::figure_at(skewed, 0.5) == 1);
  CHECK(sim::figure_at(skewed, 0.75) == Approx(1.25));
  const sim::FigureEnds uniform{0.99, 1, 1.5, 0, 0, false};
  CHECK(sim::figure_at(uniform, 0.5) == Approx(1.245));

  // One rank: the step is linear in the compute factor f, epoch(f) = epoch(1) + (f - 1) x C with C = forward
  // + backward x steps (the closed form above), so the surrogate is exact. Of 16 samples (one per stratum of
  // u), p10 (type 7: h = 15 x 0.1 = 1.5) lies between the samples of strata 1 and 2 of 16, u in [1/16, 3/16):
  // f in [0.99 + 2/16 x 0.01, 0.99 + 6/16 x 0.01], below the figure, where a uniform draw over [0.99, 1.5]
  // would put it at f >= 0.99 + 1/16 x 0.51 = 1.022, above; p90 (h = 13.5): u in [13/16, 15/16), f in
  // [1 + 10/16 x 0.5, 1 + 14/16 x 0.5].
  vt::TempDir d;
  const std::string c = calibration(d, "c.json", {{"compute", span(0.99, 1.5)}});
  const json p = predict(d, c, 1, "--interval");
  const double centre = p["epoch_time_s"], per = compute_s(p) * p["steps_per_epoch"].get<double>();
  const double low = p["interval"]["epoch_low_s"], high = p["interval"]["epoch_high_s"];
  const double tol = 1e-9 * centre;  // rounding only
  CHECK(low < centre);
  CHECK(low >= centre + (2.0 / 16 - 1) * 0.01 * per - tol);
  CHECK(low <= centre + (6.0 / 16 - 1) * 0.01 * per + tol);
  CHECK(high >= centre + 10.0 / 16 * 0.5 * per - tol);
  CHECK(high <= centre + 14.0 / 16 * 0.5 * per + tol);
}
