#pragma once
// The Torch side of calibration (compute.cpp), behind a header without Torch.
#include <string>
#include <vector>

#include "vitsim/calibrate/calibrate.hpp"

namespace vitsim::calibrate {

struct LayerSpread {
  std::string name;  // core's layer names: patch_embed, block<i>.attn, block<i>.mlp, head
  Spread fwd, bwd;
};
struct ComputeSample {
  int micro_batch = 0;
  Spread fwd, bwd, optimizer;       // whole model, as the trainer times its phases (loss in fwd)
  std::vector<LayerSpread> layers;  // layer by layer (each layer's input detached; shares only)
};
struct CopySample {
  double bytes = 0;
  Spread pinned_s, pageable_s;      // seconds per copy
  bool on_cpu = true;               // a memcpy into a fresh tensor: no device
};
struct DeviceInfo {
  std::string device;       // "cpu" or "cuda:<i>"
  std::string name;         // CUDA device name, or "cpu"
  int threads = 0;          // intra-op threads
  double mem_bytes = 0;     // device memory (CUDA), else 0
};

// Opens the scenario's device (run.device), sets the intra-op threads (run.threads, else cores / local
// ranks; OpenBLAS's to the same number) and seeds Torch.
DeviceInfo open_device(const Scenario& s, int local_rank, int local_size);
// `ranks` is the world size: the optimizer phase divides the gradients by it, as the trainer does.
ComputeSample measure_compute(const Scenario& s, const DeviceInfo& device, int micro_batch, int warmup, int iters,
                              int ranks);
CopySample measure_copy(const DeviceInfo& device, double bytes, int warmup, int iters);
std::string torch_version();

}  // namespace vitsim::calibrate
