#pragma once
// `vitsim validate`: predicted beside measured, point by point and metric by metric.
#include <map>
#include <string>
#include <vector>

#include "vitsim/core/formats/report.hpp"
#include "vitsim/core/formats/scenario.hpp"

namespace vitsim::validate {

struct MetricError {
  std::string metric;  // "step_time", "epoch_time", "compute_fwd", ...
  double predicted = 0;
  double measured = 0;
  double rel_error = 0;  // (predicted - measured) / measured
  bool scored = false;   // false when the measured term is too small for a relative error to mean much
};

struct PointComparison {
  std::map<std::string, std::string> params;
  std::vector<MetricError> metrics;
};

struct Validation {
  std::string scenario;
  std::string scenario_id;  // the predicted report's identity (report_scenario_id)
  double tolerance = 0;     // step-time MAPE above which validation fails
  std::vector<PointComparison> points;
  std::map<std::string, double> mape;  // per metric, over the points where it was scored
  bool pass = false;
};

// Matches points by the parameters both reports carry (nodes, gpus, micro_batch, grad_accum and every
// swept or overridden key); a measured point with no predicted twin, a twin of another scenario identity
// (ReportPoint::scenario_id) or a point measured twice is an error naming it. A term is
// scored when the measured value is at least `min_share` of the measured step time.
Validation compare(const Report& predicted, const Report& measured, double tolerance,
                   double min_share = 0.02);

std::string to_table(const Validation& v);
std::string to_json(const Validation& v);

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
