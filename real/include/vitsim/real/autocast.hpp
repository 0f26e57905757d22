#pragma once
// Mixed precision as PyTorch AMP does it: autocast runs matmuls and convolutions in fp16/bf16 while
// parameters, gradients (so the all-reduce) and optimizer state stay fp32. Used around forward by the
// trainer and by calibration, so both run the same kernels. Includes Torch.
#include <torch/torch.h>

#include "vitsim/core/model/vit.hpp"

namespace vitsim::real {

class Autocast {
 public:
  Autocast(bool cuda, Precision p) : cuda_(cuda), on_(p != Precision::FP32) {
    if (!on_) return;
    const auto dtype = p == Precision::FP16 ? at::kHalf : at::kBFloat16;
    if (cuda_) {
      at::autocast::set_autocast_gpu_dtype(dtype);
      at::autocast::set_enabled(true);
    } else {
      at::autocast::set_autocast_cpu_dtype(dtype);
      at::autocast::set_cpu_enabled(true);
    }
    at::autocast::increment_nesting();
  }
  ~Autocast() {
    if (!on_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    if (cuda_)
      at::autocast::set_enabled(false);
    else
      at::autocast::set_cpu_enabled(false);
  }
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  bool cuda_, on_;
};

}  // namespace vitsim::real
