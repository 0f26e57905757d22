// The op model's fit (calibrate.hpp fit_op_model): the classes' samples, the grid of discrete figures and the
// continuous ones fitted at each grid point. Pure functions, no Torch, no MPI.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "fits/op_fit.hpp"
#include "vitsim/core/base/error.hpp"

namespace vitsim::calibrate {
namespace op_fit {
namespace {

// Grids of the discrete figures (docs/calibrate-validate.md): square tiles, and the short-K half point.
constexpr int kTiles[] = {8, 16, 32, 64, 128};
constexpr double kKHalves[] = {0, 8, 16, 32, 64, 128, 256, 512, 1024};
constexpr double kNHalves[] = {0, 16, 32, 64};

// What the classes' fit works on: the samples outside the family sweeps, which parameters they can tell
// (a class with samples; matrix_s when some matmul has batch > 1; the host time always), the sum of
// their weights.
struct ClassSamples {
  std::vector<OpSample> samples;
  Free free{};
  double weight_sum = 0;
  bool matmuls = false;  // some matmul sample: the tile, k_half and n_half go on the grid
};

void check_sample_times(const std::vector<OpSample>& all) {
  if (all.empty()) throw Error("op model fit: no op sample");
  for (const auto& s : all)
    if (!(s.seconds > 0) || !std::isfinite(s.seconds))
      throw Error(
          fmt::format("op model fit: op {} measured in {} s; times must be positive", s.op.name, s.seconds));
}

ClassSamples class_samples(const std::vector<OpSample>& all, const DeviceFigures& start,
                           const OpFitOptions& options) {
  ClassSamples cs;
  for (const auto& s : all)
    if (!is_kind_sweep(s.op)) cs.samples.push_back(s);
  if (cs.samples.empty()) throw Error("op model fit: no op sample outside the kernel-family sweeps");
  for (const auto& s : cs.samples) {
    if (s.op.kernels < 1)
      throw Error(fmt::format("op model fit: op {} has {} kernels", s.op.name, s.op.kernels));
    const Param c = class_param(s.op);
    if (matmul_param(c) && !(start.peak_flops > 0))
      throw Error(fmt::format("op model fit: device {} needs a positive peak_flops for its matmul samples",
                              start.device_type));
    if (!(start.mem_bw > 0))
      throw Error(fmt::format("op model fit: device {} needs a positive mem_bw", start.device_type));
    cs.free[c] = true;
    if ((c == kGemm || c == kAttn) && s.op.batch > 1) cs.free[kMatrix] = true;
    cs.weight_sum += options.weight_by_time ? s.seconds : 1.0;
  }
  cs.free[kHost] = true;
  cs.matmuls = cs.free[kGemm] || cs.free[kAttn] || cs.free[kConv] || cs.free[kConvW];
  return cs;
}

// One point of the grid of discrete figures.
struct GridPoint {
  int tile_m = 0, tile_n = 0;
  double k_half = 0, n_half = 0;
};
// The grid in search order (tiles, then k_half, then n_half; the first of equal costs wins); with no
// matmul sample the one point of start's figures.
std::vector<GridPoint> grid_points(bool matmuls, const DeviceFigures& start, const OpFitOptions& options) {
  if (!matmuls) return {{start.tile_m, start.tile_n, start.gemm_k_half, start.gemm_n_half}};
  std::vector<GridPoint> grid;
  for (int tm : kTiles)
    for (int tn : kTiles)
      if (tm == tn || !options.square_tiles)
        for (double kh : kKHalves)
          for (double nh : kNHalves) grid.push_back({tm, tn, kh, nh});
  return grid;
}

double log_efficiency(double e) {
  return std::log(std::min(1.0, std::max(kMinEff, e > 0 ? e : 1.0)));
}

// The class samples at the figures f (its grid point's shape efficiencies, its families' costs).
std::vector<Prepared> prepare(const ClassSamples& cs, const DeviceFigures& f, const DeviceFigures& start,
                              const OpFitOptions& options) {
  std::vector<Prepared> v;
  v.reserve(cs.samples.size());
  for (const auto& s : cs.samples) {
    Prepared pr;
    pr.cls = class_param(s.op);
    pr.bytes_param = pr.cls == kNorm ? kNorm : kMem;
    const bool matmul = matmul_param(pr.cls);
    if (!matmul) pr.kind = kind_compute_time(s.op, f);
    if (matmul) pr.compute = s.op.flops / (f.peak_flops * shape_efficiency(s.op, f));
    pr.memory = s.op.bytes / f.mem_bw;
    pr.kernels = s.op.kernels;
    pr.fixed = s.op.kernels * f.kernel_s + (s.op.host_sync ? f.sync_s : 0);
    if (matmul)
      (cs.free[kMatrix] ? pr.matrices : pr.fixed) += s.op.batch * (cs.free[kMatrix] ? 1 : start.matrix_s);
    pr.log_measured = std::log(s.seconds);
    pr.weight = (options.weight_by_time ? s.seconds : 1.0) * cs.samples.size() / cs.weight_sum;
    v.push_back(pr);
  }
  return v;
}

// Where Levenberg-Marquardt starts: host time (and cost per matrix) a tenth of the fastest op per kernel;
// each free efficiency the median of what its class's samples need with those, else start's.
Params start_params(const ClassSamples& cs, const std::vector<Prepared>& v, const DeviceFigures& start) {
  double fastest = INFINITY;
  for (size_t i = 0; i < v.size(); ++i) fastest = std::min(fastest, cs.samples[i].seconds / v[i].kernels);
  const double small = std::log(std::max(kMinHost, 0.1 * fastest));
  Params p{};
  p[kGemm] = log_efficiency(start.gemm_efficiency);
  p[kAttn] = log_efficiency(start.attn_efficiency);
  p[kMem] = log_efficiency(start.mem_efficiency);
  p[kNorm] = log_efficiency(start.norm_efficiency > 0 ? start.norm_efficiency : start.mem_efficiency);
  p[kHost] = small;
  p[kMatrix] = cs.free[kMatrix] ? small : std::log(kMinMatrix);
  p[kConv] = log_efficiency(start.gemm_efficiency);
  p[kConvW] = log_efficiency(start.gemm_efficiency);
  for (int c : {kGemm, kAttn, kMem, kNorm, kConv, kConvW}) {
    if (!cs.free[c]) continue;
    std::vector<double> need;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i].cls != c) continue;
      const double left = cs.samples[i].seconds - std::exp(p[kHost]) * v[i].kernels -
                          std::exp(p[kMatrix]) * v[i].matrices - v[i].fixed;
      const double work = matmul_param(c) ? v[i].compute : v[i].memory;
      if (left > 0 && work > 0) need.push_back(work / left);
    }
    if (!need.empty()) p[c] = log_efficiency(spread_of(need).median);
  }
  return p;
}

// The fitted parameters written into the figures (the free ones; the host time always).
void store_params(const Params& p, const Free& free, DeviceFigures& f) {
  if (free[kGemm]) f.gemm_efficiency = std::exp(p[kGemm]);
  if (free[kAttn]) f.attn_efficiency = std::exp(p[kAttn]);
  if (free[kMem]) f.mem_efficiency = std::exp(p[kMem]);
  if (free[kNorm]) f.norm_efficiency = std::exp(p[kNorm]);
  if (free[kConv]) f.kinds[static_cast<size_t>(OpKind::Conv)].efficiency = std::exp(p[kConv]);
  if (free[kConvW]) f.kinds[static_cast<size_t>(OpKind::ConvWgrad)].efficiency = std::exp(p[kConvW]);
  if (free[kMatrix]) f.matrix_s = p[kMatrix] <= std::log(kMinMatrix) + 1e-6 ? 0 : std::exp(p[kMatrix]);
  f.host_op_s = std::exp(p[kHost]);
}

struct PointFit {
  double cost = INFINITY;
  DeviceFigures figures;
};
// The continuous figures at one grid point f (its tile, k_half and n_half, its kernel families' costs).
PointFit fit_at(const ClassSamples& cs, DeviceFigures f, const DeviceFigures& start,
                const OpFitOptions& options) {
  const std::vector<Prepared> v = prepare(cs, f, start, options);
  Params p = start_params(cs, v, start);
  PointFit out;
  out.cost = levenberg_marquardt(v, p, cs.free);
  store_params(p, cs.free, f);
  out.figures = f;
  return out;
}

// The grid point of least cost (the first on ties) with its continuous figures.
DeviceFigures best_on_grid(const ClassSamples& cs, const DeviceFigures& start, const OpFitOptions& options) {
  double best_cost = INFINITY;
  DeviceFigures best = start;
  for (const GridPoint& g : grid_points(cs.matmuls, start, options)) {
    DeviceFigures f = start;
    if (cs.matmuls) {
      f.tile_m = g.tile_m;
      f.tile_n = g.tile_n;
      f.gemm_k_half = g.k_half;
      f.gemm_n_half = g.n_half;
    }
    const PointFit fit = fit_at(cs, f, start, options);
    if (fit.cost < best_cost) {
      best_cost = fit.cost;
      best = fit.figures;
    }
  }
  return best;
}

}  // namespace
}  // namespace op_fit

OpModelCalibration fit_op_model(const std::vector<OpSample>& all, DeviceFigures start,
                                const OpFitOptions& options) {
  using namespace op_fit;
  check_sample_times(all);
  // First the kernel families' own costs from their sweeps; the classes' figures from the other samples.
  fit_kind_costs(all, start);
  const ClassSamples cs = class_samples(all, start, options);
  DeviceFigures best = best_on_grid(cs, start, options);
  // Second round at the best grid point: the families' costs again with the host time per op the
  // classes' fit found taken off their sweeps (the first round's intercept also took up their noise),
  // then the classes again with those.
  const bool families =
      std::any_of(all.begin(), all.end(), [](const OpSample& s) { return is_kind_sweep(s.op); });
  if (families) {
    DeviceFigures again = best;
    fit_kind_costs(all, again, best.host_op_s);
    best = fit_at(cs, again, start, options).figures;
  }

  OpModelCalibration out;
  out.figures = best;
  out.samples = static_cast<int>(all.size());
  std::vector<double> rel;
  for (const auto& s : all) rel.push_back(std::abs(op_sample_time(s.op, best) - s.seconds) / s.seconds);
  const Spread sp = spread_of(rel);
  out.median_rel_residual = sp.median;
  out.max_rel_residual = sp.max;
  return out;
}

}  // namespace vitsim::calibrate
