// Statistics, the ring all-reduce fit and the platform file writer: pure functions, no Torch, no MPI.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <iterator>
#include <stdexcept>

#include "vitsim/calibrate/calibrate.hpp"
#include "vitsim/core/error.hpp"

namespace vitsim::calibrate {

namespace {
// Linear interpolation between order statistics (numpy's default "linear" percentile).
double percentile_sorted(const std::vector<double>& v, double q) {
  const double pos = q * (v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - lo) * (v[hi] - v[lo]);
}
}  // namespace

Spread spread_of(std::vector<double> values) {
  if (values.empty()) throw Error("internal: spread of an empty sample");
  std::sort(values.begin(), values.end());
  Spread s;
  s.count = static_cast<int>(values.size());
  s.min = values.front();
  s.max = values.back();
  s.median = percentile_sorted(values, 0.5);
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / values.size();
  s.p25 = percentile_sorted(values, 0.25);
  s.p75 = percentile_sorted(values, 0.75);
  return s;
}

double algbw(double bytes, double seconds) { return seconds > 0 ? bytes / seconds : 0; }

double busbw_allreduce(double bytes, double seconds, int ranks) {
  return algbw(bytes, seconds) * 2.0 * (ranks - 1) / ranks;
}

RingFit fit_ring_allreduce(const std::vector<AllreduceSample>& samples, int ranks) {
  if (ranks < 2) throw Error(fmt::format("an all-reduce fit needs at least 2 ranks, got {}", ranks));
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& s : samples) {
    if (!(s.seconds > 0) || !(s.bytes > 0))
      throw Error(fmt::format("all-reduce sample of {} bytes in {} s: both must be positive", s.bytes, s.seconds));
    lo = std::min(lo, s.bytes);
    hi = std::max(hi, s.bytes);
  }
  if (samples.size() < 2 || lo == hi) throw Error("an all-reduce fit needs samples of at least two message sizes");
  // t = c0 + c1 S with c0 = 2(n-1) a, c1 = 2(n-1) / (n B); weighted least squares, w = 1/t^2.
  double sw = 0, sx = 0, sxx = 0, st = 0, sxt = 0;
  for (const auto& s : samples) {
    const double w = 1.0 / (s.seconds * s.seconds);
    sw += w;
    sx += w * s.bytes;
    sxx += w * s.bytes * s.bytes;
    st += w * s.seconds;
    sxt += w * s.bytes * s.seconds;
  }
  double c1 = (sw * sxt - sx * st) / (sw * sxx - sx * sx);
  double c0 = (st - c1 * sx) / sw;
  if (c0 < 0) {
    c0 = 0;
    c1 = sxt / sxx;
  }
  if (!(c1 > 0))
    throw Error("all-reduce times do not grow with the message size: no bandwidth can be fitted (measure larger sizes)");
  RingFit f;
  f.latency_s = c0 / (2.0 * (ranks - 1));
  f.bandwidth = 2.0 * (ranks - 1) / (ranks * c1);
  for (const auto& s : samples)
    f.max_rel_residual = std::max(f.max_rel_residual, std::abs(ring_allreduce_time(f, s.bytes, ranks) - s.seconds) / s.seconds);
  return f;
}

double ring_allreduce_time(const RingFit& f, double bytes, int ranks) {
  return 2.0 * (ranks - 1) * f.latency_s + 2.0 * (ranks - 1) / ranks * bytes / f.bandwidth;
}

// ---- the op model's fit ----

namespace {

// The model: one layer of each kind (the first attention and MLP blocks stand for all of them), its ops
// at each micro-batch.
void model_benchmarks(const Workload& w, const std::vector<int>& micro_batches, Precision p, std::vector<OpBenchmark>& out) {
  std::vector<int> layers;
  for (LayerKind kind : {LayerKind::PatchEmbed, LayerKind::Attention, LayerKind::Mlp, LayerKind::Head})
    for (int l = 0; l < static_cast<int>(w.layers.size()); ++l)
      if (w.layers[l].kind == kind) {
        layers.push_back(l);
        break;
      }
  for (int b : micro_batches)
    for (int l : layers)
      for (const Op& op : layer_ops(w, l, b, OpOptions{p})) out.push_back({op, b});
}

// GEMMs on a checkerboard of shapes and the attention's batched matmuls, in the matmul dtype.
void matmul_sweep(Precision p, int sweep_rows, std::vector<OpBenchmark>& out) {
  const double e = p == Precision::FP32 ? 4 : 2;
  auto matmul = [&](OpClass cls, const std::string& name, double batch, double m, double n, double k) {
    out.push_back({matmul_op(name, Pass::Fwd, cls, batch, m, n, k, e), 0});
  };
  const int dims[] = {32, 64, 128, 256, 512, 1024, 2048};
  std::vector<int> ms{sweep_rows, 256, 1024, 4096};
  for (size_t im = 0; im < ms.size(); ++im)
    for (int in = 0; in < 7; ++in)
      for (int ik = 0; ik < 7; ++ik) {
        const double m = ms[im], n = dims[in], k = dims[ik];
        if ((in + ik + static_cast<int>(im)) % 2 != 0 || 2 * m * n * k > 4294967296.0) continue;
        matmul(OpClass::Gemm, fmt::format("sweep.gemm.m{}.n{}.k{}", ms[im], dims[in], dims[ik]), 1, m, n, k);
      }
  for (int bh : {64, 256})
    for (int t : {17, 65, 197})
      for (int hd : {16, 32, 64}) {
        matmul(OpClass::AttnMatmul, fmt::format("sweep.bmm_qk.b{}.t{}.hd{}", bh, t, hd), bh, t, t, hd);
        matmul(OpClass::AttnMatmul, fmt::format("sweep.bmm_av.b{}.t{}.hd{}", bh, t, hd), bh, t, hd, t);
      }
}

// Kernel families (core/ops.hpp OpKind) at several row lengths, operands in the cache: the cost per
// element and per row that bounds them below the bandwidth. Elements about 2^18 and 2^20 (fp32).
void family_sweep(std::vector<OpBenchmark>& out) {
  auto kind = [&](OpKind k, OpClass cls, const std::string& name, double elems, double rows, double bytes) -> Op& {
    Op op = memory_op(name, Pass::Fwd, bytes, 1, cls);
    op.kind = k;
    op.elems = elems;
    op.rows = rows;
    out.push_back({op, 0});
    return out.back().op;
  };
  for (double target : {262144.0, 1048576.0}) {
    for (int t : {17, 65, 197}) {
      const double rows = std::round(target / t), e = rows * t;
      kind(OpKind::Softmax, OpClass::Norm, fmt::format("sweep.softmax.t{}.r{:.0f}", t, rows), e, rows, 8 * e);
      kind(OpKind::SoftmaxBwd, OpClass::Norm, fmt::format("sweep.softmax_bwd.t{}.r{:.0f}", t, rows), e, rows, 12 * e);
    }
    for (int d : {64, 192, 512, 1024}) {
      const double rows = std::round(target / d), e = rows * d;
      kind(OpKind::LayerNorm, OpClass::Norm, fmt::format("sweep.layer_norm.d{}.r{:.0f}", d, rows), e, rows, 8 * e + 8 * rows);
      kind(OpKind::LayerNormBwd, OpClass::Norm, fmt::format("sweep.layer_norm_bwd.d{}.r{:.0f}", d, rows), e, rows,
           20 * e + 8 * rows);
    }
    kind(OpKind::Gelu, OpClass::Norm, fmt::format("sweep.gelu.e{:.0f}", target), target, 0, 8 * target);
    kind(OpKind::GeluBwd, OpClass::Norm, fmt::format("sweep.gelu_bwd.e{:.0f}", target), target, 0, 12 * target);
    for (int n : {64, 256, 1024}) {
      const double rows = std::round(target / n), e = rows * n;
      kind(OpKind::Reduce, OpClass::Memory, fmt::format("sweep.reduce.n{}.r{:.0f}", n, rows), e, n, 4 * e + 4 * n);
    }
    for (int d : {64, 256})
      for (int n : {16, 64}) {
        const double b = std::round(target / (d * n)), e = b * d * n;
        Op& gather = kind(OpKind::Strided, OpClass::Memory, fmt::format("sweep.strided.d{}.n{}.b{:.0f}", d, n, b), e, 0, 8 * e);
        // The gather's shape for its kernel (compute.cpp): [B, D, N] read as batch B of [m, n] = [D, N],
        // written as [N, B, D]. A memory op's batch, m and n enter no prediction (core/ops.cpp: matmuls only).
        gather.batch = b;
        gather.m = d;
        gather.n = n;
      }
  }
}

// Copies and adds of 64 KiB per tensor upwards, x4 apart, up to the first size of at least 64 MiB and
// twice the last-level cache.
void copy_sweep(double llc_bytes, std::vector<OpBenchmark>& out) {
  const double largest = std::max(64.0 * 1024 * 1024, 2 * llc_bytes);
  for (double size = 64.0 * 1024;; size *= 4) {
    for (int reads : {1, 2}) {
      out.push_back({memory_op(fmt::format("sweep.{}.{:.0f}", reads == 1 ? "copy" : "add", size), Pass::Fwd,
                               size * (reads + 1)),
                     0});
    }
    if (size >= largest) break;
  }
}

}  // namespace

std::vector<OpBenchmark> op_benchmarks(const Workload& w, const std::vector<int>& micro_batches, Precision p,
                                       int sweep_rows, double llc_bytes) {
  std::vector<OpBenchmark> out;
  model_benchmarks(w, micro_batches, p, out);
  matmul_sweep(p, sweep_rows, out);
  family_sweep(out);
  copy_sweep(llc_bytes, out);
  return out;
}

double op_sample_time(const vitsim::Op& op, const DeviceFigures& f) { return run_ops({op}, f).end_s; }

double parse_cache_size(const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::logic_error&) {
    return 0;
  }
  std::string unit = text.substr(used);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.back()))) unit.pop_back();
  const double scale = unit.empty() ? 1 : unit == "K" ? 1024.0 : unit == "M" ? 1024.0 * 1024 : unit == "G" ? 1024.0 * 1024 * 1024 : 0;
  return v > 0 ? v * scale : 0;
}

namespace {

// Grids of the discrete figures (docs/calibrate-validate.md): square tiles, and the short-K half point.
constexpr int kTiles[] = {8, 16, 32, 64, 128};
constexpr double kKHalves[] = {0, 8, 16, 32, 64, 128, 256, 512, 1024};
constexpr double kNHalves[] = {0, 16, 32, 64};
// Bounds of the continuous figures: efficiencies in [1e-6, 1], host time per op in [1e-9 s, 1 s], the
// cost per matrix of a batched matmul in [1e-15 s, 10 ms] (at the lower bound it is reported as 0: none).
constexpr double kMinEff = 1e-6, kMinHost = 1e-9, kMaxHost = 1.0, kMinMatrix = 1e-15, kMaxMatrix = 1e-2;

// The one small dense solver of the fits: solves the leading n x n block of a x = b (n <= N) by Gaussian
// elimination with partial pivoting and back substitution, in place. False when a pivot is zero (or not
// a number): the system is singular and x is left as it was.
template <size_t N>
bool solve_dense(std::array<std::array<double, N>, N>& a, std::array<double, N>& b, size_t n, std::array<double, N>& x) {
  for (size_t c = 0; c < n; ++c) {
    size_t piv = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::abs(a[r][c]) > std::abs(a[piv][c])) piv = r;
    std::swap(a[c], a[piv]);
    std::swap(b[c], b[piv]);
    if (!(std::abs(a[c][c]) > 0)) return false;
    for (size_t r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (size_t c = n; c-- > 0;) {
    double v = b[c];
    for (size_t k = c + 1; k < n; ++k) v -= a[c][k] * x[k];
    x[c] = v / a[c][c];
  }
  return true;
}

// The six continuous figures, fitted as logarithms: the efficiency of each op class, the host time per
// kernel, the fixed cost per matrix of a batched matmul.
enum Param { kGemm, kAttn, kMem, kNorm, kHost, kMatrix, kConv, kConvW, kParams };
// Parameters that are a matmul's efficiency (compute-bound terms).
bool matmul_param(int c) { return c == kGemm || c == kAttn || c == kConv || c == kConvW; }
using Params = std::array<double, kParams>;
using Free = std::array<bool, kParams>;
using ParamMatrix = std::array<std::array<double, kParams>, kParams>;

// One sample with its grid point's shape efficiency folded in: predicted =
// max(compute / eff_class, memory / eff_bytes) + host x kernels + matrix_s x matrices + fixed.
struct Prepared {
  int cls = kMem;          // kGemm, kAttn, kConv, kConvW (matmuls), kMem or kNorm: its efficiency parameter
  int bytes_param = kMem;  // whose efficiency its bytes move at: kNorm for norm ops, else kMem
  double compute = 0;      // flops / (peak x shape efficiency); 0 for memory and norm ops
  double memory = 0;       // bytes / mem_bw
  double kind = 0;         // the kernel family's own cost (core/ops kind_compute_time), fixed in this fit
  double kernels = 1;
  double matrices = 0;     // a matmul's batch (each matrix costs matrix_s) when matrix_s is fitted
  double fixed = 0;        // kernels x kernel_s (+ sync_s) (+ matrices x matrix_s when it is not fitted)
  double log_measured = 0;
  double weight = 1;       // normalised: the weights sum to the sample count
};

Param class_param(const Op& op) {
  if (is_matmul(op) && op.flops > 0) {
    if (op.kind == OpKind::Conv) return kConv;
    if (op.kind == OpKind::ConvWgrad) return kConvW;
    return op.cls == OpClass::Gemm ? kGemm : kAttn;
  }
  return op.cls == OpClass::Norm ? kNorm : kMem;
}

struct Terms {
  double mem, cmp, host, matrix, pred;
};
Terms terms(const Prepared& s, const Params& p) {
  Terms t;
  t.mem = s.memory / std::exp(p[s.bytes_param]);
  t.cmp = matmul_param(s.cls) ? s.compute / std::exp(p[s.cls]) : s.kind;
  t.host = std::exp(p[kHost]) * s.kernels;
  t.matrix = std::exp(p[kMatrix]) * s.matrices;
  t.pred = std::max(t.mem, t.cmp) + t.host + t.matrix + s.fixed;
  return t;
}

double cost_of(const std::vector<Prepared>& v, const Params& p) {
  double c = 0;
  for (const auto& s : v) {
    const double r = std::log(terms(s, p).pred) - s.log_measured;
    c += s.weight * r * r;
  }
  return c;
}

void clamp_params(Params& p) {
  for (int i : {kGemm, kAttn, kMem, kNorm, kConv, kConvW}) p[i] = std::min(0.0, std::max(std::log(kMinEff), p[i]));
  p[kHost] = std::min(std::log(kMaxHost), std::max(std::log(kMinHost), p[kHost]));
  p[kMatrix] = std::min(std::log(kMaxMatrix), std::max(std::log(kMinMatrix), p[kMatrix]));
}

// The normal equations J^T W J and J^T W r of the weighted log residuals at p.
void normal_equations(const std::vector<Prepared>& v, const Params& p, ParamMatrix& jtj, Params& jtr) {
  for (const auto& s : v) {
    const Terms t = terms(s, p);
    const double r = std::log(t.pred) - s.log_measured;
    Params j{};  // d ln(pred) / d p
    if (matmul_param(s.cls) && t.cmp >= t.mem)
      j[s.cls] = -t.cmp / t.pred;
    else if (t.mem >= t.cmp)
      j[s.bytes_param] = -t.mem / t.pred;
    j[kHost] = t.host / t.pred;
    j[kMatrix] = t.matrix / t.pred;
    for (int a = 0; a < kParams; ++a) {
      jtr[a] += s.weight * j[a] * r;
      for (int b = 0; b < kParams; ++b) jtj[a][b] += s.weight * j[a] * j[b];
    }
  }
}

// One damped step (J^T W J + lambda diag) step = -J^T W r over the free parameters (fixed ones step 0);
// false when that system is singular.
bool damped_step(const ParamMatrix& jtj, const Params& jtr, double lambda, const Free& free, Params& step) {
  ParamMatrix m = jtj;
  Params rhs{};
  for (int a = 0; a < kParams; ++a) {
    m[a][a] += lambda * (jtj[a][a] + 1e-12);
    rhs[a] = -jtr[a];
  }
  for (int i = 0; i < kParams; ++i)
    if (!free[i]) {
      for (int j = 0; j < kParams; ++j) m[i][j] = m[j][i] = 0;
      m[i][i] = 1;
      rhs[i] = 0;
    }
  step = Params{};
  return solve_dense(m, rhs, kParams, step);
}

// Levenberg-Marquardt on the weighted log residuals from `p`, the parameters kept inside their bounds.
double levenberg_marquardt(const std::vector<Prepared>& v, Params& p, const Free& free) {
  clamp_params(p);
  double cost = cost_of(v, p), lambda = 1e-3;
  int stalled = 0;  // accepted steps in a row that gained next to nothing
  for (int it = 0; it < 500 && lambda < 1e12 && stalled < 3 && cost > 1e-28; ++it) {
    ParamMatrix jtj{};
    Params jtr{};
    normal_equations(v, p, jtj, jtr);
    bool improved = false;
    while (lambda < 1e12) {
      Params step;
      if (damped_step(jtj, jtr, lambda, free, step)) {
        Params q = p;
        for (int a = 0; a < kParams; ++a) q[a] += step[a];
        clamp_params(q);
        const double c = cost_of(v, q);
        if (c < cost) {
          const double gain = cost - c;
          p = q;
          cost = c;
          lambda = std::max(lambda / 3, 1e-12);
          improved = true;
          stalled = gain <= 1e-12 * cost ? stalled + 1 : 0;
          break;
        }
      }
      lambda *= 4;
    }
    if (!improved) break;
  }
  return cost;
}

bool is_kind_sweep(const Op& op) { return op.kind != OpKind::None && !is_conv(op.kind) && op.name.rfind("sweep.", 0) == 0; }

// The terms of a kernel family's cost: per element, per row, and a fixed cost per call.
enum KindTerm { kElemTerm, kRowTerm, kCallTerm, kKindTerms };
using KindCoef = std::array<double, kKindTerms>;
// One family sweep sample as a row of the least-squares system: each term's count over the measured
// time, and the share of the measured time the terms stand for.
struct KindRow {
  KindCoef x{};
  double y = 1;
};

// Least squares over the terms `on` (the others 0): false when the normal equations are singular.
bool fit_kind_terms(const std::vector<KindRow>& rows, const std::vector<int>& on, KindCoef& coef) {
  const size_t n = on.size();
  std::array<std::array<double, kKindTerms>, kKindTerms> a{};
  KindCoef b{}, x{};
  for (const auto& row : rows)
    for (size_t r = 0; r < n; ++r) {
      for (size_t c = 0; c < n; ++c) a[r][c] += row.x[on[r]] * row.x[on[c]];
      b[r] += row.x[on[r]] * row.y;
    }
  if (!solve_dense(a, b, n, x)) return false;
  coef = KindCoef{};
  for (size_t r = 0; r < n; ++r) coef[on[r]] = x[r];
  return true;
}

// Each kernel family's elem_s and row_s from its sweep samples: least squares on relative errors,
// measured ~ elems x elem_s + rows x row_s + c, every term >= 0 (of the subsets of terms whose solution
// is non-negative, the one of least cost). The intercept c takes the fixed cost of a call (the host's
// dispatch) and is not kept: the host time per op is fitted with the classes. The sweeps run as the model's
// ops do inside a pass (cold operands, outputs written to fresh memory: calibrate/src/compute.cpp
// Retained), so the cost holds what the kernel pays for its memory traffic too. With fixed_host_s (the
// second round, once the classes' fit has the host time per op) that is taken off each sample instead.
void fit_kind_costs(const std::vector<OpSample>& samples, DeviceFigures& f, double fixed_host_s = -1) {
  for (int k = 1; k < kOpKinds; ++k) {
    if (is_conv(static_cast<OpKind>(k))) continue;
    std::vector<KindRow> rows;
    for (const auto& s : samples)
      if (is_kind_sweep(s.op) && static_cast<int>(s.op.kind) == k)
        rows.push_back({{s.op.elems / s.seconds, s.op.rows / s.seconds, 1 / s.seconds},
                        fixed_host_s >= 0 ? 1 - fixed_host_s * s.op.kernels / s.seconds : 1.0});
    if (rows.empty()) continue;
    double best_cost = INFINITY;
    KindCoef best{};
    for (int mask = 1; mask < (fixed_host_s >= 0 ? 4 : 8); ++mask) {
      std::vector<int> on;
      for (int t = 0; t < kKindTerms; ++t)
        if (mask & (1 << t)) on.push_back(t);
      KindCoef coef{};
      if (on.size() > rows.size() || !fit_kind_terms(rows, on, coef)) continue;
      bool feasible = true;
      for (int t : on) feasible = feasible && coef[t] >= 0 && std::isfinite(coef[t]);
      if (!feasible) continue;
      double cost = 0;
      for (const auto& row : rows) {
        const double r = row.x[kElemTerm] * coef[kElemTerm] + row.x[kRowTerm] * coef[kRowTerm] +
                         row.x[kCallTerm] * coef[kCallTerm] - row.y;
        cost += r * r;
      }
      if (cost < best_cost * (1 - 1e-12)) {
        best_cost = cost;
        best = coef;
      }
    }
    f.kinds[static_cast<size_t>(k)].elem_s = best[kElemTerm];
    f.kinds[static_cast<size_t>(k)].row_s = best[kRowTerm];
  }
}

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
      throw Error(fmt::format("op model fit: op {} measured in {} s; times must be positive", s.op.name, s.seconds));
}

ClassSamples class_samples(const std::vector<OpSample>& all, const DeviceFigures& start, const OpFitOptions& options) {
  ClassSamples cs;
  for (const auto& s : all)
    if (!is_kind_sweep(s.op)) cs.samples.push_back(s);
  if (cs.samples.empty()) throw Error("op model fit: no op sample outside the kernel-family sweeps");
  for (const auto& s : cs.samples) {
    if (s.op.kernels < 1) throw Error(fmt::format("op model fit: op {} has {} kernels", s.op.name, s.op.kernels));
    const Param c = class_param(s.op);
    if (matmul_param(c) && !(start.peak_flops > 0))
      throw Error(fmt::format("op model fit: device {} needs a positive peak_flops for its matmul samples", start.device_type));
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

double log_efficiency(double e) { return std::log(std::min(1.0, std::max(kMinEff, e > 0 ? e : 1.0))); }

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
    if (matmul) (cs.free[kMatrix] ? pr.matrices : pr.fixed) += s.op.batch * (cs.free[kMatrix] ? 1 : start.matrix_s);
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
PointFit fit_at(const ClassSamples& cs, DeviceFigures f, const DeviceFigures& start, const OpFitOptions& options) {
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

OpModelCalibration fit_op_model(const std::vector<OpSample>& all, DeviceFigures start, const OpFitOptions& options) {
  check_sample_times(all);
  // First the kernel families' own costs from their sweeps; the classes' figures from the other samples.
  fit_kind_costs(all, start);
  const ClassSamples cs = class_samples(all, start, options);
  DeviceFigures best = best_on_grid(cs, start, options);
  // Second round at the best grid point: the families' costs again with the host time per op the
  // classes' fit found taken off their sweeps (the first round's intercept also took up their noise),
  // then the classes again with those.
  const bool families = std::any_of(all.begin(), all.end(), [](const OpSample& s) { return is_kind_sweep(s.op); });
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

std::vector<PassPoint> pass_points(const Workload& w, const std::vector<PassSample>& passes, const DeviceFigures& stage1,
                                   const OpOptions& o) {
  if (passes.empty()) throw Error("host time fit: no whole-pass measurement");
  const DeviceFigures zero = with_host(stage1, 0);
  std::vector<PassPoint> pts;
  for (const auto& ps : passes) {
    if (!(ps.seconds > 0) || !std::isfinite(ps.seconds))
      throw Error(fmt::format("host time fit: the pass at micro-batch {} measured in {} s; times must be positive",
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

// Asynchronous device: the host and the device overlap (core/ops.hpp run_ops), the end is
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

namespace {
// Quantities with their units, as SimGrid and core/units read them; 6 significant digits.
std::string bw(double v) { return fmt::format("{:.6g}MBps", v / 1e6); }
std::string lat(double v) { return fmt::format("{:.6g}us", v * 1e6); }
std::string flops(double v) { return fmt::format("{:.6g}Gf", v / 1e9); }
std::string bytes(double v) { return fmt::format("{:.6g}MiB", v / (1024.0 * 1024.0)); }
std::string prop(const std::string& k, const std::string& v) {
  return fmt::format("      <prop id=\"{}\" value=\"{}\"/>\n", k, v);
}
}  // namespace

std::string platform_xml(const PlatformText& p) {
  if (p.nodes.empty()) throw Error("platform: no node to write");
  struct Group {
    std::string id;
    const PlatformNode* node;
    std::vector<const PlatformDevice*> devices;
  };
  std::vector<Group> groups;
  for (const auto& n : p.nodes) {
    if (n.devices.empty()) throw Error(fmt::format("platform: node {} has no device", n.id));
    if (!(n.link_bw > 0) || !(n.h2d_bw > 0))
      throw Error(fmt::format("platform: node {} needs a positive link and host-to-device bandwidth", n.id));
    size_t first_group = groups.size();
    for (const auto& d : n.devices) {
      if (groups.size() == first_group || groups.back().devices.front()->gpu_model != d.gpu_model)
        groups.push_back({"", &n, {}});
      groups.back().devices.push_back(&d);
    }
    for (size_t g = first_group; g < groups.size(); ++g)
      groups[g].id = groups.size() - first_group == 1 ? n.id : fmt::format("{}-{}", n.id, g - first_group);
  }
  std::string out = "<?xml version=\"1.0\"?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n<!--\n";
  out += fmt::format("  {}: written by `vitsim calibrate --emit-platform` from measurements on these machines.\n\n", p.name);
  for (const auto& g : groups) {
    out += fmt::format("     +---- {} ({} device{} of type {}) ----+\n     |  ", g.id, g.devices.size(),
                       g.devices.size() == 1 ? "" : "s", g.devices.front()->gpu_model);
    for (size_t i = 0; i < g.devices.size(); ++i) out += fmt::format("{}{}-dev{}", i ? " <=> " : "", g.id, i);
    out += "\n     +------------------------------------------+\n";
  }
  if (groups.size() > 1) out += "     (clusters joined pairwise through their NIC links)\n";
  out += "\n" + p.provenance;
  if (!p.provenance.empty() && p.provenance.back() != '\n') out += "\n";
  out += "-->\n<platform version=\"4.1\">\n";
  out += fmt::format("  <zone id=\"{}\" routing=\"Full\">\n", p.name);
  for (const auto& g : groups) {
    const PlatformNode& n = *g.node;
    const PlatformDevice& d = *g.devices.front();
    // The ring edge between two devices crosses both private links (latency a/2 each) and the backbone
    // (no latency; FATPIPE at the fitted bandwidth), so a route's latency is the fitted a.
    out += fmt::format(
        "    <cluster id=\"{}\" prefix=\"{}-dev\" suffix=\"\" radical=\"0-{}\" speed=\"{}\" bw=\"{}\" lat=\"{}\" "
        "sharing_policy=\"SPLITDUPLEX\" bb_bw=\"{}\" bb_lat=\"0us\" bb_sharing_policy=\"FATPIPE\" loopback_bw=\"{}\" "
        "loopback_lat=\"0us\" router_id=\"{}-router\">\n",
        g.id, g.id, g.devices.size() - 1, flops(d.flops), bw(n.link_bw), lat(n.link_lat / 2), bw(n.link_bw),
        bw(n.h2d_bw), g.id);
    out += prop("gpu_model", d.gpu_model);
    out += prop("gpu_flops_fp32", flops(d.flops));
    out += prop("gpu_mem_bw", bw(d.mem_bw));
    out += prop("gpu_mem", bytes(d.mem_bytes));
    out += prop("gpu_efficiency", "1");
    out += prop("cpu_cores", std::to_string(n.cpu_cores));
    out += prop("h2d_pageable_bw", bw(n.h2d_bw));
    if (n.loader_image_overhead > 0) out += prop("loader_image_overhead", lat(n.loader_image_overhead));
    out += "    </cluster>\n";
  }
  if (groups.size() > 1) {
    if (!(p.nic_bw > 0)) throw Error("platform: several clusters need a positive NIC bandwidth");
    for (const auto& g : groups)
      out += fmt::format("    <link id=\"{}-nic\" bandwidth=\"{}\" latency=\"{}\" sharing_policy=\"SPLITDUPLEX\"/>\n", g.id,
                         bw(p.nic_bw), lat(p.nic_lat / 2));
    for (size_t i = 0; i < groups.size(); ++i)
      for (size_t j = i + 1; j < groups.size(); ++j)
        out += fmt::format(
            "    <zoneRoute src=\"{0}\" dst=\"{1}\" gw_src=\"{0}-router\" gw_dst=\"{1}-router\"><link_ctn id=\"{0}-nic\" "
            "direction=\"UP\"/><link_ctn id=\"{1}-nic\" direction=\"DOWN\"/></zoneRoute>\n",
            groups[i].id, groups[j].id);
  }
  out += "  </zone>\n</platform>\n";
  return out;
}

}  // namespace vitsim::calibrate
