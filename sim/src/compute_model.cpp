#include "vitsim/sim/compute_model.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

namespace vitsim::sim {

int kernels_fwd(LayerKind kind) {
  switch (kind) {
    case LayerKind::PatchEmbed: return 4;
    case LayerKind::Attention: return 10;
    case LayerKind::Mlp: return 5;
    case LayerKind::Head: return 3;
  }
  return 1;
}

LayerTimes roofline_layer(const Workload& w, const LayerCost& l, int b, Precision p, const GpuFacts& g) {
  (void)w;
  const double peak = g.peak_flops(p) * g.efficiency;
  const double elem = precision_bytes(p);
  // Weights are read once per pass; activations scale with the batch (fwd_act_bytes is counted in fp32).
  const double act_scale = elem / 4.0;
  const double fwd_bytes = l.params * elem + b * l.fwd_act_bytes * act_scale;
  const double bwd_bytes = 2 * fwd_bytes + l.params * elem;  // read activations and weights, write grads
  LayerTimes t;
  t.fwd_s = std::max(b * l.fwd_flops / peak, fwd_bytes / g.mem_bw) + kernels_fwd(l.kind) * g.kernel_overhead;
  t.bwd_s = std::max(b * l.bwd_flops / peak, bwd_bytes / g.mem_bw) + 2 * kernels_fwd(l.kind) * g.kernel_overhead;
  return t;
}

namespace {
// Parameter tensors of the torchvision ViT: 12 per block (2 LayerNorms, in/out projections, fc1, fc2,
// each weight + bias) and 8 outside (conv weight + bias, class token, position embedding, final LN, head).
int param_tensors(const ViTConfig& m) { return 12 * m.depth + 8; }
}  // namespace

double roofline_optimizer(const Workload& w, Precision p, const GpuFacts& g) {
  const double n = static_cast<double>(w.total_params());
  // fp32 AdamW: read param, grad, m, v (16 B) and write param, m, v (12 B). Mixed precision also reads
  // the fp32 master and writes the half copy back (+6 B).
  const double bytes_per_param = p == Precision::FP32 ? 28.0 : 34.0;
  return n * bytes_per_param / g.mem_bw + 4.0 * param_tensors(w.model) * g.kernel_overhead;
}

namespace {

class RooflineModel : public ComputeModel {
 public:
  RooflineModel(const Workload& w, Precision p, GpuFacts g) : w_(w), p_(p), g_(std::move(g)) {}
  std::string name() const override { return "roofline"; }
  std::vector<LayerTimes> layers(int b) const override {
    std::vector<LayerTimes> out;
    for (const auto& l : w_.layers) out.push_back(roofline_layer(w_, l, b, p_, g_));
    return out;
  }
  double optimizer_s() const override { return roofline_optimizer(w_, p_, g_); }

 private:
  const Workload& w_;
  Precision p_;
  GpuFacts g_;
};

// Measured totals, split over layers by the measured per-layer times when present, else by the
// roofline's share of each layer on the measured device. With `scale_to`, every layer is scaled by the
// roofline ratio target/measured device (cross-device prediction).
class CalibratedModel : public ComputeModel {
 public:
  CalibratedModel(const Workload& w, Precision p, const DeviceCalibration& d, const GpuFacts* target,
                  const GpuFacts& measured_as)
      : w_(w), p_(p), d_(d), target_(target ? std::optional<GpuFacts>(*target) : std::nullopt), measured_(measured_as) {}
  std::string name() const override { return target_ ? "calibrated+roofline-scaled" : "calibrated"; }

  std::vector<LayerTimes> layers(int b) const override {
    ComputePoint cp = interpolate(d_, b);
    std::vector<LayerTimes> shares;
    double fsum = 0, bsum = 0;
    bool by_measured = cp.layers.size() == w_.layers.size();
    for (size_t i = 0; i < w_.layers.size(); ++i) {
      LayerTimes s = by_measured ? LayerTimes{cp.layers[i].fwd_s, cp.layers[i].bwd_s}
                                 : roofline_layer(w_, w_.layers[i], b, p_, measured_);
      fsum += s.fwd_s;
      bsum += s.bwd_s;
      shares.push_back(s);
    }
    std::vector<LayerTimes> out;
    for (size_t i = 0; i < w_.layers.size(); ++i) {
      LayerTimes t{cp.fwd_s * shares[i].fwd_s / fsum, cp.bwd_s * shares[i].bwd_s / bsum};
      if (target_) {
        LayerTimes rt = roofline_layer(w_, w_.layers[i], b, p_, *target_);
        LayerTimes rm = roofline_layer(w_, w_.layers[i], b, p_, measured_);
        t.fwd_s *= rt.fwd_s / rm.fwd_s;
        t.bwd_s *= rt.bwd_s / rm.bwd_s;
      }
      out.push_back(t);
    }
    return out;
  }
  double optimizer_s() const override {
    double measured = interpolate(d_, d_.points.front().micro_batch).optimizer_s;
    if (measured <= 0) return roofline_optimizer(w_, p_, target_ ? *target_ : measured_);
    if (!target_) return measured;
    return measured * roofline_optimizer(w_, p_, *target_) / roofline_optimizer(w_, p_, measured_);
  }

 private:
  const Workload& w_;
  Precision p_;
  const DeviceCalibration& d_;
  std::optional<GpuFacts> target_;
  GpuFacts measured_;
};

}  // namespace

std::unique_ptr<ComputeModel> make_compute_model(const Workload& w, Precision p, const GpuFacts& g,
                                                 const Calibration* calib) {
  if (calib) {
    if (const auto* d = calib->find(g.model, w.model, p)) return std::make_unique<CalibratedModel>(w, p, *d, nullptr, g);
    if (const auto* d = calib->find_any(w.model, p)) {
      // The measured device as a roofline: its peak and bandwidth from the calibration file, with the
      // target's efficiency and launch overhead so that the ratio compares the hardware alone.
      GpuFacts measured = g;
      measured.model = d->device_type;
      measured.flops_fp32 = measured.flops_fp16 = measured.flops_bf16 = d->peak_flops;
      measured.mem_bw = d->mem_bw;
      return std::make_unique<CalibratedModel>(w, p, *d, &g, measured);
    }
  }
  return std::make_unique<RooflineModel>(w, p, g);
}

}  // namespace vitsim::sim
