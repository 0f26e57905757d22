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
};

// Ops of one optimizer step, Pass::Step, in issue order.
std::vector<Op> step_ops(const Workload& w, const StepInputs& in);
// Host synchronisations among ops.
int host_syncs(const std::vector<Op>& ops);

}  // namespace vitsim
