#include "vitsim/sim/compute/compute_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "vitsim/core/base/units.hpp"

namespace vitsim::sim {

double expected_max_normal(int n) {
  if (n <= 1) return 0;
  // Simpson's rule over [-10, 10]: the integrand is below 1e-20 beyond.
  constexpr int kSteps = 4000;
  constexpr double lo = -10, hi = 10, h = (hi - lo) / kSteps;
  auto f = [n](double x) {
    const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    return x * n * pdf * std::pow(cdf, n - 1);
  };
  double sum = f(lo) + f(hi);
  for (int i = 1; i < kSteps; ++i) sum += (i % 2 ? 4 : 2) * f(lo + i * h);
  return sum * h / 3;
}

double sync_wait_s(const SyncCalibration& sync, double compute_s, int ranks) {
  if (ranks <= 1 || sync.ranks < 2) return 0;
  const double scale = expected_max_normal(ranks) / expected_max_normal(sync.ranks);
  return sync.fixed_s + sync.per_compute * compute_s * scale;
}

double straggler_wait_s(double cv, double compute_s, int ranks) {
  return ranks <= 1 ? 0 : cv * compute_s * expected_max_normal(ranks);
}

std::vector<LayerTimes> op_layer_times(const Workload& w, int b, const OpOptions& o, const DeviceFigures& d) {
  const std::vector<Op> ops = pass_ops(w, b, o);
  const Timeline tl = run_ops(ops, d);
  std::vector<LayerTimes> out(w.layers.size());
  double prev = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const double dt = tl.op_end_s[i] - prev;
    prev = tl.op_end_s[i];
    LayerTimes& t = out.at(static_cast<size_t>(ops[i].layer));
    (ops[i].pass == Pass::Fwd ? t.fwd_s : t.bwd_s) += dt;
  }
  // A host-bound tail (the host still issuing when the device is done) belongs to the last op's layer.
  if (!ops.empty() && tl.end_s > prev) out.at(static_cast<size_t>(ops.back().layer)).bwd_s += tl.end_s - prev;
  return out;
}

StepFlops step_flops(const Workload& w, int micro_batch, int grad_accum, const ComputeInputs& in) {
  StepFlops f;
  for (const Op& op : pass_ops(w, micro_batch, in.ops())) {
    const LayerKind kind = w.layers.at(static_cast<size_t>(op.layer)).kind;
    const bool token_wise = kind != LayerKind::Head;
    const double flops = op.flops * grad_accum / (token_wise ? std::max(1, in.token_split) : 1);
    f.model += flops;
    if (in.recompute && op.pass == Pass::Fwd && (kind == LayerKind::Attention || kind == LayerKind::Mlp))
      f.recompute += flops;
  }
  return f;
}

double op_step_time(const Workload& w, const StepInputs& step, const DeviceFigures& d) {
  return run_ops(step_ops(w, step), d).end_s;
}

namespace {

// Patch parallelism: a rank computes 1/split of every token-wise layer (the head runs whole).
void split_tokens(const Workload& w, std::vector<LayerTimes>& t, int split) {
  if (split <= 1) return;
  for (size_t i = 0; i < t.size(); ++i)
    if (w.layers[i].kind != LayerKind::Head) {
      t[i].fwd_s /= split;
      t[i].bwd_s /= split;
    }
}

// Activation checkpointing: backward of an encoder layer first runs its forward again (the recompute),
// at the forward's own time on this device.
void add_recompute(const Workload& w, std::vector<LayerTimes>& t, bool recompute) {
  if (!recompute) return;
  for (size_t i = 0; i < t.size(); ++i)
    if (w.layers[i].kind == LayerKind::Attention || w.layers[i].kind == LayerKind::Mlp)
      t[i].bwd_s += t[i].fwd_s;
}

class OpModel : public ComputeModel {
 public:
  OpModel(const Workload& w, ComputeInputs in, DeviceFigures d, std::string name)
      : w_(w), in_(std::move(in)), d_(std::move(d)), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  std::vector<LayerTimes> layers(int b) const override {
    auto t = op_layer_times(w_, b, in_.ops(), d_);
    split_tokens(w_, t, in_.token_split);
    add_recompute(w_, t, in_.recompute);
    return t;
  }
  double optimizer_s() const override { return op_step_time(w_, in_.step, d_); }
  std::vector<std::string> notes(int b) const override {
    const Timeline tl = run_ops(pass_ops(w_, b, in_.ops()), d_);
    if (d_.async && tl.host_s > tl.device_s)
      return {fmt::format(
          "compute on {} at micro-batch {} is launch-bound: the host issues its ops in {:.3g} ms, "
          "the device runs them in {:.3g} ms",
          d_.device_type, b, 1e3 * tl.host_s, 1e3 * tl.device_s)};
    return {};
  }

 private:
  const Workload& w_;
  ComputeInputs in_;
  DeviceFigures d_;
  std::string name_;
};

// Measured times of this shape (affine in micro-batch), split over layers by the measured per-layer
// times when present, else by the op model's shares on the measured device. With `target`, each layer
// is scaled by the op model's ratio target / measured device (cross-device prediction).
class CalibratedModel : public ComputeModel {
 public:
  CalibratedModel(const Workload& w, ComputeInputs in, const DeviceCalibration& d, DeviceFigures measured,
                  std::optional<DeviceFigures> target)
      : w_(w), in_(std::move(in)), d_(d), measured_(std::move(measured)), target_(std::move(target)) {}
  std::string name() const override { return target_ ? "calibrated+op-scaled model" : "calibrated model"; }

  std::vector<LayerTimes> layers(int b) const override {
    const ComputePoint cp = interpolate(d_, b);
    const bool by_measured = cp.layers.size() == w_.layers.size();
    // The op model on the measured device: the split over layers when none was measured, and the
    // denominator of the cross-device ratio.
    std::vector<LayerTimes> model_m, model_t;
    if (!by_measured || target_) model_m = op_layer_times(w_, b, in_.ops(), measured_);
    if (target_) model_t = op_layer_times(w_, b, in_.ops(), *target_);
    std::vector<LayerTimes> shares;
    double fsum = 0, bsum = 0;
    for (size_t i = 0; i < w_.layers.size(); ++i) {
      LayerTimes s = by_measured ? LayerTimes{cp.layers[i].fwd_s, cp.layers[i].bwd_s} : model_m[i];
      fsum += s.fwd_s;
      bsum += s.bwd_s;
      shares.push_back(s);
    }
    std::vector<LayerTimes> out;
    for (size_t i = 0; i < w_.layers.size(); ++i) {
      LayerTimes t{cp.fwd_s * shares[i].fwd_s / fsum, cp.bwd_s * shares[i].bwd_s / bsum};
      if (target_) {
        t.fwd_s *= model_t[i].fwd_s / model_m[i].fwd_s;
        t.bwd_s *= model_t[i].bwd_s / model_m[i].bwd_s;
      }
      out.push_back(t);
    }
    split_tokens(w_, out, in_.token_split);
    add_recompute(w_, out, in_.recompute);
    return out;
  }
  std::vector<std::string> notes(int b) const override {
    const std::string n = interpolation_note(d_, b);
    if (n.empty()) return {};
    return {n};
  }
  // The measured optimizer phase is vitsim's own trainer's (fp32 parameters and state); another framework's
  // step, or one over a module in half (training.cast=module), comes from the op model on the measured
  // device's figures (and is scaled like the layers across devices).
  double optimizer_s() const override {
    const double measured = interpolate(d_, d_.points.front().micro_batch).optimizer_s;
    const DeviceFigures& dev = target_ ? *target_ : measured_;
    if (measured <= 0 || in_.step.framework != Framework::Vitsim || in_.step.param_bytes != 4)
      return op_step_time(w_, in_.step, dev);
    const double part =
        in_.step.zero_stage >= 1 ? 1.0 / std::max(1, in_.step.dp_ranks) : 1.0;  // ZeRO-1+ partition
    // The trainer measured no clipping: its norm and scale come from the op model on top.
    StepInputs plain = in_.step;
    plain.gradient_clipping = 0;
    const double clip =
        in_.step.gradient_clipping > 0 ? op_step_time(w_, in_.step, dev) - op_step_time(w_, plain, dev) : 0;
    if (!target_) return measured * part + clip;
    return measured * part * op_step_time(w_, plain, *target_) / op_step_time(w_, plain, measured_) + clip;
  }

 private:
  const Workload& w_;
  ComputeInputs in_;
  const DeviceCalibration& d_;
  DeviceFigures measured_;
  std::optional<DeviceFigures> target_;  // cross-device: the device predicted for
};

}  // namespace

namespace {

// The models a registry entry chains: each gives a model for this device or nullptr when the calibration
// lacks what it needs.
struct Candidates {
  const Workload& w;
  const ComputeInputs& in;
  const GpuFacts& g;
  const Calibration* calib;
  DeviceFigures platform;

  const OpModelCalibration* fitted() const {
    return calib ? calib->op_model(g.model, in.precision) : nullptr;
  }
  // This device measured on this shape: its times, split and scaled by its fitted figures if any.
  std::unique_ptr<ComputeModel> measured_here() const {
    const DeviceCalibration* d = calib ? calib->find(g.model, w.model, in.precision) : nullptr;
    if (!d) return nullptr;
    return std::make_unique<CalibratedModel>(w, in, *d, fitted() ? fitted()->figures : platform,
                                             std::nullopt);
  }
  // Another device measured on this shape, scaled by the op model's ratio of the two devices.
  std::unique_ptr<ComputeModel> measured_elsewhere() const {
    const DeviceCalibration* d = calib ? calib->find_any(w.model, in.precision) : nullptr;
    if (!d) return nullptr;
    // The measured device: its fitted figures, else its stated peak and bandwidth with the target's
    // efficiencies, so that the ratio compares the hardware alone.
    DeviceFigures measured = platform;
    if (const auto* m = calib->op_model(d->device_type, in.precision)) {
      measured = m->figures;
    } else {
      measured.device_type = d->device_type;
      measured.peak_flops = d->peak_flops;
      measured.mem_bw = d->mem_bw;
    }
    return std::make_unique<CalibratedModel>(w, in, *d, measured, platform);
  }
  std::unique_ptr<ComputeModel> op_fitted() const {
    if (!fitted()) return nullptr;
    return std::make_unique<OpModel>(w, in, fitted()->figures, "op-level model (calibrated figures)");
  }
  std::unique_ptr<ComputeModel> op_platform() const {
    return std::make_unique<OpModel>(w, in, platform, "op-level model (platform figures)");
  }
};

std::string names_list() {
  std::string out;
  for (const auto& n : compute_model_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

using Factory = std::unique_ptr<ComputeModel> (*)(const Candidates&);

struct Registered {
  ComputeModelInfo info;
  Factory make;
};

std::unique_ptr<ComputeModel> make_auto(const Candidates& c) {
  if (auto m = c.measured_here()) return m;
  if (auto m = c.op_fitted()) return m;
  if (auto m = c.measured_elsewhere()) return m;
  return c.op_platform();
}

std::unique_ptr<ComputeModel> make_measured(const Candidates& c) {
  if (auto m = c.measured_here()) return m;
  if (auto m = c.measured_elsewhere()) return m;
  throw Error(
      c.in.origin,
      fmt::format("compute.model: measured: {} has no measured times of this ViT at {} (vitsim calibrate "
                  "measures them); choose another of {}",
                  c.calib ? "the calibration" : "no --calibration was given, so vitsim",
                  precision_name(c.in.precision), names_list()));
}

std::unique_ptr<ComputeModel> make_op(const Candidates& c) {
  if (auto m = c.op_fitted()) return m;
  return c.op_platform();
}

std::unique_ptr<ComputeModel> make_op_platform(const Candidates& c) {
  return c.op_platform();
}

// The registry, in the order docs/model.md "Compute models" lists it. A new model is a ComputeModel subclass
// above and a row here.
const std::vector<Registered>& registry() {
  static const std::vector<Registered> r{
      {{"auto", "the best source each device has: measured times, else the op model",
        "per device, the first that applies: this device measured on this shape (calibrated model), the op "
        "model with this device's fitted figures, another device's measured times scaled by the op model, "
        "the "
        "op model with the platform file's figures"},
       make_auto},
      {{"measured", "measured per-layer times (vitsim calibrate)",
        "measured times of this shape (vitsim calibrate): this device's, else another device's scaled by the "
        "op model; an error without them"},
       make_measured},
      {{"op", "the operator-level model with fitted efficiencies",
        "the operator-level model with this device's fitted figures when the calibration has them, else the "
        "platform file's"},
       make_op},
      {{"op_platform", "the operator-level model with the platform file's (datasheet) figures",
        "the operator-level model with the platform file's figures, the calibration ignored"},
       make_op_platform},
  };
  return r;
}

const Registered& registered(const std::string& name) {
  for (const auto& r : registry())
    if (r.info.name == name) return r;
  throw Error(fmt::format("unknown compute model '{}'; valid: {}", echo(name), names_list()));
}

}  // namespace

std::vector<ComputeModelInfo> compute_models() {
  std::vector<ComputeModelInfo> out;
  for (const auto& r : registry()) out.push_back(r.info);
  return out;
}

std::vector<std::string> compute_model_names() {
  std::vector<std::string> out;
  for (const auto& r : registry()) out.push_back(r.info.name);
  return out;
}

void check_compute_model(const std::string& name) {
  (void)registered(name);
}

std::unique_ptr<ComputeModel> make_compute_model(const Workload& w, const ComputeInputs& in,
                                                 const GpuFacts& g, const Calibration* calib) {
  return registered(in.model).make(Candidates{w, in, g, calib, device_figures(g, in.precision)});
}

}  // namespace vitsim::sim
