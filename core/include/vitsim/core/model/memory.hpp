#pragma once
// Memory per GPU for data-parallel training with optional ZeRO partitioning.
#include <map>
#include <string>

#include "vitsim/core/model/vit.hpp"

namespace vitsim {

struct MemoryBreakdown {
  double params = 0;       // model weights held by this GPU
  double grads = 0;        // gradients held by this GPU
  double optimizer = 0;    // optimizer state (+ fp32 master weights in mixed precision)
  double activations = 0;  // kept for backward, whole micro-batch
  double buffers = 0;      // communication buckets / gathered parameters
  double reserved = 0;     // CUDA context, workspaces (a platform figure)
  double total() const { return params + grads + optimizer + activations + buffers + reserved; }
};

struct MemoryInputs {
  int micro_batch = 1;
  Precision precision = Precision::FP32;
  int zero_stage = 0;         // 0..3
  int dp_ranks = 1;           // ranks the ZeRO state is partitioned over
  double bucket_bytes = 0;    // one gradient bucket kept alive for communication
  double reserved_bytes = 0;  // per-GPU runtime overhead, from the platform
  std::string optimizer = "adamw";
  // Patch (sequence) parallelism (Ulysses): each rank keeps the encoder blocks' activations of 1/S of
  // the tokens (attention scores: 1/S of the heads); the input image and the head stay whole.
  int sequence_parallel = 1;
  // Activation checkpointing of every encoder block: each block keeps only its input (tokens x width at
  // the activation precision) and, during backward, one block's activations are rebuilt at a time.
  bool activation_checkpointing = false;
  // DeepSpeed's BF16_Optimizer (bf16 at ZeRO-0, v0.14.4 bf16_optimizer.py _setup_for_real_optimizer): the
  // bf16 gradients and a flat fp32 gradient buffer (4 bytes a parameter), the fp32 master and optimizer state
  // partitioned over the ranks (as ZeRO-1), and the whole buffer cast to bf16 for its one all-reduce.
  bool bf16_optimizer = false;
  // DeepSpeed's ZeRO-Offload where it applies (offload.hpp offloads_optimizer, offloads_params): the fp32
  // master and the optimizer's moments on the host; at ZeRO-3 the parameter partition too (the gathered
  // layer stays in the buffers).
  bool offload_optimizer = false;
  bool offload_params = false;
  // The module in half under torch.optim or vitsim's flat optimizer (training.cast=module, frameworks vitsim
  // and ddp): the optimizer's state in the parameters' dtype and no fp32 master copy.
  bool half_optimizer_state = false;
};

// Bytes per parameter (ZeRO paper, Rajbhandari et al. 2020, section 3): fp32 training keeps
// 4 (weights) + 4 (grads) + 8 (Adam m, v); mixed precision keeps 2 + 2 + 12 (fp32 master, m, v); torch.optim
// over a module in half (half_optimizer_state) 2 + 2 + 4 (m, v in half, no master).
// ZeRO-1 divides the optimizer term by N, ZeRO-2 also the gradients, ZeRO-3 also the weights.
MemoryBreakdown memory_per_gpu(const Workload& w, const MemoryInputs& in);
// The activations each layer's forward keeps for backward, for the whole micro-batch (layer name -> bytes):
// memory_per_gpu's activations are their sum (plus, under activation checkpointing, the one block backward
// rebuilds at a time). The trace's memory counter (core/results/trace.hpp TraceMemory).
std::map<std::string, double> saved_bytes_per_layer(const Workload& w, const MemoryInputs& in);

// Optimizer state bytes per parameter, fp32 master included: adamw/adam 8 (+4), sgd 4 (momentum) (+4).
// `state_in_param_dtype` (torch.optim over a module in half, MemoryInputs::half_optimizer_state): the
// moments in the parameters' dtype and no master: adamw/adam 2 x 2, sgd 2.
double optimizer_bytes_per_param(const std::string& optimizer, Precision p,
                                 bool state_in_param_dtype = false);

}  // namespace vitsim
