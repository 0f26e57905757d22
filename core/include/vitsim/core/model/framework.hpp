#pragma once
// The fixed work of one optimizer step as a framework's code does it, as ops (core/model/ops.hpp): gradient
// averaging and flattening around the all-reduce, the optimizer, overflow checks and their host syncs,
// zeroing gradients. Which functions each cost comes from: docs/model.md, docs/sources.md.
#include <optional>
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

// How fp16/bf16 training runs the model (training.cast): `Autocast`, torch.autocast over fp32 parameters
// (GEMMs in half after a cast, LayerNorm, softmax and the residual stream in fp32; fp32 gradients and
// optimizer state), or `Module`, the whole module converted to half (`model.half()`, DeepSpeed's fp16/bf16,
// Paddle's O2 with fp16 parameters: every weight, activation and gradient in 2 bytes, no casts). Under
// `Module`, torch.optim and vitsim's flat optimizer keep their state in the parameters' dtype, with no fp32
// master copy; DeepSpeed's optimizers keep theirs (FP16_Optimizer, BF16_Optimizer, ZeRO). docs/model.md
// "Precision".
enum class HalfCast { Autocast, Module };
const char* half_cast_name(HalfCast c);             // "autocast", "module"
HalfCast parse_half_cast(const std::string& name);  // throws Error listing the valid names
std::vector<std::string> half_cast_names();
// The framework's own: DeepSpeed converts the module (engine.py _configure_distributed_model: module.half()
// or .bfloat16(), fp16.auto_cast false by default); vitsim's trainer and DDP (as the study's code) autocast.
HalfCast framework_half_cast(Framework f);

// How torch.optim runs the optimizer's arithmetic (framework ddp): one group of kernels per tensor
// (`_single_tensor_*`, PyTorch 1.13's default), multi-tensor `_foreach_*` kernels (`_multi_tensor_*`, the
// default from PyTorch 2.0 when every parameter is on CUDA: optimizer.py `_default_to_fused_or_foreach`), or
// one fused kernel (`fused=True`, `_fused_adamw`). torch/optim/adamw.py; docs/model.md "PyTorch versions".
enum class OptimizerImpl { PerTensor, Foreach, Fused };
const char* optimizer_impl_name(OptimizerImpl i);  // "per-tensor", "foreach", "fused"

// The PyTorch versions the ddp framework model knows, each with its optimizer default and its zero_grad
// (set_to_none, the default from 2.0: no kernels); training.torch_version takes one of the names.
struct TorchVersion {
  const char* name;            // "1.13", "2.0", ...
  OptimizerImpl default_impl;  // what torch.optim picks with foreach=None, fused=None on CUDA
  bool zero_grad_set_to_none;  // Optimizer.zero_grad's default
  bool foreach_clip;           // clip_grad_norm_ with foreach kernels (2.0 on)
  bool fused_adamw;            // AdamW(fused=True) exists (2.0 on)
};
const std::vector<TorchVersion>& torch_versions();
std::vector<std::string> torch_version_names();
const TorchVersion& torch_version(const std::string& name);  // throws Error listing the known names

// Kernel launches of one `_foreach_*` or fused op over tensors of `elements` each at list depth `depth`
// (the lists it reads and writes), as PyTorch's multi_tensor_apply packs them
// (aten/src/ATen/native/cuda/MultiTensorApply.cuh: chunks of 65,536 elements, at most 320 blocks and
// depth_to_max_tensors {110, 64, 48, 36, 30} tensors a launch).
int multi_tensor_launches(const std::vector<double>& elements, int depth);

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
  std::string torch_version = "1.13";             // framework ddp: torch_versions()
  std::optional<OptimizerImpl> optimizer_impl{};  // framework ddp: nullopt = the version's default
  // Frameworks vitsim and ddp: the bytes of one element of the parameters, their gradients and torch.optim's
  // (or the flat optimizer's) state: 4 under autocast (fp32), 2 with the module in half (HalfCast::Module:
  // torch.optim keeps exp_avg and exp_avg_sq in the parameters' dtype, torch/optim/adamw.py
  // `torch.zeros_like(p, memory_format=torch.preserve_format)`). DeepSpeed's step ignores it.
  double param_bytes = 4;
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
