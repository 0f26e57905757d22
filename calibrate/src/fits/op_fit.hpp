#pragma once
// The op model's fit (fit_op_model, calibrate.hpp) inside: its parameters, the samples as the solver sees
// them, Levenberg-Marquardt (op_fit_solver.cpp) and the kernel families' costs (op_fit_kinds.cpp). No Torch.
#include <array>
#include <cmath>
#include <cstddef>
#include <utility>
#include <vector>

#include "vitsim/calibrate/calibrate.hpp"

namespace vitsim::calibrate::op_fit {

// Bounds of the continuous figures: efficiencies in [1e-6, 1], host time per op in [1e-9 s, 1 s], the
// cost per matrix of a batched matmul in [1e-15 s, 10 ms] (at the lower bound it is reported as 0: none).
constexpr double kMinEff = 1e-6, kMinHost = 1e-9, kMaxHost = 1.0, kMinMatrix = 1e-15, kMaxMatrix = 1e-2;

// The one small dense solver of the fits: solves the leading n x n block of a x = b (n <= N) by Gaussian
// elimination with partial pivoting and back substitution, in place. False when a pivot is zero (or not
// a number): the system is singular and x is left as it was.
template <size_t N>
inline bool solve_dense(std::array<std::array<double, N>, N>& a, std::array<double, N>& b, size_t n,
                        std::array<double, N>& x) {
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
inline bool matmul_param(int c) {
  return c == kGemm || c == kAttn || c == kConv || c == kConvW;
}
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
  double matrices = 0;  // a matmul's batch (each matrix costs matrix_s) when matrix_s is fitted
  double fixed = 0;     // kernels x kernel_s (+ sync_s) (+ matrices x matrix_s when it is not fitted)
  double log_measured = 0;
  double weight = 1;  // normalised: the weights sum to the sample count
};

// The parameter whose efficiency an op's time depends on.
Param class_param(const Op& op);
// Levenberg-Marquardt on the weighted log residuals from `p`, the parameters kept inside their bounds;
// returns the cost reached.
double levenberg_marquardt(const std::vector<Prepared>& v, Params& p, const Free& free);

// A kernel-family sweep sample (calibrate op_benchmarks), whose own cost fit_kind_costs fits.
bool is_kind_sweep(const Op& op);
// Each kernel family's elem_s and row_s from its sweep samples: least squares on relative errors,
// measured ~ elems x elem_s + rows x row_s + c, every term >= 0 (of the subsets of terms whose solution
// is non-negative, the one of least cost). The intercept c takes the fixed cost of a call (the host's
// dispatch) and is not kept: the host time per op is fitted with the classes. The sweeps run as the model's
// ops do inside a pass (cold operands, outputs written to fresh memory: calibrate/src/compute.cpp
// Retained), so the cost holds what the kernel pays for its memory traffic too. With fixed_host_s (the
// second round, once the classes' fit has the host time per op) that is taken off each sample instead.
void fit_kind_costs(const std::vector<OpSample>& samples, DeviceFigures& f, double fixed_host_s = -1);

}  // namespace vitsim::calibrate::op_fit
