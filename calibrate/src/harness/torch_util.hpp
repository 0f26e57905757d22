#pragma once
// What the LibTorch benchmarks (bench_*.cpp, kernels_*.cpp) share: the rank's device as Torch names it and
// the clock read at a phase boundary. The only calibrate header with Torch.
#include <torch/torch.h>

#include "harness/harness.hpp"
#include "harness/measure.hpp"

namespace vitsim::calibrate {

inline torch::Device device_of(const DeviceInfo& info) {
  return info.device == "cpu" ? torch::Device(torch::kCPU) : torch::Device(info.device);
}

// The clock at a phase boundary; on CUDA after the device finished the phase's kernels.
inline Clock::time_point mark(const torch::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize(d.index());
  return Clock::now();
}

}  // namespace vitsim::calibrate
