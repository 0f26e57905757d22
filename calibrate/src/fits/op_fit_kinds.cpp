// The kernel families' own costs per element and per row (op_fit.hpp fit_kind_costs), from their sweeps.
// Pure functions, no Torch.
#include <array>
#include <cmath>
#include <vector>

#include "fits/op_fit.hpp"

namespace vitsim::calibrate::op_fit {

bool is_kind_sweep(const Op& op) {
  return op.id == OpId::SweepKind;
}

namespace {

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
}  // namespace

void fit_kind_costs(const std::vector<OpSample>& samples, DeviceFigures& f, double fixed_host_s) {
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

}  // namespace vitsim::calibrate::op_fit
