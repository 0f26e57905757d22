// The loop closed on this machine, small: calibrate a tiny ViT on 2 MPI ranks (with its step phase), emit the
// platform, then train a micro-batch the calibration did not measure (`mpirun vitsim train`, what
// `validate --run` launches) beside one it measured, back to back in one run (five such runs), and `vitsim
// validate --measured` each. What it judges is what a loaded machine leaves judgeable (issue 35 item 8): the
// held-out point's step relative to the calibrated one, both measured under the same load, against the same
// ratio predicted; the absolute accuracy of a calibration on a quiet machine is the benches'
// (bench/validate_local.sh, docs/benchmarks.md "Validation on this machine"). About 3 minutes on 2 shared
// cores (the op-model benchmarks are most of it; this is the test that runs them).
#include <catch2/catch.hpp>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "test_util.hpp"
#include "vitsim/core/model/vit.hpp"

using namespace vitsim;

namespace {
std::string scenario(const std::string& platform) {
  return fmt::format(R"(<scenario name="calib-loop">
  <cluster platform="{}" nodes="1" gpus_per_node="2"/>
  <model preset="vit_fmnist_tiny"/>
  <dataset name="fashion_mnist"/>
  <training micro_batch="64" epochs="1" lr="1e-3"/>
  <parallelism overlap="false"/>
  <loader workers="1" prefetch="4"/>
  <simulation steps="20" warmup="3"/>
  <run device="cpu" threads="1" max_steps="23" eval_samples="256" timeout="120s" check_every="0" augment="false"/>
</scenario>
)",
                     platform);
}
}  // namespace

TEST_CASE("calibrate then validate a held-out micro-batch on 2 ranks", "[calib][mpirun][timed]") {
  vt::TempDir d;
  // Calibration at micro-batch 48 and 96 only; the point validated is 64, interpolated between them.
  const std::string cal_sc = d.file("cal.xml", scenario(vt::source("platforms/local/this-machine.xml")));
  // The all-reduce sizes: small ones plus the one the trainer sends here (the whole fp32 gradient in one
  // bucket), so that the fit holds where it is used.
  const double grad_bytes = 4.0 * build_workload(vit_preset("vit_fmnist_tiny")).total_params();
  auto cal = vt::run(vt::prioritised(
      fmt::format("mpirun --allow-run-as-root --oversubscribe -np 2 {} calibrate --scenario {} "
                  "--out {} --emit-platform {} "
                  "--micro-batches 48,96 --iters 10 --sizes 4KiB,64KiB,{:.0f}B -q",
                  VITSIM_BINARY, cal_sc, d / "calib.json", d / "platform.xml", grad_bytes)));
  INFO(cal.out);
  REQUIRE(cal.status == 0);

  const std::string val_sc = d.file("val.xml", scenario("platform.xml"));
  // Micro-batch 48 (calibrated) and 64 (held out) as one sweep: one `mpirun vitsim train` runs them one after
  // the other, seconds apart, so that whatever else the machine runs slows both alike. The test failed when
  // it compared one run against a calibration made under another load (a calibration beside other tests,
  // 0.124 s predicted against 0.074 s measured, issue 35): that compares two moments of the machine, not the
  // model with the machine.
  //
  // A load that changes between the two points of one run (seconds apart) moves that run's ratio; measured
  // here beside five other engineers' builds (load 14, 2026-12-06), eight runs of this sweep gave 1.12
  // .. 1.78 while the steps inside each point spread by 10% (p95 over the median): a run's own noise does not
  // show it, and one run beside a second copy of the suite was judged at 1.59 (issue 35). So five runs, the
  // order of the two points alternating (48 first, then 64 first: what the first point of a run pays, the
  // second does not, cancels), and the median of their five ratios judged: two disturbed runs of five do not
  // move it (the eight runs above: median 1.28, the quiet figure below). The prediction does not enter what
  // is measured, so this cannot hide a model's error.
  struct Point {
    double predicted = 0, measured = 0, median = 0;
  };
  struct Run {
    Point calibrated, held_out;  // micro-batch 48, 64
    double ratio() const { return held_out.median / calibrated.median; }
  };
  std::vector<Run> runs;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const std::string sweep =
        attempt % 2 == 0 ? "--set training.micro_batch=48,64" : "--set training.micro_batch=64,48";
    auto train = vt::run(vt::prioritised(
        fmt::format("mpirun --allow-run-as-root --oversubscribe -np 2 {} train {} {} --out {} -q",
                    VITSIM_BINARY, val_sc, sweep, d / "measured.json")));
    INFO(train.out);
    REQUIRE(train.status == 0);
    auto val = vt::run(vt::prioritised(fmt::format(
        "{} validate {} {} --calibration {} --measured {} --format json --out {} -q --tolerance 1",
        VITSIM_BINARY, val_sc, sweep, d / "calib.json", d / "measured.json", d / "validation.json")));
    INFO(val.out);
    // 4: validate ran and wrote its table, but the absolute error exceeds --tolerance. The calibration and
    // this run are two moments of the machine: beside a second copy of the suite (issue 35's loaded machine,
    // two suites on 2 cores) they differed by more than 2x. What this test judges is the ratio below,
    // measured within runs.
    REQUIRE((val.status == 0 || val.status == 4));
    auto v = nlohmann::json::parse(std::ifstream(d / "validation.json"));
    auto m = nlohmann::json::parse(std::ifstream(d / "measured.json"));
    REQUIRE(v["points"].size() == 2);
    REQUIRE(m["points"].size() == 2);
    Run r;
    for (const auto& vp : v["points"]) {
      const std::string mb = vp["params"]["training.micro_batch"].get<std::string>();
      REQUIRE((mb == "48" || mb == "64"));
      Point& p = mb == "48" ? r.calibrated : r.held_out;
      for (const auto& e : vp["metrics"])
        if (e["metric"] == "step_time") {
          p.predicted = e["predicted"].get<double>();
          p.measured = e["measured"].get<double>();
        }
      for (const auto& mp : m["points"])
        if (mp["params"]["training.micro_batch"] == mb) p.median = mp["step_time_s"]["p50"].get<double>();
    }
    REQUIRE(r.calibrated.median > 0);
    REQUIRE(r.held_out.median > 0);
    runs.push_back(r);
  }
  // The run whose ratio is the median of the five (an odd count: one of them).
  std::vector<const Run*> by_ratio;
  for (const auto& r : runs) by_ratio.push_back(&r);
  std::sort(by_ratio.begin(), by_ratio.end(),
            [](const Run* a, const Run* b) { return a->ratio() < b->ratio(); });
  std::string ratios;
  for (const Run* r : by_ratio) ratios += fmt::format(" {:.3f}", r->ratio());
  INFO("measured ratios (64 over 48, five runs, sorted):" << ratios);
  const Run& best = *by_ratio[by_ratio.size() / 2];
  const Point &at48 = best.calibrated, &at64 = best.held_out;
  INFO("micro-batch 48 (calibrated): predicted " << at48.predicted << " s, measured " << at48.measured
                                                 << " s (median " << at48.median << " s)");
  INFO("micro-batch 64 (held out): predicted " << at64.predicted << " s, measured " << at64.measured
                                               << " s (median " << at64.median << " s)");
  REQUIRE(at48.predicted > 0);
  REQUIRE(at64.predicted > 0);
  CHECK(at48.measured > 0);
  CHECK(at64.measured > 0);
  // The calibration has the step phase's sync figures (what a step waits at its gradient sync beyond the
  // all-reduce), which the prediction of 2 ranks uses.
  auto c = nlohmann::json::parse(std::ifstream(d / "calib.json"));
  CHECK(c["devices"][0]["sync"]["ranks"] == 2);
  // The occupancy phase's figure (rank 0 alone against both ranks busy), which 1-rank predictions use.
  CHECK(c["devices"][0]["occupancy"]["busy_ranks"] == 2);
  // Its rounds' spans, which `predict --interval` samples (the kept round lies within each); a sync span
  // wherever the sync figures are above zero (its rounds' summed rests over the fit's: sync_span_of).
  const auto& sync = c["devices"][0]["sync"];
  const bool some_rest = sync["fixed_s"].get<double>() > 0 || sync["per_compute"].get<double>() > 0;
  for (const char* span : {"compute", "sync"}) {
    INFO(span);
    if (std::string(span) == "sync" && !some_rest) continue;
    REQUIRE(c["devices"][0]["spans"].contains(span));
    CHECK(c["devices"][0]["spans"][span]["low"].get<double>() <= 1);
    CHECK(c["devices"][0]["spans"][span]["high"].get<double>() >= 1);
  }
  // The held-out step over the calibrated one, predicted against measured (medians of the same run, the
  // run of median ratio). A load
  // that slows both points alike cancels; what is left is the model's: the compute interpolated between the
  // calibrated micro-batches, and the parts of a step that do not grow with the micro-batch (the all-reduce,
  // the sync rest) against those that do. Compute alone at 64 over 48 is 4/3, the parts that do not grow
  // bring it down (1.28 measured here, 2026-12-03); the held-out point given 48's figure (no interpolation)
  // makes the predicted ratio 1 (-22%), given 96's about 1.83 (+44%: 1.28 = 1 + x/3 puts the compute at
  // x = 0.83 of the step at 48, so 96 is 1 + x).
  // The limit is the one the absolute error had on a quiet run, 20% (measured here 2026-12-02, with this
  // test's commands: quiet runs -0.8% .. +9.4% of error, the local validation's single runs -5.3% .. +10.8%,
  // docs/benchmarks.md "In the test suite"): each side's error lies within it, and the two sides' common part
  // (the machine's speed at that moment, the calibration's drift) now cancels instead of adding up.
  const double ratio_error = (at64.predicted / at48.predicted) / (at64.median / at48.median) - 1;
  INFO("predicted ratio " << at64.predicted / at48.predicted << ", measured " << at64.median / at48.median
                          << ": error " << ratio_error);
  CHECK(std::abs(ratio_error) <= 0.20);
  // The ratio cancels an error of scale too (a unit, a per-sample cost counted per step): those move the
  // step 64x to 1000x, a load the run and the calibration did not share at most 5x (test_util.hpp,
  // `prioritised`: single runs 2-5x slower beside other sessions' builds). Within 10x either way; the
  // absolute error on a quiet machine is bench/validate_local.sh's (docs/benchmarks.md "Validation on this
  // machine").
  for (const Point* p : {&at48, &at64}) {
    CHECK(p->predicted / p->median > 0.1);
    CHECK(p->predicted / p->median < 10);
  }
}
