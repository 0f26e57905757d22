#pragma once
// Optimizers over one flat parameter buffer. The trainer keeps every parameter as a view into one flat
// fp32 tensor (and every gradient as a view into one flat gradient tensor, the all-reduce buckets), so
// an optimizer step is a handful of element-wise kernels over the whole model instead of a dozen
// kernels per parameter tensor (DeepSpeed's flat fp32 partitions and apex's multi-tensor Adam do the
// same). The arithmetic is LibTorch's torch::optim::{AdamW, Adam, SGD} (1.13) operation for operation,
// so the trajectory is the same (tests/real/test_real_model.cpp compares them).
// Includes Torch: only the trainer's translation units and its tests include this header.
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "vitsim/core/formats/scenario.hpp"

namespace vitsim::real {

struct OptimizerConfig {
  std::string kind = "adamw";  // adamw, adam (L2 added to the gradient), sgd (momentum 0.9)
  double lr = 1e-3, weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // Adam(W)
  double momentum = 0.9;                          // SGD
};
OptimizerConfig optimizer_config(const TrainingSpec& t);  // kind, lr and weight decay of the scenario

// The trainer's layout: parameters and gradients as views into two flat fp32 buffers on the parameters'
// device, in reverse parameter order (roughly the order backward produces gradients), params[i]
// starting at element offsets[i]. The gradient buffer starts at zero.
struct FlatParameters {
  torch::Tensor params, grads;
  std::vector<int64_t> offsets;
};
FlatParameters flatten_parameters(const std::vector<torch::Tensor>& params);

class FlatOptimizer {
 public:
  // params and grads: same number of elements, fp32, same device; the optimizer updates params in place.
  FlatOptimizer(OptimizerConfig cfg, torch::Tensor params, torch::Tensor grads);
  void step();
  long long steps() const { return step_; }
  // State as archive entries under "optimizer/": kind, step, moments. load() refuses state of another
  // optimizer or size.
  void save(torch::serialize::OutputArchive& archive) const;
  void load(torch::serialize::InputArchive& archive);
  // The state tensors by their archive names (the checkpoint's per-tensor checksums cover them).
  std::vector<std::pair<std::string, torch::Tensor>> state() const;

 private:
  OptimizerConfig cfg_;
  torch::Tensor params_, grads_;
  torch::Tensor m_, v_;  // Adam(W): first and second moments; SGD: m_ is the momentum buffer
  long long step_ = 0;
};

// Makes every tensor in `params` a view into `flat` (fp32, contiguous; params[i] starts at element
// offsets[i]) holding its current value. Call it again after anything that rebinds parameter storage
// (torch's Module::load does, through Tensor::set_).
void bind_flat_parameters(const std::vector<torch::Tensor>& params, const std::vector<int64_t>& offsets,
                          torch::Tensor& flat);

}  // namespace vitsim::real
