// The loop closed on this machine, small: calibrate a tiny ViT on 2 MPI ranks (with its step phase), emit the
// platform, then train a micro-batch the calibration did not measure (`mpirun vitsim train`, what
// `validate --run` launches) and `vitsim validate --measured` it, and require the predicted step time within
// a tolerance set from the errors measured here (docs/benchmarks.md "Validation on this machine", "In the
// test suite"). About 2.5 minutes on 2 shared cores (the op-model benchmarks are most of it; this is the test
// that runs them).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <optional>

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

TEST_CASE("calibrate then validate a held-out micro-batch on 2 ranks", "[calib][mpirun]") {
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
  // A run on a busy machine says so itself: its noise (p95 over the median of its steps, as validate prints
  // it). Up to three runs; the first quiet one (noise <= 10%) is judged, and when none is quiet the least
  // noisy. Each run is `mpirun vitsim train` (what `validate --run` launches) and `validate --measured` on
  // its report, so that the median step is at hand: a busy machine's few slow steps move the mean that
  // validate compares, not the median (CI, 2026-12-02: three runs with p95 >= 2x the median).
  struct Run {
    double err = 0, noise = 0, predicted = 0, measured = 0, median = 0;
  };
  std::optional<Run> best;
  for (int attempt = 0; attempt < 3 && !(best && best->noise <= 0.10); ++attempt) {
    auto train = vt::run(vt::prioritised(
        fmt::format("mpirun --allow-run-as-root --oversubscribe -np 2 {} train {} --out {} -q", VITSIM_BINARY,
                    val_sc, d / "measured.json")));
    INFO(train.out);
    REQUIRE(train.status == 0);
    auto val = vt::run(vt::prioritised(
        fmt::format("{} validate {} --calibration {} --measured {} --format json --out {} -q --tolerance 1",
                    VITSIM_BINARY, val_sc, d / "calib.json", d / "measured.json", d / "validation.json")));
    INFO(val.out);
    REQUIRE(val.status == 0);
    auto v = nlohmann::json::parse(std::ifstream(d / "validation.json"));
    auto m = nlohmann::json::parse(std::ifstream(d / "measured.json"));
    REQUIRE(v["points"].size() == 1);
    REQUIRE(m["points"].size() == 1);
    Run r;
    r.noise = v["noise"].get<double>();
    r.median = m["points"][0]["step_time_s"]["p50"].get<double>();
    for (const auto& e : v["points"][0]["metrics"])
      if (e["metric"] == "step_time") {
        r.err = e["rel_error"].get<double>();
        r.predicted = e["predicted"].get<double>();
        r.measured = e["measured"].get<double>();
      }
    if (!best || r.noise < best->noise) best = r;
  }
  REQUIRE(best);
  INFO("predicted " << best->predicted << " s, measured " << best->measured << " s (median " << best->median
                    << " s), error " << best->err << ", the run's noise " << best->noise);
  CHECK(best->measured > 0);
  CHECK(best->median > 0);
  // The calibration has the step phase's sync figures (what a step waits at its gradient sync beyond the
  // all-reduce), which the prediction of 2 ranks uses.
  auto c = nlohmann::json::parse(std::ifstream(d / "calib.json"));
  CHECK(c["devices"][0]["sync"]["ranks"] == 2);
  // The occupancy phase's figure (rank 0 alone against both ranks busy), which 1-rank predictions use.
  CHECK(c["devices"][0]["occupancy"]["busy_ranks"] == 2);
  // Its rounds' spans, which `predict --interval` samples (the kept round lies within each); a sync span
  // wherever the sync figures are above zero (both come from the micro-batches whose kept rest is).
  const auto& sync = c["devices"][0]["sync"];
  const bool some_rest = sync["fixed_s"].get<double>() > 0 || sync["per_compute"].get<double>() > 0;
  for (const char* span : {"compute", "sync"}) {
    INFO(span);
    if (std::string(span) == "sync" && !some_rest) continue;
    REQUIRE(c["devices"][0]["spans"].contains(span));
    CHECK(c["devices"][0]["spans"][span]["low"].get<double>() <= 1);
    CHECK(c["devices"][0]["spans"][span]["high"].get<double>() >= 1);
  }
  // Measured here, 2026-12-02, with this test's commands (7 runs, load 0.3-10 on the 2 shared cores): quiet
  // runs (noise <= 10%) -0.8% .. +9.4% of error, the other runs up to -27.0% (noise 19.5%) and +11.6%
  // (11.1%); the local validation's single runs (bench/validate_local.sh, 24 runs) within -5.3% .. +10.8%. A
  // model error (wrong units, a phase left out, a broken interpolation) moves the step by 2x or more.
  // A quiet run is judged on validate's own error (the mean step); a noisy one on the median step, which a
  // minority of slow steps does not move, with the wider tolerance.
  if (best->noise <= 0.10) {
    CHECK(std::abs(best->err) <= 0.20);
  } else {
    CHECK(std::abs(best->predicted / best->median - 1) <= 0.35);
  }
}
