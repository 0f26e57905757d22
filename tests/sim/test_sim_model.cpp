// Behaviour of the training model, through the public predict() API (one process per point).
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "sim_test_util.hpp"
#include "test_util.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/results/report.hpp"
#include "vitsim/sim/compute/compute_model.hpp"
#include "vitsim/sim/point/simulate.hpp"
#include "vitsim/sim/predict/predict.hpp"

using namespace vitsim;

namespace {

// Two nodes of one GPU each joined by 10 GB/s NICs, zero latency; GPU speeds given per node.
std::string two_gpu_platform(const vt::TempDir& d, const std::string& f0, const std::string& f1,
                             const std::string& nic = "10GBps") {
  return d.file("p.xml", vt::platform_xml(2, 1, "100GBps", "0us", {nic, nic}, {f0, f1}));
}

// The tests' small scenario: vit_cifar_tiny at micro-batch 32 on `nodes` x `gpus` of `platform`, 6 steps.
std::string scenario_text(const std::string& platform, int nodes, int gpus, const std::string& extra) {
  return fmt::format(R"(<scenario name="m">
  <cluster platform="{}" nodes="{}" gpus_per_node="{}"/>
  <model preset="vit_cifar_tiny"/>
  <dataset name="synthetic" train_samples="6400" image_size="32" channels="3"/>
  <training micro_batch="32" precision="fp32"/>
  <loader workers="2"/>
  <simulation steps="6" warmup="1"/>
  {}
</scenario>
)",
                     platform, nodes, gpus, extra);
}

Report run(const vt::TempDir& d, const std::string& extra, const std::vector<std::string>& sets = {}) {
  auto f = read_scenario_file(d.file("s.xml", scenario_text("p.xml", 2, 1, extra)));
  for (const auto& s : sets) apply_override(f, s);
  sim::PredictOptions o;
  o.progress = false;
  return sim::predict(f, o);
}

}  // namespace

TEST_CASE("predict's ranks, handed back by its child as columns, equal the point simulated in this process",
          "[model][process_pool]") {
  // sim::predict runs the point in a forked process that hands its ranks back as one array a field
  // (predict.cpp rank_columns); simulate_point runs it here (in a child of the test: one SimGrid engine a
  // process) without that trip. Two GPUs of different speeds, so that the ranks differ, and the default
  // straggler figure, so that every breakdown member but the loader's is non-zero.
  vt::TempDir d;
  two_gpu_platform(d, "2Tf", "1Tf");
  const Report r = run(d, R"(<parallelism collective="ring"/>)");
  REQUIRE(r.points.size() == 1);
  const auto& ranks = r.points[0].per_rank;
  REQUIRE(ranks.size() == 2);
  auto numbers = [](const std::vector<RankReport>& rs) {
    std::vector<double> v;
    for (const RankReport& x : rs) {
      const Breakdown& b = x.breakdown_s;
      v.insert(v.end(),
               {double(x.rank), x.step_time_s.mean, x.step_time_s.p50, x.step_time_s.p95, b.data, b.h2d,
                b.compute_fwd, b.compute_bwd, b.optimizer, b.comm_total, b.comm_exposed, b.straggler_wait});
    }
    return v;
  };
  const std::vector<double> alone = vt::in_child_vector([&] {
    const Scenario s = expand(read_scenario_file(d / "s.xml")).at(0);
    return numbers(
        sim::simulate_point(s, read_platform_facts(s.cluster.platform), nullptr, false).point.per_rank);
  });
  CHECK(numbers(ranks) == alone);
  CHECK(ranks[0].breakdown_s.straggler_wait > 0);
  CHECK(ranks[0].breakdown_s.compute_fwd != ranks[1].breakdown_s.compute_fwd);
  CHECK(ranks[0].host != ranks[1].host);
  CHECK(!ranks[0].device.empty());
}

TEST_CASE("a rank on a GPU half as fast makes the step as long as its compute", "[model]") {
  vt::TempDir d;
  two_gpu_platform(d, "2Tf", "1Tf");
  Report r = run(d, R"(<parallelism collective="ring"/>)");
  REQUIRE(r.points.size() == 1);
  const auto& p = r.points[0];
  const auto& fast = p.per_rank[0].breakdown_s;
  const auto& slow = p.per_rank[1].breakdown_s;
  // Compute-bound test GPUs (platform_xml: huge memory bandwidth, no launch cost): half the FLOP/s,
  // twice the time. The memory-bound ops (softmax, LayerNorm, ...: a few hundred MB per step at
  // 1000 TB/s) add well under 1e-4 of the step, the same on both.
  CHECK(slow.compute_fwd + slow.compute_bwd ==
        Approx(2 * (fast.compute_fwd + fast.compute_bwd)).epsilon(1e-4));
  // The synchronous all-reduce makes the fast rank wait: both ranks' steps last the slow rank's compute
  // plus the communication that follows it.
  const double slow_compute = slow.compute_fwd + slow.compute_bwd + slow.optimizer + slow.data + slow.h2d;
  CHECK(p.step_time_s.mean >= slow_compute);
  CHECK(p.per_rank[0].step_time_s.mean == Approx(p.per_rank[1].step_time_s.mean).epsilon(1e-9));
  CHECK(fast.comm_exposed > slow.comm_exposed);
}

TEST_CASE("accumulation k divides all-reduce time per sample by k", "[model]") {
  vt::TempDir d;
  two_gpu_platform(d, "1Tf", "1Tf", "1GBps");
  Report r = run(d, "", {"training.grad_accum=1,4"});
  REQUIRE(r.points.size() == 2);
  const auto& k1 = r.points[0];
  const auto& k4 = r.points[1];
  // Gradients are reduced once per optimizer step, which holds k micro-batches.
  CHECK(k1.breakdown_s.comm_total > 0);
  CHECK(k4.breakdown_s.comm_total == Approx(k1.breakdown_s.comm_total).epsilon(1e-9));
  const double per_sample_1 = k1.breakdown_s.comm_total / k1.global_batch;
  const double per_sample_4 = k4.breakdown_s.comm_total / k4.global_batch;
  CHECK(per_sample_4 == Approx(per_sample_1 / 4).epsilon(1e-9));
}

TEST_CASE("overlap never makes a step slower and hides communication behind a long backward", "[model]") {
  vt::TempDir d;
  two_gpu_platform(d, "0.2Tf", "0.2Tf", "1GBps");
  // Small buckets (the model has 5.4 M parameters, 21.5 MB of fp32 gradients): many buckets to overlap.
  Report r = run(d, R"(<parallelism bucket_size="2MB"/>)", {"parallelism.overlap=false,true"});
  REQUIRE(r.points.size() == 2);
  const auto& off = r.points[0];
  const auto& on = r.points[1];
  CHECK(on.step_time_s.mean <= off.step_time_s.mean);
  // Off: the rank waits for every collective. On: most of it runs during backward.
  CHECK(off.breakdown_s.comm_exposed == Approx(off.breakdown_s.comm_total).epsilon(1e-6));
  CHECK(on.breakdown_s.comm_total == Approx(off.breakdown_s.comm_total).epsilon(1e-6));
  CHECK(on.breakdown_s.comm_exposed < 0.5 * on.breakdown_s.comm_total);
}

TEST_CASE("a slow loader shows as data wait", "[model]") {
  vt::TempDir d;
  // loader_bw 1 MB/s: a 32x32x3 fp32 image (12,288 B) takes 12.3 ms per worker; 32 images / 2 workers
  // = 197 ms per batch, far longer than the step's compute on a 1 TFLOP/s GPU.
  std::string xml = vt::platform_xml(2, 1, "100GBps", "0us", {"10GBps", "10GBps"}, {"1Tf", "1Tf"});
  const std::string prop = "<prop id=\"gpu_model\"";
  for (size_t pos = xml.find(prop); pos != std::string::npos; pos = xml.find(prop, pos + 200))
    xml.insert(pos, "<prop id=\"loader_bw\" value=\"1MBps\"/><prop id=\"cpu_cores\" value=\"8\"/>");
  d.file("p.xml", xml);
  // Both workers start at t = 0 and deliver batches in pairs: measure whole pairs (10 steps after 1).
  Report r = run(d, "", {"simulation.steps=11"});
  const auto& p = r.points.at(0);
  CHECK(p.bound == "data");
  // Steady state: one batch per (batch time / workers) = 32 * 12.288 ms / 2 per step.
  CHECK(p.step_time_s.mean == Approx(32 * 12288 / 1e6 / 2).epsilon(0.01));
}

TEST_CASE("the same inputs give byte-identical JSON, whatever --jobs", "[model][determinism]") {
  vt::TempDir d;
  const std::string sc = vt::source("scenarios/study/vector-strong-b64.xml");
  auto a = vt::vitsim("predict " + sc + " --format json --jobs 1 -q");
  auto b = vt::vitsim("predict " + sc + " --format json --jobs 2 -q");
  auto c = vt::vitsim("predict " + sc + " --format json --jobs 2 -q");
  REQUIRE(a.status == 0);
  CHECK(a.out == b.out);
  CHECK(b.out == c.out);
}

TEST_CASE("simulation.flows: a lone ring without flows predicts what its flows do", "[model][lone]") {
  // Predicted with the ring computed (auto) and as SimGrid flows (always): every figure the same to 1e-9
  // (SimGrid ends a flow within its own precision), and the notes say which ran. The shipped study scenarios
  // (cluster-per-node files): heterogeneous Tesla, Vector with the communication stream (overlap, ZeRO-2);
  // and flat-star files that vitsim builds in code, one NIC per node and one per GPU (rails).
  const std::string note = "note: ring: no link carries two of its transfers";
  vt::TempDir d;
  for (const auto& [name, nics] :
       {std::pair<std::string, std::string>{"flat1", "--nics 1"}, {"flat2", "--nics 2 --rail-optimised"}}) {
    const auto w =
        vt::vitsim("platform --nodes 4 --gpus-per-node 2 --gpu t4 --nic-speed 25gbe --layout flat-star " +
                   nics + " --out " + (d / (name + ".xml")));
    INFO(w.out);
    REQUIRE(w.status == 0);
    d.file(name + "-s.xml", scenario_text(name + ".xml", 4, 2, R"(<parallelism collective="ring"/>)"));
  }
  const std::vector<std::string> cases = {
      vt::source("scenarios/study/tesla-strong-b16.xml") + " --set parallelism.collective=ring",
      vt::source("scenarios/study/vector-strong-b64.xml") +
          " --set parallelism.overlap=true --set parallelism.collective=ring",
      vt::source("scenarios/study/vector-strong-b64.xml") +
          " --set parallelism.zero=2 --set parallelism.collective=ring",
      // auto where NCCL may run nothing but its ring: the ring's transfers after NCCL's latency, lone.
      vt::source("scenarios/study/vector-strong-b64.xml") + " --set nccl.algo=ring", d / "flat1-s.xml",
      d / "flat2-s.xml",
      d / "flat1-s.xml --set parallelism.collective=topology --set cluster.gpus_per_node=1"};  // topology
                                                                                               // picks the
                                                                                               // ring
  for (const std::string& c : cases) {
    INFO(c);
    const std::string args = "predict " + c + " -q -j1 ";
    const auto lone = vt::vitsim(args + "--format json"),
               flows = vt::vitsim(args + "--format json --set simulation.flows=always");
    REQUIRE(lone.status == 0);
    REQUIRE(flows.status == 0);
    vt::check_same_numbers(nlohmann::json::parse(lone.out), nlohmann::json::parse(flows.out), 1e-9);
    CHECK(vt::vitsim(args).out.find(note) != std::string::npos);
    CHECK(vt::vitsim(args + "--set simulation.flows=always").out.find(note) == std::string::npos);
  }
  // `topology` on nodes of 2 GPUs picks the hierarchical all-reduce (several rings at once): flows, and no
  // note.
  const auto hier =
      vt::vitsim("predict " + (d / "flat1-s.xml") + " --set parallelism.collective=topology -q -j1");
  REQUIRE(hier.status == 0);
  CHECK(hier.out.find(note) == std::string::npos);
  // A SHARED node backbone carries every transfer of the node's ring: flows, and no note.
  d.file("p.xml", vt::platform_xml(1, 4, "10GBps", "1us", {}, {"1Tf"}, "8GBps", "SHARED"));
  const std::string sc = d.file("s.xml", scenario_text("p.xml", 1, 4, ""));
  const auto shared = vt::vitsim("predict " + sc + " -q -j1");
  REQUIRE(shared.status == 0);
  CHECK(shared.out.find(note) == std::string::npos);
}

TEST_CASE("a CPU device copies no batch to itself: no host-to-device time, no h2d event", "[model][trace]") {
  // The trainer on a CPU device wraps the loader's batch in place (real/src/trainer/trainer.cpp micro_batch:
  // no copy, no h2d event); on a GPU it copies it over the host link.
  vt::TempDir d;
  for (const auto& [scenario, cpu] :
       {std::pair<std::string, bool>{"scenarios/local/validate-homog.xml", true},
        {"scenarios/study/vector-strong-b64.xml", false}}) {
    INFO(scenario);
    const auto r =
        vt::vitsim("predict " + vt::source(scenario) + " -q -j1 --format json --trace " + (d / "t.json"));
    REQUIRE(r.status == 0);
    const auto rep = nlohmann::json::parse(r.out);
    for (const auto& p : rep["points"]) CHECK((p["breakdown_s"]["h2d"].get<double>() == 0) == cpu);
    std::ifstream in(d / "t.json");
    const auto trace = nlohmann::json::parse(in);
    bool h2d = false;
    for (const auto& e : trace["traceEvents"]) h2d = h2d || e.value("name", "") == "h2d";
    CHECK(h2d == !cpu);
  }
}

TEST_CASE("compute model: per-layer times are the op timeline charged to each layer", "[model][compute]") {
  // The layers' forward and backward times add up to the whole pass's timeline (core run_ops), on an
  // asynchronous device both when it is device-bound and when the host's issue cost dominates.
  Workload w = build_workload(vit_preset("vit_cifar_tiny"));
  GpuFacts g;
  g.model = "G";
  g.flops_fp32 = 1e12;
  g.mem_bw = 1e11;
  g.gemm_efficiency = 0.5;
  g.sm_count = 8;
  for (double host : {0.0, 50e-6}) {
    g.host_op_overhead = host;
    const DeviceFigures d = sim::device_figures(g, Precision::FP32);
    CHECK(d.gemm_efficiency == 0.5);
    CHECK(d.attn_efficiency == 0.5);  // defaults to the GEMM figure
    auto t = sim::op_layer_times(w, 16, OpOptions{Precision::FP32}, d);
    double sum = 0;
    for (const auto& l : t) sum += l.fwd_s + l.bwd_s;
    const Timeline tl = run_ops(pass_ops(w, 16, OpOptions{Precision::FP32}), d);
    CHECK(sum == Approx(tl.end_s).epsilon(1e-12));
    if (host > 0) CHECK(tl.end_s >= tl.host_s);
  }
}

namespace {
// A calibration of device "G1Tf" (the test platform's model name for a 1 TFLOP/s GPU) on vit_cifar_tiny,
// with peak figures so that it can also predict another GPU type by the op model's ratio.
std::string calibration_json() {
  return R"({"schema": "vitsim.calibration/2", "provenance": {"host": "test"},
    "devices": [{"device_type": "G1Tf", "precision": "fp32", "peak_flops": 1e12, "mem_bw": 1e15,
      "model": {"image_size": 32, "patch": 4, "channels": 3, "width": 192, "depth": 6, "heads": 3,
                "mlp_ratio": 2.0, "classes": 10},
      "points": [{"micro_batch": 16, "fwd_s": 0.10, "bwd_s": 0.20, "optimizer_s": 0.01},
                 {"micro_batch": 32, "fwd_s": 0.20, "bwd_s": 0.40, "optimizer_s": 0.01}]}]})";
}

// One GPU of the test platform (GPU speed `flops`) at `micro_batch`, predicted with that calibration
// (or none) and the scenario's compute.model at `model` ("": its default).
Report predict_calibrated(const std::string& flops, int micro_batch, const std::string& model = "",
                          bool calibrated = true) {
  vt::TempDir d;
  two_gpu_platform(d, flops, flops);
  auto f = read_scenario_file(d.file("s.xml", R"(<scenario name="c">
  <cluster platform="p.xml" nodes="1" gpus_per_node="1"/>
  <model preset="vit_cifar_tiny"/>
  <dataset name="synthetic" train_samples="6400" image_size="32" channels="3"/>
  <simulation steps="4" warmup="1"/>
</scenario>)"));
  apply_override(f, "training.micro_batch=" + std::to_string(micro_batch));
  if (!model.empty()) apply_override(f, "compute.model=" + model);
  sim::PredictOptions o;
  o.progress = false;
  if (calibrated) o.calibration = d.file("c.json", calibration_json());
  return sim::predict(f, o);
}
}  // namespace

TEST_CASE("calibrated compute: interpolated in micro-batch", "[model][calibration]") {
  Report r = predict_calibrated("1Tf", 24);
  const auto& b = r.points.at(0).breakdown_s;
  // Halfway between the measured points 16 and 32: fwd 0.15 s, bwd 0.30 s, optimizer 0.01 s.
  CHECK(b.compute_fwd == Approx(0.15).epsilon(1e-9));
  CHECK(b.compute_bwd == Approx(0.30).epsilon(1e-9));
  CHECK(b.optimizer == Approx(0.01).epsilon(1e-9));
  CHECK(r.points[0].notes.at(0) == "compute on G1Tf: calibrated model, vitsim framework step");
}

TEST_CASE("calibrated compute: another GPU type scaled by the op model's ratio", "[model][calibration]") {
  Report r = predict_calibrated("2Tf", 32);  // GPU type "G2Tf" was never measured
  const auto& b = r.points.at(0).breakdown_s;
  // Both devices are compute-bound in the op model (1000 TB/s memory, no launch cost): twice the peak,
  // half the measured time (0.20 s and 0.40 s at micro-batch 32); the memory-bound ops, the same on both
  // devices, shift the ratio by well under 1e-4.
  CHECK(b.compute_fwd == Approx(0.10).epsilon(1e-4));
  CHECK(b.compute_bwd == Approx(0.20).epsilon(1e-4));
  CHECK(r.points[0].notes.at(0) == "compute on G2Tf: calibrated+op-scaled model, vitsim framework step");
}

TEST_CASE("compute.model chooses among the registered models", "[model][calibration][compute]") {
  // The calibration measured G1Tf on this shape and fitted no op figures (calibration_json above).
  const auto compute = [](const Report& r) {
    const auto& b = r.points.at(0).breakdown_s;
    return std::pair{b.compute_fwd, b.compute_bwd};
  };
  const std::string step = ", vitsim framework step";
  SECTION("auto (the default) and measured take the measured times of the device") {
    for (const std::string model : {"", "auto", "measured"}) {
      INFO(model);
      const Report r = predict_calibrated("1Tf", 32, model);
      CHECK(r.points.at(0).notes.at(0) == "compute on G1Tf: calibrated model" + step);
      // The measured point at micro-batch 32 (summed over layers: equal to rounding).
      CHECK(compute(r).first == Approx(0.20).epsilon(1e-9));
      CHECK(compute(r).second == Approx(0.40).epsilon(1e-9));
    }
    CHECK(predict_calibrated("2Tf", 32, "measured").points.at(0).notes.at(0) ==
          "compute on G2Tf: calibrated+op-scaled model" + step);
  }
  SECTION("op and op_platform ignore measured times: the prediction without a calibration") {
    const Report uncalibrated = predict_calibrated("1Tf", 32, "", false);
    CHECK(uncalibrated.points.at(0).notes.at(0) ==
          "compute on G1Tf: op-level model (platform figures)" + step);
    for (const std::string model : {"op", "op_platform"}) {
      INFO(model);
      const Report r = predict_calibrated("1Tf", 32, model);
      CHECK(r.points.at(0).notes.at(0) == "compute on G1Tf: op-level model (platform figures)" + step);
      CHECK(compute(r) == compute(uncalibrated));
      CHECK(r.points.at(0).step_time_s.mean == uncalibrated.points.at(0).step_time_s.mean);
    }
  }
  SECTION("measured without measured times is an error at the key, naming the others") {
    CHECK_THROWS_WITH(
        predict_calibrated("1Tf", 32, "measured", false),
        "--set compute.model: compute.model: measured: no --calibration was given, so vitsim has no "
        "measured times of this ViT at fp32 (vitsim calibrate measures them); choose another of " +
            vt::join(sim::compute_model_names()));
  }
}

TEST_CASE(
    "training.cast=module: ddp's point keeps half state, moves fewer bytes and all-reduces half gradients",
    "[model][cast]") {
  // The same ddp fp16 point under autocast (the default) and with the module in half. Memory per GPU from
  // core/model/memory.hpp's closed forms: AdamW's state 12 bytes a parameter (fp32 master, m, v) under
  // autocast, 4 (m, v in half, no master) with the module in half; weights and gradients 2 bytes in both.
  vt::TempDir d;
  two_gpu_platform(d, "2Tf", "2Tf");
  const std::vector<std::string> base{"training.framework=ddp", "training.precision=fp16"};
  std::vector<std::string> module_sets = base;
  module_sets.push_back("training.cast=module");
  const Report amp = run(d, R"(<parallelism collective="ring"/>)", base);
  const Report half = run(d, R"(<parallelism collective="ring"/>)", module_sets);
  REQUIRE(amp.points.size() == 1);
  REQUIRE(half.points.size() == 1);
  const double P = static_cast<double>(build_workload(vit_preset("vit_cifar_tiny")).total_params());
  const ReportPoint &a = amp.points[0], &h = half.points[0];
  CHECK(a.memory.optimizer == Approx(12 * P));
  CHECK(h.memory.optimizer == Approx(4 * P));
  CHECK(h.memory.params == Approx(a.memory.params));
  CHECK(h.memory.grads == Approx(a.memory.grads));
  // Fewer bytes in every phase: no casts and 2-byte LayerNorm and residual stream in forward and backward,
  // a half optimizer step, and half the gradient bytes on the wire (fp16 where autocast all-reduces fp32).
  const Breakdown &ba = a.breakdown_s, &bh = h.breakdown_s;
  CHECK(bh.compute_fwd < ba.compute_fwd);
  CHECK(bh.compute_bwd < ba.compute_bwd);
  CHECK(bh.optimizer < ba.optimizer);
  CHECK(bh.comm_total < ba.comm_total);
}
