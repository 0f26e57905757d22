#pragma once
// Inside `vitsim fit` (sim/fit/fit.hpp): the problem handed from the runs (fit.cpp) to the solver
// (fit_solve.cpp) and the writers (fit_report.cpp).
#include <functional>
#include <string>
#include <vector>

#include "vitsim/sim/fit/fit.hpp"
#include "vitsim/sim/fit/least_squares.hpp"

namespace vitsim::sim {

// The fit's coordinate of a figure: u in [0, 1] over its range, in log when the range is positive (a
// time scales as 1/bandwidth or 1/FLOP rate: log makes it nearer linear), else linear.
double figure_value(const RangedFigure& f, double u);
double figure_unit(const RangedFigure& f, double value);

// Every point's time with each values vector (one entry per ranged figure, SI; NaN: as written).
using TimesOf = std::function<std::vector<std::vector<double>>(const std::vector<std::vector<double>>&)>;

struct FitProblem {
  std::vector<RangedFigure> figures;  // every ranged figure of the platform
  std::vector<size_t> free;           // indices into figures
  std::vector<double> swing;          // per figure: largest |log-time change| over its range
  std::vector<double> measured_s;     // per point
  std::vector<std::string> where;     // per point: "times.csv:3"
  std::vector<double> stated_s;       // per point, the figures as stated
  std::string measured_path, metric;
  bool by_default = false;  // the free figures were chosen by default_free (not named with --free)
};

using Say = std::function<void(const std::string&)>;

// The default free figures (docs/fit.md "Which figures"): those moving some measured time by
// kDefaultFreeLogSwing or more, most sensitive first, each kept when its secant column (the log-time
// change over its range at every point) stays clear of the chosen ones' (kCollinearEigen), at most one
// fewer than the measurements (one when there is one). Notes say what was passed over and why.
std::vector<size_t> default_free(const FitProblem& p, const std::vector<std::vector<double>>& secants,
                                 std::vector<std::string>& notes);

// Refuses (Error) a Jacobian whose columns are near-dependent, naming the figures; `when` says where it was
// taken ("at the stated values"). With `zero_columns`, a column that moves no time by kNoEffectLogSwing
// over the range is refused too.
// The columns of `j` that take part in a near-dependence (kCollinearEigen); empty when none.
std::vector<size_t> collinear_columns(const Matrix& j);
void refuse_unidentifiable(const Matrix& j, const FitProblem& p, const std::string& when, bool zero_columns);

// The fit itself: Levenberg-Marquardt from the stated values, the covariance s^2 (J^T J)^-1 at the end, and
// a leave-one-out refit per point (when there are more points than free figures). Figures chosen by default
// that prove unidentifiable at the stated or the fitted values (no local effect, collinear) are dropped from
// p.free, the least sensitive first, with a note; named ones are refused.
FitResult solve_fit(FitProblem& p, const TimesOf& times, const FitOptions& opt, const Say& say);

// The platform file `text` (at `path`) with the fitted values and their ranges replaced by the fit's
// interval, labelled in each range's reason and in a comment before <platform>; read back before it is
// returned.
std::string fitted_platform(const std::string& text, const std::string& path, const FitResult& r,
                            const FitOptions& opt);

}  // namespace vitsim::sim
