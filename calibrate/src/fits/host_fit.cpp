// Stage 2 of the op model's fit (calibrate.hpp fit_host_op): the host time per kernel from whole passes.
// Pure functions, no Torch, no MPI.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "vitsim/calibrate/calibrate.hpp"
#include "vitsim/core/base/error.hpp"

namespace vitsim::calibrate {

namespace {

// One whole pass of the host-time fit: its measured time, its device time with no host time (+ syncs),
// its kernels, its ops.
struct PassPoint {
  double measured = 0, device = 0, kernels = 0;
  std::vector<Op> ops;
};

DeviceFigures with_host(const DeviceFigures& stage1, double h) {
  DeviceFigures f = stage1;
  f.host_op_s = h;
  return f;
}

std::vector<PassPoint> pass_points(const Workload& w, const std::vector<PassSample>& passes,
                                   const DeviceFigures& stage1, const OpOptions& o) {
  if (passes.empty()) throw Error("host time fit: no whole-pass measurement");
  const DeviceFigures zero = with_host(stage1, 0);
  std::vector<PassPoint> pts;
  for (const auto& ps : passes) {
    if (!(ps.seconds > 0) || !std::isfinite(ps.seconds))
      throw Error(
          fmt::format("host time fit: the pass at micro-batch {} measured in {} s; times must be positive",
                      ps.micro_batch, ps.seconds));
    PassPoint pt;
    pt.ops = pass_ops(w, ps.micro_batch, o);
    pt.measured = ps.seconds;
    pt.device = run_ops(pt.ops, zero).end_s;  // with no host time: device times (+ syncs)
    pt.kernels = 0;
    for (const Op& op : pt.ops) pt.kernels += op.kernels;
    pts.push_back(std::move(pt));
  }
  return pts;
}

// Synchronous device: end = device + h x kernels. The whole passes and the ops were timed at different
// moments, and a shared machine's speed drifts between them (memory bandwidth seen from 18 to 48 GB/s
// within minutes): measured = s x device + h x kernels, with s the speed of the pass phase relative to the
// op phase (a nuisance factor, not kept) and h the host time per kernel; least squares on relative
// errors, (s, h) from the 2x2 normal equations. With one pass, or h < 0, s = 1 is kept and h alone is
// fitted: h = sum(a_b (1 - device_b / measured_b)) / sum(a_b^2), a_b = kernels_b / measured_b.
void fit_host_sync(const std::vector<PassPoint>& pts, HostFit& out) {
  double suu = 0, suv = 0, svv = 0, suy = 0, svy = 0;
  for (const auto& pt : pts) {
    const double u = pt.device / pt.measured, v = pt.kernels / pt.measured;  // y = 1
    suu += u * u;
    suv += u * v;
    svv += v * v;
    suy += u;
    svy += v;
  }
  const double det = suu * svv - suv * suv;
  double sc = 1, h = -1;
  if (pts.size() >= 2 && det > 1e-12 * suu * svv) {
    sc = (suy * svv - svy * suv) / det;
    h = (suu * svy - suv * suy) / det;
  }
  if (!(h >= 0) || !(sc > 0)) {
    sc = 1;
    h = (svy - suv) / svv;  // s = 1: sum v (1 - u) / sum v^2
  }
  out.host_op_s = std::max(0.0, h);
  out.speed = sc;
}

// Asynchronous device: the host and the device overlap (core/model/ops.hpp run_ops), the end is
// non-decreasing in h; golden-section search of the relative squared error between 0 and the h that
// makes the host alone the longest measured pass.
void fit_host_async(const std::vector<PassPoint>& pts, const DeviceFigures& stage1, HostFit& out) {
  auto cost = [&](double h) {
    const DeviceFigures f = with_host(stage1, h);
    double c = 0;
    for (const auto& pt : pts) {
      const double r = run_ops(pt.ops, f).end_s / pt.measured - 1;
      c += r * r;
    }
    return c;
  };
  double lo = 0, hi = 0;
  for (const auto& pt : pts) hi = std::max(hi, pt.measured / pt.kernels);
  const double g = (std::sqrt(5.0) - 1) / 2;
  double a = hi - g * (hi - lo), b = lo + g * (hi - lo), ca = cost(a), cb = cost(b);
  for (int it = 0; it < 200 && hi - lo > 1e-15; ++it) {
    if (ca <= cb) {
      hi = b;
      b = a;
      cb = ca;
      a = hi - g * (hi - lo);
      ca = cost(a);
    } else {
      lo = a;
      a = b;
      ca = cb;
      b = lo + g * (hi - lo);
      cb = cost(b);
    }
  }
  out.host_op_s = std::max(0.0, (lo + hi) / 2);
  if (cost(0) <= cost(out.host_op_s)) out.host_op_s = 0;
}

}  // namespace

HostFit fit_host_op(const Workload& w, const std::vector<PassSample>& passes, const DeviceFigures& stage1,
                    const OpOptions& o) {
  const std::vector<PassPoint> pts = pass_points(w, passes, stage1, o);
  HostFit out;
  if (!stage1.async)
    fit_host_sync(pts, out);
  else
    fit_host_async(pts, stage1, out);
  const DeviceFigures f = with_host(stage1, out.host_op_s);
  for (size_t i = 0; i < pts.size(); ++i) {
    const auto& pt = pts[i];
    HostFitPoint hp;
    hp.micro_batch = passes[i].micro_batch;
    hp.measured_s = pt.measured;
    hp.device_s = pt.device;
    hp.kernels = pt.kernels;
    hp.implied_host_op_s = (pt.measured - pt.device) / pt.kernels;
    hp.predicted_s = run_ops(pt.ops, f).end_s;
    // The fit's own residual: on a synchronous device with the speed factor on the device part.
    const double fitted = stage1.async ? hp.predicted_s : out.speed * pt.device + out.host_op_s * pt.kernels;
    hp.residual = fitted / pt.measured - 1;
    out.points.push_back(hp);
    out.max_rel_residual = std::max(out.max_rel_residual, std::abs(hp.residual));
  }
  return out;
}

}  // namespace vitsim::calibrate
