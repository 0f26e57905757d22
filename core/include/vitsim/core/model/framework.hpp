#pragma once
// The fixed work of one optimizer step as a framework's code does it, as ops (core/model/ops.hpp): gradient
// averaging and flattening around the all-reduce, the optimizer, overflow checks and their host syncs,
// zeroing gradients. Which functions each cost comes from: docs/model.md, docs/sources.md.
#include <string>
#include <vector>

#include "vitsim/core/model/ops.hpp"
#include "vitsim/core/model/vit.hpp"

namespace vitsim {

enum class Framework { Vitsim, DeepSpeed, Ddp };
const char* framework_name(Framework f);             // "vitsim", "deepspeed", "ddp"
Framework parse_framework(const std::string& name);  // throws Error listing the valid names

// The registry of training.framework (as SimGrid registers a model with a description): each framework's
// name, whose code and version it stands for, and one line on its step. `vitsim predict --list frameworks`
// prints them; docs/model.md's list is generated from them (tests/cli/test_descriptors.cpp).
struct FrameworkInfo {
  Framework value;
  const char* name;
  const char* stands_for;
  const char* description;
};
const std::vector<FrameworkInfo>& frameworks();  // in the enum's order

// Element counts of the model's parameter tensors, in registration order (torchvision's ViT: conv
// weight and bias, class token, position embedding, 12 per block, final LayerNorm, head): 12 depth + 8.
std::vector<double> parameter_tensors(const ViTConfig& m);

struct StepInputs {
  Framework framework = Framework::Vitsim;
  Precision precision = Precision::FP32;
  std::string optimizer = "adamw";  // adamw, adam, sgd
  int dp_ranks = 1;                 // gradients are averaged over these (no averaging work at 1)
  int zero_stage = 0;               // ZeRO 1+: the optimizer updates 1/dp_ranks of the parameters
  double gradient_clipping = 0;     // > 0: the gradients' global norm, then a scale when above it
  double loss_scale = 0;            // fp16: 0 = dynamic, > 0 static (see step_ops)
  int grad_accum = 1;               // micro-batches a step (DeepSpeed: per-micro-batch gradient work)
  int grad_buckets = 1;             // gradient buckets a reduction (DeepSpeed ZeRO: per-bucket kernels)
  bool overlap = false;             // DeepSpeed ZeRO overlap_comm: a device sync ends each reduction
  // DeepSpeed ZeRO-Offload of the optimizer in use (offload.hpp offloads_optimizer): the fp32 partition's
  // flatten, unscale and Adam run on the host (OffloadStep), not as GPU kernels.
  bool offload_optimizer = false;
};

// Which optimizer wrapper DeepSpeed's engine builds (engine.py _do_optimizer_sanity_check, v0.14.4): ZeRO-0
// in fp32 or fp16 the bare optimizer or FP16_Optimizer (modelled at v0.12.6, the study's); ZeRO-0 in bf16
// BF16_Optimizer (grad_accum_dtype defaults to fp32 without ZeRO); ZeRO 1/2 DeepSpeedZeroOptimizer; ZeRO 3
// DeepSpeedZeroOptimizer_Stage3. docs/model.md "Framework step" lists each one's ops and collectives.
enum class DeepSpeedPath { Zero0, Bf16Optimizer, Zero12, Zero3 };
DeepSpeedPath deepspeed_path(Precision p, int zero_stage);

// ZeRO-3's defaults (deepspeed/runtime/zero/config.py, v0.14.4): a parameter of at most
// stage3_param_persistence_threshold = 1e5 elements stays whole on every rank (never gathered; all-gathered
// once after each step, stage3.py _post_step); the coordinator prefetches stage3_prefetch_bucket_size = 5e7
// elements ahead (partitioned_param_coordinator.py fetch_sub_module).
inline constexpr double kZero3PersistenceElements = 1e5;
inline constexpr double kZero3PrefetchElements = 5e7;

// Ops of one optimizer step, Pass::Step, in issue order.
std::vector<Op> step_ops(const Workload& w, const StepInputs& in);
// Host synchronisations among ops.
int host_syncs(const std::vector<Op>& ops);

}  // namespace vitsim
