#pragma once
// Measured end-to-end times of a few configurations, as `vitsim fit` reads them (docs/fit.md): a vitsim
// report of kind measured (`vitsim train` writes it, `vitsim validate --measured` reads it), or a CSV a
// user copies from training logs:
//
//   # the four runs of last month (lines starting with '#' and blank lines are skipped)
//   cluster.nodes,training.micro_batch,step_time_s
//   1,32,0.412
//   2,32,0.455
//
// The header names scenario keys as `--set` takes them, and one time column: `step_time_s` (seconds per
// optimizer step, the steady state) or `epoch_time_s` (seconds per epoch). Each row is one configuration:
// its keys applied to the scenario as `--set KEY=VALUE` would apply them, and its time in seconds.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/scenario.hpp"

namespace vitsim {

// The time a measurement states, and the simulated figure it is compared with.
enum class MeasuredMetric { StepTime, EpochTime };
const char* measured_metric_column(MeasuredMetric m);  // "step_time_s", "epoch_time_s"

struct MeasuredTime {
  Origin origin;      // "times.csv:4", or the report with no line ("run.json")
  std::string where;  // for messages: "times.csv:4", "run.json: /points/2"
  // CSV: the row's keys and values, in the header's order, as --set takes them.
  std::vector<std::pair<std::string, std::string>> keys;
  // A report's point: its identity (core/formats/identity.hpp) and parameters.
  std::string scenario_id;
  std::map<std::string, std::string> params;
  double seconds = 0;
};

struct MeasuredTimes {
  std::string path;
  MeasuredMetric metric = MeasuredMetric::StepTime;
  bool report = false;  // read from a measured report (else a CSV)
  std::vector<MeasuredTime> rows;
};

// Reads FILE: a JSON report of kind measured (its points' mean step times) or a CSV as above, told apart
// by looks_like_json. Throws Error with FILE:LINE for a CSV (an
// unknown or repeated column, no time column or two, a row with another number of fields, an empty field,
// a time that is not a positive number of seconds, a row repeating an earlier configuration) and with
// FILE: /json/pointer for a report (the report reader's messages; a predicted report is refused).
MeasuredTimes read_measured_times(const std::string& path);
// JSON, not a CSV: the first character that is not white space is '{' or '[', or the name ends in .json
// (garbage in a.json is malformed JSON, not a CSV header).
bool looks_like_json(const std::string& path, const std::string& text);
// The same of `text`, the file's content read already.
MeasuredTimes read_measured_times(const std::string& path, const std::string& text);

// A message about a row's configuration, for a one-line Error: "times.csv:3: column 'cluster.nodes': ..."
// where `what` came from a key the row set (its values go in as --set values: "--set cluster.nodes: ..."),
// else "WHERE: what".
std::string row_message(const MeasuredTime& row, const std::string& what);

// The files the rows of a measured CSV name (a cluster.platform, deepspeed.config or whatif.edits column),
// for check_output_paths before any work: each row's keys applied to a copy of `f` as measured_scenarios
// applies them, the files beyond `f`'s own, each once, its role naming the row ("the platform of
// times.csv:3"). `fit --out q.xml` replaced the platform a row named (issue 39 item 6). A report or a
// validation names no file; a row whose keys do not apply is left to the reading to refuse.
std::vector<NamedPath> measured_inputs(const ScenarioFile& f, const MeasuredTimes& m);
// The same of the file at `path` (predict's and plan's --runs): nothing for a JSON file.
std::vector<NamedPath> measured_inputs(const ScenarioFile& f, const std::string& path);

// The scenario points the measurements are of, in their order. A CSV row: the row's keys applied to a copy
// of `f` as --set applies them; the result must be one point (a sweep of the file left open by the row is an
// error naming the key to add as a column). A report's point: the point of `f` (its sweeps expanded) with
// the same identity. Throws Error naming the row or the point.
// `repeats`: a configuration measured more than once is kept once per run (predict --runs: each run is one
// ratio), where fit refuses it.
std::vector<Scenario> measured_scenarios(const ScenarioFile& f, const MeasuredTimes& m, bool repeats = false);

// A measured time held against the model's time of its configuration: Error "WHERE: measured M s against P s
// predicted: a ratio of R, outside 1e-12 .. 1e12 (not a time of this configuration)" unless the ratio is
// within kMinTimeRatio .. kMaxTimeRatio (report.hpp). The one plausibility bound of predict --runs and vitsim
// fit (a fit of 1e300 s wrote a platform where --runs refused the same file, issue 39 item 12).
void check_time_ratio(const std::string& where, double measured_s, double predicted_s);

// A validation (`vitsim validate --format json`, schema vitsim.validation/N), as predict and plan --runs read
// it: per point, its step time as the prediction stated it when validated and as the run measured it.
struct ValidatedTime {
  std::string where;  // "validation-1.json: /points/2"
  double predicted = 0, measured = 0;
};
// Whether `text` (a file's) is a validation: JSON whose schema is vitsim.validation/N.
bool is_validation(const std::string& text);
// Every point's step time of the validation `text` read from `path`; Error naming the file and JSON pointer
// (no points, a point without a step_time metric, a time that is not a positive number).
std::vector<ValidatedTime> read_validated_times(const std::string& path, const std::string& text);

}  // namespace vitsim
