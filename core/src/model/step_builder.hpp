#pragma once
// The pieces framework.cpp and framework_deepspeed.cpp build a step from (private to core's model room).
#include <string>
#include <vector>

#include "vitsim/core/model/framework.hpp"
#include "vitsim/core/model/ops.hpp"

namespace vitsim {

struct StepBuilder {
  std::vector<Op> ops;
  void mem(const std::string& name, double bytes, int kernels = 1, bool sync = false) {
    ops.push_back(memory_op("step." + name, Pass::Step, bytes, kernels));
    ops.back().host_sync = sync;
  }
};

// A fused multi-tensor Adam (DeepSpeed FusedAdam) over `n` fp32 parameters whose gradients are
// `grad_bytes` wide (framework.cpp).
void fused_adam(StepBuilder& s, double n, double grad_bytes, double extra_write_bytes);

// The optimizer's arithmetic as separate elementwise kernels, one group per tensor in `launch_groups`
// (framework.cpp); `elem_bytes` the parameters' dtype (4, or 2 with the module in half).
void unfused_optimizer(StepBuilder& s, const std::string& kind, double n, int launch_groups,
                       double elem_bytes);

// PyTorch DDP's step at in.torch_version (framework_torch.cpp); `tensors` is parameter_tensors(w.model).
void ddp_step(StepBuilder& s, const std::vector<double>& tensors, const StepInputs& in);
// The optimizer implementation a ddp step runs: the scenario's, else its PyTorch version's default.
OptimizerImpl ddp_optimizer_impl(const StepInputs& in);

// DeepSpeed's step for ZeRO-0 in bf16 (BF16_Optimizer) and ZeRO 1, 2 and 3, at v0.14.4
// (framework_deepspeed.cpp); `tensors` is parameter_tensors(w.model).
void deepspeed_partitioned_step(StepBuilder& s, const std::vector<double>& tensors, const StepInputs& in);

}  // namespace vitsim
