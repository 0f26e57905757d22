#pragma once
// Gradient buckets: which parameter tensors' gradients are reduced together, in what order. One layout,
// used by the simulator (sim/src/point/simulate.cpp) and by the real trainer (real/src/trainer/trainer.cpp),
// so that `vitsim validate` compares the same buckets. The rules are the frameworks' own (docs/sources.md):
//   DDP (PyTorch 1.13, torch/csrc/distributed/c10d/reducer.cpp compute_bucket_assignment_by_size, as
//   rebuilt after the first iteration in gradient-ready order): add the tensor, then close the bucket
//   once its bytes reach the cap (>=); the first bucket's cap is _DEFAULT_FIRST_BUCKET_BYTES (1 MiB).
//   vitsim's trainer: DDP's rule with the one limit {cap} (no smaller first bucket), so that a small
//   bucket_size cuts a small model into several buckets (validate-netns: 64 KiB).
//   DeepSpeed ZeRO-1/2 (deepspeed/runtime/zero/stage_1_and_2.py
//   reduce_independent_p_g_buckets_and_remove_grads): before adding a tensor, close the bucket if the
//   tensor would take it past reduce_bucket_size elements (>); a bucket never passes the cap unless one
//   tensor alone does.
//   DeepSpeed ZeRO-0 (deepspeed/runtime/engine.py allreduce_no_retain): add the tensor, then close the
//   bucket once its elements pass the cap (>).
//   DeepSpeed ZeRO-0 in bf16 (v0.14.4 BF16_Optimizer): the gradients accumulate into one flat fp32 buffer,
//   and buffered_allreduce_fallback reduces that one tensor (get_grads_for_reduction): one bucket whatever
//   the cap.
#include <optional>
#include <string>
#include <vector>

#include "vitsim/core/model/framework.hpp"
#include "vitsim/core/model/vit.hpp"

namespace vitsim {

enum class BucketRule { Vitsim, DdpReducer, DeepSpeedIpg, DeepSpeedAllreduce, DeepSpeedFlat };
// "vitsim", "ddp", "deepspeed-ipg", "deepspeed-allreduce", "deepspeed-flat"
const char* bucket_rule_name(BucketRule r);

// DDP's dist._DEFAULT_FIRST_BUCKET_BYTES (c10d kDefaultFirstBucketBytes = 1024 * 1024).
inline constexpr double kDdpFirstBucketBytes = 1024.0 * 1024.0;

struct GradBucket {
  int begin = 0, end = 0;  // tensor indices [begin, end) in gradient-ready order
  double elements = 0;
  double bytes = 0;  // elements x the communication dtype's element size
  bool operator==(const GradBucket& o) const = default;
};

// Cuts `tensors` (element counts in gradient-ready order) into buckets by `rule`, with `cap_bytes` the
// bucket cap and `elem_bytes` the communication dtype's element size. Every tensor lands in exactly one
// bucket, buckets in ready order. Throws Error when cap_bytes or elem_bytes is not positive.
std::vector<GradBucket> bucket_layout(const std::vector<double>& tensors, double cap_bytes, double elem_bytes,
                                      BucketRule rule);

// The model's parameter tensors in gradient-ready order: the trainer's registration order
// (parameter_tensors() with the patch embedding's class token and position embedding before its convolution)
// reversed, the order DDP's rebuilt Reducer and DeepSpeed's IPG hooks see them in a ViT's backward.
std::vector<double> gradient_ready_tensors(const ViTConfig& m);
// The Workload layer (core/model/vit.hpp: patch_embed, block{i}.attn, block{i}.mlp, head) that owns forward
// tensor `forward_index` (of parameter_tensors(m), or of the trainer's order: they differ within
// patch_embed).
int tensor_layer(const ViTConfig& m, int forward_index);

// The rule of a framework: vitsim's trainer DDP's without the first-bucket cap, DDP its own; DeepSpeed the
// IPG rule at ZeRO >= 1, the allreduce fallback's at ZeRO-0, one flat bucket at ZeRO-0 in bf16.
BucketRule bucket_rule(Framework f, int zero_stage, Precision training);
// The dtype gradients are communicated in: `comm_dtype` (parallelism.comm_dtype) when set; else the
// gradients' own dtype: the `training` precision where the module is in half (`cast` Module: DeepSpeed, or
// training.cast=module), fp32 under autocast (vitsim's trainer and DDP keep fp32 parameters and gradients).
Precision gradient_comm_dtype(std::optional<Precision> comm_dtype, HalfCast cast, Precision training);
// The model's layout: bucket_layout(gradient_ready_tensors(m), cap_bytes, precision_bytes(comm_dtype), rule).
// A scenario's (parallelism.bucket_size, its comm dtype and rule) is gradient_buckets(const Scenario&),
// core/formats/scenario.hpp.
std::vector<GradBucket> gradient_buckets(const ViTConfig& m, double cap_bytes, Precision comm_dtype,
                                         BucketRule rule);
// One line for logs and reports: "N buckets (rule, dtype): b0 [0,4) 1.2 MB, ...".
std::string describe_buckets(const std::vector<GradBucket>& b, BucketRule rule, Precision dtype);

}  // namespace vitsim
