#include "vitsim/core/model/memory.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "vitsim/core/base/error.hpp"

namespace vitsim {

double optimizer_bytes_per_param(const std::string& optimizer, Precision p, bool state_in_param_dtype) {
  double moments = 0;
  if (optimizer == "adamw" || optimizer == "adam")
    moments = 2;  // exp_avg, exp_avg_sq
  else if (optimizer == "sgd")
    moments = 1;  // momentum buffer
  else
    throw Error(fmt::format("unknown optimizer '{}'; valid: adam, adamw, sgd", optimizer));
  // torch.optim's state takes the parameters' dtype (zeros_like(p)): half with the module in half, no master.
  if (state_in_param_dtype && p != Precision::FP32) return moments * precision_bytes(p);
  return moments * 4 + (p == Precision::FP32 ? 0 : 4);  // fp32 moments; mixed precision adds an fp32 master
}

namespace {

// Bytes per sample each layer's forward keeps until its backward, in forward order, and under activation
// checkpointing the largest block backward rebuilds at a time.
struct KeptActivations {
  std::vector<std::pair<std::string, double>> per_layer;
  double rebuilt_block = 0;
};

KeptActivations kept_activations(const Workload& w, const MemoryInputs& in) {
  const double elem = precision_bytes(in.precision);
  const double sp = std::max(1, in.sequence_parallel);
  KeptActivations k;
  // A block is an attention layer and the MLP layer after it (vit.cpp's layer table).
  double block = 0;
  for (const auto& l : w.layers) {
    const bool split = l.kind == LayerKind::Attention || l.kind == LayerKind::Mlp;
    const double saved = w.saved_activation_bytes(l, in.precision) / (split ? sp : 1.0);
    if (!split || !in.activation_checkpointing) {
      k.per_layer.push_back({l.name, saved});
      continue;
    }
    if (l.kind == LayerKind::Attention) {
      block = saved;
      // The checkpoint: the block's input, T x d elements (fp32 doubles the 2-byte term as above).
      k.per_layer.push_back({l.name, w.model.tokens() * static_cast<double>(w.model.width) * elem / sp});
    } else {
      block += saved;
      k.per_layer.push_back({l.name, 0.0});
      k.rebuilt_block = std::max(k.rebuilt_block, block);
    }
  }
  return k;
}

}  // namespace

std::map<std::string, double> saved_bytes_per_layer(const Workload& w, const MemoryInputs& in) {
  std::map<std::string, double> out;
  for (const auto& [name, bytes] : kept_activations(w, in).per_layer) out[name] = bytes * in.micro_batch;
  return out;
}

MemoryBreakdown memory_per_gpu(const Workload& w, const MemoryInputs& in) {
  if (in.zero_stage < 0 || in.zero_stage > 3)
    throw Error(fmt::format("ZeRO stage must be 0..3, got {}", in.zero_stage));
  const double n_params = static_cast<double>(w.total_params());
  const double elem = precision_bytes(in.precision);
  const double n = std::max(1, in.dp_ranks);
  MemoryBreakdown m;
  m.params = n_params * elem / (in.zero_stage >= 3 ? n : 1.0);
  m.grads = n_params * elem / (in.zero_stage >= 2 ? n : 1.0);
  m.optimizer = n_params * optimizer_bytes_per_param(in.optimizer, in.precision, in.half_optimizer_state) /
                (in.zero_stage >= 1 || in.bf16_optimizer ? n : 1.0);
  if (in.offload_optimizer) m.optimizer = 0;  // on the host (offload.hpp OffloadStep::host_bytes)
  if (in.offload_params) m.params = 0;
  if (in.bf16_optimizer) m.grads += n_params * 4;  // the fp32 accumulation buffer beside the bf16 gradients
  const KeptActivations kept = kept_activations(w, in);
  for (const auto& [name, bytes] : kept.per_layer) m.activations += bytes;
  m.activations += kept.rebuilt_block;  // one block recomputed at a time in backward
  m.activations *= in.micro_batch;
  m.buffers = std::min(in.bucket_bytes, m.grads);      // a bucket never holds more than all gradients
  if (in.bf16_optimizer) m.buffers = n_params * elem;  // the fp32 buffer's bf16 copy, all-reduced at once
  if (in.zero_stage >= 3) {
    // ZeRO-3 gathers one layer's full parameters at a time: the largest layer stays resident.
    double largest = 0;
    for (const auto& l : w.layers) largest = std::max(largest, static_cast<double>(l.params));
    m.buffers += largest * elem;
  }
  m.reserved = in.reserved_bytes;
  return m;
}

}  // namespace vitsim
