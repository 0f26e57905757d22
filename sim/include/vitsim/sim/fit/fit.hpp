#pragma once
// `vitsim fit` (issue 26 item 4; docs/fit.md): the platform's ranged figures fitted to measured end-to-end
// times of a few configurations, by simulation-based least squares on log time within the figures' ranges.
// The figures are those `predict --interval` samples (sim/predict/interval.hpp: ranged_figures), applied to a
// point the same way (platform_with_values: a copy of the platform with the figure's value), the copies
// simulated as predict simulates points (simulate_points: forked from a zygote).
#include <cstdint>
#include <string>
#include <vector>

#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/results/measured_times.hpp"
#include "vitsim/sim/predict/interval.hpp"
#include "vitsim/sim/predict/predict.hpp"

namespace vitsim::sim {

// Thresholds of the fit (docs/fit.md "Refusals"), choices stated there.
// A figure whose range moves no measured time by this much (log time, ~0.1%) has no effect on them.
inline constexpr double kNoEffectLogSwing = 1e-3;
// The default free figures: those whose range moves some measured time by this much (~1%, the spread of
// repeated runs, docs/benchmarks.md), most sensitive first.
inline constexpr double kDefaultFreeLogSwing = 1e-2;
// Near-singular J^T J: the smallest eigenvalue of the correlation matrix of the Jacobian's columns below
// this (each figure's uncertainty inflated by the others more than 1/sqrt(1e-4) = 100 times).
inline constexpr double kCollinearEigen = 1e-4;
// Starts of the fit beside the stated values: points of a Latin hypercube over the free figures' ranges
// (sim/predict/interval.hpp, seed kFitSeed), stepped with it in the same batches; the lowest cost wins. A
// step time is a max() of host and device work, so the error has kinks and local minima that one start can
// stop in. ASSUMPTION: 4 catch the cases of the tests and docs/fit.md's example at 5x the simulations of one
// start and the same rounds.
inline constexpr int kFitStarts = 4;
// Once a start has converged, a start whose squared error is still above this many times its own stops: it
// would have to fall below a minimum it is far from. ASSUMPTION: 2 (the rms 1.4 times) keeps the starts
// that matter in the tests and docs/fit.md's example and halves the simulations of the others.
inline constexpr double kAbandonFactor = 2;
inline constexpr std::uint64_t kFitSeed = 26;
// Uncalibrated, the ranges reach as far as the public corpus' p10-p90 band of the model's own error
// (core/results/corpus_error.hpp): the quantiles of predict --interval's default interval.
inline constexpr double kCorpusPLow = 0.1, kCorpusPHigh = 0.9;

struct FitOptions {
  PredictOptions predict;         // calibration, jobs, progress: as predict runs points
  std::vector<std::string> free;  // --free: KEY or KEY@ELEMENT-ID; empty = the most sensitive figures
  std::string measured_label;     // the measured file as the output's note names it
  std::string date;               // "2026-05-04" for the note; "" = today (UTC)
  int max_iterations = 30;
  int starts = kFitStarts;  // starts across the ranges beside the stated values
  // Uncalibrated, widen the ranges by the public corpus' band (docs/fit.md
  // "Uncalibrated: the corpus' reach"); false keeps them as stated (the tests of the fit's mechanics).
  bool corpus_reach = true;
};

// One figure the fit moved.
struct FittedFigure {
  RangedFigure figure;    // as the platform states it (its range, why, where)
  double stated = 0;      // the value in effect before the fit (SI)
  double value = 0;       // fitted (SI)
  double sigma_low = 0;   // the 1-sigma interval from the Jacobian's covariance (SI), within the range;
  double sigma_high = 0;  //   NaN when there is no uncertainty (as many measurements as figures)
  double range_low = 0;   // the range the output file states: 2 sigma, within the old range
  double range_high = 0;
  std::string at_bound;  // "low" or "high" when the fit ended on an end of the range the data push past
  double swing = 0;      // log-time swing over the range, largest over the measured points
};

// One measured configuration.
struct FitPoint {
  std::string where;                          // "times.csv:3"
  std::map<std::string, std::string> params;  // as the scenario point has them
  double measured_s = 0;
  double stated_s = 0;     // simulated with the figures as stated
  double fitted_s = 0;     // with the fitted figures
  double left_out_s = -1;  // simulated with the figures fitted to the other points (leave-one-out); < 0: none
  double residual() const { return fitted_s / measured_s - 1; }
  double stated_error() const { return stated_s / measured_s - 1; }
  double left_out_error() const { return left_out_s / measured_s - 1; }
};

struct FitResult {
  std::string scenario, platform, measured, metric;  // metric: step_time_s or epoch_time_s
  std::vector<FittedFigure> figures;
  std::vector<RangedFigure> not_free;  // ranged figures left at their values, with their swings below
  std::vector<double> not_free_swing;
  std::vector<FitPoint> points;
  double rms_stated = 0, rms_fitted = 0, rms_left_out = -1;  // of the relative errors; -1: no leave-one-out
  double sigma_log = -1;  // the residuals' standard deviation s (log time); -1: no degrees of freedom
  int iterations = 0;
  bool converged = false;
  long long simulations = 0;
  double wall_s = 0;
  std::vector<std::string> notes;
  std::string platform_text;  // the fitted platform file
  std::string written;        // where it was written (the JSON says)
};

// Fits and returns the result, `platform_text` ready to write. Throws Error: measurements that cannot pin
// the free figures down (fewer measurements than figures; a figure with no effect on them; figures whose
// effects are collinear), named with the reason; a --free name that is not a ranged figure; measured points
// on more than one platform file.
FitResult fit(const ScenarioFile& file, const MeasuredTimes& measured, const FitOptions& opt);

std::string fit_to_table(const FitResult& r);
std::string fit_to_json(const FitResult& r);

}  // namespace vitsim::sim
