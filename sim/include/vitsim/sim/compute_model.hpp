#pragma once
// How long a layer takes on a device: ComputeModel::duration(layer, micro_batch, device).
// Pure arithmetic (no SimGrid), so it is unit-tested on its own.
#include <memory>
#include <string>
#include <vector>

#include "vitsim/core/calibration.hpp"
#include "vitsim/core/platform.hpp"
#include "vitsim/core/vit.hpp"

namespace vitsim::sim {

struct LayerTimes {
  double fwd_s = 0;
  double bwd_s = 0;
};

class ComputeModel {
 public:
  virtual ~ComputeModel() = default;
  virtual std::string name() const = 0;  // "roofline", "calibrated", "calibrated+roofline-scaled"
  // Times of every layer of the workload (forward order) at this micro-batch on this device.
  virtual std::vector<LayerTimes> layers(int micro_batch) const = 0;
  virtual double optimizer_s() const = 0;  // one optimizer step over all parameters (unpartitioned)
};

// Kernel launches per layer, forward (PyTorch eager, counted from the ops each sub-block runs:
// attention = LayerNorm, QKV GEMM, split/reshape, QK^T, softmax, AV, out GEMM, residual add, plus two
// layout copies; MLP = LayerNorm, fc1, GELU, fc2, residual add; patch embedding = conv, flatten,
// cat, add; head = LayerNorm, slice, GEMM). Backward launches twice as many.
int kernels_fwd(LayerKind kind);

// Roofline: max(FLOPs / (peak * efficiency), bytes / memory bandwidth) + kernels * launch overhead.
LayerTimes roofline_layer(const Workload& w, const LayerCost& l, int micro_batch, Precision p, const GpuFacts& g);
// AdamW over all parameters: memory-bound, reads params, grads and two moments and writes three of them
// (plus the fp32 master copy in mixed precision), 4 launches per parameter tensor.
double roofline_optimizer(const Workload& w, Precision p, const GpuFacts& g);

// Picks the model for a device: the calibration when it covers this device type, model and precision;
// else a calibrated device scaled by the roofline ratio; else the roofline from the platform figures.
std::unique_ptr<ComputeModel> make_compute_model(const Workload& w, Precision p, const GpuFacts& g,
                                                 const Calibration* calib);

}  // namespace vitsim::sim
