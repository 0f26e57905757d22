#include "vitsim/core/model/framework.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/step_builder.hpp"
#include "vitsim/core/base/enum_names.hpp"
#include "vitsim/core/base/error.hpp"

namespace vitsim {

const std::vector<FrameworkInfo>& frameworks() {
  static const std::vector<FrameworkInfo> r{
      {Framework::Vitsim, "vitsim", "vitsim's own trainer (real/, LibTorch C++)",
       "one flat gradient buffer averaged, a flat AdamW (9 elementwise kernels, 92 bytes a parameter), one "
       "zero_"},
      {Framework::DeepSpeed, "deepspeed",
       "DeepSpeed v0.12.6 (ZeRO-0 in fp32 and fp16), v0.14.4 (bf16, ZeRO 1-3)",
       "its engine's step: host syncs, flattened gradients in one bucket (ZeRO-0), FusedAdam, the fp16 "
       "overflow checks, ZeRO's partitioned optimizer and collectives; with a `<deepspeed>` config"},
      {Framework::Ddp, "ddp",
       "PyTorch DistributedDataParallel (Reducer, gradient_as_bucket_view off), torch.optim.AdamW: 1.13, or "
       "2.0-2.5 by training.torch_version",
       "each gradient copied into its bucket scaled by 1/world and back; 1.13: the per-tensor AdamW loop (9 "
       "kernels a tensor), zero_ per tensor; 2.x: foreach AdamW (or fused), gradients set to None"}};
  return r;
}

const char* framework_name(Framework f) {
  return name_of(frameworks(), f);
}

Framework parse_framework(const std::string& name) {
  return value_of(frameworks(), name, "framework");
}

namespace {
constexpr EnumNames<HalfCast, 2> kHalfCastNames{
    {{HalfCast::Autocast, "autocast"}, {HalfCast::Module, "module"}}};
}  // namespace

const char* half_cast_name(HalfCast c) {
  return name_of(kHalfCastNames, c);
}

HalfCast parse_half_cast(const std::string& name) {
  return value_of(kHalfCastNames, name, "training.cast");
}

std::vector<std::string> half_cast_names() {
  std::vector<std::string> out;
  for (const auto& n : kHalfCastNames) out.emplace_back(n.name);
  return out;
}

HalfCast framework_half_cast(Framework f) {
  return f == Framework::DeepSpeed ? HalfCast::Module : HalfCast::Autocast;
}

std::vector<double> parameter_tensors(const ViTConfig& m) {
  const double d = m.width, h = m.mlp_hidden(), P = static_cast<double>(m.patch) * m.patch * m.channels;
  std::vector<double> t{P * d, d, m.class_tokens * d, static_cast<double>(m.tokens()) * d};
  for (int i = 0; i < m.depth; ++i)
    for (double n : {d, d, 3 * d * d, 3 * d, d * d, d, d, d, h * d, h, d * h, d}) t.push_back(n);
  for (double n : {d, d, m.classes * d, static_cast<double>(m.classes)}) t.push_back(n);
  return t;
}

int host_syncs(const std::vector<Op>& ops) {
  int n = 0;
  for (const auto& op : ops) n += op.host_sync ? 1 : 0;
  return n;
}

DeepSpeedPath deepspeed_path(Precision p, int zero_stage) {
  if (zero_stage >= 3) return DeepSpeedPath::Zero3;
  if (zero_stage >= 1) return DeepSpeedPath::Zero12;
  return p == Precision::BF16 ? DeepSpeedPath::Bf16Optimizer : DeepSpeedPath::Zero0;
}

// The optimizer's arithmetic over `n` parameters, as separate elementwise kernels over fp32 tensors
// (one group of kernels per tensor in `launch_groups`): torch.optim's single-tensor AdamW/Adam/SGD
// (PyTorch 1.13) and vitsim's flat optimizer run the same kernels, vitsim's once over one flat buffer.
// Bytes per parameter: AdamW p *= 1 - lr wd (r4 w4), m = b1 m + (1-b1) g (mul_ r4 w4, add_ r8 w4),
// v = b2 v + (1-b2) g^2 (mul_ r4 w4, addcmul_ r12 w4), denom = sqrt(v) / sqrt(bc2) + eps (three
// kernels r4 w4), p -= lr / bc1 m / denom (addcdiv_ r12 w4): 9 kernels, 92 bytes. Adam adds wd p to
// the gradient (r8 w4) instead of decaying p. SGD with momentum: d_p = g + wd p, buf = m buf + d_p,
// p -= lr buf: 4 kernels, 44 bytes. Every tensor these kernels read and write has the parameters' dtype:
// with the module in half (`elem_bytes` 2) each count halves (46, 50, 22 bytes).
void unfused_optimizer(StepBuilder& s, const std::string& kind, double n, int launch_groups,
                       double elem_bytes) {
  const double scale = elem_bytes / 4;
  if (kind == "sgd") {
    s.mem("sgd", n * 44 * scale, 4 * launch_groups);
    return;
  }
  const double bytes = kind == "adamw" ? 92 : 92 - 8 + 12;
  s.mem(kind, n * bytes * scale, 9 * launch_groups);
}

// A fused multi-tensor Adam (DeepSpeed FusedAdam, csrc/adam/multi_tensor_apply.cuh): one pass reading
// p, g, m, v and writing p, m, v; a launch per chunk list (65536-element chunks, at most 320 blocks and
// 36 tensors a launch: 20.97 M elements per launch at most; 5 launches for vit_b_16).
void fused_adam(StepBuilder& s, double n, double grad_bytes, double extra_write_bytes) {
  constexpr double kElementsPerLaunch = 65536.0 * 320.0;
  const int launches = std::max(1, static_cast<int>(std::ceil(n / kElementsPerLaunch)));
  s.mem("fused_adam", n * (4 + grad_bytes + 4 + 4 + 4 + 4 + 4 + extra_write_bytes), launches);
}

std::vector<Op> step_ops(const Workload& w, const StepInputs& in) {
  const std::vector<double> tensors = parameter_tensors(w.model);
  const int nt = static_cast<int>(tensors.size());
  const double P = std::accumulate(tensors.begin(), tensors.end(), 0.0);
  const bool half = in.precision != Precision::FP32;
  const int n = std::max(1, in.dp_ranks);
  const double part = in.zero_stage >= 1 ? 1.0 / n : 1.0;
  const double Pp = P * part;  // parameters this rank's optimizer updates
  StepBuilder s;
  switch (in.framework) {
    case Framework::Vitsim: {
      // real/src/trainer/trainer.cpp + optim.cpp: gradients live in one flat fp32 buffer (no copies); it is
      // divided by the ranks after the all-reduce, stepped once, then zeroed. With the module in half the
      // buffer, the parameters and the state are in 2 bytes (in.param_bytes).
      const double e = in.param_bytes;
      if (n > 1) s.mem("grad_average", P * (e + e));
      // Clipping over the flat buffer: one norm reduction (reads it) and one scale (reads and writes it).
      if (in.gradient_clipping > 0) {
        s.mem("clip_grad_norm", P * e);
        s.mem("clip_grad_scale", P * (e + e));
      }
      unfused_optimizer(s, in.optimizer, Pp, 1, e);
      s.mem("zero_grad", P * e);
      break;
    }
    case Framework::Ddp:
      // PyTorch DDP at the scenario's training.torch_version (framework_torch.cpp): 1.13, the default, is
      // the bucket copies, torch.optim's single-tensor loop (9 kernels a tensor) and a zero_ per tensor.
      ddp_step(s, tensors, in);
      break;
    case Framework::DeepSpeed: {
      if (deepspeed_path(in.precision, in.zero_stage) != DeepSpeedPath::Zero0) {
        deepspeed_partitioned_step(s, tensors, in);
        break;
      }
      // DeepSpeed v0.12.6 (checked against v0.9-v0.14), ZeRO-0, overlap_comm false. engine.backward:
      // loss.mean().item() (one sync a micro-step, v0.10.1-v0.13.2); allreduce_gradients ->
      // buffered_allreduce_fallback -> allreduce_and_copy with buckets of MEMORY_OPT_ALLREDUCE_SIZE
      // = 5e8 elements (one bucket for a ViT): the gradients flattened (torch.cat: 2 launches of up to
      // 128 inputs), all-reduced, scaled by 1/world (mul_), copied back tensor by tensor (copy_).
      // utils/timer.py ThroughputTimer: torch.cuda.synchronize() in start() and stop() every step.
      const double gb = half ? 2 : 4;  // fp16: the model itself is fp16 (module.half()), no autocast
      s.mem("loss_item", 4, 1, /*sync=*/true);
      s.mem("throughput_timer_start", 0, 0, /*sync=*/true);
      if (n > 1) {
        s.mem("flatten_grads", P * (gb + gb), 2);
        s.mem("grad_average", P * (gb + gb));
        s.mem("copy_back", P * (gb + gb), nt);
      }
      if (half) {
        // runtime/fp16/fused_optimizer.py FP16_Optimizer.step (dynamic loss scale): the overflow check
        // (utils.py CheckOverflow.has_overflow_serial -> _has_inf_or_nan: float(x.float().sum()) per
        // gradient: cast + sum kernels and one device-to-host sync each), the overflow flag through a
        // ByteTensor (a blocking host->device copy) and .item(); the fp16 gradients cast to fp32 per
        // tensor and flattened; the gradient norm (.norm(), .item(), a FloatTensor copy, [0].item():
        // three syncs, even without clipping); unscale (one mul_); FusedAdam on the fp32 master; the
        // master copied back into the fp16 parameters tensor by tensor.
        for (int i = 0; i < nt; ++i)
          s.mem(fmt::format("overflow_check[{}]", i), tensors[i] * (2 + 4 + 4), 2, /*sync=*/true);
        s.mem("overflow_flag_h2d", 1, 1, /*sync=*/true);
        s.mem("overflow_flag_item", 1, 1, /*sync=*/true);
        s.mem("grads_to_fp32", P * (2 + 4), nt);
        s.mem("flatten_fp32_grads", P * (4 + 4), 2);
        s.mem("grad_norm", P * 4, 2, /*sync=*/true);
        s.mem("grad_norm_tensor", 4, 1, /*sync=*/true);
        s.mem("grad_norm_item", 4, 1, /*sync=*/true);
        // Clipping folds into this one mul_ (unscale_and_clip_grads: combined scale); a static loss
        // scale (fp16.loss_scale > 0) keeps the overflow check above: FP16_Optimizer.step calls
        // has_overflow whatever the scale and skips the step on overflow either way.
        s.mem("unscale", P * (4 + 4));
        fused_adam(s, Pp, 4, 0);
        s.mem("master_to_fp16", P * (4 + 2), nt);
      } else {
        // gradient_clipping: engine._take_model_step -> clip_fp32_gradients -> runtime/utils.py
        // clip_grad_norm_: a norm per tensor, their norm, .item() (one sync), a mul_ per tensor (counted
        // on every step: the scale applies when the norm exceeds the limit, an upper bound).
        if (in.gradient_clipping > 0) {
          s.mem("clip_grad_norm", P * gb, nt + 2, /*sync=*/true);
          s.mem("clip_grad_scale", P * (gb + gb), nt);
        }
        // FusedAdam (DeepSpeed builds it for "type": "AdamW", adam_w_mode) over the fp32 parameters;
        // zero_grad sets the gradients to None (no kernels).
        fused_adam(s, Pp, 4, 0);
      }
      s.mem("throughput_timer_stop", 0, 0, /*sync=*/true);
      break;
    }
  }
  return s.ops;
}

}  // namespace vitsim
