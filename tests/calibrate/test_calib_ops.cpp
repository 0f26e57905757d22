// vitsim calibrate's op-model fit (calibrate/src/fits/op_fit.cpp): efficiencies per op class (GEMM, attention
// matmul, memory, norm), host time per op, cost per matrix of a batched matmul, GEMM tile and short-K half
// point, fitted to op times (stage 1); the host time per kernel from whole passes (stage 2). Pure: no
// Torch, no MPI.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "vitsim/calibrate/calibrate.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/model/ops.hpp"
#include "vitsim/core/model/vit.hpp"

using namespace vitsim;
using namespace vitsim::calibrate;

namespace {

// A CPU-like device (one thread, synchronous) and a GPU-like one (many SMs, asynchronous).
DeviceFigures cpu_truth() {
  DeviceFigures d;
  d.device_type = "cpu-test";
  d.peak_flops = 2e11;
  d.mem_bw = 6e10;
  d.sm_count = 1;
  d.tile_m = d.tile_n = 32;
  d.gemm_k_half = 64;
  d.gemm_efficiency = 0.8;
  d.attn_efficiency = 0.45;
  d.mem_efficiency = 0.6;
  d.norm_efficiency = 0.15;  // exp, erf and row reductions: far below the bandwidth on a CPU
  d.matrix_s = 8e-7;         // a CPU's bmm: one GEMM call per matrix
  d.host_op_s = 6e-6;
  d.async = false;
  return d;
}
DeviceFigures gpu_truth() {
  DeviceFigures d;
  d.device_type = "gpu-test";
  d.peak_flops = 1e14;
  d.mem_bw = 2e12;
  d.sm_count = 16;
  d.tile_m = d.tile_n = 64;
  d.gemm_k_half = 128;
  d.gemm_efficiency = 0.7;
  d.attn_efficiency = 0.35;
  d.mem_efficiency = 0.85;
  d.norm_efficiency = 0.7;
  d.host_op_s = 4e-6;
  d.async = true;
  return d;
}
// What the fit starts from: the truth's peak, bandwidth, SMs and sync mode, nothing else.
DeviceFigures start_from(const DeviceFigures& t) {
  DeviceFigures s;
  s.device_type = t.device_type;
  s.peak_flops = t.peak_flops;
  s.mem_bw = t.mem_bw;
  s.sm_count = t.sm_count;
  s.async = t.async;
  return s;
}
// The calibration's ops: vit_fmnist_tiny at micro-batches 32, 64, 128 plus the device sweep.
std::vector<Op> calibration_ops() {
  const Workload w = build_workload(vit_preset("vit_fmnist_tiny"));
  std::vector<Op> ops;
  for (const auto& b : op_benchmarks(w, {32, 64, 128}, Precision::FP32, 64 * w.model.tokens()))
    ops.push_back(b.op);
  return ops;
}
// Deterministic noise in [-3%, +3%]: seven levels in a fixed pattern.
double noise(size_t i) {
  return 0.03 * (static_cast<double>((i * 5) % 7) - 3.0) / 3.0;
}

std::vector<OpSample> samples_of(const std::vector<Op>& ops, const DeviceFigures& truth, bool noisy) {
  std::vector<OpSample> out;
  for (size_t i = 0; i < ops.size(); ++i)
    out.push_back({ops[i], op_sample_time(ops[i], truth) * (noisy ? 1 + noise(i) : 1.0)});
  return out;
}

// Another shape than the calibration's: width 128, depth 4, patch 4 on 32 px images.
Workload held_out_shape() {
  ViTConfig c;
  c.image_size = 32;
  c.patch = 4;
  c.channels = 3;
  c.width = 128;
  c.depth = 4;
  c.heads = 4;
  c.mlp_ratio = 2.0;
  c.classes = 10;
  return build_workload(c);
}

}  // namespace

TEST_CASE("calibrate ops: the benchmark list covers the model's layers and the sweep", "[calib][ops]") {
  const Workload w = build_workload(vit_preset("vit_fmnist_tiny"));
  const auto list = op_benchmarks(w, {32, 64}, Precision::FP32, 1088);
  std::set<std::string> layers;
  int sweep_gemm = 0, sweep_bmm = 0, sweep_mem = 0;
  std::map<OpKind, int> sweep_kind;
  for (const auto& b : list) {
    if (b.micro_batch > 0) {
      CHECK((b.micro_batch == 32 || b.micro_batch == 64));
      layers.insert(w.layers[b.op.layer].name);
    } else if (b.op.cls == OpClass::Gemm) {
      ++sweep_gemm;
      CHECK(b.op.flops <= 4294967296.0);
    } else if (b.op.cls == OpClass::AttnMatmul) {
      ++sweep_bmm;
    } else if (b.op.kind != OpKind::None) {
      ++sweep_kind[b.op.kind];
      CHECK(b.op.elems > 0);
    } else {
      ++sweep_mem;
    }
  }
  CHECK(layers == std::set<std::string>{"patch_embed", "block0.attn", "block0.mlp", "head"});
  CHECK(sweep_gemm > 60);
  CHECK(sweep_bmm == 36);
  CHECK(sweep_mem == 12);  // copies and adds of 64 KiB .. 64 MiB
  // The kernel families at two sizes: softmax at 3 row lengths, LayerNorm at 4 widths, GELU, sums at 3
  // widths, permuted gathers at 2 x 2 shapes (each forward and backward where there is one).
  CHECK(sweep_kind == std::map<OpKind, int>{{OpKind::Softmax, 6},
                                            {OpKind::SoftmaxBwd, 6},
                                            {OpKind::LayerNorm, 8},
                                            {OpKind::LayerNormBwd, 8},
                                            {OpKind::Gelu, 2},
                                            {OpKind::GeluBwd, 2},
                                            {OpKind::Reduce, 6},
                                            {OpKind::Strided, 8}});
  // The same list every time (every rank times the same ops, in the same order).
  const auto again = op_benchmarks(w, {32, 64}, Precision::FP32, 1088);
  REQUIRE(again.size() == list.size());
  for (size_t i = 0; i < list.size(); ++i) CHECK(again[i].op.name == list[i].op.name);
}

TEST_CASE("calibrate ops: the copy sweep reaches 4x the last-level cache", "[calib][ops]") {
  const Workload w = build_workload(vit_preset("vit_fmnist_tiny"));
  auto largest_copy = [&](double llc) {
    double largest = 0;
    for (const auto& b : op_benchmarks(w, {32}, Precision::FP32, 1088, llc))
      if (b.op.name.rfind("sweep.copy.", 0) == 0) largest = std::max(largest, b.op.bytes);
    return largest;
  };
  const double MiB = 1024.0 * 1024;
  CHECK(largest_copy(0) == 2 * 64 * MiB);          // read + written: 64 MiB each, the sweep's own end
  CHECK(largest_copy(32 * MiB) == 2 * 64 * MiB);   // >= 4 x 32 MiB
  CHECK(largest_copy(48 * MiB) == 2 * 256 * MiB);  // the first size x4 apart of at least 2 x 48 MiB
  CHECK(largest_copy(48 * MiB) >= 4 * 48 * MiB);
}

TEST_CASE("calibrate ops: a permuted-gather sweep op carries its shape in its own fields", "[calib][ops]") {
  // calibrate's kernel for a "strided" sweep op gathers [batch, m, n] into [n, batch, m], the shape read
  // from the op (calibrate/src/bench/kernel_maker.cpp), not from its name: every such op, at both precisions,
  // has a whole positive shape whose product is its elements, and the name (for the reader) says the same.
  const Workload w = build_workload(vit_preset("vit_fmnist_tiny"));
  for (Precision p : {Precision::FP32, Precision::BF16}) {
    int gathers = 0;
    for (const auto& b : op_benchmarks(w, {32}, p, 1088)) {
      if (b.op.kind != OpKind::Strided || b.micro_batch != 0) continue;
      ++gathers;
      INFO(b.op.name);
      CHECK(b.op.batch >= 1);
      CHECK(b.op.m >= 1);
      CHECK(b.op.n >= 1);
      CHECK(b.op.batch == std::round(b.op.batch));
      CHECK(b.op.batch * b.op.m * b.op.n == b.op.elems);
      CHECK(b.op.name == fmt::format("sweep.strided.d{:.0f}.n{:.0f}.b{:.0f}", b.op.m, b.op.n, b.op.batch));
      CHECK(b.op.cls == OpClass::Memory);  // its batch, m and n enter no prediction (core: matmuls only)
    }
    CHECK(gathers == 8);  // d in {64, 256} x n in {16, 64} at 2^18 and 2^20 elements
  }
}

TEST_CASE("calibrate ops: cache sizes as sysfs writes them", "[calib][ops]") {
  CHECK(parse_cache_size("32768K") == 32768.0 * 1024);
  CHECK(parse_cache_size("2M\n") == 2.0 * 1024 * 1024);
  CHECK(parse_cache_size("1G") == 1024.0 * 1024 * 1024);
  CHECK(parse_cache_size("512") == 512);
  CHECK(parse_cache_size("") == 0);
  CHECK(parse_cache_size("big") == 0);
  CHECK(parse_cache_size("12Q") == 0);
  CHECK(parse_cache_size("-4K") == 0);
}

TEST_CASE("calibrate ops: a sample's prediction is run_ops of the op alone", "[calib][ops]") {
  const DeviceFigures d = cpu_truth();
  for (const Op& op : calibration_ops()) {
    CHECK(op_sample_time(op, d) == Approx(op.kernels * d.host_op_s + op_device_time(op, d)).epsilon(1e-12));
  }
}

TEST_CASE("calibrate ops: the fit recovers the figures the times were made with", "[calib][ops]") {
  for (const DeviceFigures& truth : {cpu_truth(), gpu_truth()}) {
    INFO(truth.device_type);
    const std::vector<Op> ops = calibration_ops();
    const OpModelCalibration f = fit_op_model(samples_of(ops, truth, false), start_from(truth));
    CHECK(f.samples == static_cast<int>(ops.size()));
    CHECK(f.figures.device_type == truth.device_type);
    CHECK(f.figures.peak_flops == truth.peak_flops);  // the reference figures stay
    CHECK(f.figures.mem_bw == truth.mem_bw);
    CHECK(f.figures.sm_count == truth.sm_count);
    CHECK(f.figures.async == truth.async);
    CHECK(f.figures.kernel_s == 0);
    CHECK(f.figures.tile_m == truth.tile_m);
    CHECK(f.figures.tile_n == truth.tile_n);
    CHECK(f.figures.gemm_k_half == truth.gemm_k_half);
    CHECK(f.figures.gemm_efficiency == Approx(truth.gemm_efficiency).epsilon(0.01));
    CHECK(f.figures.attn_efficiency == Approx(truth.attn_efficiency).epsilon(0.01));
    CHECK(f.figures.mem_efficiency == Approx(truth.mem_efficiency).epsilon(0.01));
    CHECK(f.figures.norm_efficiency == Approx(truth.norm_efficiency).epsilon(0.01));
    if (truth.matrix_s > 0)
      CHECK(f.figures.matrix_s == Approx(truth.matrix_s).epsilon(0.01));
    else
      CHECK(f.figures.matrix_s < 1e-12);  // none on a GPU
    CHECK(f.figures.host_op_s == Approx(truth.host_op_s).epsilon(0.01));
    CHECK(f.max_rel_residual < 1e-6);
    CHECK(f.median_rel_residual <= f.max_rel_residual);
  }
}

TEST_CASE("calibrate ops: with +-3% noise the fit predicts another ViT shape within the noise",
          "[calib][ops]") {
  // Training samples carry a deterministic +-3% error; the held-out ops (another shape, every layer,
  // forward and backward) are predicted from the fitted figures and compared with the noiseless truth.
  const Workload other = held_out_shape();
  for (const DeviceFigures& truth : {cpu_truth(), gpu_truth()}) {
    INFO(truth.device_type);
    const OpModelCalibration f = fit_op_model(samples_of(calibration_ops(), truth, true), start_from(truth));
    // Residuals against the noisy samples: a sample's own noise (3%) plus, for the kernel families, the
    // error of the family's cost, fitted from sweeps that carry the same +-3% (at most 3% more).
    CHECK(f.max_rel_residual <= 0.065);
    CHECK(f.median_rel_residual <= 0.03);
    CHECK(f.figures.gemm_efficiency <= 1.0);
    CHECK(f.figures.attn_efficiency <= 1.0);
    CHECK(f.figures.mem_efficiency <= 1.0);
    for (int b : {16, 64, 256}) {
      const std::vector<Op> ops = pass_ops(other, b, OpOptions{Precision::FP32});
      double worst = 0;
      for (const Op& op : ops)
        worst = std::max(worst, std::abs(op_sample_time(op, f.figures) / op_sample_time(op, truth) - 1));
      CHECK(worst <= 0.03);
      const double predicted = run_ops(ops, f.figures).end_s, real = run_ops(ops, truth).end_s;
      CHECK(predicted == Approx(real).epsilon(0.03));
    }
  }
}

TEST_CASE("calibrate ops: weighted by time the fit recovers the figures too", "[calib][ops]") {
  for (const DeviceFigures& truth : {cpu_truth(), gpu_truth()}) {
    INFO(truth.device_type);
    const OpModelCalibration f =
        fit_op_model(samples_of(calibration_ops(), truth, false), start_from(truth), OpFitOptions{true});
    CHECK(f.figures.tile_m == truth.tile_m);
    CHECK(f.figures.gemm_k_half == truth.gemm_k_half);
    CHECK(f.figures.gemm_efficiency == Approx(truth.gemm_efficiency).epsilon(0.01));
    CHECK(f.figures.attn_efficiency == Approx(truth.attn_efficiency).epsilon(0.01));
    CHECK(f.figures.mem_efficiency == Approx(truth.mem_efficiency).epsilon(0.01));
    CHECK(f.figures.norm_efficiency == Approx(truth.norm_efficiency).epsilon(0.01));
    CHECK(f.figures.host_op_s == Approx(truth.host_op_s).epsilon(0.01));
    CHECK(f.max_rel_residual < 1e-6);
  }
}

TEST_CASE("calibrate ops: weights by time make the long ops count", "[calib][ops]") {
  // Two memory ops that disagree: a 10 us one says efficiency 1, a 10 ms one says 0.5. Alike, the fit
  // splits the difference in ratio; by time, it follows the long op.
  DeviceFigures start;
  start.device_type = "cpu-test";
  start.mem_bw = 1e10;
  start.async = false;
  auto mem_op = [](const std::string& name, double bytes) { return memory_op(name, Pass::Fwd, bytes); };
  const std::vector<OpSample> samples{{mem_op("short", 1e5), 1e-5}, {mem_op("long", 5e7), 1e-2}};
  const OpModelCalibration alike = fit_op_model(samples, start);
  const OpModelCalibration by_time = fit_op_model(samples, start, OpFitOptions{true});
  CHECK(by_time.figures.mem_efficiency < alike.figures.mem_efficiency);
  CHECK(by_time.figures.mem_efficiency == Approx(0.5).epsilon(0.01));
}

TEST_CASE("calibrate ops: the fit is deterministic", "[calib][ops]") {
  const auto samples = samples_of(calibration_ops(), cpu_truth(), true);
  const OpModelCalibration a = fit_op_model(samples, start_from(cpu_truth()));
  const OpModelCalibration b = fit_op_model(samples, start_from(cpu_truth()));
  CHECK(a.figures.gemm_efficiency == b.figures.gemm_efficiency);
  CHECK(a.figures.attn_efficiency == b.figures.attn_efficiency);
  CHECK(a.figures.mem_efficiency == b.figures.mem_efficiency);
  CHECK(a.figures.norm_efficiency == b.figures.norm_efficiency);
  CHECK(a.figures.matrix_s == b.figures.matrix_s);
  CHECK(a.figures.host_op_s == b.figures.host_op_s);
  CHECK(a.figures.tile_m == b.figures.tile_m);
  CHECK(a.figures.gemm_k_half == b.figures.gemm_k_half);
  CHECK(a.max_rel_residual == b.max_rel_residual);
}

TEST_CASE("calibrate ops: efficiencies stay at most 1 and positive when the reference peak is too low",
          "[calib][ops]") {
  // Times made with a peak twice the stated one: a GEMM efficiency of 1.6 would fit; it is held at 1.
  DeviceFigures truth = cpu_truth();
  truth.peak_flops *= 2;
  DeviceFigures start = start_from(cpu_truth());
  const OpModelCalibration f = fit_op_model(samples_of(calibration_ops(), truth, false), start);
  CHECK(f.figures.gemm_efficiency <= 1.0);
  CHECK(f.figures.gemm_efficiency > 0.9);
  CHECK(f.figures.attn_efficiency <= 1.0);
  CHECK(f.figures.mem_efficiency <= 1.0);
  CHECK(f.figures.peak_flops == start.peak_flops);
}

TEST_CASE("calibrate ops: a class without samples keeps the start's figures", "[calib][ops]") {
  // Memory ops only: the memory efficiency and host time are fitted; GEMM figures, tile and k_half stay.
  const DeviceFigures truth = cpu_truth();
  std::vector<Op> mem;
  for (const Op& op : calibration_ops())
    if (op.cls == OpClass::Memory) mem.push_back(op);
  DeviceFigures start = start_from(truth);
  start.gemm_efficiency = 0.5;
  start.attn_efficiency = 0.25;
  start.tile_m = start.tile_n = 128;
  start.gemm_k_half = 7;
  start.norm_efficiency = 0.4;
  start.matrix_s = 3e-7;
  const OpModelCalibration f = fit_op_model(samples_of(mem, truth, false), start);
  CHECK(f.figures.mem_efficiency == Approx(truth.mem_efficiency).epsilon(0.01));
  CHECK(f.figures.norm_efficiency == 0.4);  // no norm op among the samples
  CHECK(f.figures.matrix_s == 3e-7);        // no batched matmul
  CHECK(f.figures.host_op_s == Approx(truth.host_op_s).epsilon(0.01));
  CHECK(f.figures.gemm_efficiency == 0.5);
  CHECK(f.figures.attn_efficiency == 0.25);
  CHECK(f.figures.tile_m == 128);
  CHECK(f.figures.gemm_k_half == 7);
}

TEST_CASE("calibrate ops: the fit refuses what it cannot fit", "[calib][ops][negative]") {
  const DeviceFigures truth = cpu_truth();
  CHECK_THROWS_WITH(fit_op_model({}, start_from(truth)), "op model fit: no op sample");
  auto samples = samples_of(calibration_ops(), truth, false);
  auto zero = samples;
  zero[3].seconds = 0;
  CHECK_THROWS_WITH(fit_op_model(zero, start_from(truth)),
                    "op model fit: op " + zero[3].op.name + " measured in 0 s; times must be positive");
  DeviceFigures no_peak = start_from(truth);
  no_peak.peak_flops = 0;
  CHECK_THROWS_WITH(fit_op_model(samples, no_peak),
                    "op model fit: device cpu-test needs a positive peak_flops for its matmul samples");
  DeviceFigures no_bw = start_from(truth);
  no_bw.mem_bw = 0;
  CHECK_THROWS_WITH(fit_op_model(samples, no_bw), "op model fit: device cpu-test needs a positive mem_bw");
}

// ---- stage 2: the host time per kernel from whole passes ----

namespace {
// Whole passes of vit_fmnist_tiny at three micro-batches made with `truth` (its host_op_s), the device
// part slowed by `speed` (the passes timed in a slower spell than the ops).
std::vector<PassSample> passes_of(const Workload& w, const DeviceFigures& truth, double speed) {
  std::vector<PassSample> out;
  for (int b : {16, 64, 128}) {
    const std::vector<Op> ops = pass_ops(w, b, OpOptions{Precision::FP32});
    DeviceFigures device_only = truth;
    device_only.host_op_s = 0;
    double kernels = 0;
    for (const Op& op : ops) kernels += op.kernels;
    out.push_back({b, speed * run_ops(ops, device_only).end_s + truth.host_op_s * kernels});
  }
  return out;
}
}  // namespace

TEST_CASE("calibrate ops: stage 2 recovers the host time per kernel of whole passes",
          "[calib][ops][stage2]") {
  const Workload w = build_workload(vit_preset("vit_fmnist_tiny"));
  DeviceFigures stage1 = cpu_truth();
  stage1.host_op_s = 5e-7;  // what ops timed alone showed
  DeviceFigures truth = cpu_truth();
  truth.host_op_s = 2e-5;  // inside a pass: autograd, the engine
  for (double speed : {1.0, 1.25, 0.9}) {
    INFO("speed " << speed);
    const HostFit h = fit_host_op(w, passes_of(w, truth, speed), stage1, OpOptions{Precision::FP32});
    CHECK(h.host_op_s == Approx(truth.host_op_s).epsilon(1e-6));
    CHECK(h.speed == Approx(speed).epsilon(1e-6));
    CHECK(h.max_rel_residual < 1e-9);
    REQUIRE(h.points.size() == 3);
    for (const auto& pt : h.points) {
      CHECK(pt.kernels > 0);
      CHECK(pt.residual == Approx(0).margin(1e-9));
      // The prediction uses the ops' device times (s = 1) with the fitted host time.
      DeviceFigures f = stage1;
      f.host_op_s = h.host_op_s;
      CHECK(pt.predicted_s ==
            Approx(run_ops(pass_ops(w, pt.micro_batch, OpOptions{Precision::FP32}), f).end_s));
    }
  }
}

TEST_CASE("calibrate ops: stage 2 with one pass or faster passes than ops keeps s = 1 and clamps at 0",
          "[calib][ops][stage2]") {
  const Workload w = build_workload(vit_preset("vit_fmnist_tiny"));
  const DeviceFigures stage1 = cpu_truth();
  DeviceFigures truth = cpu_truth();
  truth.host_op_s = 2e-5;
  auto passes = passes_of(w, truth, 1.0);
  // One pass: s = 1, h = (measured - device) / kernels exactly.
  const HostFit one = fit_host_op(w, {passes[1]}, stage1, OpOptions{Precision::FP32});
  CHECK(one.speed == 1);
  CHECK(one.host_op_s == Approx(truth.host_op_s).epsilon(1e-6));
  CHECK(one.points[0].implied_host_op_s == Approx(truth.host_op_s).epsilon(1e-6));
  // Passes quicker than the ops alone with no host time: h clamped at 0.
  DeviceFigures none = stage1;
  none.host_op_s = 0;
  const HostFit quick = fit_host_op(w, passes_of(w, none, 0.8), stage1, OpOptions{Precision::FP32});
  CHECK(quick.host_op_s >= 0);
  CHECK(quick.host_op_s < 1e-9);
}

TEST_CASE("calibrate ops: stage 2 on an asynchronous device searches the host time", "[calib][ops][stage2]") {
  // A launch-bound GPU pass (vit_fmnist_tiny's ops are small): the host time shows in the pass's end.
  const Workload w = build_workload(vit_preset("vit_fmnist_tiny"));
  DeviceFigures truth = gpu_truth();
  truth.host_op_s = 2e-5;
  std::vector<PassSample> passes;
  for (int b : {16, 64})
    passes.push_back({b, run_ops(pass_ops(w, b, OpOptions{Precision::FP32}), truth).end_s});
  DeviceFigures stage1 = gpu_truth();
  stage1.host_op_s = 1e-6;
  const HostFit h = fit_host_op(w, passes, stage1, OpOptions{Precision::FP32});
  CHECK(h.speed == 1);
  CHECK(h.host_op_s == Approx(truth.host_op_s).epsilon(1e-3));
  CHECK(h.max_rel_residual < 1e-3);
}

TEST_CASE("calibrate ops: stage 2 refuses what it cannot fit", "[calib][ops][stage2][negative]") {
  const Workload w = build_workload(vit_preset("vit_fmnist_tiny"));
  CHECK_THROWS_WITH(fit_host_op(w, {}, cpu_truth(), OpOptions{}), "host time fit: no whole-pass measurement");
  CHECK_THROWS_WITH(fit_host_op(w, {{64, 0.0}}, cpu_truth(), OpOptions{}),
                    "host time fit: the pass at micro-batch 64 measured in 0 s; times must be positive");
}

TEST_CASE("calibrate ops: the kernel-family sweeps give each family's cost per element and per row",
          "[calib][ops][kinds]") {
  // Softmax on a CPU: exp per element and a reduction set-up per row (here 1.5 ns and 60 ns, the order
  // measured on this project's VM: docs/model.md); GELU's erf per element only. Against the
  // truth's norm bandwidth (6e10 x 0.15 = 9 GB/s: 0.9 ns an element for softmax's 8 bytes) both bind.
  DeviceFigures truth = cpu_truth();
  truth.kinds[static_cast<size_t>(OpKind::Softmax)] = {1.5e-9, 6e-8, 0};
  truth.kinds[static_cast<size_t>(OpKind::GeluBwd)] = {3e-9, 0, 0};
  const auto samples = samples_of(calibration_ops(), truth, false);
  int softmax_sweeps = 0;
  for (const auto& s : samples)
    softmax_sweeps += s.op.kind == OpKind::Softmax && s.op.name.rfind("sweep.", 0) == 0;
  CHECK(softmax_sweeps == 6);  // row lengths 17, 65 and 197 at two sizes
  const OpModelCalibration f = fit_op_model(samples, start_from(truth));
  const auto& sm = f.figures.kinds[static_cast<size_t>(OpKind::Softmax)];
  // The sweeps' times also hold the host time per op (6 us on ~0.4-10 ms): within 2%.
  CHECK(sm.elem_s == Approx(1.5e-9).epsilon(0.02));
  CHECK(sm.row_s == Approx(6e-8).epsilon(0.02));
  CHECK(f.figures.kinds[static_cast<size_t>(OpKind::GeluBwd)].elem_s == Approx(3e-9).epsilon(0.02));
  // A family whose sweeps are bound by their bytes gets a cost no larger than its bytes time: the
  // prediction of the model's own ops keeps the bandwidth.
  const Workload w = build_workload(vit_preset("vit_cifar_tiny"));
  double worst = 0;
  for (const Op& op : pass_ops(w, 32, OpOptions{}))
    worst = std::max(worst, std::abs(op_sample_time(op, f.figures) / op_sample_time(op, truth) - 1));
  CHECK(worst < 0.03);
}
