// PyTorch DistributedDataParallel's step (framework ddp) by PyTorch version: torch.optim's three ways of
// running the optimizer (per tensor, foreach, fused), zero_grad and clip_grad_norm_. Sources: docs/sources.md
// "PyTorch versions"; the ops: docs/model.md "PyTorch versions".
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/step_builder.hpp"
#include "vitsim/core/base/enum_names.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/model/framework.hpp"

namespace vitsim {

const char* optimizer_impl_name(OptimizerImpl i) {
  switch (i) {
    case OptimizerImpl::PerTensor:
      return "per-tensor";
    case OptimizerImpl::Foreach:
      return "foreach";
    case OptimizerImpl::Fused:
      return "fused";
  }
  return "?";
}

// 1.13: the single-tensor loop by default (foreach=None means False before 2.0),
// zero_grad(set_to_none=False), clip_grad_norm_ a norm per tensor; AdamW has no fused path (Adam's arrived
// in 1.13). 2.0 on: foreach by default on CUDA (torch/optim/optimizer.py `_default_to_fused_or_foreach(...,
// use_fused=False)`: fused is never the default), zero_grad(set_to_none=True), clip_grad_norm_ through
// `_foreach_norm` and
// `_foreach_mul_` (torch/nn/utils/clip_grad.py, foreach=None), AdamW(fused=True) available.
const std::vector<TorchVersion>& torch_versions() {
  static const std::vector<TorchVersion> v{{"1.13", OptimizerImpl::PerTensor, false, false, false},
                                           {"2.0", OptimizerImpl::Foreach, true, true, true},
                                           {"2.1", OptimizerImpl::Foreach, true, true, true},
                                           {"2.2", OptimizerImpl::Foreach, true, true, true},
                                           {"2.3", OptimizerImpl::Foreach, true, true, true},
                                           {"2.4", OptimizerImpl::Foreach, true, true, true},
                                           {"2.5", OptimizerImpl::Foreach, true, true, true}};
  return v;
}

std::vector<std::string> torch_version_names() {
  std::vector<std::string> out;
  for (const auto& t : torch_versions()) out.emplace_back(t.name);
  return out;
}

const TorchVersion& torch_version(const std::string& name) {
  for (const auto& t : torch_versions())
    if (name == t.name) return t;
  std::string valid;
  for (const auto& t : torch_versions()) valid += (valid.empty() ? "" : ", ") + std::string(t.name);
  throw Error(fmt::format("unknown PyTorch version '{}'; valid: {}", name, valid));
}

int multi_tensor_launches(const std::vector<double>& elements, int depth) {
  constexpr double kChunk = 65536;
  constexpr int kMaxBlocks = 320;
  constexpr int kMaxTensors[5] = {110, 64, 48, 36, 30};
  const int max_tensors = kMaxTensors[std::clamp(depth, 1, 5) - 1];
  int launches = 0, tensors = 0, blocks = 0;
  for (size_t t = 0; t < elements.size(); ++t) {
    const long long chunks = std::max(1LL, static_cast<long long>(std::ceil(elements[t] / kChunk)));
    ++tensors;
    for (long long c = 0; c < chunks; ++c) {
      ++blocks;
      const bool last_chunk = c == chunks - 1;
      const bool tensors_full = tensors == max_tensors && last_chunk;
      const bool last = t + 1 == elements.size() && last_chunk;
      if (tensors_full || blocks == kMaxBlocks || last) {
        ++launches;
        blocks = 0;
        tensors = last_chunk ? 0 : 1;  // a tensor cut by a full launch carries into the next
      }
    }
  }
  return launches;
}

namespace {

// The tensors this rank's optimizer updates: all of them, or (ZeRO 1+) the first ceil(nt / ranks).
std::vector<double> updated_tensors(const std::vector<double>& tensors, int nt_part) {
  return {tensors.begin(), tensors.begin() + std::min<size_t>(tensors.size(), static_cast<size_t>(nt_part))};
}

// torch/optim/adamw.py `_multi_tensor_adamw` (capturable off, amsgrad off, weight decay on): the steps on
// the CPU (no kernels), then _foreach_mul_(params) r4 w4 (depth 1), _foreach_lerp_(exp_avgs, grads) r8 w4
// (2), _foreach_mul_(exp_avg_sqs) r4 w4 (1), _foreach_addcmul_(exp_avg_sqs, grads, grads) r12 w4 (3),
// _foreach_sqrt(exp_avg_sqs) r4 w4 (2), _foreach_div_ r4 w4 (1), _foreach_add_(eps) r4 w4 (1),
// _foreach_addcdiv_(params, exp_avgs, denom) r12 w4 (3): 8 ops, 84 bytes a parameter. Adam
// (`_multi_tensor_adam`) adds the decay to the gradients instead (_foreach_add(grads, params) r8 w4, depth
// 3 with its output): 88 bytes. SGD with momentum (`_multi_tensor_sgd`): _foreach_add(grads, params) r8
// w4 (3), _foreach_mul_(bufs) r4 w4 (1), _foreach_add_(bufs, grads) r8 w4 (2), _foreach_add_(params,
// bufs) r8 w4 (2): 44 bytes. Every list holds tensors of the parameters' dtype: with the module in half
// (`elem_bytes` 2) the bytes halve (42, 44, 22).
void foreach_optimizer(StepBuilder& s, const std::string& kind, const std::vector<double>& t, double n,
                       double elem_bytes) {
  struct ForeachOp {
    const char* name;
    double bytes;
    int depth;
  };
  std::vector<ForeachOp> ops;
  if (kind == "sgd")
    ops = {{"wd", 12, 3}, {"momentum_mul", 8, 1}, {"momentum_add", 12, 2}, {"update", 12, 2}};
  else
    ops = {{kind == "adamw" ? "decay" : "wd", kind == "adamw" ? 8.0 : 12.0, kind == "adamw" ? 1 : 3},
           {"lerp_exp_avg", 12, 2},
           {"mul_exp_avg_sq", 8, 1},
           {"addcmul_exp_avg_sq", 16, 3},
           {"sqrt", 8, 2},
           {"div_bias_correction", 8, 1},
           {"add_eps", 8, 1},
           {"addcdiv_params", 16, 3}};
  for (const ForeachOp& op : ops)
    s.mem(fmt::format("{}_foreach.{}", kind, op.name), n * op.bytes * elem_bytes / 4,
          multi_tensor_launches(t, op.depth));
}

// torch/optim/adamw.py `_fused_adamw` (and adam.py `_fused_adam`): _foreach_add_(state_steps, 1) on the
// device (depth 1, 4 bytes a tensor), then one _fused_adamw_ (aten/src/ATen/native/cuda/
// fused_adamw_impl.cu) over params, grads, exp_avgs, exp_avg_sqs (depth 4): reads 16 bytes a parameter,
// writes 12. The step counts stay fp32 (adamw.py `_get_scalar_dtype(is_fused=True)`); the four lists take the
// parameters' dtype, 14 bytes with the module in half (`elem_bytes` 2).
void fused_optimizer(StepBuilder& s, const std::string& kind, const std::vector<double>& t, double n,
                     double elem_bytes) {
  s.mem(kind + "_fused.steps", 4.0 * static_cast<double>(t.size()),
        multi_tensor_launches(std::vector<double>(t.size(), 1.0), 1));
  s.mem(kind + "_fused", n * 28 * elem_bytes / 4, multi_tensor_launches(t, 4));
}

}  // namespace

OptimizerImpl ddp_optimizer_impl(const StepInputs& in) {
  return in.optimizer_impl.value_or(torch_version(in.torch_version).default_impl);
}

void ddp_step(StepBuilder& s, const std::vector<double>& tensors, const StepInputs& in) {
  const TorchVersion& tv = torch_version(in.torch_version);
  const int nt = static_cast<int>(tensors.size());
  const double P = std::accumulate(tensors.begin(), tensors.end(), 0.0);
  const int n = std::max(1, in.dp_ranks);
  const double part = in.zero_stage >= 1 ? 1.0 / n : 1.0;
  const int nt_p = std::max(1, static_cast<int>(std::ceil(nt * part)));
  // torch/csrc/distributed/c10d/reducer.cpp (gradient_as_bucket_view=False, the default through 2.x): each
  // gradient is copied into its bucket scaled by 1/world (mark_variable_ready_dense: one mul_out per tensor)
  // and copied back after the all-reduce (copy_bucket_to_grad). The buckets take the gradients' dtype: the
  // parameters' (in.param_bytes: 4 under autocast, 2 with the module in half), as every tensor below.
  const double e = in.param_bytes;
  if (n > 1) {
    s.mem("bucket_copy_in", P * (e + e), nt);
    s.mem("bucket_copy_out", P * (e + e), nt);
  }
  if (in.gradient_clipping > 0) {
    if (tv.foreach_clip) {
      // 2.x: _foreach_norm over the gradients (depth 1 with its outputs' 1-element tensors, depth 2), stack +
      // norm, then _foreach_mul_ by the clamped coefficient (depth 1).
      s.mem("clip_grad_norm", P * e, multi_tensor_launches(tensors, 2) + 2);
      s.mem("clip_grad_scale", P * (e + e), multi_tensor_launches(tensors, 1));
    } else {
      // 1.13: a norm per tensor, stack + norm, a mul_ per tensor (no sync).
      s.mem("clip_grad_norm", P * e, nt + 2);
      s.mem("clip_grad_scale", P * (e + e), nt);
    }
  }
  const double Pp = P * part;
  switch (ddp_optimizer_impl(in)) {
    case OptimizerImpl::PerTensor:
      unfused_optimizer(s, in.optimizer, Pp, nt_p, e);
      break;
    case OptimizerImpl::Foreach:
      foreach_optimizer(s, in.optimizer, updated_tensors(tensors, nt_p), Pp, e);
      break;
    case OptimizerImpl::Fused:
      fused_optimizer(s, in.optimizer, updated_tensors(tensors, nt_p), Pp, e);
      break;
  }
  // zero_grad: 1.13 a zero_ per tensor; 2.x sets the gradients to None (no kernels; the next backward
  // allocates them).
  if (!tv.zero_grad_set_to_none) s.mem("zero_grad", P * e, nt);
}

}  // namespace vitsim
