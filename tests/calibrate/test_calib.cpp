// vitsim calibrate: the statistics, the ring all-reduce fit and the emitted platform file.
#include <catch2/catch.hpp>

#include <cmath>

#include "test_util.hpp"
#include "vitsim/calibrate/calibrate.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/formats/calibration.hpp"
#include "vitsim/core/model/vit.hpp"
#include "vitsim/core/platform/platform.hpp"

using namespace vitsim;
using namespace vitsim::calibrate;

TEST_CASE("calibrate: median and spread as numpy's linear percentiles", "[calib]") {
  // Sorted: 1 2 3 4 10. numpy.percentile(..., [25, 50, 75]) = 2, 3, 4.
  Spread s = spread_of({10, 3, 1, 4, 2});
  CHECK(s.count == 5);
  CHECK(s.min == 1);
  CHECK(s.max == 10);
  CHECK(s.median == 3);
  CHECK(s.mean == 4);  // (1 + 2 + 3 + 4 + 10) / 5
  CHECK(s.p25 == 2);
  CHECK(s.p75 == 4);
  CHECK(s.rel_iqr() == Approx(2.0 / 3.0));
  // Even count: the median halfway between the middle two; p25 of 1 2 3 4 is 1.75.
  Spread e = spread_of({4, 1, 3, 2});
  CHECK(e.median == 2.5);
  CHECK(e.p25 == 1.75);
  CHECK_THROWS_AS(spread_of({}), Error);
}

TEST_CASE("calibrate: algbw and busbw follow nccl-tests", "[calib]") {
  // 1 MB in 1 ms is 1 GB/s; busbw for all-reduce multiplies by 2(n-1)/n: 1.5 at n = 4, 1 at n = 2.
  CHECK(algbw(1e6, 1e-3) == Approx(1e9));
  CHECK(busbw_allreduce(1e6, 1e-3, 4) == Approx(1.5e9));
  CHECK(busbw_allreduce(1e6, 1e-3, 2) == Approx(1e9));
}

TEST_CASE("calibrate: the ring fit recovers latency and bandwidth from exact times", "[calib]") {
  for (int n : {2, 3, 8}) {
    RingFit truth{7e-6, 3.5e9, 0};
    std::vector<AllreduceSample> samples;
    for (double b = 4096; b <= 64.0 * 1024 * 1024; b *= 4)
      samples.push_back({b, ring_allreduce_time(truth, b, n)});
    RingFit f = fit_ring_allreduce(samples, n);
    CHECK(f.latency_s == Approx(7e-6).epsilon(1e-9));
    CHECK(f.bandwidth == Approx(3.5e9).epsilon(1e-9));
    CHECK(f.max_rel_residual < 1e-9);
  }
}

TEST_CASE("calibrate: the ring fit weighs relative residuals", "[calib]") {
  // Times 5% high at every other size: the fit stays within those 5% at every size, small and large
  // (unweighted least squares would follow the 64 MiB points and miss the 4 KiB ones by far more).
  const int n = 2;
  RingFit truth{20e-6, 2e9, 0};
  std::vector<AllreduceSample> samples;
  int k = 0;
  for (double b = 4096; b <= 64.0 * 1024 * 1024; b *= 4)
    samples.push_back({b, ring_allreduce_time(truth, b, n) * (k++ % 2 ? 1.05 : 1.0)});
  RingFit f = fit_ring_allreduce(samples, n);
  CHECK(f.max_rel_residual < 0.05);
  CHECK(f.latency_s == Approx(20e-6).epsilon(0.06));
  CHECK(f.bandwidth == Approx(2e9).epsilon(0.06));
}

TEST_CASE("calibrate: a negative latency intercept is clamped to zero", "[calib]") {
  // Pure bandwidth plus a small-message speed-up: the unconstrained intercept is negative.
  std::vector<AllreduceSample> samples{{1e3, 0.2e-6}, {1e6, 1e-3}, {1e7, 1e-2}};
  RingFit f = fit_ring_allreduce(samples, 2);
  CHECK(f.latency_s == 0);
  CHECK(f.bandwidth > 0);
}

TEST_CASE("calibrate: the ring fit refuses what it cannot fit", "[calib][negative]") {
  CHECK_THROWS_WITH(fit_ring_allreduce({{1e3, 1e-5}, {1e6, 1e-3}}, 1),
                    "an all-reduce fit needs at least 2 ranks, got 1");
  CHECK_THROWS_WITH(fit_ring_allreduce({{1e3, 1e-5}, {1e3, 2e-5}}, 2),
                    "an all-reduce fit needs samples of at least two message sizes");
  CHECK_THROWS_WITH(
      fit_ring_allreduce({{1e3, 1e-3}, {1e6, 1e-5}}, 2),
      "all-reduce times do not grow with the message size: no bandwidth can be fitted (measure larger "
      "sizes)");
}

namespace {
PlatformNode node(const std::string& id, std::vector<PlatformDevice> devices) {
  PlatformNode n;
  n.id = id;
  n.cpu_cores = 2;
  n.devices = std::move(devices);
  n.link_bw = 4e9;
  n.link_lat = 8e-6;
  n.h2d_bw = 6e9;
  n.loader_image_overhead = 20e-6;
  return n;
}
}  // namespace

TEST_CASE("calibrate: the emitted platform reads back with the measured figures", "[calib]") {
  vt::TempDir d;
  PlatformText pt;
  pt.name = "calibrated";
  // Device "cpu" is a CPU rank, as calibrate writes it (outputs.cpp: cpu when the device is "cpu"):
  // device_kind cpu, so the collective needs no GPU architecture.
  PlatformDevice cpu{"cpu", 12.5e9, 6e9, 8.0 * 1024 * 1024 * 1024};
  cpu.cpu = true;
  pt.nodes.push_back(node("host", {cpu, cpu}));
  pt.provenance = "  - test figures\n";
  const std::string path = d.file("p.xml", calibrated_platform_xml(pt));
  PlatformFacts f = read_platform_facts(path);
  REQUIRE(f.nodes.size() == 1);
  REQUIRE(f.gpu.count("host-gpu1"));
  const GpuFacts& g = f.gpu.at("host-gpu1");
  CHECK(g.model == "cpu");
  CHECK(g.flops_fp32 == Approx(12.5e9));
  CHECK(g.mem_bw == Approx(6e9));
  CHECK(g.efficiency == 1.0);
  CHECK(f.nodes[0].cpu_cores == 2);
  CHECK(f.nodes[0].loader_image_overhead == Approx(20e-6));

  // SimGrid loads it too: a 2-device prediction on it runs, and its all-reduce of the whole gradient
  // follows the fitted edge (the scenario has no calibration: roofline compute at 12.5 GFLOP/s).
  const std::string sc = d.file("s.xml", R"(<scenario name="emitted">
  <cluster platform="p.xml" nodes="1" gpus_per_node="2"/>
  <model preset="vit_fmnist_tiny"/>
  <dataset name="synthetic" train_samples="512" image_size="28" channels="1"/>
  <training micro_batch="16"/>
  <simulation steps="4" warmup="1"/>
</scenario>
)");
  auto r = vt::vitsim("predict " + sc + " -q --format json --jobs 1");
  INFO(r.out);
  CHECK(r.status == 0);

  // The same devices as GPUs of a model outside the catalogue, with no gpu_arch stated: NCCL's tuner cannot
  // rate them and refuses them by name (issue 35 item 3), never as another GPU.
  cpu.cpu = false;
  pt.nodes.clear();
  pt.nodes.push_back(node("host", {cpu, cpu}));
  d.file("p.xml", calibrated_platform_xml(pt));
  r = vt::vitsim("predict " + sc + " -q --format json --jobs 1");
  CHECK(r.status == 1);
  CHECK_THAT(r.out, Catch::Contains("gpu_arch") && Catch::Contains("known: "));
}

TEST_CASE("calibrate: devices of different types become clusters joined by links", "[calib]") {
  vt::TempDir d;
  PlatformText pt;
  pt.name = "calibrated";
  PlatformDevice fast{"cpu", 12e9, 6e9, 1e9}, slow{"cpu-half", 6e9, 6e9, 1e9};
  pt.nodes.push_back(node("h-r0", {fast}));
  pt.nodes.push_back(node("h-r1", {slow}));
  pt.nodes.push_back(node("h-r2", {slow}));
  pt.nic_bw = 4e9;
  pt.nic_lat = 8e-6;
  PlatformFacts f = read_platform_facts(d.file("p.xml", calibrated_platform_xml(pt)));
  REQUIRE(f.nodes.size() == 3);
  CHECK(f.gpu.at("h-r0-gpu0").model == "cpu");
  CHECK(f.gpu.at("h-r2-gpu0").model == "cpu-half");
  CHECK(f.gpu.at("h-r2-gpu0").flops_fp32 == Approx(6e9));
  pt.nic_bw = 0;
  CHECK_THROWS_WITH(calibrated_platform_xml(pt), "platform: several clusters need a positive NIC bandwidth");
}

TEST_CASE("calibrate: refuses to overwrite without --force, before measuring", "[calib][negative][cli]") {
  vt::TempDir d;
  const std::string out = d.file("calib.json", "{}");
  auto r =
      vt::vitsim("calibrate --scenario " + vt::source("scenarios/local/fmnist-vit.xml") + " --out " + out);
  CHECK(r.status == 1);
  CHECK(r.out == "vitsim: error: " + out + ": calibration file exists; pass --force to overwrite it\n");
  auto p = vt::vitsim("calibrate --scenario " + vt::source("scenarios/local/fmnist-vit.xml") + " --out " +
                      d / "new.json" + " --emit-platform " + out);
  CHECK(p.status == 1);
  CHECK(p.out == "vitsim: error: " + out + ": platform file exists; pass --force to overwrite it\n");
  auto s = vt::vitsim("calibrate --out " + d / "new.json");
  CHECK(s.status == 2);  // a bad command line (docs/errors.md)
  CHECK(s.out ==
        "vitsim: error: vitsim calibrate needs a scenario: vitsim calibrate SCENARIO.xml --out CALIB.json: "
        "it measures "
        "that scenario's ViT, dataset and precision\n");
}

TEST_CASE("calibrate on one rank writes the schema and --append adds a second device type", "[calib]") {
  // One process, no mpirun (an MPI singleton): compute, copies and the loader; no all-reduce. No op model
  // (--no-op-model): its benchmarks are most of calibrate's time, and the loop test below measures them.
  vt::TempDir d;
  const std::string sc = vt::source("scenarios/local/fmnist-vit.xml");
  const std::string out = d / "calib.json";
  // Micro-batches 4 and 64: 4 and 8 timed in the wrong order under load (0.019 s against 0.014 s, 3
  // iterations), and so did 4 and 16 while other builds ran (0.022 s against 0.018 s, 2026-12-02), a file
  // the reader refuses (times falling with the batch beyond 5%); 16x the work is beyond such noise, and the
  // measuring runs go at the highest priority (vt::prioritised).
  const std::string base = "calibrate --scenario " + sc + " --out " + out +
                           " --micro-batches 4,64 --iters 3 --warmup 1 " +
                           "--loader-batches 4 -q --set run.threads=1 --no-op-model";
  auto measure = [](const std::string& args) {
    return vt::run(vt::prioritised(std::string(VITSIM_BINARY) + " " + args));
  };
  auto first = measure(base + " --device-type cpu-a");
  INFO(first.out);
  REQUIRE(first.status == 0);
  auto again = vt::vitsim(base + " --device-type cpu-b");
  CHECK(again.status == 1);  // exists, no --force / --append
  auto second = measure(base + " --device-type cpu-b --append");
  INFO(second.out);
  REQUIRE(second.status == 0);

  Calibration c = read_calibration(out);
  REQUIRE(c.devices.size() == 2);
  CHECK(c.devices[0].device_type == "cpu-a");
  CHECK(c.devices[1].device_type == "cpu-b");
  const Workload w = build_workload(vit_preset("vit_fmnist_tiny"));
  for (const auto& dev : c.devices) {
    REQUIRE(dev.points.size() == 2);
    CHECK(dev.points[0].micro_batch == 4);
    CHECK(dev.points[1].micro_batch == 64);
    for (const auto& p : dev.points) {
      CHECK(p.fwd_s > 0);
      CHECK(p.bwd_s > 0);
      CHECK(p.optimizer_s > 0);
      // Per layer, in core's layer table order, so the simulator splits by the measured shares.
      REQUIRE(p.layers.size() == w.layers.size());
      for (size_t i = 0; i < w.layers.size(); ++i) CHECK(p.layers[i].name == w.layers[i].name);
    }
    // The compute rounds' span around the kept (median) round, which it contains (the kept round is one of
    // them); no sync span without the step phase (one rank).
    CHECK(!dev.compute_span.empty());
    CHECK(dev.compute_span.low <= 1);
    CHECK(dev.compute_span.low > 0);
    CHECK(dev.compute_span.high >= 1);
    CHECK(dev.sync_span.empty());
    CHECK(dev.occupancy_busy_ranks == 0);  // no occupancy phase on one rank
    // Issue 37 item 4: the compute rounds judged (3, plus a repeat per spread beyond the limit, at most
    // kMaxRoundRepeats), no step rounds on one rank; the step-to-step variability measured on one rank too.
    // Whether a repeat came is the machine's: only what holds either way is checked.
    const RoundCheck& rc = dev.rounds.compute;
    CHECK(rc.rounds >= 3);
    CHECK(rc.rounds <= 3 + kMaxRoundRepeats);
    CHECK(rc.repeats == rc.rounds - 3);
    CHECK(rc.limit == kRoundSpreadLimit);
    CHECK(rc.noisy == (rc.spread > rc.limit));
    CHECK((rc.repeats == kMaxRoundRepeats || !rc.noisy));  // repeated until steady or out of repeats
    CHECK(dev.rounds.step.empty());
    REQUIRE_FALSE(dev.step_cv.empty());
    CHECK(dev.step_cv.value >= 0);
    CHECK(dev.step_cv.value < 1);
    CHECK_THAT(dev.step_cv.why, Catch::Contains("compute rounds"));
  }
  CHECK(c.links.empty());      // one rank: nothing to all-reduce
  CHECK(c.op_models.empty());  // --no-op-model: no op benchmarks timed, none written
  REQUIRE(c.loaders.size() == 1);
  CHECK(c.loaders[0].dataset == "fashion_mnist");
  CHECK(c.loaders[0].resize == 28);
  CHECK(c.loaders[0].images_per_s_per_worker > 0);
  CHECK(c.h2d_pinned_bw > 0);
  for (const char* key : {"host", "date", "command", "versions", "method", "noise", "h2d", "appended_to"})
    CHECK(c.provenance.count(key) == 1);

  // cpu-a measured again (--append): one entry still, its compute span taking in the earlier figures.
  auto third = measure(base + " --device-type cpu-a --append");
  INFO(third.out);
  REQUIRE(third.status == 0);
  const Calibration repeated = read_calibration(out);
  REQUIRE(repeated.devices.size() == 2);
  CHECK(repeated.devices[1].device_type == "cpu-a");  // replaced: the fresh entry last
  CHECK_THAT(repeated.devices[1].compute_span.why, Catch::Contains("an earlier calibration of this device"));
  CHECK(repeated.devices[0].compute_span.why.find("earlier") == std::string::npos);  // cpu-b as it was

  // One name per rank or one for all: two names for one rank is an error.
  auto one = vt::vitsim(base + " --force --emit-platform " + d / "p.xml");
  CHECK(one.status == 1);
  CHECK(one.out.find(
            "--emit-platform needs the all-reduce fit: run calibrate under mpirun with 2 or more ranks") !=
        std::string::npos);
  auto bad = vt::vitsim(base + " --device-type a,b --force");
  CHECK(bad.status == 1);
  CHECK(bad.out.find("calibrate: --device-type lists 2 names for 1 ranks; give one name, or one per rank") !=
        std::string::npos);
}
