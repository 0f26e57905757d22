// Issue 25 item 5: DeepSpeed's step as microsoft/DeepSpeed v0.14.4 runs it
// (core/src/model/framework_deepspeed.cpp): the kernels and host syncs of BF16_Optimizer (bf16 at ZeRO-0),
// DeepSpeedZeroOptimizer (ZeRO 1 and 2) and DeepSpeedZeroOptimizer_Stage3 (ZeRO 3), counted from the code for
// ViT-B/16 and ViT-L/16. The collectives they issue: tests/sim/test_step_actions.cpp. Sources:
// docs/sources.md "Kernels, framework steps and the op model".
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "vitsim/core/model/framework.hpp"
#include "vitsim/core/model/memory.hpp"
#include "vitsim/core/model/offload.hpp"
#include "vitsim/core/model/ops.hpp"
#include "vitsim/core/model/vit.hpp"

using namespace vitsim;

namespace {

int kernels(const std::vector<Op>& ops) {
  int n = 0;
  for (const Op& op : ops) n += op.kernels;
  return n;
}

const Op* find_op(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& op : ops)
    if (op.name == "step." + name) return &op;
  return nullptr;
}

// Sizes the counts below are written in: parameters P, tensors nt (torchvision's ViT: 12 per block + 8,
// parameter_tensors), a rank's partition's tensors ntp = ceil(nt / N), FusedAdam's launches over P / N
// (65536 x 320 elements a launch, framework.cpp fused_adam).
struct Model {
  std::string preset;
  int nt;
};
const Model kModels[] = {{"vit_b_16", 12 * 12 + 8}, {"vit_l_16", 24 * 12 + 8}};

StepInputs deepspeed(Precision p, int zero, int ranks) {
  StepInputs in{Framework::DeepSpeed, p, "adamw", ranks, zero};
  in.grad_buckets = 7;
  return in;
}

int adam_launches(double P, int n) {
  return static_cast<int>(std::ceil(P / n / (65536.0 * 320.0)));
}

}  // namespace

TEST_CASE("DeepSpeed bf16 at ZeRO-0 is BF16_Optimizer: no loss scale, no overflow check",
          "[ops][framework][deepspeed]") {
  for (const Model& m : kModels) {
    INFO(m.preset);
    const Workload w = build_workload(vit_preset(m.preset));
    REQUIRE(static_cast<int>(parameter_tensors(w.model).size()) == m.nt);
    const double P = w.total_params();
    const int N = 8, nt = m.nt;
    StepInputs in = deepspeed(Precision::BF16, 0, N);
    REQUIRE(deepspeed_path(in.precision, in.zero_stage) == DeepSpeedPath::Bf16Optimizer);
    const auto ops = step_ops(w, in);
    // Host syncs: ThroughputTimer start() and stop() (utils/timer.py, synchronized by default) and
    // BF16_Optimizer.step's `assert all_groups_norm > 0.` (bool() of a CUDA tensor): 3. No loss .item()
    // (engine.backward since v0.13.3), no overflow check: DeepSpeed's bf16 path has none.
    CHECK(host_syncs(ops) == 3);
    for (const Op& op : ops) CHECK(op.name.find("overflow") == std::string::npos);
    // Kernels: update_hp_grads 2 per tensor (.to(fp32), add_); allreduce_bucket's cast to bf16, mul_(1/N),
    // copy_ back (3); get_global_norm_of_tensors 4 per tensor minus 1 plus 5; the norm check (1);
    // FusedAdam on P / N; the fp32 -> bf16 partition copy and clear_hp_grads' zero_ (2).
    CHECK(kernels(ops) == 2 * nt + 3 + (4 * nt - 1 + 5) + 1 + adam_launches(P, N) + 2);
    // fp32 gradient accumulation reads bf16 and fp32 and writes fp32: 2 + 4 (cast) + 4 + 4 + 4 (add) bytes.
    CHECK(find_op(ops, "update_hp_grads")->bytes == 18 * P);
    // Every micro-batch accumulates; clipping adds clip_tensors_by_global_norm's coefficient (2 kernels and
    // `if clip_coef < 1`: a comparison and a sync) and a mul_ per tensor.
    in.grad_accum = 4;
    in.gradient_clipping = 1.0;
    const auto acc = step_ops(w, in);
    CHECK(host_syncs(acc) == 4);
    CHECK(kernels(acc) == kernels(ops) + 3 * 2 * nt + 3 + nt);
    // One rank: nothing to all-reduce, and its partition is the whole model.
    CHECK(kernels(step_ops(w, deepspeed(Precision::BF16, 0, 1))) ==
          2 * nt + (4 * nt - 1 + 5) + 1 + adam_launches(P, 1) + 2);
  }
}

TEST_CASE("DeepSpeed fp32 and fp16 at ZeRO-0 keep v0.12.6's step", "[ops][framework][deepspeed]") {
  // FP16_Optimizer (framework.cpp): a sync per gradient tensor and 5, plus the engine's 3: nt + 8.
  for (const Model& m : kModels) {
    const Workload w = build_workload(vit_preset(m.preset));
    CHECK(host_syncs(step_ops(w, deepspeed(Precision::FP16, 0, 8))) == m.nt + 8);
    CHECK(host_syncs(step_ops(w, deepspeed(Precision::FP32, 0, 8))) == 3);
  }
}

TEST_CASE("DeepSpeed ZeRO-1 and 2: per-bucket kernels, a partitioned step, syncs by precision and overlap",
          "[ops][framework][deepspeed]") {
  for (const Model& m : kModels) {
    INFO(m.preset);
    const Workload w = build_workload(vit_preset(m.preset));
    const double P = w.total_params();
    const int N = 8, nt = m.nt, ntp = (nt + N - 1) / N, B = 7;
    StepInputs in = deepspeed(Precision::BF16, 1, N);
    const auto z1 = step_ops(w, in);
    // Syncs: the 2 ThroughputTimer syncs and get_grad_norm_direct's torch.tensor(-1.0, device=...) (a
    // blocking host-to-device copy); bf16 has no overflow check.
    CHECK(host_syncs(z1) == 3);
    // Kernels: loss.float() and loss * scale (2); a copy per gradient into the IPG buffer (nt); per bucket
    // average_tensor's div_ and allreduce_bucket's flatten (2 B); the copy_ of this rank's slices and
    // copy_grads_in_partition (2 ntp); get_grad_norm_direct: .double() and norm per partition gradient,
    // then 15 scalar kernels; the err tensor (1); the partition flattened (1 launch: ntp <= 128) and cast
    // to fp32 (1); unscale_and_clip_grads' mul_ (1); FusedAdam; the bit16 partition copy (1).
    CHECK(kernels(z1) == 2 + nt + 2 * B + 2 * ntp + (2 * ntp + 15) + 1 + 1 + 1 + 1 + adam_launches(P, N) + 1);
    // fp16: has_overflow_partitioned_grads_serial (zeros, 7 per partition gradient, .byte()) and
    // overflow_gpu[0].item() (a sync).
    in.precision = Precision::FP16;
    const auto f16 = step_ops(w, in);
    CHECK(host_syncs(f16) == 4);
    CHECK(kernels(f16) == kernels(z1) + (1 + 7 * ntp + 1) + 1);
    // ZeRO-2 with 4 micro-batches and overlap_comm: a reduction every micro-batch, each epilogue ending in
    // get_accelerator().synchronize(); from the second on, the partition's gradients are added (ntp each).
    in = deepspeed(Precision::BF16, 2, N);
    in.grad_accum = 4;
    in.overlap = true;
    const auto z2 = step_ops(w, in);
    CHECK(host_syncs(z2) == 3 + 4);
    CHECK(kernels(z2) == kernels(z1) + 3 * (2 + nt + 2 * B + 2 * ntp) + 3 * ntp);
    // ZeRO-1 with the same accumulation reduces once, at the boundary.
    in.zero_stage = 1;
    CHECK(host_syncs(step_ops(w, in)) == 3 + 1);
  }
}

TEST_CASE("DeepSpeed ZeRO-3: reduce-scatter kernels every micro-batch, a stream sync each, norm syncs",
          "[ops][framework][deepspeed]") {
  for (const Model& m : kModels) {
    INFO(m.preset);
    const Workload w = build_workload(vit_preset(m.preset));
    const double P = w.total_params();
    const int N = 8, nt = m.nt, B = 7;
    StepInputs in = deepspeed(Precision::BF16, 3, N);
    const auto z3 = step_ops(w, in);
    // Syncs: ThroughputTimer's 2; independent_gradient_partition_epilogue's reduce stream synchronize (1 a
    // micro-batch); get_grad_norm_direct's torch.tensor(-1.0, device=...) and get_global_norm's math.sqrt
    // of a tensor (float(): a sync).
    CHECK(host_syncs(z3) == 2 + 1 + 2);
    // Kernels: loss cast and scale (2); the IPG copy per gradient (nt); per bucket reduce_scatter_coalesced's
    // torch.cat of N chunks of each of its ceil(nt / B) gradients (launches of 128 inputs) and div_ (1);
    // partition_grads' copy per gradient (nt); the norm: 2 per gradient partition + 11; the err tensor (1);
    // get_global_norm's pow and add (2); the flatten of nt partitions (ceil(nt / 128)) and the cast to
    // fp32 (1); unscale (1); FusedAdam; the bit16 copy (1).
    const int cat = static_cast<int>(std::ceil(N * std::ceil(static_cast<double>(nt) / B) / 128.0));
    const int flat = (nt + 127) / 128;
    CHECK(kernels(z3) ==
          2 + nt + B * (cat + 1) + nt + (2 * nt + 11) + 1 + 2 + flat + 1 + 1 + adam_launches(P, N) + 1);
    // fp16 adds has_overflow's 9 kernels over the flat partition buffer and the flag's .item().
    in.precision = Precision::FP16;
    CHECK(host_syncs(step_ops(w, in)) == 2 + 1 + 2 + 1);
  }
}

TEST_CASE("DeepSpeed's wrapper follows the precision and the ZeRO stage", "[ops][framework][deepspeed]") {
  // engine.py _do_optimizer_sanity_check (v0.14.4): ZeRO enabled -> ZERO_OPTIMIZATION (bf16 at ZeRO-1 takes
  // BF16_Optimizer only with grad_accum_dtype fp32, not DeepSpeed's default under ZeRO); bf16 without ZeRO
  // -> BFLOAT16; fp16 -> FP16; fp32 -> the bare optimizer.
  CHECK(deepspeed_path(Precision::FP32, 0) == DeepSpeedPath::Zero0);
  CHECK(deepspeed_path(Precision::FP16, 0) == DeepSpeedPath::Zero0);
  CHECK(deepspeed_path(Precision::BF16, 0) == DeepSpeedPath::Bf16Optimizer);
  for (Precision p : {Precision::FP32, Precision::FP16, Precision::BF16}) {
    CHECK(deepspeed_path(p, 1) == DeepSpeedPath::Zero12);
    CHECK(deepspeed_path(p, 2) == DeepSpeedPath::Zero12);
    CHECK(deepspeed_path(p, 3) == DeepSpeedPath::Zero3);
  }
}

TEST_CASE("BF16_Optimizer's memory: fp32 gradients beside the bf16 ones, a partitioned master",
          "[memory][deepspeed]") {
  // bf16_optimizer.py _setup_for_real_optimizer (v0.14.4): bf16 parameters (2P); the bf16 gradients (2P,
  // alive until the next backward's clear_lp_grads) and the flat fp32 gradient buffer (4P); the fp32
  // master partition and AdamW's two moments over N ranks ((4 + 8) P / N); allreduce_bucket's bf16 copy of
  // the whole buffer (2P) as the communication buffer.
  const Workload w = build_workload(vit_preset("vit_l_16"));
  const double P = w.total_params();
  MemoryInputs in;
  in.precision = Precision::BF16;
  in.dp_ranks = 8;
  in.bucket_bytes = 50e6;
  in.bf16_optimizer = true;
  const MemoryBreakdown m = memory_per_gpu(w, in);
  CHECK(m.params == 2 * P);
  CHECK(m.grads == 6 * P);
  CHECK(m.optimizer == Approx(12 * P / 8).epsilon(1e-12));
  CHECK(m.buffers == 2 * P);
}

TEST_CASE("ZeRO-Offload: the step's host work, PCIe bytes and memory, by DeepSpeed v0.14.4's copies",
          "[deepspeed][offload]") {
  // P = 1e9 parameters over N = 4 ranks: a partition of 2.5e8; bf16 (e = 2); A = 2 micro-batches.
  OffloadInputs in;
  in.optimizer_device = "cpu";
  in.zero_stage = 2;
  in.dp_ranks = 4;
  in.precision = Precision::BF16;
  in.grad_accum = 2;
  in.params = 1e9;
  in.pcie_bw = 25e9;
  in.host_cores = 10;
  const OffloadStep z2 = offload_step(in);
  // stage_1_and_2.py: x Pp x e up and down (the host's accumulated gradients), Pp x 4 down at the
  // boundary (fp32) and Pp x 4 up (fp32_partition.to(device)): 2.5e8 x 2 + 2.5e8 x 4 = 1.5e9 each way.
  CHECK(z2.d2h_bytes == Approx(1.5e9));
  CHECK(z2.h2d_bytes == Approx(1.5e9));
  CHECK(z2.pcie_s == Approx(3e9 / 25e9));
  // CPU Adam: 2.5e8 / (8.1e7 a core x 10 cores) (offload.hpp kCpuAdamParamsPerCoreS).
  CHECK(z2.cpu_adam_s == Approx(2.5e8 / (kCpuAdamParamsPerCoreS * 10)));
  CHECK(z2.nvme_s == 0);
  // Host: the fp32 master, Adam's two moments and the fp32 gradients, 16 bytes a partition parameter.
  CHECK(z2.host_bytes == Approx(2.5e8 * 16));
  // ZeRO-3 with the parameters offloaded too: A x Pp x 4 down; no bit16 copy up after the step, the
  // partition up before each forward and backward gather: 2 x A x Pp x e = 2e9.
  in.zero_stage = 3;
  in.param_device = "cpu";
  const OffloadStep z3 = offload_step(in);
  CHECK(z3.d2h_bytes == Approx(2 * 2.5e8 * 4));
  CHECK(z3.h2d_bytes == Approx(2 * 2 * 2.5e8 * 2));
  CHECK(z3.host_bytes == Approx(2.5e8 * 16 + 2.5e8 * 2));
  // NVMe: the optimizer state (12 bytes a parameter) swapped in and out each step, 8 ranks a drive.
  in.param_device = "none";
  in.optimizer_device = "nvme";
  in.ranks_per_node = 8;
  CHECK(offload_step(in).nvme_bytes == Approx(8 * 2 * 2.5e8 * 12));
  CHECK(offload_step(in).nvme_s == Approx(8 * 2 * 2.5e8 * 12 / kNvmeBytesPerS));
  // Where DeepSpeed uses none: ZeRO-0 (no ZeRO optimizer), offload_param below ZeRO-3.
  in.zero_stage = 0;
  CHECK(offload_step(in).seconds() == 0);
  CHECK(!offloads_params("cpu", 2));
  CHECK(offloads_optimizer("cpu", 1));
}

TEST_CASE("ZeRO-Offload moves the optimizer state (and ZeRO-3's parameters) off the GPU",
          "[deepspeed][offload][memory]") {
  const Workload w = build_workload(vit_preset("vit_b_16"));
  MemoryInputs mi;
  mi.precision = Precision::BF16;
  mi.zero_stage = 3;
  mi.dp_ranks = 8;
  const MemoryBreakdown on_gpu = memory_per_gpu(w, mi);
  mi.offload_optimizer = true;
  mi.offload_params = true;
  const MemoryBreakdown off = memory_per_gpu(w, mi);
  CHECK(on_gpu.optimizer > 0);
  CHECK(off.optimizer == 0);
  CHECK(off.params == 0);
  CHECK(off.grads == on_gpu.grads);
  CHECK(off.buffers == on_gpu.buffers);  // the gathered layer stays
}
