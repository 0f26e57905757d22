// Bounded Levenberg-Marquardt for `vitsim fit` (sim/fit/least_squares.hpp; docs/fit.md "Method").
#include "vitsim/sim/fit/least_squares.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

namespace vitsim::sim {

SymmetricEigen symmetric_eigen(Matrix a) {
  const size_t n = a.size();
  Matrix v(n, std::vector<double>(n, 0.0));
  for (size_t i = 0; i < n; ++i) v[i][i] = 1;
  // Cyclic Jacobi (Golub and Van Loan, "Matrix Computations", 4th ed., s8.5): each rotation zeroes one
  // off-diagonal pair; sweeps until the off-diagonal mass is negligible against the diagonal.
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0, diag = 0;
    for (size_t i = 0; i < n; ++i) {
      diag += a[i][i] * a[i][i];
      for (size_t j = i + 1; j < n; ++j) off += a[i][j] * a[i][j];
    }
    if (off <= 1e-30 * diag || off == 0) break;
    for (size_t p = 0; p < n; ++p)
      for (size_t q = p + 1; q < n; ++q) {
        if (a[p][q] == 0) continue;
        const double theta = (a[q][q] - a[p][p]) / (2 * a[p][q]);
        const double t = (theta >= 0 ? 1 : -1) / (std::fabs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (size_t k = 0; k < n; ++k) {  // a = a G
          const double akp = a[k][p], akq = a[k][q];
          a[k][p] = c * akp - s * akq;
          a[k][q] = s * akp + c * akq;
        }
        for (size_t k = 0; k < n; ++k) {  // a = G^T a
          const double apk = a[p][k], aqk = a[q][k];
          a[p][k] = c * apk - s * aqk;
          a[q][k] = s * apk + c * aqk;
        }
        for (size_t k = 0; k < n; ++k) {
          const double vkp = v[k][p], vkq = v[k][q];
          v[k][p] = c * vkp - s * vkq;
          v[k][q] = s * vkp + c * vkq;
        }
      }
  }
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return a[x][x] < a[y][y]; });
  SymmetricEigen out;
  for (size_t k : order) {
    out.values.push_back(a[k][k]);
    std::vector<double> vec(n);
    for (size_t i = 0; i < n; ++i) vec[i] = v[i][k];
    out.vectors.push_back(std::move(vec));
  }
  return out;
}

Matrix spd_inverse(const Matrix& a, double floor) {
  const size_t n = a.size();
  const SymmetricEigen e = symmetric_eigen(a);
  const double largest = n ? e.values.back() : 0;
  Matrix inv(n, std::vector<double>(n, 0.0));
  for (size_t k = 0; k < n; ++k) {
    if (!(e.values[k] > floor * largest)) throw std::domain_error("singular matrix");
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j) inv[i][j] += e.vectors[k][i] * e.vectors[k][j] / e.values[k];
  }
  return inv;
}

Matrix normal_matrix(const Matrix& j) {
  const size_t k = j.empty() ? 0 : j.front().size();
  Matrix a(k, std::vector<double>(k, 0.0));
  for (const auto& row : j)
    for (size_t p = 0; p < k; ++p)
      for (size_t q = 0; q < k; ++q) a[p][q] += row[p] * row[q];
  return a;
}

Collinearity collinearity(const Matrix& j) {
  const Matrix a = normal_matrix(j);
  const size_t k = a.size();
  std::vector<size_t> live;  // columns that are not zero
  for (size_t c = 0; c < k; ++c)
    if (a[c][c] > 0) live.push_back(c);
  Collinearity out;
  out.direction.assign(k, 0.0);
  if (live.size() < 2) return out;
  Matrix corr(live.size(), std::vector<double>(live.size()));
  for (size_t p = 0; p < live.size(); ++p)
    for (size_t q = 0; q < live.size(); ++q)
      corr[p][q] = a[live[p]][live[q]] / std::sqrt(a[live[p]][live[p]] * a[live[q]][live[q]]);
  const SymmetricEigen e = symmetric_eigen(corr);
  out.smallest = std::max(0.0, e.values.front());
  for (size_t p = 0; p < live.size(); ++p) out.direction[live[p]] = e.vectors.front()[p];
  return out;
}

namespace {

// Solves a x = b for a small symmetric positive definite a (Gaussian elimination, partial pivoting).
std::vector<double> solve(Matrix a, std::vector<double> b) {
  const size_t n = b.size();
  for (size_t c = 0; c < n; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[pivot][c])) pivot = r;
    std::swap(a[c], a[pivot]);
    std::swap(b[c], b[pivot]);
    if (a[c][c] == 0) return std::vector<double>(n, 0.0);
    for (size_t r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      for (size_t q = c; q < n; ++q) a[r][q] -= f * a[c][q];
      b[r] -= f * b[c];
    }
  }
  std::vector<double> x(n);
  for (size_t c = n; c-- > 0;) {
    double s = b[c];
    for (size_t q = c + 1; q < n; ++q) s -= a[c][q] * x[q];
    x[c] = s / a[c][c];
  }
  return x;
}

struct State {
  std::vector<double> x, r;  // r: every residual at x
  double cost = 0;
  Matrix jacobian;
  bool have_r = false, have_j = false;
  bool finish_after_j = false;  // converged or out of iterations: stop once J is at x
  bool done = false, converged = false;
  double lambda = 1e-3;
  int iterations = 0;
};

double cost_of(const std::vector<size_t>& rows, const std::vector<double>& r) {
  double c = 0;
  for (size_t row : rows) c += r[row] * r[row];
  return c;
}

// The step that minimises the damped linearisation over the free coordinates, projected on the box.
std::vector<double> damped_step(const State& s, const LmProblem& p, size_t k, double mu) {
  std::vector<double> g(k, 0.0);
  for (size_t i = 0; i < p.rows.size(); ++i)
    for (size_t c = 0; c < k; ++c) g[c] += s.jacobian[i][c] * s.r[p.rows[i]];
  const Matrix a = normal_matrix(s.jacobian);
  double largest = 0;
  for (size_t c = 0; c < k; ++c) largest = std::max(largest, a[c][c]);
  std::vector<size_t> free;  // a coordinate at a bound the descent direction pushes against stays there
  for (size_t c = 0; c < k; ++c)
    if (!((s.x[c] <= 0 && g[c] > 0) || (s.x[c] >= 1 && g[c] < 0))) free.push_back(c);
  std::vector<double> x = s.x;
  if (free.empty() || largest == 0) return x;
  Matrix af(free.size(), std::vector<double>(free.size()));
  std::vector<double> bf(free.size());
  for (size_t p1 = 0; p1 < free.size(); ++p1) {
    for (size_t q = 0; q < free.size(); ++q) af[p1][q] = a[free[p1]][free[q]];
    af[p1][p1] += mu * (a[free[p1]][free[p1]] + 1e-12 * largest);  // Marquardt's scaling
    bf[p1] = -g[free[p1]];
  }
  const std::vector<double> d = solve(af, bf);
  for (size_t p1 = 0; p1 < free.size(); ++p1) x[free[p1]] = std::clamp(x[free[p1]] + d[p1], 0.0, 1.0);
  return x;
}

}  // namespace

std::vector<LmResult> levenberg_marquardt(const std::vector<LmProblem>& problems, size_t k,
                                          const BatchResiduals& eval, const LmOptions& opt) {
  std::map<std::vector<double>, std::vector<double>> cache;  // x -> residuals: a point is evaluated once
  auto evaluate = [&](const std::vector<std::vector<double>>& xs) {
    std::vector<std::vector<double>> todo;
    for (const auto& x : xs)
      if (!cache.count(x) && std::find(todo.begin(), todo.end(), x) == todo.end()) todo.push_back(x);
    if (!todo.empty()) {
      const auto got = eval(todo);
      for (size_t b = 0; b < todo.size(); ++b) cache[todo[b]] = got.at(b);
    }
  };
  std::vector<State> st(problems.size());
  for (size_t p = 0; p < problems.size(); ++p) {
    st[p].x = problems[p].start;
    st[p].finish_after_j = opt.max_iterations <= 0;  // 0: the Jacobian at the start only
  }
  auto shifted = [&](const State& s, size_t c) {
    std::vector<double> x = s.x;
    x[c] += x[c] + opt.fd_step <= 1 ? opt.fd_step : -opt.fd_step;
    return x;
  };
  for (int round = 0;; ++round) {
    // Racing starts: once one has converged, a start still above abandon_factor x its cost stops.
    double settled = std::numeric_limits<double>::infinity();
    for (const auto& s : st)
      if (s.done && s.converged) settled = std::min(settled, s.cost);
    for (auto& s : st)
      if (opt.abandon_factor > 0 && !s.done && s.have_r && s.cost > opt.abandon_factor * settled)
        s.done = true;
    // Jacobians (and first residuals) of the problems that moved.
    std::vector<std::vector<double>> batch;
    for (auto& s : st)
      if (!s.done && !s.have_j) {
        batch.push_back(s.x);
        for (size_t c = 0; c < k; ++c) batch.push_back(shifted(s, c));
      }
    evaluate(batch);
    for (size_t p = 0; p < st.size(); ++p) {
      State& s = st[p];
      if (s.done || s.have_j) continue;
      s.r = cache.at(s.x);
      s.cost = cost_of(problems[p].rows, s.r);
      s.have_r = true;
      s.jacobian.assign(problems[p].rows.size(), std::vector<double>(k, 0.0));
      for (size_t c = 0; c < k; ++c) {
        const std::vector<double> xc = shifted(s, c);
        const std::vector<double>& rc = cache.at(xc);
        for (size_t i = 0; i < problems[p].rows.size(); ++i)
          s.jacobian[i][c] = (rc[problems[p].rows[i]] - s.r[problems[p].rows[i]]) / (xc[c] - s.x[c]);
      }
      s.have_j = true;
      if (s.finish_after_j || s.cost == 0 || k == 0) s.done = true;
    }
    if (opt.progress && !st.empty()) {
      double best = st.front().cost;
      for (const auto& s : st) best = std::min(best, s.cost);
      opt.progress(round, best);
    }
    // Damped steps.
    batch.clear();
    std::vector<std::vector<std::vector<double>>> trials(st.size());
    for (size_t p = 0; p < st.size(); ++p) {
      State& s = st[p];
      if (s.done) continue;
      for (double mu : {s.lambda / 10, s.lambda, s.lambda * 10}) {
        trials[p].push_back(damped_step(s, problems[p], k, mu));
        batch.push_back(trials[p].back());
      }
    }
    if (batch.empty()) break;
    evaluate(batch);
    for (size_t p = 0; p < st.size(); ++p) {
      State& s = st[p];
      if (s.done) continue;
      ++s.iterations;
      size_t best = 0;
      double best_cost = s.cost;
      for (size_t t = 0; t < trials[p].size(); ++t) {
        const double c = cost_of(problems[p].rows, cache.at(trials[p][t]));
        if (c < best_cost) best_cost = c, best = t + 1;
      }
      if (best > 0) {
        const double decrease = (s.cost - best_cost) / s.cost;
        double moved = 0;
        for (size_t c = 0; c < k; ++c) moved = std::max(moved, std::fabs(trials[p][best - 1][c] - s.x[c]));
        s.x = trials[p][best - 1];
        s.lambda = std::max(1e-12, s.lambda * (best == 1 ? 0.1 : best == 2 ? 1.0 : 10.0));
        s.have_j = false;
        if (decrease < opt.tolerance || moved < opt.step_tolerance || best_cost < opt.cost_floor)
          s.finish_after_j = s.converged = true;
      } else {
        s.lambda *= 100;
        const bool stuck =
            std::all_of(trials[p].begin(), trials[p].end(), [&](const auto& x) { return x == s.x; });
        if (s.lambda > 1e10 || stuck) s.done = s.converged = true;  // J is at x already
      }
      if (!s.finish_after_j && !s.done && s.iterations >= opt.max_iterations) s.finish_after_j = true;
    }
  }
  std::vector<LmResult> out;
  for (auto& s : st) {
    LmResult r;
    r.x = s.x;
    r.residuals = s.r;
    r.cost = s.cost;
    r.jacobian = s.jacobian;
    r.iterations = s.iterations;
    r.converged = s.converged;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace vitsim::sim
