// DeepSpeed's optimizer step where it partitions the optimizer: BF16_Optimizer (bf16 at ZeRO-0),
// DeepSpeedZeroOptimizer (ZeRO 1 and 2) and DeepSpeedZeroOptimizer_Stage3 (ZeRO 3), as microsoft/DeepSpeed
// v0.14.4 (commit d254d75e) runs them with its defaults: contiguous_gradients, reduce_scatter and
// use_multi_rank_bucket_allreduce true, overlap_comm as the scenario says, PyTorch >= 1.13 (so
// all_gather_into_tensor). The kernels and host syncs are here; the collectives they issue are the
// simulator's (sim/src/point/step_shape.cpp). Each function named is in docs/sources.md "Kernels, framework
// steps and the op model"; docs/model.md "Framework step" tells the step per configuration.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/step_builder.hpp"

namespace vitsim {
namespace {

struct Sizes {
  double P = 0;   // parameters
  int nt = 0;     // parameter tensors
  double Pp = 0;  // parameters of this rank's partition: P / N
  // Tensors of this rank's partition (a flat partition cuts the tensors in order): ASSUMPTION ceil(nt / N); a
  // partition boundary inside a tensor adds one (range ntp .. ntp + 1).
  int ntp = 0;
  double e = 4;  // bytes of the model's dtype: the engine converts the module (half(), bfloat16()) or not
  bool fp16 = false;
  int accum = 1;  // micro-batches a step
};

int launches(double inputs, double per_launch) {
  return std::max(1, static_cast<int>(std::ceil(inputs / per_launch)));
}

// torch.cat copies its inputs in launches of up to 128 (aten/src/ATen/native/cuda/Shape.cu
// CAT_ARRAY_BATCH_SIZE, docs/sources.md).
constexpr double kCatInputsPerLaunch = 128;

// BF16_Optimizer (runtime/bf16_optimizer.py): bf16 parameters and gradients, fp32 gradient accumulation
// into one flat fp32 buffer, fp32 master weights partitioned over the data-parallel ranks (as ZeRO-1), no
// loss scale and no overflow check.
void bf16_optimizer(StepBuilder& s, const Sizes& z, const StepInputs& in) {
  // backward -> update_hp_grads -> _update_hp_grad per tensor: hp_grad.add_(lp.grad.to(fp32)), a cast
  // (r2 w4) and an add (r4 r4 w4) each, every micro-batch.
  s.mem("update_hp_grads", z.accum * z.P * (2 + 4 + 4 + 4 + 4), 2 * z.nt * z.accum);
  if (in.dp_ranks > 1) {
    // engine.allreduce_gradients -> buffered_allreduce_fallback over get_grads_for_reduction() (the one
    // fp32 buffer) -> allreduce_no_retain -> allreduce_and_copy -> allreduce_bucket: the flatten of one
    // tensor is a view; .to(communication_data_type = bf16), all_reduce (the simulator's), mul_(1/world)
    // (postscale_gradients), copy_ back into fp32; allreduce_and_copy's buf.copy_(synced) is the buffer
    // onto itself (aten copy_'s same-data early exit: no kernel).
    s.mem("grads_to_bf16", z.P * (4 + 2));
    s.mem("grad_average", z.P * (2 + 2));
    s.mem("grads_from_bf16", z.P * (2 + 4));
  }
  // step -> utils.py get_global_norm_of_tensors: per tensor .float() (a no-op on fp32), norm, **2, copy_
  // into its buffer slot, add_ into slot 0 (4 kernels, 3 for the first); then pow(1/2), isinf, isnan,
  // logical_or, masked_fill_. `assert all_groups_norm > 0.`: a comparison and bool(): one sync.
  s.mem("grad_norm", z.P * 4, 4 * z.nt - 1 + 5);
  s.mem("grad_norm_check", 4, 1, /*sync=*/true);
  if (in.gradient_clipping > 0) {
    // clip_tensors_by_global_norm: max_norm / (norm + eps) (2 kernels), `if clip_coef < 1` (a comparison
    // and a sync), a mul_ per tensor (counted every step: the scale applies above the limit, an upper bound).
    s.mem("clip_coef", 4, 3, /*sync=*/true);
    s.mem("clip_grad_scale", z.P * (4 + 4), z.nt);
  }
  // optimizer.step(): FusedAdam over this rank's fp32 partition, its gradient a view of the fp32 buffer.
  fused_adam(s, z.Pp, 4, 0);
  // update_lp_params: the bf16 partition copied from the fp32 one, then all_gather_dp_groups (the
  // simulator's all-gather); clear_hp_grads: zero_ of the fp32 gradient buffer. clear_lp_grads sets the
  // bf16 gradients to None (no kernel).
  s.mem("fp32_to_bf16_partition", z.Pp * (4 + 2));
  s.mem("clear_hp_grads", z.P * 4);
}

// One gradient reduction of DeepSpeedZeroOptimizer (stage_1_and_2.py), every IPG bucket of it:
// reduce_independent_p_g_buckets_and_remove_grads copies each gradient into the IPG buffer
// (contiguous_gradients); reduce_ipg_grads -> average_tensor: tensor.div_(world) over the bucket, then
// (use_multi_rank_bucket_allreduce) one allreduce_and_scatter -> allreduce_and_copy_with_multiple_ranks ->
// allreduce_bucket: flatten of the bucket's slices (torch.cat), all_reduce (the simulator's), copy_ of the
// slices this rank owns; then copy_grads_in_partition copies this rank's gradients out of the bucket.
// ASSUMPTION: a bucket's slices (its tensors, plus one per partition boundary inside one) fit one torch.cat
// launch of 128 inputs (a ViT-L/16 bucket of 50 MB holds a few dozen); a bucket of more takes more launches.
void zero12_reduction(StepBuilder& s, const Sizes& z, const StepInputs& in, int reductions) {
  const double r = reductions;
  const int buckets = std::max(1, in.grad_buckets);
  s.mem("ipg_copy", r * z.P * 2 * z.e, reductions * z.nt);
  s.mem("bucket_average", r * z.P * 2 * z.e, reductions * buckets);
  s.mem("bucket_flatten", r * z.P * 2 * z.e, reductions * buckets);
  s.mem("bucket_copy_back", r * z.Pp * 2 * z.e, reductions * z.ntp);
  s.mem("copy_grads_in_partition", r * z.Pp * 2 * z.e, reductions * z.ntp);
  // independent_gradient_partition_epilogue: from the second reduction of a step the partition's
  // gradients are added to the averaged ones (add_, r e e w e) ...
  if (reductions > 1) s.mem("accumulate_partition", (r - 1) * z.Pp * 3 * z.e, (reductions - 1) * z.ntp);
  // ... and with overlap_comm it ends with get_accelerator().synchronize().
  if (in.overlap)
    for (int i = 0; i < reductions; ++i) s.mem("ipg_epilogue_sync", 0, 0, /*sync=*/true);
}

// DeepSpeedZeroOptimizer.step (stage_1_and_2.py) after its reductions.
void zero12_step(StepBuilder& s, const Sizes& z, const StepInputs& in) {
  if (z.fp16) {
    // check_overflow -> has_overflow -> has_overflow_partitioned_grads_serial: a zeros([1]), per partition
    // gradient _has_inf_or_nan (float, isnan, isinf, logical_or, float, max: r e w4, r4 w1, r4 w1, r2 w1,
    // r1 w4, r4) and +=; .byte(); all_reduce(MAX) of the flag (the simulator's); overflow_gpu[0].item().
    s.mem("overflow_check", z.Pp * (z.e + 26), 1 + 7 * z.ntp + 1);
    s.mem("overflow_item", 1, 1, /*sync=*/true);
  }
  // scaled_global_norm -> get_grad_norm_direct: per partition gradient .double() and norm (r e w8, r8);
  // stack, square, sum, float; all_reduce(SUM) of the norm (the simulator's); pow, isinf, isnan,
  // logical_or; torch.tensor(-1.0, device=...) (a blocking host-to-device copy: a sync); two muls,
  // logical_not and an add; scaled_global_norm's stack and norm; _global_grad_norm's division.
  s.mem("grad_norm", z.Pp * (z.e + 16), 2 * z.ntp + 15);
  s.mem("grad_norm_err_tensor", 4, 1, /*sync=*/true);
  // The partition's gradients flattened (torch.cat) and cast to the fp32 master's dtype.
  if (!in.offload_optimizer) {  // offloaded: flatten, unscale and Adam on the host (offload.cpp)
    s.mem("flatten_partition_grads", z.Pp * 2 * z.e, launches(z.ntp, kCatInputsPerLaunch));
    if (z.e != 4) s.mem("partition_grads_to_fp32", z.Pp * (z.e + 4));
    // unscale_and_clip_grads: with clipping 6 scalar kernels (the clip factor as a tensor, clamp: no
    // sync); the mul_ by 1 / combined_scale always (1.0 without a loss scale).
    if (in.gradient_clipping > 0) s.mem("clip_factor", 4, 6);
    s.mem("unscale_and_clip", z.Pp * (4 + 4));
    fused_adam(s, z.Pp, 4, 0);
  }
  // The bit16 partition copied from the fp32 one (offloaded: from the fp32 partition just brought up by
  // fp32_partition.to(device)); all_gather_dp_groups -> all_gather_into_tensor of the whole flat bit16
  // group (the simulator's; allgather_bucket_size is not used on this path).
  s.mem("fp32_to_bit16_partition", z.Pp * (4 + z.e));
}

// DeepSpeedZeroOptimizer_Stage3 (stage3.py): every micro-batch __add_grad_to_ipg_bucket copies each
// gradient into the IPG buffer; per bucket __reduce_and_partition_ipg_grads -> __avg_scatter_grads ->
// coalesced_collectives.py reduce_scatter_coalesced: torch.cat of every rank's chunk of every gradient,
// div_(world), reduce_scatter_tensor (the simulator's); partition_grads copies (first micro-batch) or adds
// each gradient's partition into the grad partition buffer; independent_gradient_partition_epilogue
// synchronizes the reduce stream (a sync a micro-batch).
void zero3_reductions(StepBuilder& s, const Sizes& z, const StepInputs& in) {
  const double a = z.accum;
  const int buckets = std::max(1, in.grad_buckets);
  const double per_bucket = std::ceil(static_cast<double>(z.nt) / buckets);
  s.mem("ipg_copy", a * z.P * 2 * z.e, z.accum * z.nt);
  s.mem("reduce_scatter_flatten", a * z.P * 2 * z.e,
        z.accum * buckets * launches(in.dp_ranks * per_bucket, kCatInputsPerLaunch));
  s.mem("reduce_scatter_average", a * z.P * 2 * z.e, z.accum * buckets);
  s.mem("partition_grads", z.Pp * (2 * z.e + (a - 1) * 3 * z.e), z.accum * z.nt);
  for (int i = 0; i < z.accum; ++i) s.mem("reduce_stream_sync", 0, 0, /*sync=*/true);
}

// DeepSpeedZeroOptimizer_Stage3.step (one sub-group: sub_group_size 1e9 holds a ViT).
void zero3_step(StepBuilder& s, const Sizes& z, bool offload) {
  if (z.fp16) {
    // has_overflow (partition_gradients): isinf(...).any() and isnan(...).any() over the flat partition
    // buffer with two logical_or_, clone, to(uint8), zero_; all_reduce(MAX) (the simulator's); .item().
    s.mem("overflow_check", z.Pp * 2 * z.e, 9);
    s.mem("overflow_item", 1, 1, /*sync=*/true);
  }
  // _get_norm_groups -> get_grad_norm_direct: per gradient partition .double() and norm(2); stack, pow,
  // sum; all_reduce(SUM) of the double (the simulator's); **(1/2), isinf, isnan, logical_or;
  // torch.tensor(-1.0, device=...) (a sync); two muls, logical_not, an add. utils.py get_global_norm:
  // norm**2 and 0.0 + it, then math.sqrt of the tensor (float(): a sync).
  s.mem("grad_norm", z.Pp * (z.e + 16), 2 * z.nt + 11);
  s.mem("grad_norm_err_tensor", 4, 1, /*sync=*/true);
  s.mem("global_norm_sqrt", 8, 2, /*sync=*/true);
  // _prepare_fp32_grad_for_sub_group: flatten (torch.cat) and .to(fp32); unscale_and_clip_grads: one mul_
  // (the clip factor is a Python float by now); _optimizer_step: FusedAdam; _reassign_or_swap_out_...:
  // the bit16 partition copied from fp32. _post_step all-gathers the persistent parameters (the
  // simulator's).
  if (offload) return;  // flatten, unscale, Adam and the bit16 copy on the host (offload.cpp)
  s.mem("flatten_partition_grads", z.Pp * 2 * z.e, launches(z.nt, kCatInputsPerLaunch));
  if (z.e != 4) s.mem("partition_grads_to_fp32", z.Pp * (z.e + 4));
  s.mem("unscale_and_clip", z.Pp * (4 + 4));
  fused_adam(s, z.Pp, 4, 0);
  s.mem("fp32_to_bit16_partition", z.Pp * (4 + z.e));
}

}  // namespace

void deepspeed_partitioned_step(StepBuilder& s, const std::vector<double>& tensors, const StepInputs& in) {
  Sizes z;
  const int n = std::max(1, in.dp_ranks);
  z.P = std::accumulate(tensors.begin(), tensors.end(), 0.0);
  z.nt = static_cast<int>(tensors.size());
  z.Pp = z.P / n;
  z.ntp = std::max(1, static_cast<int>(std::ceil(static_cast<double>(z.nt) / n)));
  z.e = precision_bytes(in.precision);
  z.fp16 = in.precision == Precision::FP16;
  z.accum = std::max(1, in.grad_accum);
  // utils/timer.py ThroughputTimer.start()/stop(): get_accelerator().synchronize() each, with
  // timers.throughput.synchronized true (its default); engine.backward has no loss .item() since v0.13.3.
  s.mem("throughput_timer_start", 0, 0, /*sync=*/true);
  const DeepSpeedPath path = deepspeed_path(in.precision, in.zero_stage);
  if (path != DeepSpeedPath::Bf16Optimizer)
    // stage_1_and_2.py / stage3.py backward -> loss_scaler.backward(loss.float()): the cast (half models)
    // and loss * scale (1.0 without fp16), every micro-batch.
    s.mem("scaled_loss", z.accum * 8.0, z.accum * (z.e == 4 ? 1 : 2));
  switch (path) {
    case DeepSpeedPath::Bf16Optimizer:
      bf16_optimizer(s, z, in);
      break;
    case DeepSpeedPath::Zero12:
      // ZeRO-2 reduces at every micro-batch (hooks); ZeRO-1 once, at the boundary (reduce_gradients).
      zero12_reduction(s, z, in, in.zero_stage >= 2 ? z.accum : 1);
      zero12_step(s, z, in);
      break;
    case DeepSpeedPath::Zero3:
      zero3_reductions(s, z, in);
      zero3_step(s, z, in.offload_optimizer);
      break;
    case DeepSpeedPath::Zero0:
      break;  // framework.cpp (v0.12.6)
  }
  s.mem("throughput_timer_stop", 0, 0, /*sync=*/true);
}

}  // namespace vitsim
