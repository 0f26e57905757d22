// The loop closed on this machine, small: calibrate a tiny ViT on 2 MPI ranks, emit the platform, then
// `vitsim validate --run` a micro-batch the calibration did not measure, and require the predicted step
// time within a tolerance set from the run-to-run noise measured here (docs/benchmarks.md "Validation on this
// machine"). About a minute on 2 cores.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

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
  auto val =
      vt::run(vt::prioritised(fmt::format("{} validate {} --calibration {} --run --format json --out {} -q "
                                          "--tolerance 1",
                                          VITSIM_BINARY, val_sc, d / "calib.json", d / "validation.json")));
  INFO(val.out);
  REQUIRE(val.status == 0);
  auto v = nlohmann::json::parse(std::ifstream(d / "validation.json"));
  REQUIRE(v["points"].size() == 1);
  double err = 0, predicted = 0, measured = 0;
  for (const auto& m : v["points"][0]["metrics"])
    if (m["metric"] == "step_time") {
      err = m["rel_error"].get<double>();
      predicted = m["predicted"].get<double>();
      measured = m["measured"].get<double>();
    }
  INFO("predicted " << predicted << " s, measured " << measured << " s, error " << err);
  CHECK(measured > 0);
  // 35%: on this machine (docs/benchmarks.md) single runs of one point spread by up to 14% (max - min over
  // 3 runs, over the mean) and two calibrations minutes apart differed by up to 10%; on top of that the
  // prediction is low by a part the model leaves out here: two ranks and their two loader workers share
  // the 2 cores, so the trainer's all-reduce waits for a peer slowed by its worker (measured 2026-12-01:
  // comm 2.6 ms against the 0.2 ms all-reduce calibrate fits, compute 10-12% above calibrate's). Errors
  // seen in fresh clones that day: -19.8%, -29.7%, -30.3%, and passes. A model error (wrong units, a phase
  // left out, a broken interpolation) moves the step by 2x or more. Modelling the workers' share of the
  // cores is issue 11's.
  CHECK(std::abs(err) <= 0.35);
}
