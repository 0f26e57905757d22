#pragma once
// How long each layer and the optimizer step take on a device: ComputeModel::layers(micro_batch).
// Pure arithmetic (no SimGrid), so it is unit-tested on its own.
//
// The models a device's times come from (the ComputeModel subclasses in sim/src/compute/compute_model.cpp):
// - "calibrated model": this device, this ViT shape and precision were measured (vitsim calibrate): the
//   measured per-layer times, affine in micro-batch; the framework's step ops on top when the scenario's
//   framework is not the one measured (vitsim's own trainer).
// - "op-level model (calibrated figures)": the operator-level model (core/model/ops.hpp) with this device's
// figures fitted by
//   vitsim calibrate (efficiency per op class): carries to any ViT shape.
// - "op-level model (platform figures)": the operator-level model with the platform file's figures (datasheet
// peaks,
//   per-architecture efficiencies, each labelled in the platform file).
// - "calibrated+op-scaled model": another device measured on this shape, scaled by the op model's ratio of
//   the two devices' times (cross-device prediction).
// The scenario's compute.model names a registry entry (compute_models()) that picks among them per
// device, as SimGrid's --cfg=cpu/model picks a CPU model: "auto" (the default) the first that applies.
#include <memory>
#include <string>
#include <vector>

#include "vitsim/core/formats/calibration.hpp"
#include "vitsim/core/model/framework.hpp"
#include "vitsim/core/model/ops.hpp"
#include "vitsim/core/model/vit.hpp"
#include "vitsim/core/platform/platform.hpp"

namespace vitsim::sim {

struct LayerTimes {
  double fwd_s = 0;
  double bwd_s = 0;
};

class ComputeModel {
 public:
  virtual ~ComputeModel() = default;
  virtual std::string name() const = 0;
  // Times of every layer of the workload (forward order) at this micro-batch on this device.
  virtual std::vector<LayerTimes> layers(int micro_batch) const = 0;
  // One optimizer step with the framework's fixed per-step work (core/model/framework.hpp).
  virtual double optimizer_s() const = 0;
  // Lines for the report's notes (interpolation, extrapolation, what bounds the step); may be empty.
  virtual std::vector<std::string> notes(int micro_batch) const {
    (void)micro_batch;
    return {};
  }
};

// E[max of n independent standard normal draws] (0 for n = 1, 1/sqrt(pi) for n = 2, 3/(2 sqrt(pi)) for 3):
// how far the slowest of n ranks with independent per-step jitter lags their mean, in standard deviations.
// By numerical quadrature of n x phi(x) Phi(x)^(n-1).
double expected_max_normal(int n);
// The wait at one gradient sync (StepShape::sync_wait_s) from calibrate's step phase (SyncCalibration) for
// a step of `compute_s` forward + backward on `ranks` ranks: fixed_s + per_compute x compute_s, the second
// term scaled from the measured rank count to `ranks` by expected_max_normal (the slowest of more ranks lags
// further; an assumption beyond the measured count: independent, normal jitter). 0 for one rank.
double sync_wait_s(const SyncCalibration& sync, double compute_s, int ranks);

// The expected wait of a synchronous step for its slowest rank (StepShape::straggler_wait_s): each of
// `ranks` ranks' step compute a normal draw of mean `compute_s` and coefficient of variation `cv`, the
// slowest expected at compute_s (1 + cv e_N), e_N = expected_max_normal(ranks): cv x compute_s x e_N.
// 0 for one rank. docs/model.md "Stragglers".
double straggler_wait_s(double cv, double compute_s, int ranks);

// The op model's figures of a platform GPU at a precision: core's (core/platform/platform.hpp), which
// calibrate's imports share.
using vitsim::device_figures;

// Per-layer times of one micro-batch's forward and backward from the op timeline (core run_ops): each
// op's share of the timeline is charged to its layer and pass, so host-bound stretches count where
// they happen.
std::vector<LayerTimes> op_layer_times(const Workload& w, int micro_batch, const OpOptions& o,
                                       const DeviceFigures& d);
// The framework's step ops on this device.
double op_step_time(const Workload& w, const StepInputs& step, const DeviceFigures& d);

struct ComputeInputs {
  Precision precision = Precision::FP32;
  bool autocast = true;  // false: the model itself in half (DeepSpeed fp16/bf16), core/model/ops.hpp
  OpOptions ops() const { return OpOptions{precision, autocast}; }
  StepInputs step;  // framework, optimizer, ranks, ZeRO stage
  int token_split =
      1;  // patch (sequence) parallelism: each rank computes 1/token_split of the token-wise layers
  // Activation checkpointing: each encoder block's forward runs again at the start of its backward.
  bool recompute = false;
  std::string model = "auto";  // compute.model: a name of compute_models()
  Origin origin;               // where compute.model was set, for the errors a model raises
};

// FLOPs one rank runs per optimizer step (MFU, docs/reports.md): `model` is the op model's forward
// and backward FLOPs (matmuls; memory-bound ops count none) of grad_accum micro-batches, the token-wise
// layers' share divided by token_split; `recompute` the forward FLOPs that activation checkpointing runs
// again (hardware FLOPs, not model FLOPs).
struct StepFlops {
  double model = 0;
  double recompute = 0;
};
StepFlops step_flops(const Workload& w, int micro_batch, int grad_accum, const ComputeInputs& in);

// The registry of compute.model, in docs/model.md's order: name, where its times come from (as SimGrid's
// --cfg=cpu/model names a CPU model), one line (`vitsim predict --list compute-models` prints them).
struct ComputeModelInfo {
  std::string name;
  std::string stands_for;  // where a device's times come from: "measured per-layer times", ...
  std::string description;
};
std::vector<ComputeModelInfo> compute_models();
std::vector<std::string> compute_model_names();
// Throws Error "unknown compute model 'NAME'; valid: ..." for a name not in the registry.
void check_compute_model(const std::string& name);

// The model of a device that the registry entry in.model picks (see the list above); Error (at
// in.origin) when the entry needs what the calibration lacks ("measured" without measured times).
std::unique_ptr<ComputeModel> make_compute_model(const Workload& w, const ComputeInputs& in,
                                                 const GpuFacts& g, const Calibration* calib);

}  // namespace vitsim::sim
