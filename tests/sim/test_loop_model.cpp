// Issue 26 item 5, what the local loop costs beyond compute and the all-reduce (docs/benchmarks.md
// "Validation on this machine"): the step phase's sync figures (calibration "sync", the simulator's wait at
// the gradient sync) and a CPU device's loader on the rank's own cores. Each mechanism against its closed
// form.
#include <catch2/catch.hpp>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "sim_test_util.hpp"
#include "test_util.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/formats/calibration.hpp"
#include "vitsim/core/results/report.hpp"
#include "vitsim/sim/compute/compute_model.hpp"

using namespace vitsim;
using json = nlohmann::json;

namespace {

// The shipped local calibration (platforms/local/calibrated.json: vit_fmnist_tiny on "cpu") with the step
// phase's figures set, or none.
std::string calibration(const vt::TempDir& d, const std::string& name, double fixed_s, double per_compute,
                        int ranks = 2) {
  json c = json::parse(vt::run("cat " + vt::source("platforms/local/calibrated.json")).out);
  for (auto& dev : c["devices"]) {
    dev.erase("sync");
    if (ranks > 0) dev["sync"] = {{"ranks", ranks}, {"fixed_s", fixed_s}, {"per_compute", per_compute}};
  }
  return d.file(name, c.dump(1));
}

json predict(const vt::TempDir& d, const std::string& calib, int ranks, const std::string& extra = "") {
  return vt::predict_local_point(d, calib, ranks, extra);  // tests/sim/sim_test_util.hpp
}

double ms(const json& p, const char* key) {
  return p["breakdown_s"][key].get<double>();
}

}  // namespace

TEST_CASE("loop model: the expected slowest of n ranks against its closed forms", "[loop][sync]") {
  // E[max of n standard normals]: 0 for one, 1/sqrt(pi) for two, 3/(2 sqrt(pi)) for three (closed forms);
  // 1.0293754 for four and 1.5387527 for ten (tables of normal order statistics, e.g. Harter 1961).
  CHECK(sim::expected_max_normal(1) == 0);
  CHECK(sim::expected_max_normal(2) == Approx(1 / std::sqrt(M_PI)).epsilon(1e-9));
  CHECK(sim::expected_max_normal(3) == Approx(1.5 / std::sqrt(M_PI)).epsilon(1e-9));
  CHECK(sim::expected_max_normal(4) == Approx(1.0293754).epsilon(1e-6));
  CHECK(sim::expected_max_normal(10) == Approx(1.5387527).epsilon(1e-6));
  const SyncCalibration s{2, 2e-4, 0.015};
  CHECK(sim::sync_wait_s(s, 0.1, 1) == 0);  // one rank waits for no one
  CHECK(sim::sync_wait_s(s, 0.1, 2) == Approx(2e-4 + 0.015 * 0.1));
  CHECK(sim::sync_wait_s(s, 0.1, 4) ==
        Approx(2e-4 + 0.015 * 0.1 * 1.0293754 * std::sqrt(M_PI)).epsilon(1e-6));
}

TEST_CASE("loop model: calibration sync figures round-trip, and bad ones are refused",
          "[loop][sync][negative]") {
  vt::TempDir d;
  const Calibration c = read_calibration(calibration(d, "c.json", 2.5e-4, 0.012));
  REQUIRE(c.sync("cpu") != nullptr);
  CHECK(c.sync("cpu")->ranks == 2);
  CHECK(c.sync("cpu")->fixed_s == 2.5e-4);
  CHECK(c.sync("cpu")->per_compute == 0.012);
  CHECK(c.sync("T4") == nullptr);
  const Calibration again = read_calibration_text(calibration_to_json(c), "again.json");
  CHECK(again.sync("cpu")->per_compute == 0.012);
  CHECK(read_calibration(calibration(d, "none.json", 0, 0, 0)).sync("cpu") == nullptr);
  auto error_of = [&](double fixed, double pc, int ranks) {
    try {
      read_calibration(calibration(d, "bad.json", fixed, pc, ranks));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK_THAT(error_of(1e-4, 0.01, 1),
             Catch::Contains("sync: ranks must be >= 2 (a sync needs two ranks), got 1"));
  CHECK_THAT(error_of(-1e-4, 0.01, 2), Catch::Contains("sync: fixed_s must be in [0, 1) s, got -0.0001"));
  CHECK_THAT(error_of(1e-4, 1.5, 2), Catch::Contains("sync: per_compute must be in [0, 1], got 1.5"));
}

// With the figures, each rank waits fixed_s + per_compute x its step's forward + backward at the gradient
// sync (booked as exposed communication): the step grows by exactly that on 2 ranks, and not at all on 1 rank
// (no sync). (Other rank counts scale the second term by expected_max_normal, tested above; the platform
// has 2.)
TEST_CASE("loop model: the step phase's sync figures add their wait at the gradient sync", "[loop][sync]") {
  vt::TempDir d;
  const double fixed = 3e-4, pc = 0.02;
  // A step phase that measured no wait (not none: without one, the platform's gpu_step_cv would add its
  // straggler wait instead, tested below).
  const std::string without = calibration(d, "without.json", 0, 0);
  const std::string with = calibration(d, "with.json", fixed, pc);
  for (int ranks : {1, 2}) {
    const json a = predict(d, without, ranks);
    const json b = predict(d, with, ranks);
    const double compute = ms(b, "compute_fwd") + ms(b, "compute_bwd");
    const double wait = ranks == 1 ? 0 : fixed + pc * compute;
    INFO("ranks " << ranks << ", compute " << compute);
    CHECK(ms(b, "compute_fwd") == Approx(ms(a, "compute_fwd")));
    CHECK(ms(b, "comm_exposed") - ms(a, "comm_exposed") == Approx(wait).margin(1e-9));
    CHECK(b["step_time_s"]["mean"].get<double>() - a["step_time_s"]["mean"].get<double>() ==
          Approx(wait).margin(1e-9));
    bool noted = false;
    for (const auto& n : b["notes"])
      noted = noted || n.get<std::string>().rfind("gradient sync on cpu: +", 0) == 0;
    CHECK(noted == (ranks > 1));
  }
}

// calibrate's occupancy phase (rank 0 alone against every rank of the host busy): a point with fewer busy
// ranks per host than calibrated computes at the alone factor, linear between it (1 rank) and 1 (the
// calibrated count). Measured here 2026-12-03 (bench/validate_local.sh): x1.04 slower busy, and the 1-rank
// points predicted +3.4% and +3.9% slow without it.
TEST_CASE("loop model: fewer busy ranks per host than calibrated compute at the occupancy factor",
          "[loop][occupancy]") {
  DeviceCalibration dc;
  CHECK(dc.occupancy_factor(1) == 1);  // not measured
  dc.occupancy_busy_ranks = 3;
  dc.occupancy_alone_factor = 0.9;
  CHECK(dc.occupancy_factor(1) == Approx(0.9));
  CHECK(dc.occupancy_factor(2) == Approx(0.95));
  CHECK(dc.occupancy_factor(3) == 1);
  CHECK(dc.occupancy_factor(8) == 1);

  vt::TempDir d;
  json c = json::parse(vt::run("cat " + calibration(d, "c.json", 0, 0, 0)).out);
  for (auto& dev : c["devices"]) dev["occupancy"] = {{"busy_ranks", 2}, {"alone_factor", 0.95}};
  const std::string with = d.file("occ.json", c.dump(1));
  const Calibration back = read_calibration_text(calibration_to_json(read_calibration(with)), "again.json");
  CHECK(back.devices[0].occupancy_busy_ranks == 2);
  CHECK(back.devices[0].occupancy_alone_factor == 0.95);
  const std::string without = calibration(d, "without.json", 0, 0, 0);
  for (int ranks : {1, 2}) {
    const json a = predict(d, without, ranks);
    const json b = predict(d, with, ranks);
    INFO("ranks " << ranks);
    const double f = ranks == 1 ? 0.95 : 1.0;
    CHECK(ms(b, "compute_fwd") == Approx(f * ms(a, "compute_fwd")).epsilon(1e-9));
    CHECK(ms(b, "compute_bwd") == Approx(f * ms(a, "compute_bwd")).epsilon(1e-9));
  }
  auto error_of = [&](const json& occ) {
    json bad = c;
    bad["devices"][0]["occupancy"] = occ;
    try {
      read_calibration(d.file("bad.json", bad.dump(1)));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  using Catch::Contains;
  CHECK_THAT(error_of({{"busy_ranks", 1}, {"alone_factor", 0.9}}), Contains("busy_ranks must be >= 2"));
  CHECK_THAT(error_of({{"busy_ranks", 2}, {"alone_factor", 0}}),
             Contains("alone_factor must be in [0.001, 10]"));
  CHECK_THAT(error_of({{"busy_ranks", 2}, {"alone_factor", 0.9}, {"cores", 2}}),
             Contains("unknown key 'cores'; valid: busy_ranks, alone_factor"));
}

// A CPU device's loader workers are threads of the rank, on its cores: each micro-batch's loading adds to the
// step (the trainer measured its data wait at one batch's loading time). Closed form: the calibration's
// images/s per worker, micro-batch / rate, whatever the workers and prefetch.
TEST_CASE("loop model: a CPU device loads its batches on the rank's own cores", "[loop][loader]") {
  vt::TempDir d;
  const std::string calib = calibration(d, "c.json", 0, 0, 0);
  const double rate =
      json::parse(vt::run("cat " + calib).out)["loaders"][0]["images_per_s_per_worker"].get<double>();
  for (const char* workers : {"1", "4"}) {
    const json p = predict(d, calib, 2, std::string("--set loader.workers=") + workers);
    CHECK(ms(p, "data") == Approx(64 / rate).epsilon(1e-6));
  }
}

// Issue 37, stragglers (docs/model.md "Stragglers"): without calibrate's step phase, each rank's step compute
// is a normal draw of coefficient of variation gpu_step_cv and the sync waits for the slowest of N:
// straggler_wait_s = cv x compute x E[max of N standard normals].
TEST_CASE("stragglers: the wait for the slowest of N ranks against its closed form and a Monte-Carlo draw",
          "[loop][straggler]") {
  CHECK(sim::straggler_wait_s(0.02, 0.1, 1) == 0);  // one rank waits for no one
  CHECK(sim::straggler_wait_s(0.02, 0.1, 2) == Approx(0.02 * 0.1 / std::sqrt(M_PI)).epsilon(1e-9));
  CHECK(sim::straggler_wait_s(0.02, 0.1, 3) == Approx(0.02 * 0.1 * 1.5 / std::sqrt(M_PI)).epsilon(1e-9));
  // It grows with N: e_N increases (2.6 at 128 ranks against 1.4 at 8).
  CHECK(sim::straggler_wait_s(0.01, 1, 128) > sim::straggler_wait_s(0.01, 1, 8));
  // Monte-Carlo micro-case: 128 ranks, step compute mu (1 + cv Z) each, 20,000 steps (seed fixed); the mean
  // of the slowest rank's lag against mu x cv x e_128. The draws' own error: sd(max of 128) ~ 0.42 of a
  // sigma, / sqrt(20000) = 0.003 sigma, 0.1% of e_128 (2.6); 1% leaves room.
  const double mu = 0.25, cv = 0.03;
  const int n = 128, steps = 20000;
  std::mt19937_64 rng(37);
  std::normal_distribution<double> z(0, 1);
  double lag = 0;
  for (int s = 0; s < steps; ++s) {
    double slowest = -1e300;
    for (int r = 0; r < n; ++r) slowest = std::max(slowest, mu * (1 + cv * z(rng)));
    lag += (slowest - mu) / steps;
  }
  CHECK(lag == Approx(sim::straggler_wait_s(cv, mu, n)).epsilon(0.01));
}

// In the simulator: with no step phase in the calibration, 2 ranks wait gpu_step_cv x their forward +
// backward x e_2 once a step (booked as straggler_wait, apart from exposed communication); the step grows by
// exactly that against gpu_step_cv 0, and one rank never waits.
TEST_CASE("stragglers: the platform's gpu_step_cv adds its wait before the last bucket's reduction",
          "[loop][straggler]") {
  vt::TempDir d;
  const std::string nosync = calibration(d, "nosync.json", 0, 0, 0);
  const double cv = 0.05;
  for (int ranks : {1, 2}) {
    const json a = predict(d, nosync, ranks, "--what-if prop:vm:gpu_step_cv=0");
    const json b = predict(d, nosync, ranks, "--what-if prop:vm:gpu_step_cv=" + std::to_string(cv));
    const double compute = ms(b, "compute_fwd") + ms(b, "compute_bwd");
    const double wait = ranks == 1 ? 0 : cv * compute / std::sqrt(M_PI);
    INFO("ranks " << ranks << ", compute " << compute);
    CHECK(ms(b, "compute_fwd") == Approx(ms(a, "compute_fwd")));
    CHECK(b["breakdown_s"].value("straggler_wait", 0.0) == Approx(wait).margin(1e-9));
    CHECK(b["step_time_s"]["mean"].get<double>() - a["step_time_s"]["mean"].get<double>() ==
          Approx(wait).margin(1e-9));
  }
}

// Issue 37 item 2: calibrate measures the step-to-step variability itself (the device's "step_cv", its
// compute rounds); predict then takes it in place of the platform's gpu_step_cv (whatever the platform
// states), in the same closed form: cv x forward + backward x e_2, e_2 = 1/sqrt(pi). With the step phase's
// sync figures as well, those hold the measured wait already: no straggler wait is added on top.
TEST_CASE("stragglers: a calibrated step cv replaces the platform's gpu_step_cv",
          "[loop][straggler][calib]") {
  vt::TempDir d;
  const double measured = 0.03;
  auto with_cv = [&](const std::string& name, int sync_ranks) {
    json c = json::parse(vt::run("cat " + calibration(d, name, 2e-4, 0.01, sync_ranks)).out);
    for (auto& dev : c["devices"])
      dev["step_cv"] = {{"value", measured}, {"why", "measured: a test's figure"}};
    return d.file(name, c.dump(1));
  };
  const std::string cal = with_cv("cv.json", 0);
  for (const char* platform_cv : {"0", "0.2"}) {
    INFO("platform gpu_step_cv " << platform_cv);
    const std::string what_if = std::string("--what-if prop:vm:gpu_step_cv=") + platform_cv;
    const json one = predict(d, cal, 1, what_if);
    CHECK(one["breakdown_s"].value("straggler_wait", 0.0) == 0);  // one rank waits for no one
    const json p = predict(d, cal, 2, what_if);
    const double compute = ms(p, "compute_fwd") + ms(p, "compute_bwd");
    CHECK(p["breakdown_s"].value("straggler_wait", 0.0) ==
          Approx(measured * compute / std::sqrt(M_PI)).margin(1e-9));
    bool noted = false;
    for (const auto& n : p["notes"])
      noted |= n.get<std::string>().find("step cv 0.03 as calibrated") != std::string::npos;
    CHECK(noted);
  }
  const json synced = predict(d, with_cv("cv-sync.json", 2), 2);
  CHECK(synced["breakdown_s"].value("straggler_wait", 0.0) == 0);
}

// predict's columns add up (issue 37): step = compute + optimizer + data+h2d + exposed + straggler wait, in
// the JSON (breakdown_sum_s) and in the table's cells, on 2 ranks with the default gpu_step_cv.
TEST_CASE("stragglers: the breakdown's terms add up to the step", "[loop][straggler][columns]") {
  vt::TempDir d;
  const std::string nosync = calibration(d, "nosync.json", 0, 0, 0);
  const json p = predict(d, nosync, 2);
  Breakdown b;
  for (auto [key, field] : std::initializer_list<std::pair<const char*, double Breakdown::*>>{
           {"data", &Breakdown::data},
           {"h2d", &Breakdown::h2d},
           {"compute_fwd", &Breakdown::compute_fwd},
           {"compute_bwd", &Breakdown::compute_bwd},
           {"optimizer", &Breakdown::optimizer},
           {"comm_exposed", &Breakdown::comm_exposed},
           {"straggler_wait", &Breakdown::straggler_wait}})
    b.*field = p["breakdown_s"].value(key, 0.0);
  CHECK(b.straggler_wait > 0);
  CHECK(b.optimizer > 0);
  CHECK(breakdown_sum_s(b) == Approx(p["step_time_s"]["mean"].get<double>()).epsilon(1e-6));
  const auto r = vt::vitsim("predict " + vt::source("scenarios/local/validate-homog.xml") +
                            " --set training.micro_batch=64 --set cluster.gpus_per_node=2 --calibration " +
                            nosync + " -q");
  REQUIRE(r.status == 0);
  for (const char* head : {"optimizer", "straggler wait", "exposed"})
    CHECK(r.out.find(head) != std::string::npos);
}
