// Levenberg-Marquardt of the op model's fit (op_fit.hpp): the predicted time of a prepared sample, the
// cost, the normal equations and damped steps. Pure functions, no Torch.
#include <algorithm>
#include <cmath>

#include "fits/op_fit.hpp"

namespace vitsim::calibrate::op_fit {

Param class_param(const Op& op) {
  if (is_matmul(op) && op.flops > 0) {
    if (op.kind == OpKind::Conv) return kConv;
    if (op.kind == OpKind::ConvWgrad) return kConvW;
    return op.cls == OpClass::Gemm ? kGemm : kAttn;
  }
  return op.cls == OpClass::Norm ? kNorm : kMem;
}

namespace {

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
  for (int i : {kGemm, kAttn, kMem, kNorm, kConv, kConvW})
    p[i] = std::min(0.0, std::max(std::log(kMinEff), p[i]));
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

}  // namespace

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

}  // namespace vitsim::calibrate::op_fit
