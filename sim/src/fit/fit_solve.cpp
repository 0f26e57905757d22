// The solver of `vitsim fit` (sim/src/fit/fit_detail.hpp; docs/fit.md "Method"): which figures are free, the
// Levenberg-Marquardt fit on log time, its covariance and the leave-one-out refits.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#include "fit/fit_detail.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/platform/platform_props.hpp"

namespace vitsim::sim {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool log_scale(const RangedFigure& f) {
  return f.low > 0 && f.high > f.low;
}

std::string percent(double log_change) {
  return fmt::format("{:.2f}%", 100 * std::expm1(log_change));
}

std::string named(const RangedFigure& f) {
  return fmt::format("{} ({})", f.key, f.where());
}

// The submatrix of `m` over the columns `cols`.
Matrix columns(const std::vector<std::vector<double>>& m, const std::vector<size_t>& cols) {
  Matrix out;
  for (const auto& row : m) {
    std::vector<double> r;
    for (size_t c : cols) r.push_back(row[c]);
    out.push_back(std::move(r));
  }
  return out;
}

double rms(const std::vector<double>& relative) {
  double s = 0;
  for (double e : relative) s += e * e;
  return relative.empty() ? 0 : std::sqrt(s / static_cast<double>(relative.size()));
}

}  // namespace

double figure_value(const RangedFigure& f, double u) {
  const double v = log_scale(f) ? f.low * std::pow(f.high / f.low, u) : f.low + u * (f.high - f.low);
  return std::clamp(v, f.low, f.high);  // pow's last bit must not step outside the range the reader checks
}

double figure_unit(const RangedFigure& f, double value) {
  if (!(f.high > f.low)) return 0;
  const double u =
      log_scale(f) ? std::log(value / f.low) / std::log(f.high / f.low) : (value - f.low) / (f.high - f.low);
  return std::clamp(u, 0.0, 1.0);
}

std::vector<size_t> default_free(const FitProblem& p, const std::vector<std::vector<double>>& secants,
                                 std::vector<std::string>& notes) {
  const size_t n = p.measured_s.size();
  const size_t most = n >= 2 ? n - 1 : 1;  // one degree of freedom left for s^2 and the leave-one-out
  std::vector<size_t> order;
  for (size_t j = 0; j < p.figures.size(); ++j)
    if (p.swing[j] >= kDefaultFreeLogSwing && p.figures[j].prop->type != PropType::Integer)
      order.push_back(j);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p.swing[a] > p.swing[b]; });
  std::vector<size_t> chosen;
  for (size_t j : order) {
    if (chosen.size() == most) {
      notes.push_back(
          fmt::format("{} moves the measured times by up to {} but is left at its value: {} {} "
                      "down {} at most (measure more configurations, or name it with --free)",
                      named(p.figures[j]), percent(p.swing[j]),
                      count_noun(static_cast<long long>(n), "measured configuration"),
                      n == 1 ? "pins" : "pin", count_noun(static_cast<long long>(most), "figure")));
      continue;
    }
    std::vector<size_t> trial = chosen;
    trial.push_back(j);
    if (collinearity(columns(secants, trial)).smallest >= kCollinearEigen) {
      chosen = trial;
    } else {
      notes.push_back(
          fmt::format("{} is left at its value: over its range it moves the measured times as the "
                      "figures chosen before it do, and the measurements cannot tell them apart",
                      named(p.figures[j])));
    }
  }
  if (chosen.empty()) {
    std::string list;
    for (size_t j = 0; j < p.figures.size(); ++j)
      list += fmt::format("{}{} {}", list.empty() ? "" : ", ", p.figures[j].key, percent(p.swing[j]));
    throw Error(
        fmt::format("no ranged figure moves the measured times by {} or more over its range: nothing to "
                    "fit (each figure's largest change: {})",
                    percent(kDefaultFreeLogSwing), list));
  }
  return chosen;
}

namespace {
// The columns of `j` that move no time by kNoEffectLogSwing over their range.
std::vector<size_t> flat_columns(const Matrix& j) {
  std::vector<size_t> out;
  for (size_t c = 0; !j.empty() && c < j.front().size(); ++c) {
    double most = 0;
    for (const auto& row : j) most = std::max(most, std::fabs(row[c]));
    if (most < kNoEffectLogSwing) out.push_back(c);
  }
  return out;
}
}  // namespace

std::vector<size_t> collinear_columns(const Matrix& j) {
  const Collinearity c = collinearity(j);
  if (c.smallest >= kCollinearEigen) return {};
  double biggest = 0;
  for (double d : c.direction) biggest = std::max(biggest, std::fabs(d));
  std::vector<size_t> out;  // the columns that take a real part in the near-dependence
  for (size_t q = 0; q < c.direction.size(); ++q)
    if (std::fabs(c.direction[q]) >= 0.2 * biggest) out.push_back(q);
  return out;
}

void refuse_unidentifiable(const Matrix& j, const FitProblem& p, const std::string& when, bool zero_columns) {
  std::string dead;
  for (size_t c : zero_columns ? flat_columns(j) : std::vector<size_t>{})
    dead += fmt::format("{}{}", dead.empty() ? "" : ", ", named(p.figures[p.free[c]]));
  if (!dead.empty())
    throw Error(
        fmt::format("unidentifiable: {} has no effect on the measured times {} (its local slope moves "
                    "them by less than {} over its range): leave it out of --free, or measure a "
                    "configuration it shapes",
                    dead, when, percent(kNoEffectLogSwing)));
  const std::vector<size_t> tied = collinear_columns(j);
  if (tied.empty()) return;
  std::string names;
  for (size_t q : tied)
    names += fmt::format("{}{}", names.empty() ? "" : " and ", named(p.figures[p.free[q]]));
  throw Error(
      fmt::format("unidentifiable: {} move the measured times together {} (the smallest eigenvalue of "
                  "the correlation of their effects is {:.2g}, below {:g}): the measurements cannot tell "
                  "them apart; free fewer of them, or measure configurations that load them differently",
                  names, when, collinearity(j).smallest, kCollinearEigen));
}

namespace {

// The fitted figures from the solution: values, 1-sigma and 2-sigma intervals (within the range), bounds.
std::vector<FittedFigure> fitted_figures(const FitProblem& p, const LmResult& m, double s2) {
  const size_t k = p.free.size(), n = p.measured_s.size();
  Matrix cov;
  if (s2 >= 0) {
    try {
      cov = spd_inverse(normal_matrix(m.jacobian));
    } catch (const std::domain_error&) {
      throw Error("unidentifiable: J^T J at the fitted values is singular: free fewer figures");
    }
    for (auto& row : cov)
      for (double& x : row) x *= s2;
  }
  std::vector<double> g(k, 0.0);  // J^T r: which way each coordinate would go
  for (size_t i = 0; i < n; ++i)
    for (size_t c = 0; c < k; ++c) g[c] += m.jacobian[i][c] * m.residuals[i];
  std::vector<FittedFigure> out;
  for (size_t c = 0; c < k; ++c) {
    const RangedFigure& f = p.figures[p.free[c]];
    FittedFigure ff;
    ff.figure = f;
    ff.stated = f.value;
    ff.value = figure_value(f, m.x[c]);
    ff.swing = p.swing[p.free[c]];
    const double sigma = s2 >= 0 ? std::sqrt(std::max(0.0, cov[c][c])) : kNaN;
    auto at = [&](double u) { return figure_value(f, std::clamp(u, 0.0, 1.0)); };
    ff.sigma_low = std::isnan(sigma) ? kNaN : std::min(at(m.x[c] - sigma), at(m.x[c] + sigma));
    ff.sigma_high = std::isnan(sigma) ? kNaN : std::max(at(m.x[c] - sigma), at(m.x[c] + sigma));
    ff.range_low = std::isnan(sigma) ? f.low : std::min(at(m.x[c] - 2 * sigma), at(m.x[c] + 2 * sigma));
    ff.range_high = std::isnan(sigma) ? f.high : std::max(at(m.x[c] - 2 * sigma), at(m.x[c] + 2 * sigma));
    if (m.x[c] <= 0 && g[c] > 0) ff.at_bound = "low";
    if (m.x[c] >= 1 && g[c] < 0) ff.at_bound = "high";
    out.push_back(std::move(ff));
  }
  return out;
}

}  // namespace

namespace {

// Residuals (log of simulated over measured time) of every point at a batch of coordinates of the free
// figures, each set of values simulated once across the fits (and after a figure is dropped from the free
// ones). The key has -inf where a figure is as written: NaN compares unordered, and C++20's vector <=>
// took every key with a NaN first for the same.
class Evaluator {
 public:
  Evaluator(const FitProblem& p, const TimesOf& times) : p_(p), times_(times) {}
  std::vector<std::vector<double>> operator()(const std::vector<std::vector<double>>& us) {
    std::vector<std::vector<double>> values, keys, todo, out;
    std::set<std::vector<double>> queued;
    for (const auto& u : us) {
      values.push_back(values_of(u));
      keys.push_back(key_of(values.back()));
      if (!seen_.count(keys.back()) && queued.insert(keys.back()).second) todo.push_back(values.back());
    }
    const auto t = todo.empty() ? std::vector<std::vector<double>>{} : times_(todo);
    for (size_t q = 0; q < todo.size(); ++q) {
      std::vector<double> r;
      for (size_t i = 0; i < p_.measured_s.size(); ++i) r.push_back(std::log(t[q][i] / p_.measured_s[i]));
      seen_[key_of(todo[q])] = r;
    }
    for (const auto& key : keys) out.push_back(seen_.at(key));
    return out;
  }

 private:
  std::vector<double> values_of(const std::vector<double>& u) const {
    std::vector<double> v(p_.figures.size(), kNaN);
    for (size_t c = 0; c < p_.free.size(); ++c) v[p_.free[c]] = figure_value(p_.figures[p_.free[c]], u[c]);
    return v;
  }
  static std::vector<double> key_of(std::vector<double> v) {
    for (double& x : v)
      if (std::isnan(x)) x = -std::numeric_limits<double>::infinity();
    return v;
  }
  const FitProblem& p_;
  const TimesOf& times_;
  std::map<std::vector<double>, std::vector<double>> seen_;
};

std::vector<double> start_of(const FitProblem& p) {
  std::vector<double> start;
  for (size_t j : p.free) start.push_back(figure_unit(p.figures[j], p.figures[j].value));
  return start;
}

// A Jacobian `j` taken `when` ("at the stated values"): a figure with no local effect there (its range moves
// the times only away from it: the descent would never move it) or collinear with another is refused when
// named (Error); when chosen by default it is left at its value with a note (the least sensitive of the
// collinear ones), what the secants over the whole ranges did not show, e.g. two per-op costs that add
// alike. Returns whether a figure was dropped.
bool drop_unidentifiable(FitProblem& p, const Matrix& j, const std::string& when,
                         std::vector<std::string>& notes) {
  if (const std::vector<size_t> flat = flat_columns(j); !flat.empty()) {
    if (!p.by_default) refuse_unidentifiable(j, p, when, true);
    notes.push_back(
        fmt::format("{} is left at its value: it moves the measured times by up to {} over its "
                    "range, but not {}",
                    named(p.figures[p.free[flat.front()]]), percent(p.swing[p.free[flat.front()]]), when));
    p.free.erase(p.free.begin() + static_cast<std::ptrdiff_t>(flat.front()));
  } else if (const std::vector<size_t> tied = collinear_columns(j); !tied.empty()) {
    if (!p.by_default) refuse_unidentifiable(j, p, when, false);
    const size_t drop = *std::min_element(tied.begin(), tied.end(), [&](size_t a, size_t b) {
      return p.swing[p.free[a]] < p.swing[p.free[b]];
    });
    std::string others;
    for (size_t q : tied)
      if (q != drop) others += (others.empty() ? "" : " and ") + named(p.figures[p.free[q]]);
    notes.push_back(
        fmt::format("{} is left at its value: {} it moves the measured times as {} does, and the "
                    "measurements cannot tell them apart (name it with --free in place of the other "
                    "to fit it instead)",
                    named(p.figures[p.free[drop]]), when, others));
    p.free.erase(p.free.begin() + static_cast<std::ptrdiff_t>(drop));
  } else {
    return false;
  }
  if (p.free.empty()) throw Error("no free figure left to fit: " + notes.back());
  return true;
}

// The best of the starts (the stated values and opt.starts across the ranges), the figures that prove
// unidentifiable at the stated or the fitted values dropped (by default) or refused (named) first.
LmResult fit_from_starts(FitProblem& p, const BatchResiduals& eval, const std::vector<size_t>& all,
                         const FitOptions& opt, const Say& say, std::vector<std::string>& notes) {
  const size_t n = all.size();
  for (;;) {
    std::string names;
    for (size_t j : p.free) names += (names.empty() ? "" : ", ") + p.figures[j].key;
    say(fmt::format("fitting {} to {} ({} simulations a Jacobian)", names,
                    count_noun(static_cast<long long>(n), "measured configuration"), p.free.size() * n));
    LmOptions first;
    first.max_iterations = 0;
    const size_t k = p.free.size();
    if (drop_unidentifiable(p, levenberg_marquardt({{all, start_of(p)}}, k, eval, first).front().jacobian,
                            "at the stated values", notes))
      continue;
    LmOptions o;
    o.max_iterations = opt.max_iterations;
    o.abandon_factor = kAbandonFactor;
    o.progress = [&](int round, double cost) {
      say(fmt::format("round {}: rms error {:.2f}% (log time)", round + 1, 100 * std::sqrt(cost / n)));
    };
    say(fmt::format("Levenberg-Marquardt from the stated values and {} starts across the ranges",
                    opt.starts));
    std::vector<LmProblem> starts{{all, start_of(p)}};
    for (const auto& row : latin_hypercube(opt.starts, static_cast<int>(k), kFitSeed))
      starts.push_back({all, row});
    const std::vector<LmResult> fits = levenberg_marquardt(starts, k, eval, o);
    const LmResult& m = *std::min_element(fits.begin(), fits.end(), [](const LmResult& a, const LmResult& b) {
      return a.cost < b.cost;  // ties: the first, the stated values' start
    });
    if (!drop_unidentifiable(p, m.jacobian, "at the fitted values", notes)) return m;
  }
}

// Each point predicted by the figures fitted to the others, refits started from the fit's solution.
void leave_one_out(const FitProblem& p, const LmResult& m, const BatchResiduals& eval, const FitOptions& opt,
                   const Say& say, FitResult& r) {
  const size_t n = p.measured_s.size();
  std::vector<LmProblem> loo;
  for (size_t i = 0; i < n; ++i) {
    LmProblem q{{}, m.x};
    for (size_t h = 0; h < n; ++h)
      if (h != i) q.rows.push_back(h);
    loo.push_back(std::move(q));
  }
  say(fmt::format("leave-one-out: {} refits from the fitted values", n));
  LmOptions lo;
  lo.max_iterations = opt.max_iterations;
  const std::vector<LmResult> refits = levenberg_marquardt(loo, p.free.size(), eval, lo);
  std::vector<double> left_err;
  for (size_t i = 0; i < n; ++i) {
    r.points[i].left_out_s = p.measured_s[i] * std::exp(refits[i].residuals[i]);
    left_err.push_back(r.points[i].left_out_error());
  }
  r.rms_left_out = rms(left_err);
}

}  // namespace

FitResult solve_fit(FitProblem& p, const TimesOf& times, const FitOptions& opt, const Say& say) {
  const size_t n = p.measured_s.size();
  Evaluator evaluator(p, times);
  const BatchResiduals eval = [&](const std::vector<std::vector<double>>& us) { return evaluator(us); };
  std::vector<size_t> all(n);
  for (size_t i = 0; i < n; ++i) all[i] = i;
  FitResult r;
  const LmResult m = fit_from_starts(p, eval, all, opt, say, r.notes);
  const size_t k = p.free.size();
  r.measured = p.measured_path;
  r.metric = p.metric;
  r.iterations = m.iterations;
  r.converged = m.converged;
  const double s2 = n > k ? m.cost / static_cast<double>(n - k) : -1;
  r.sigma_log = s2 >= 0 ? std::sqrt(s2) : -1;
  r.figures = fitted_figures(p, m, s2);
  std::vector<double> stated_err, fitted_err;
  for (size_t i = 0; i < n; ++i) {
    FitPoint fp;
    fp.where = p.where[i];
    fp.measured_s = p.measured_s[i];
    fp.stated_s = p.stated_s[i];
    fp.fitted_s = p.measured_s[i] * std::exp(m.residuals[i]);
    stated_err.push_back(fp.stated_error());
    fitted_err.push_back(fp.residual());
    r.points.push_back(fp);
  }
  r.rms_stated = rms(stated_err);
  r.rms_fitted = rms(fitted_err);
  if (s2 < 0)
    r.notes.push_back(
        fmt::format("as many measured configurations as free figures ({}): the fit passes through "
                    "them, with no uncertainty and no leave-one-out; the written ranges are the "
                    "stated ones",
                    n));
  if (n > k && n >= 2) leave_one_out(p, m, eval, opt, say, r);
  for (const FittedFigure& f : r.figures)
    if (!f.at_bound.empty())
      r.notes.push_back(
          fmt::format("{} ended at the {} end of its range ({}): the measurements ask for {}; the "
                      "range, or a figure left at its value, may be wrong",
                      named(f.figure), f.at_bound, f.figure.text, f.at_bound == "low" ? "less" : "more"));
  if (!m.converged)
    r.notes.push_back(fmt::format("the fit stopped at its limit of {} iterations before the error settled",
                                  opt.max_iterations));
  return r;
}

}  // namespace vitsim::sim
