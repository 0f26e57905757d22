#pragma once
// A validation (`vitsim validate`: predicted beside measured, point by point and metric by metric) and its
// JSON ("vitsim.validation/2"), written by vitsim validate and read back by predict's and plan's --runs
// (read_validated_times, measured_times.hpp) through one mapping (core/src/results/validation_json.cpp).
#include <map>
#include <string>
#include <vector>

namespace vitsim {

struct ValidationMetric {
  std::string metric;  // "step_time", "epoch_time", "compute_fwd", ...
  double predicted = 0;
  double measured = 0;
  double rel_error = 0;  // (predicted - measured) / measured
  bool scored = false;   // false when the measured term is too small for a relative error to mean much
};

struct ValidationPoint {
  std::map<std::string, std::string> params;
  std::vector<ValidationMetric> metrics;
};

// A likely cause of a failed validation (validate's diagnose), most likely first.
struct ValidationCause {
  std::string kind;  // "uncalibrated", "phase", "noise"
  std::string text;  // one paragraph for a person
};

struct Validation {
  std::string scenario;
  std::string scenario_id;  // the predicted report's identity (report_scenario_id)
  double tolerance = 0;     // step-time MAPE above which validation fails
  std::vector<ValidationPoint> points;
  std::map<std::string, double> mape;  // per metric, over the points where it was scored
  bool pass = false;
  // The run's own noise: over the measured points, the largest spread of the step times within the run
  // (p95 / median - 1 of the point's step statistics: the slowest rank's), and the point where it was seen.
  double noise = 0;
  std::string noise_point;
  std::vector<ValidationCause> causes;  // diagnose's, on a failed validation
};

// The validation as JSON (schema vitsim.validation/2): the head (schema, kind, vitsim_version), scenario,
// scenario_id, tolerance, pass, mape, noise, diagnosis (the causes) and points.
std::string validation_to_json(const Validation& v);
// Reads it back from `text` (the file `path`'s): the keys above its points are read when present (a
// validation written by hand may give its points alone); Error naming the file and JSON pointer.
Validation validation_from_json(const std::string& text, const std::string& path);

}  // namespace vitsim
