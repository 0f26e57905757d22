#pragma once
// Bounded nonlinear least squares for `vitsim fit` (docs/fit.md "Method"): Levenberg-Marquardt in the
// unit box [0, 1]^k with forward-difference Jacobians, several problems stepped together so that each
// round's function evaluations go out as one batch (the fit's evaluations are simulations, forked
// together). Also the small dense linear algebra it needs (k is a handful of figures).
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace vitsim::sim {

using Matrix = std::vector<std::vector<double>>;  // row-major, rows x cols

// Eigen decomposition of a symmetric matrix by cyclic Jacobi rotations: the eigenvalues ascending, each
// with its unit eigenvector (vectors[k] belongs to values[k]).
struct SymmetricEigen {
  std::vector<double> values;
  std::vector<std::vector<double>> vectors;
};
SymmetricEigen symmetric_eigen(Matrix a);

// The inverse of a symmetric positive definite matrix by its eigen decomposition; throws std::domain_error
// when an eigenvalue is not above `floor` x the largest.
Matrix spd_inverse(const Matrix& a, double floor = 1e-14);

// J^T J of a rows x k matrix.
Matrix normal_matrix(const Matrix& j);

// How close the columns of `j` come to a linear dependence: the smallest eigenvalue of the correlation
// matrix of its columns (each scaled to unit length), 1 for orthogonal columns, 0 for dependent ones, and
// the eigenvector that says which columns take part. A zero column is left out (its entries 0).
struct Collinearity {
  double smallest = 1;
  std::vector<double> direction;  // per column
};
Collinearity collinearity(const Matrix& j);

// One problem: which residuals it fits (rows of the evaluator's output) and where it starts.
struct LmProblem {
  std::vector<size_t> rows;
  std::vector<double> start;  // in [0, 1]^k
};

struct LmResult {
  std::vector<double> x;          // the minimum found, in [0, 1]^k
  std::vector<double> residuals;  // every residual the evaluator returns, at x
  double cost = 0;                // sum of the problem's squared residuals at x
  Matrix jacobian;                // the problem's rows x k, forward differences at x
  int iterations = 0;
  bool converged = false;  // the cost stopped falling (else the iteration limit ended it)
};

struct LmOptions {
  // Forward-difference step in unit coordinates: 1% of a figure's (log) range. Large enough that a
  // simulation's discrete events do not make the difference noise, small enough for a local slope.
  double fd_step = 0.01;
  int max_iterations = 30;
  double tolerance = 1e-4;       // stop when a step lowers the cost by less than this fraction,
  double step_tolerance = 1e-4;  // or moves no coordinate by more than this (0.01% of a range),
  double cost_floor = 1e-14;     // or leaves a cost below this (an rms of 1e-7: exact to the simulator's
                                 // rounding)
  // > 0: problems are starts of one problem racing: once one has converged, a start whose cost is still above
  // this factor times its cost stops (its Jacobian is then not at its x; it is not converged).
  double abandon_factor = 0;
  // Called after each round with the round's number and the lowest cost of the problems: progress lines.
  std::function<void(int round, double cost)> progress;
};

// Evaluates every residual (all rows) at each point of a batch: out[b][row].
using BatchResiduals =
    std::function<std::vector<std::vector<double>>(const std::vector<std::vector<double>>&)>;

// Minimises each problem's sum of squared residuals over [0, 1]^k, all problems stepped together: a round
// evaluates the Jacobians of the problems that moved (k points each), then three damped steps per problem
// (damping lambda/10, lambda, 10 lambda, projected on the box, coordinates held at a bound the gradient
// pushes against left out), and keeps the best step that lowers the cost. A problem is done when a step
// lowers its cost by less than `tolerance` (relative), moves less than `step_tolerance` or reaches
// `cost_floor`, when no damping finds a lower cost, or at the iteration limit; its Jacobian is then at its
// final x.
std::vector<LmResult> levenberg_marquardt(const std::vector<LmProblem>& problems, size_t k,
                                          const BatchResiduals& eval, const LmOptions& opt = {});

}  // namespace vitsim::sim
