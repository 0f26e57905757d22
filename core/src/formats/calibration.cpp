#include "vitsim/core/formats/calibration.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim {
bool same_shape(const ViTConfig& a, const ViTConfig& b) {
  return a.image_size == b.image_size && a.patch == b.patch && a.channels == b.channels &&
         a.width == b.width && a.depth == b.depth && a.heads == b.heads && a.mlp_ratio == b.mlp_ratio &&
         a.classes == b.classes && a.class_tokens == b.class_tokens;
}

const DeviceCalibration* Calibration::find(const std::string& type, const ViTConfig& m, Precision p) const {
  for (const auto& d : devices)
    if (d.device_type == type && d.precision == p && same_shape(d.model, m)) return &d;
  return nullptr;
}

const DeviceCalibration* Calibration::find_any(const ViTConfig& m, Precision p) const {
  for (const auto& d : devices)
    if (d.precision == p && same_shape(d.model, m) && d.peak_flops > 0 && d.mem_bw > 0) return &d;
  return nullptr;
}

const OpModelCalibration* Calibration::op_model(const std::string& type, Precision p) const {
  for (const auto& o : op_models)
    if (o.figures.device_type == type && o.precision == p) return &o;
  return nullptr;
}

const LoaderCalibration* Calibration::loader(const std::string& dataset, int resize) const {
  for (const auto& l : loaders)
    if (l.dataset == dataset && l.resize == resize) return &l;
  return nullptr;
}

double DeviceCalibration::occupancy_factor(int busy) const {
  if (occupancy_busy_ranks < 2 || busy >= occupancy_busy_ranks) return 1;
  const double t = static_cast<double>(std::max(busy, 1) - 1) / (occupancy_busy_ranks - 1);
  return occupancy_alone_factor + (1 - occupancy_alone_factor) * t;
}

void widen_by_earlier(DeviceCalibration& fresh, const DeviceCalibration& earlier) {
  MeasuredSpan& span = fresh.compute_span;
  if (span.empty() || earlier.points.empty() || fresh.points.empty()) return;
  double lo = INFINITY, hi = 0, sum = 0;
  for (const ComputePoint& p : fresh.points) {
    const ComputePoint e = interpolate(earlier, p.micro_batch);
    const double r = (e.fwd_s + e.bwd_s) / (p.fwd_s + p.bwd_s);
    lo = std::min(lo, r);
    hi = std::max(hi, r);
    sum += r;
  }
  const double mean = sum / static_cast<double>(fresh.points.size());
  if (!earlier.compute_span.empty()) {
    lo = std::min(lo, earlier.compute_span.low * mean);
    hi = std::max(hi, earlier.compute_span.high * mean);
  }
  span.low = std::clamp(std::min(span.low, lo), 1e-3, 1.0);
  span.high = std::clamp(std::max(span.high, hi), 1.0, 100.0);
  span.why += fmt::format(
      "; and an earlier calibration of this device (calibrate --append): its forward + backward "
      "x{:.3f}..x{:.3f} "
      "of this one's{}",
      lo, hi, earlier.compute_span.empty() ? "" : ", its own span carried over");
}

Calibration with_span_factors(const Calibration& c, size_t device, double compute, double sync) {
  Calibration out = c;
  DeviceCalibration& d = out.devices.at(device);
  for (ComputePoint& p : d.points) {
    p.fwd_s *= compute;
    p.bwd_s *= compute;
    for (LayerTime& l : p.layers) {
      l.fwd_s *= compute;
      l.bwd_s *= compute;
    }
  }
  d.sync.fixed_s *= sync;
  d.sync.per_compute *= sync;
  if (compute != 1)
    d.scaled_by = fmt::format("x{:.4g} as sampled from its spans.compute (low {:.4g}, high {:.4g})", compute,
                              d.compute_span.low, d.compute_span.high);
  return out;
}

const SyncCalibration* Calibration::sync(const std::string& device_type) const {
  for (const auto& d : devices)
    if (d.device_type == device_type && d.sync.ranks > 0) return &d.sync;
  return nullptr;
}

const MeasuredFigure* Calibration::step_cv(const std::string& device_type) const {
  for (const auto& d : devices)
    if (d.device_type == device_type && !d.step_cv.empty()) return &d.step_cv;
  return nullptr;
}

namespace {
constexpr double kMinTime = 1e-12;  // s: the floor of a fitted time

// t(b) = fixed + per_sample x b.
struct Affine {
  double fixed = 0, per_sample = 0;
  double at(double b) const { return fixed + per_sample * b; }
};

// Least squares on relative residuals over (b_i, t_i); at least two distinct b. Each point is weighted
// by 1/t_i^2 (t_i relative to the largest, floored at 1e-6 of it so a zero time cannot dominate).
Affine fit_affine(const std::vector<double>& b, const std::vector<double>& t) {
  const double tmax = *std::max_element(t.begin(), t.end());
  std::vector<double> w(t.size(), 1.0);
  if (tmax > 0)
    for (size_t i = 0; i < t.size(); ++i) {
      const double r = std::max(t[i] / tmax, 1e-6);
      w[i] = 1 / (r * r);
    }
  double sw = 0, sb = 0, st = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    sw += w[i];
    sb += w[i] * b[i];
    st += w[i] * t[i];
  }
  const double bm = sb / sw, tm = st / sw;
  double sbb = 0, sbt = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    sbb += w[i] * (b[i] - bm) * (b[i] - bm);
    sbt += w[i] * (b[i] - bm) * (t[i] - tm);
  }
  Affine a;
  a.per_sample = sbb > 0 ? sbt / sbb : 0;
  a.fixed = tm - a.per_sample * bm;
  return a;
}

// One micro-batch measured (possibly several times): proportional through the origin, from the mean.
Affine proportional(const std::vector<double>& b, const std::vector<double>& t) {
  double sum = 0;
  for (double x : t) sum += x;
  return {0, sum / t.size() / b.front()};
}

double max_rel_residual(const Affine& a, const std::vector<double>& b, const std::vector<double>& t) {
  double worst = 0;
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i] > 0) worst = std::max(worst, std::abs(a.at(b[i]) - t[i]) / t[i]);
  return worst;
}
}  // namespace

Interpolated interpolate_with_notes(const DeviceCalibration& d, int micro_batch) {
  const auto& pts = d.points;
  if (pts.empty()) throw Error(fmt::format("calibration of {}: no measured points", d.device_type));
  Interpolated out;
  out.measured_min = out.measured_max = pts.front().micro_batch;
  for (const auto& p : pts) {
    out.measured_min = std::min(out.measured_min, p.micro_batch);
    out.measured_max = std::max(out.measured_max, p.micro_batch);
  }
  out.single_point = out.measured_min == out.measured_max;
  out.extrapolated = micro_batch < out.measured_min || micro_batch > out.measured_max;
  const double b = micro_batch;
  auto fit = [&](const std::vector<double>& bs, const std::vector<double>& ts) {
    const bool one = std::all_of(bs.begin(), bs.end(), [&](double x) { return x == bs.front(); });
    return one ? proportional(bs, ts) : fit_affine(bs, ts);
  };

  std::vector<double> bs, fwd, bwd;
  double opt_sum = 0;
  for (const auto& p : pts) {
    bs.push_back(p.micro_batch);
    fwd.push_back(p.fwd_s);
    bwd.push_back(p.bwd_s);
    opt_sum += p.optimizer_s;
  }
  const Affine af = fit(bs, fwd), ab = fit(bs, bwd);
  ComputePoint& cp = out.point;
  cp.micro_batch = micro_batch;
  cp.fwd_s = std::max(kMinTime, af.at(b));
  cp.bwd_s = std::max(kMinTime, ab.at(b));
  cp.optimizer_s = opt_sum / pts.size();
  out.fit_max_rel_residual = std::max(max_rel_residual(af, bs, fwd), max_rel_residual(ab, bs, bwd));

  // Per layer: over the points that list layers, when they all list the same names.
  std::vector<const ComputePoint*> with;
  for (const auto& p : pts)
    if (!p.layers.empty()) with.push_back(&p);
  bool same = !with.empty();
  for (const ComputePoint* p : with) {
    if (p->layers.size() != with.front()->layers.size()) {
      same = false;
      break;
    }
    for (size_t i = 0; i < p->layers.size(); ++i)
      same = same && p->layers[i].name == with.front()->layers[i].name;
  }
  if (same) {
    std::vector<double> lb;
    for (const ComputePoint* p : with) lb.push_back(p->micro_batch);
    for (size_t i = 0; i < with.front()->layers.size(); ++i) {
      std::vector<double> lf, lw;
      for (const ComputePoint* p : with) {
        lf.push_back(p->layers[i].fwd_s);
        lw.push_back(p->layers[i].bwd_s);
      }
      cp.layers.push_back({with.front()->layers[i].name, std::max(kMinTime, fit(lb, lf).at(b)),
                           std::max(kMinTime, fit(lb, lw).at(b))});
    }
  }
  return out;
}

ComputePoint interpolate(const DeviceCalibration& d, int micro_batch) {
  return interpolate_with_notes(d, micro_batch).point;
}

std::string interpolation_note(const DeviceCalibration& d, int micro_batch) {
  const Interpolated r = interpolate_with_notes(d, micro_batch);
  const std::string head = fmt::format("compute on {} at micro-batch {}: ", d.device_type, micro_batch);
  if (r.single_point)
    return r.extrapolated ? head + fmt::format("one measured point (micro-batch {}): scaled proportionally",
                                               r.measured_min)
                          : "";
  if (!r.extrapolated) return "";
  return head + fmt::format("extrapolated {} the measured {}..{} (affine fit)",
                            micro_batch < r.measured_min ? "below" : "beyond", r.measured_min,
                            r.measured_max);
}

std::string unused_calibration_note(const Calibration& c) {
  if (c.links.empty()) return "";
  std::string list;
  for (const auto& l : c.links)
    list += fmt::format("{}{} ({} ranks: {}, {})", list.empty() ? "" : "; ", l.link_class, l.ranks,
                        units::format_bandwidth(l.bandwidth), units::format_time(l.latency));
  return fmt::format(
      "calibration {}: its link fits are not used ({}): the simulated links are the platform's; put the fit "
      "into a platform with `vitsim calibrate --emit-platform` or a --what-if link:...:bandwidth=...",
      c.path, list);
}

}  // namespace vitsim
