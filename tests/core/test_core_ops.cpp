// The operator-level compute model (core/model/ops.hpp) and the framework step ops
// (core/model/framework.hpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "vitsim/core/model/framework.hpp"
#include "vitsim/core/model/ops.hpp"
#include "vitsim/core/model/vit.hpp"

using namespace vitsim;

namespace {
// A device that is purely compute-bound for matmuls (infinite bandwidth, no fixed costs).
DeviceFigures compute_only(double peak, int sms, int tile) {
  DeviceFigures d;
  d.device_type = "test";
  d.peak_flops = peak;
  d.mem_bw = 1e30;
  d.sm_count = sms;
  d.tile_m = d.tile_n = tile;
  return d;
}
Op gemm(double m, double n, double k) {
  return matmul_op("gemm", Pass::Fwd, OpClass::Gemm, 1, m, n, k, 0);
}
}  // namespace

TEST_CASE("ops: matmul FLOPs add up to the per-layer totals (which match the published MACs)", "[ops]") {
  // The layer table's FLOPs (test_core_workload: within 2% of timm's MACs) are the GEMMs and attention
  // matmuls; the op decomposition must account for exactly those, forward and backward, at any batch.
  for (const char* preset : {"vit_b_16", "vit_tiny_patch16_224", "vit_cifar_tiny", "vit_fmnist_tiny"}) {
    for (Precision p : {Precision::FP32, Precision::FP16}) {
      for (int b : {1, 7, 64}) {
        INFO(preset << " " << precision_name(p) << " b=" << b);
        const Workload w = build_workload(vit_preset(preset));
        for (int l = 0; l < static_cast<int>(w.layers.size()); ++l) {
          double fwd = 0, bwd = 0;
          for (const Op& op : layer_ops(w, l, b, OpOptions{p})) {
            CHECK(op.layer == l);
            if (!is_matmul(op)) CHECK(op.flops == 0);
            (op.pass == Pass::Fwd ? fwd : bwd) += op.flops;
          }
          CHECK(fwd == Approx(b * w.layers[l].fwd_flops).epsilon(1e-12));
          CHECK(bwd == Approx(b * w.layers[l].bwd_flops).epsilon(1e-12));
        }
      }
    }
  }
}

TEST_CASE("ops: the math attention path moves the B x H x S x S scores, the fused path does not", "[ops]") {
  ViTConfig c = vit_preset("vit_b_16");
  auto score_bytes = [](const ViTConfig& cfg, int b) {
    const Workload w = build_workload(cfg);
    double bytes = 0;
    for (const Op& op : layer_ops(w, 1, b, OpOptions{Precision::FP32}))
      if (!is_matmul(op)) bytes += op.bytes;
    return bytes;
  };
  // fp32 math path: softmax reads and writes the scores (8 B each), its backward reads two and writes one
  // (12 B): 20 B per score element beyond the fused path's traffic, which has none of them. The score
  // matmuls' own reads/writes of S x S are counted in the matmul ops.
  const double S = 1.0 * 8 * c.heads * c.tokens() * c.tokens();
  const double math = score_bytes(c, 8);
  c.attention = AttentionPath::Fused;
  const double fused = score_bytes(c, 8);
  CHECK(math - fused >= 20 * S);
  CHECK(math - fused < 20 * S + 8.0 * 8 * c.tokens() * c.width * 4 * 4);  // + layout copies of [b T d] only
}

TEST_CASE("ops: chunk's backward is one cat and two layout copies and out_layout's backward copies nothing",
          "[ops]") {
  // What LibTorch 1.13's autograd runs for the math path (core/src/model/ops.cpp): SplitBackward's cat of the
  // three [T, b, d] gradients, view's backward copying the q and v gradients out of [B H, T, hd], k's
  // gradient a view; the output layout's contiguous and transpose pass the gradient on as a view.
  const ViTConfig c = vit_preset("vit_b_16");
  const Workload w = build_workload(c);
  const int b = 4;
  const double R = 1.0 * b * c.tokens(), d = c.width;
  std::map<std::string, Op> ops;
  for (const Op& op : layer_ops(w, 1, b, OpOptions{Precision::FP32})) ops[op.name] = op;
  REQUIRE(ops.count("block0.attn.qkv_split_bwd"));
  CHECK(ops["block0.attn.qkv_split_bwd"].kernels == 1);
  CHECK(ops["block0.attn.qkv_split_bwd"].bytes == 6 * R * d * 4);
  REQUIRE(ops.count("block0.attn.qv_grad_layout"));
  CHECK(ops["block0.attn.qv_grad_layout"].kernels == 2);
  CHECK(ops["block0.attn.qv_grad_layout"].bytes == 4 * R * d * 4);
  CHECK(ops["block0.attn.qv_grad_layout"].pass == Pass::Bwd);
  CHECK(ops.count("block0.attn.out_layout") == 1);
  CHECK(ops.count("block0.attn.out_layout_bwd") == 0);
}

TEST_CASE("ops: a GEMM one tile past k full waves pays a whole extra wave", "[ops][waves]") {
  // NVIDIA's Matrix Multiplication Background guide (docs/sources.md): tiles run in waves of one tile per
  // SM; a partial last wave takes as long as a full one. 80 SMs, 128x128 tiles, n = one tile column.
  const DeviceFigures d = compute_only(100e12, 80, 128);
  const double k = 4096;
  const Op full = gemm(128.0 * 160, 128, k);  // 160 tiles = exactly 2 waves
  const Op more = gemm(128.0 * 161, 128, k);  // 161 tiles = 3 waves, the last with 1 tile
  CHECK(shape_efficiency(full, d) == Approx(1.0));
  CHECK(shape_efficiency(more, d) == Approx(161.0 / 240.0));
  // Time is proportional to waves: 2 -> 3.
  CHECK(op_device_time(more, d) / op_device_time(full, d) == Approx(1.5));
  // A partial tile costs a whole tile: m = 128 x 160 + 1 rows is 161 tiles too.
  CHECK(op_device_time(gemm(128.0 * 160 + 1, 128, k), d) == Approx(op_device_time(more, d)));
}

TEST_CASE("ops: split-K gives idle SMs a share of a weight-gradient GEMM's long K", "[ops][waves]") {
  const DeviceFigures d = compute_only(100e12, 80, 128);
  // m x n = 768 x 768: 36 tiles on 80 SMs; K = 64 x 197 rows. floor(80 / 36) = 2 slices of K.
  const Op wgrad = gemm(768, 768, 64.0 * 197);
  CHECK(shape_efficiency(wgrad, d) == Approx(72.0 / 80.0));
  // Short K cannot be split below 256 per slice.
  CHECK(shape_efficiency(gemm(768, 768, 300), d) == Approx(36.0 / 80.0));
}

TEST_CASE("ops: short K lowers a GEMM's efficiency by k / (k + k_half)", "[ops]") {
  DeviceFigures d = compute_only(100e12, 1, 64);
  d.gemm_k_half = 64;
  CHECK(shape_efficiency(gemm(64, 64, 64), d) == Approx(0.5));
  CHECK(shape_efficiency(gemm(64, 64, 192), d) == Approx(0.75));
}

TEST_CASE("ops: a narrow output lowers a GEMM's efficiency by min(m, n) / (min(m, n) + n_half)", "[ops]") {
  DeviceFigures d = compute_only(100e12, 1, 32);
  d.gemm_n_half = 32;
  CHECK(shape_efficiency(gemm(4096, 32, 1024), d) == Approx(0.5));   // n the narrow side
  CHECK(shape_efficiency(gemm(96, 4096, 1024), d) == Approx(0.75));  // m the narrow side (a weight gradient)
  d.gemm_k_half = 1024;                                              // both: the product
  CHECK(shape_efficiency(gemm(4096, 32, 1024), d) == Approx(0.25));
}

TEST_CASE("ops: time per op is the larger of its compute and memory times plus the kernel cost", "[ops]") {
  DeviceFigures d = compute_only(1e12, 1, 1);
  d.mem_bw = 1e9;
  d.mem_efficiency = 0.5;
  d.gemm_efficiency = 0.25;
  d.kernel_s = 5e-6;
  const Op mem = memory_op("mem", Pass::Fwd, 1e6, 2);
  CHECK(op_device_time(mem, d) == Approx(1e6 / 0.5e9 + 2 * 5e-6));
  Op g = gemm(1000, 1000, 1000);  // 2 GFLOP at 0.25 TFLOP/s = 8 ms; no bytes
  CHECK(op_device_time(g, d) == Approx(8e-3 + 5e-6));
  g.bytes = 1e8;  // 100 MB at 0.5 GB/s = 200 ms: memory-bound
  CHECK(op_device_time(g, d) == Approx(0.2 + 5e-6));
}

TEST_CASE("ops: an asynchronous device is launch-bound when the host issues slower than it runs",
          "[ops][timeline]") {
  DeviceFigures d = compute_only(1e12, 1, 1);
  d.mem_bw = 1e9;
  std::vector<Op> ops(100);
  for (auto& op : ops) op.bytes = 1e3;  // 1 us of device time each
  d.host_op_s = 10e-6;
  Timeline t = run_ops(ops, d);
  // Host-bound: every op waits to be issued; the last ends 1 us after its issue at 100 x 10 us.
  CHECK(t.end_s == Approx(100 * 10e-6 + 1e-6));
  d.host_op_s = 0.1e-6;
  t = run_ops(ops, d);
  // Device-bound: the device runs back to back after the first issue.
  CHECK(t.end_s == Approx(0.1e-6 + 100 * 1e-6));
  // A synchronous device (CPU) pays both.
  d.async = false;
  t = run_ops(ops, d);
  CHECK(t.end_s == Approx(100 * (0.1e-6 + 1e-6)));
  // A host sync makes the host wait for the device, then pay the sync.
  d.async = true;
  d.host_op_s = 0.1e-6;
  d.sync_s = 20e-6;
  ops[49].host_sync = true;
  t = run_ops(ops, d);
  CHECK(t.end_s == Approx((0.1e-6 + 50 * 1e-6) + 20e-6 + 0.1e-6 + 50 * 1e-6));
}

TEST_CASE("framework: DeepSpeed fp16 adds one host sync per parameter tensor plus eight",
          "[ops][framework]") {
  // DeepSpeed v0.12.6 (docs/model.md): utils.py CheckOverflow.has_overflow_serial syncs once per
  // gradient tensor (float(x.float().sum())); FP16_Optimizer.step adds 5 (overflow flag copy and .item(),
  // the norm's .item(), FloatTensor copy and [0].item()); engine.backward's loss .item() and
  // ThroughputTimer's two cuda.synchronize() add 3 per step in fp16 and fp32 alike. vit_b_16 has
  // 12 x 12 + 8 = 152 parameter tensors: 160 syncs in fp16, 3 in fp32.
  const Workload w = build_workload(vit_preset("vit_b_16"));
  REQUIRE(parameter_tensors(w.model).size() == 152);
  double sum = 0;
  for (double n : parameter_tensors(w.model)) sum += n;
  CHECK(sum == w.total_params());
  StepInputs in{Framework::DeepSpeed, Precision::FP16, "adamw", 8, 0};
  CHECK(host_syncs(step_ops(w, in)) == 152 + 8);
  in.precision = Precision::FP32;
  CHECK(host_syncs(step_ops(w, in)) == 3);
  in.framework = Framework::Vitsim;
  CHECK(host_syncs(step_ops(w, in)) == 0);
  in.framework = Framework::Ddp;
  CHECK(host_syncs(step_ops(w, in)) == 0);
}

TEST_CASE("framework: names and errors", "[ops][framework]") {
  CHECK(parse_framework("ddp") == Framework::Ddp);
  CHECK_THROWS_WITH(parse_framework("horovod"), "unknown framework 'horovod'; valid: vitsim, deepspeed, ddp");
  CHECK_THROWS_WITH(parse_attention_path("flash"), "unknown attention path 'flash'; valid: math, fused");
}

TEST_CASE("ops: a kernel family's per-element and per-row cost bounds a memory op below its bandwidth",
          "[ops][kinds]") {
  // vit_cifar_tiny (32 px, patch 4: T = 65 tokens, width 192, 3 heads) at micro-batch 8.
  const Workload w = build_workload(vit_preset("vit_cifar_tiny"));
  int attn = -1;
  for (int l = 0; l < static_cast<int>(w.layers.size()) && attn < 0; ++l)
    if (w.layers[l].kind == LayerKind::Attention) attn = l;
  const std::vector<Op> ops = layer_ops(w, attn, 8, OpOptions{});
  const Op* softmax = nullptr;
  for (const auto& op : ops)
    if (op.kind == OpKind::Softmax) softmax = &op;
  REQUIRE(softmax);
  const double T = 65, rows = 8 * 3 * T;  // one row per query of every head of every sample
  CHECK(softmax->elems == rows * T);
  CHECK(softmax->rows == rows);
  CHECK(softmax->bytes == rows * T * 8);  // fp32 in, fp32 out
  DeviceFigures d = compute_only(1e12, 1, 1);
  d.mem_bw = 1e10;
  d.norm_efficiency = 0.5;
  // Without family figures: its bytes at the norm class's share of the bandwidth.
  CHECK(op_device_time(*softmax, d) == Approx(softmax->bytes / 5e9));
  // exp and the row reductions: 2 ns an element and 50 ns a row exceed 1.6 ns an element of bytes.
  d.kinds[static_cast<size_t>(OpKind::Softmax)] = {2e-9, 5e-8, 0};
  CHECK(op_device_time(*softmax, d) == Approx(rows * T * 2e-9 + rows * 5e-8));
  // A fast family stays bound by its bytes: the larger of the two.
  d.kinds[static_cast<size_t>(OpKind::Softmax)] = {1e-10, 0, 0};
  CHECK(op_device_time(*softmax, d) == Approx(softmax->bytes / 5e9));
  // Other families are not touched by the softmax's figures.
  for (const auto& op : ops)
    if (op.kind == OpKind::None && !is_matmul(op)) CHECK(kind_compute_time(op, d) == 0);
}

TEST_CASE("ops: the patch embedding is a convolution whose own efficiency replaces the GEMM's",
          "[ops][kinds]") {
  const Workload w = build_workload(vit_preset("vit_cifar_tiny"));
  std::map<std::string, Op> by;
  for (const auto& op : layer_ops(w, 0, 16, OpOptions{})) by[op.name] = op;
  REQUIRE(by.count("patch_embed.conv"));
  REQUIRE(by.count("patch_embed.conv.wgrad"));
  const Op& conv = by["patch_embed.conv"];
  CHECK(conv.kind == OpKind::Conv);
  CHECK(by["patch_embed.conv.wgrad"].kind == OpKind::ConvWgrad);
  CHECK(by["patch_embed.cat_class_token"].kind == OpKind::Strided);
  DeviceFigures d = compute_only(1e12, 1, 1);
  d.gemm_efficiency = 0.8;
  const double as_gemm = op_device_time(conv, d);
  CHECK(as_gemm == Approx(conv.flops / (1e12 * 0.8 * shape_efficiency(conv, d))));
  d.kinds[static_cast<size_t>(OpKind::Conv)].efficiency =
      0.2;  // a convolution kernel at a quarter of the GEMM's rate
  CHECK(op_device_time(conv, d) == Approx(as_gemm * 0.8 / 0.2));
  CHECK(op_device_time(by["patch_embed.conv.wgrad"], d) ==
        Approx(by["patch_embed.conv.wgrad"].flops /
               (1e12 * 0.8 * shape_efficiency(by["patch_embed.conv.wgrad"], d))));
}

TEST_CASE("ops: kind names round-trip and an unknown one lists the valid names", "[ops][kinds]") {
  for (int k = 0; k < kOpKinds; ++k)
    CHECK(parse_op_kind(op_kind_name(static_cast<OpKind>(k))) == static_cast<OpKind>(k));
  CHECK_THROWS_WITH(
      parse_op_kind("softmx"),
      "unknown op kind 'softmx'; valid: none, strided, reduce, softmax, softmax_bwd, layer_norm, "
      "layer_norm_bwd, gelu, gelu_bwd, conv, conv_wgrad");
}

TEST_CASE("ops: every op of the layer table carries its identity, and a linear's ops their layer",
          "[ops][id]") {
  // `vitsim calibrate` rebuilds each op's kernel from its OpId (never from its name): an op left at
  // OpId::Other would be timed as a generic copy.
  ViTConfig dropout = vit_preset("vit_cifar_tiny");
  dropout.dropout = 0.1;
  ViTConfig fused = vit_preset("vit_cifar_tiny");
  fused.attention = AttentionPath::Fused;
  for (const ViTConfig& c : {vit_preset("vit_cifar_tiny"), dropout, fused})
    for (const OpOptions& o :
         {OpOptions{Precision::FP32}, OpOptions{Precision::BF16}, OpOptions{Precision::FP16, false}})
      for (const Op& op : pass_ops(build_workload(c), 8, o)) {
        INFO(op.name);
        CHECK(op.id != OpId::Other);
        const bool of_linear = op.id == OpId::WeightCast || op.id == OpId::Linear || op.id == OpId::GradAcc ||
                               op.id == OpId::BiasGrad || op.id == OpId::Wgrad || op.id == OpId::Dgrad;
        CHECK(of_linear == (op.linear != LinearId::None));
      }
}

// Issue 37, PyTorch 2.x DDP (docs/model.md "PyTorch versions"): torch.optim's AdamW per tensor (1.13),
// foreach (2.x's default) and fused, on one rank of 8, vit_b_16 (152 parameter tensors, P parameters). From
// their formulas (core/src/model/framework_torch.cpp): per tensor 9 kernels a tensor and 92 bytes a
// parameter; foreach 8 `_foreach_*` ops of 84 bytes a parameter in all, each launching max(ceil(152 / depth's
// tensors), ceil(chunks / 320)) kernels or more; fused one op of 28 bytes a parameter (+ the steps'
// increment).
TEST_CASE("framework: ddp's optimizer per tensor, foreach and fused order as their kernels and bytes",
          "[ops][framework][torch]") {
  const Workload w = build_workload(vit_preset("vit_b_16"));
  const std::vector<double> t = parameter_tensors(w.model);
  const double P = w.total_params();
  auto optimizer = [&](const std::string& version, std::optional<OptimizerImpl> impl) {
    StepInputs in{Framework::Ddp, Precision::FP32, "adamw", 8, 0};
    in.torch_version = version;
    in.optimizer_impl = impl;
    std::pair<double, int> bytes_kernels{0, 0};
    for (const Op& op : step_ops(w, in))
      if (op.name.rfind("step.adamw", 0) == 0) {
        bytes_kernels.first += op.bytes;
        bytes_kernels.second += op.kernels;
      }
    return bytes_kernels;
  };
  const auto per_tensor = optimizer("1.13", std::nullopt);  // 1.13's default
  CHECK(per_tensor.first == Approx(92 * P));
  CHECK(per_tensor.second == 9 * 152);
  const auto foreach = optimizer("2.4", std::nullopt);  // 2.x's default
  CHECK(foreach == optimizer("2.4", OptimizerImpl::Foreach));
  CHECK(foreach.first == Approx(84 * P));
  // vit_b_16's 86.6 M parameters in 65,536-element chunks fill 320-block launches at least 4 times an op;
  // depth 1 takes 110 tensors a launch, depth 3 48 (at least ceil(152 / 48) = 4 launches).
  CHECK(multi_tensor_launches(t, 1) >= std::ceil(P / 65536 / 320));
  CHECK(multi_tensor_launches(t, 3) >= 4);
  CHECK(foreach.second < per_tensor.second / 10);
  const auto fused = optimizer("2.4", OptimizerImpl::Fused);
  CHECK(fused.first == Approx(28 * P + 4 * 152));
  CHECK(fused.second == multi_tensor_launches(t, 4) + multi_tensor_launches(std::vector<double>(152, 1), 1));
  // The order the issue expects: fused <= foreach <= per tensor, in bytes and in launches.
  CHECK(fused.first < foreach.first);
  CHECK(foreach.first < per_tensor.first);
  CHECK(fused.second < foreach.second);
  // 1.13 with optimizer_impl foreach: the same foreach ops, and 1.13's zero_ per tensor still.
  CHECK(optimizer("1.13", OptimizerImpl::Foreach) == foreach);
  StepInputs in13{Framework::Ddp, Precision::FP32, "adamw", 8, 0}, in24 = in13;
  in24.torch_version = "2.4";
  auto has_zero_grad = [&](const StepInputs& in) {
    for (const Op& op : step_ops(w, in))
      if (op.name == "step.zero_grad") return true;
    return false;
  };
  CHECK(has_zero_grad(in13));
  CHECK_FALSE(has_zero_grad(in24));  // 2.x: zero_grad(set_to_none=True)
}

TEST_CASE("framework: multi_tensor_apply's launches by hand", "[ops][framework][torch]") {
  // Three tensors of 65,536 elements at depth 1: 3 blocks, one launch (the last chunk of the last tensor).
  CHECK(multi_tensor_launches({65536, 65536, 65536}, 1) == 1);
  // 111 one-element tensors at depth 1: the 110th fills a launch, the 111th is the last: 2.
  CHECK(multi_tensor_launches(std::vector<double>(111, 1), 1) == 2);
  // One tensor of 321 chunks: 320 blocks fill a launch, the rest carries into a second.
  CHECK(multi_tensor_launches({321 * 65536.0}, 4) == 2);
  CHECK_THROWS_WITH(torch_version("3.0"), Catch::Contains("unknown PyTorch version '3.0'; valid: 1.13, 2.0"));
}

TEST_CASE("ops: with the module in half LayerNorm and the residual stream move 2 bytes and the casts go",
          "[ops][cast]") {
  // core/src/model/ops.cpp LayerBuilder: f (LayerNorm in and out, residual stream) is 4 under autocast and 2
  // with the module in half; a (what the GEMMs read and write) is 2 in both. LayerNorm forward moves
  // R d (f + f) + 8 R (fp32 mean and rstd); the residual add R d (f + a + f).
  const Workload w = build_workload(vit_preset("vit_b_16"));
  const int b = 4;
  const double R = b * static_cast<double>(w.model.tokens()), d = w.model.width;
  auto ops_of = [&](bool autocast) {
    std::map<std::string, Op> by_name;
    for (const Op& op : pass_ops(w, b, OpOptions{Precision::FP16, autocast})) by_name.emplace(op.name, op);
    return by_name;
  };
  const auto amp = ops_of(true), half = ops_of(false);
  std::string ln, residual;
  for (const auto& [name, op] : amp) {
    if (op.id == OpId::LayerNorm && ln.empty()) ln = name;
    if (op.id == OpId::Residual && residual.empty()) residual = name;
  }
  REQUIRE(!ln.empty());
  REQUIRE(!residual.empty());
  CHECK(amp.at(ln).bytes == Approx(R * d * (4 + 4) + 8 * R));
  CHECK(half.at(ln).bytes == Approx(R * d * (2 + 2) + 8 * R));
  CHECK(amp.at(residual).bytes == Approx(R * d * (4 + 2 + 4)));
  CHECK(half.at(residual).bytes == Approx(R * d * (2 + 2 + 2)));
  // Autocast's casts (of weights, activations, the image, scores and probabilities, the residual branch's
  // gradient) are there under autocast and absent with the module in half.
  const std::set<OpId> casts{OpId::WeightCast, OpId::ImageCast,    OpId::ActCast,
                             OpId::ActCastBwd, OpId::ScoresCast,   OpId::ScoresCastBwd,
                             OpId::ProbsCast,  OpId::ProbsCastBwd, OpId::ResidualCast};
  auto count_casts = [&](const std::map<std::string, Op>& ops) {
    int n = 0;
    for (const auto& [name, op] : ops) n += casts.count(op.id) ? 1 : 0;
    return n;
  };
  CHECK(count_casts(amp) > 0);
  CHECK(count_casts(half) == 0);
  // The GEMMs' FLOPs are the same either way: only the bytes around them change.
  double amp_flops = 0, half_flops = 0;
  for (const auto& [name, op] : amp) amp_flops += op.flops;
  for (const auto& [name, op] : half) half_flops += op.flops;
  CHECK(half_flops == Approx(amp_flops));
}

TEST_CASE("framework: with the module in half vitsim's and ddp's optimizer move the parameters' dtype",
          "[ops][framework][cast]") {
  // StepInputs::param_bytes 2 (training.cast=module): every tensor torch.optim and the flat optimizer read
  // and write is half, so each closed form of framework.cpp and framework_torch.cpp halves: AdamW per tensor
  // 92 -> 46 bytes a parameter, foreach 84 -> 42, fused 28 -> 14 (its fp32 step counts stay 4 bytes a
  // tensor); SGD 44 -> 22; DDP's bucket copies (in and out) P (4 + 4) -> P (2 + 2) each, zero_grad P 4 ->
  // P 2.
  const Workload w = build_workload(vit_preset("vit_b_16"));
  const double P = w.total_params();
  const double nt = static_cast<double>(parameter_tensors(w.model).size());
  auto bytes = [&](Framework f, const std::string& version, std::optional<OptimizerImpl> impl,
                   const std::string& optimizer, double param_bytes, const std::string& prefix) {
    StepInputs in{f, Precision::FP16, optimizer, 8, 0};
    in.torch_version = version;
    in.optimizer_impl = impl;
    in.param_bytes = param_bytes;
    double sum = 0;
    for (const Op& op : step_ops(w, in))
      if (op.name.rfind(prefix, 0) == 0) sum += op.bytes;
    return sum;
  };
  CHECK(bytes(Framework::Ddp, "1.13", std::nullopt, "adamw", 2, "step.adamw") == Approx(46 * P));
  CHECK(bytes(Framework::Ddp, "2.4", std::nullopt, "adamw", 2, "step.adamw") == Approx(42 * P));
  CHECK(bytes(Framework::Ddp, "2.4", OptimizerImpl::Fused, "adamw", 2, "step.adamw") ==
        Approx(14 * P + 4 * nt));
  CHECK(bytes(Framework::Ddp, "1.13", std::nullopt, "sgd", 2, "step.sgd") == Approx(22 * P));
  CHECK(bytes(Framework::Ddp, "1.13", std::nullopt, "adamw", 2, "step.bucket_copy_in") == Approx(4 * P));
  CHECK(bytes(Framework::Ddp, "1.13", std::nullopt, "adamw", 2, "step.zero_grad") == Approx(2 * P));
  CHECK(bytes(Framework::Vitsim, "1.13", std::nullopt, "adamw", 2, "step.adamw") == Approx(46 * P));
  CHECK(bytes(Framework::Vitsim, "1.13", std::nullopt, "adamw", 2, "step.grad_average") == Approx(4 * P));
  // The whole step, vitsim's and ddp's: exactly half of autocast's (no fixed-size op in them but fused's
  // step counts).
  for (Framework f : {Framework::Vitsim, Framework::Ddp})
    CHECK(bytes(f, "1.13", std::nullopt, "adamw", 2, "step.") ==
          Approx(bytes(f, "1.13", std::nullopt, "adamw", 4, "step.") / 2));
  // DeepSpeed's step keeps its fp32 master whatever param_bytes says.
  CHECK(bytes(Framework::DeepSpeed, "1.13", std::nullopt, "adamw", 2, "step.") ==
        Approx(bytes(Framework::DeepSpeed, "1.13", std::nullopt, "adamw", 4, "step.")));
}
