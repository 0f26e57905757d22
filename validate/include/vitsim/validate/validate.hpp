#pragma once
// `vitsim validate`: predicted beside measured, point by point and metric by metric.
#include <map>
#include <string>
#include <vector>

#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/results/report.hpp"
#include "vitsim/core/results/validation.hpp"

namespace vitsim::validate {

// The validation and its parts: core's (vitsim/core/results/validation.hpp), which also writes and reads
// its JSON.
using MetricError = ValidationMetric;
using PointComparison = ValidationPoint;
using Cause = ValidationCause;
using Validation = vitsim::Validation;

// Matches points by the parameters both reports carry (nodes, gpus, micro_batch, grad_accum and every
// swept or overridden key); a measured point with no predicted twin, a twin of another scenario identity
// (ReportPoint::scenario_id) or a point measured twice is an error naming it. A term is
// scored when the measured value is at least `min_share` of the measured step time.
Validation compare(const Report& predicted, const Report& measured, double tolerance,
                   double min_share = 0.02);

// What validate knows beside the two reports, for the causes it names.
struct DiagnoseContext {
  std::string scenario;     // the scenario path as given (the commands suggested name it)
  std::string calibration;  // --calibration, "" when none was given
  int ranks = 1;            // the most ranks of a point (calibrate's -np)
};
// The likely causes of a step-time error beyond the tolerance, most likely first, from what validate has:
// - "uncalibrated": a device's compute rests on the platform file's figures (the predicted report's note
//   "compute on D: op-level model (platform figures)"), with the calibrate command that replaces them;
// - "phase": the phase of the step (data, h2d, compute_fwd, compute_bwd, optimizer, comm_exposed) whose
//   predicted time is furthest from the measured one, in seconds averaged over the points, named with the
//   point, both times and the relative error, and what makes that phase differ;
// - "noise": the run's step times spread by more than the tolerance (Validation::noise).
// A phase is named when it holds at least a quarter of the step's mean absolute error. Empty on a pass.
std::vector<Cause> diagnose(const Validation& v, const Report& predicted, const DiagnoseContext& ctx);

std::string to_table(const Validation& v);
std::string to_json(const Validation& v);  // validation_to_json

// Runs the real trainer on every point, one `mpirun -np RANKS VITSIM train SCENARIO --set ...` each,
// and gathers the measured points into one report. `mpirun_args` is inserted after `mpirun`.
struct RunOptions {
  std::string vitsim_exe;  // the vitsim binary to launch
  std::string mpirun = "mpirun";
  std::vector<std::string> mpirun_args;  // e.g. --allow-run-as-root, --oversubscribe, --hostfile H
  std::vector<std::string> sets;         // the user's --set overrides, passed on
  bool quiet = false;
};
Report run_measured(const ScenarioFile& file, const std::vector<Scenario>& points, const RunOptions& opt);

}  // namespace vitsim::validate
