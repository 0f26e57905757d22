#pragma once
// The device a rank runs on, chosen in one place for the trainer (real/src/trainer/point_setup.cpp, where it
// is defined) and calibrate's measurements (calibrate/src/bench/bench_device.cpp). No Torch in this header.
#include <string>

#include "vitsim/core/formats/scenario.hpp"

namespace vitsim::real {

struct RankDevice {
  bool cuda = false;
  int index = 0;  // the local GPU, on CUDA
  std::string name() const { return cuda ? "cuda:" + std::to_string(index) : "cpu"; }
};

// run.device resolved ("auto": CUDA when this LibTorch has a device); local rank r takes local GPU r mod the
// GPUs LibTorch sees. Throws Error for run.device = cuda without a usable CUDA device, and for fp16 off CUDA
// (LibTorch's CPU autocast runs bf16 only).
RankDevice choose_device(const Scenario& s, int local_rank);

// LibTorch's intra-op threads and OpenBLAS's own, set together: their product must not exceed the cores
// (docs/sources.md "Software and machine facts", threads per rank). OpenBLAS is reached through Debian's
// alternatives, so its setter is looked up, not linked.
void set_threads(int threads);

}  // namespace vitsim::real
