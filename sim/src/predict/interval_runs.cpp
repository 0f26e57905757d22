// The measured runs of an interval (predict/interval_runs.hpp; docs/predict.md "Measured runs").
#include "predict/interval_runs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/identity.hpp"
#include "vitsim/sim/engine/process_pool.hpp"
#include "vitsim/sim/point/simulate.hpp"
#include "vitsim/sim/predict/predict.hpp"

namespace vitsim::sim {

std::vector<MeasuredRun> measured_runs(const ScenarioFile& f, const std::vector<std::string>& files) {
  std::vector<MeasuredRun> out;
  std::vector<std::string> seen;  // the files read, to refuse one given twice (its runs would count twice)
  PlatformCache platforms;
  for (const std::string& path : files) {
    for (const std::string& earlier : seen) {
      std::error_code ec;
      if (earlier == path || std::filesystem::equivalent(earlier, path, ec))
        throw Error(
            fmt::format("--runs: '{}' is the same file as '{}': its runs would count twice and the "
                        "interval's level would claim more than they hold; give each file once",
                        path, earlier));
    }
    seen.push_back(path);
    const std::string text = read_input_file(path, "measured runs (--runs)");
    if (is_validation(text)) {
      for (const ValidatedTime& v : read_validated_times(path, text))
        out.push_back({Scenario{}, v.measured, MeasuredMetric::StepTime, v.where, path, v.predicted});
      continue;
    }
    const MeasuredTimes m = read_measured_times(path, text);
    std::vector<Scenario> scenarios = measured_scenarios(f, m, true);
    for (size_t i = 0; i < scenarios.size(); ++i) {
      scenarios[i].what_ifs.clear();
      try {  // what the simulation of the run would refuse, refused now, naming the row
        check_epoch(scenarios[i]);
        check_point(scenarios[i], platforms.of(scenarios[i]));
      } catch (const Error& e) {
        throw Error(row_message(m.rows[i], e.what()));
      }
      out.push_back({std::move(scenarios[i]), m.rows[i].seconds, m.metric, m.rows[i].where, path, 0});
    }
  }
  return out;
}

// The runs' measured / predicted ratios: each configuration (identity and platform file) simulated once.
std::vector<double> run_ratios(const std::vector<MeasuredRun>& runs, const Calibration* calib,
                               const PredictOptions& opt, const std::string& who) {
  std::map<std::string, size_t> index;  // configuration -> its simulation
  std::vector<Scenario> unique;
  std::vector<size_t> of(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].predicted > 0) continue;  // a validation's: its ratio is the validated one
    const std::string key = scenario_id(runs[i].scenario) + " " + runs[i].scenario.cluster.platform;
    auto [it, fresh] = index.emplace(key, unique.size());
    if (fresh) unique.push_back(runs[i].scenario);
    of[i] = it->second;
  }
  const std::vector<SimulatedTimes> predicted =
      unique.empty() ? std::vector<SimulatedTimes>{}
                     : simulate_points(unique, calib, opt, who + " (the measured runs)");
  std::vector<double> ratios;
  for (size_t i = 0; i < runs.size(); ++i) {
    double model = runs[i].predicted;
    if (!(model > 0)) {
      const SimulatedTimes& p = predicted[of[i]];
      model = runs[i].metric == MeasuredMetric::StepTime ? p.step_time_s : p.epoch_time_s;
    }
    // The report reader's range for a ratio (core/src/results/report_json.cpp): what is written reads back.
    check_time_ratio(runs[i].where, runs[i].seconds, model);
    ratios.push_back(runs[i].seconds / model);
  }
  return ratios;
}

// The measured runs as the sensitivity's last figure: the point's central epoch times the conformal ends.
FigureSensitivity runs_figure(const RunsSpread& spread, const std::vector<MeasuredRun>& runs,
                              const ReportPoint& p) {
  FigureSensitivity e;
  e.figure = "measured runs";
  std::vector<std::string> files;  // in the order given
  for (const MeasuredRun& r : runs)
    if (std::find(files.begin(), files.end(), r.file) == files.end()) files.push_back(r.file);
  e.where = fmt::format("{} run{} of {}", runs.size(), runs.size() == 1 ? "" : "s", files.front());
  if (files.size() > 1)
    e.where += fmt::format(" and {} more file{}", files.size() - 1, files.size() == 2 ? "" : "s");
  e.range = fmt::format("x{:.3f}..x{:.3f}", spread.ratio_low, spread.ratio_high);
  e.why = fmt::format(
      "measured: each run's measured / predicted time (a validation's point: as predicted when validated; "
      "another run: its configuration simulated with this platform and calibration); the ratios at ranks {} "
      "and {} of the {} in order (split conformal): a new run like them "
      "falls between at least {:.0f}% of the time. What no figure of the model holds: the machine's "
      "run-to-run spread and drift, and the model's own error",
      spread.k_low, spread.k_high, spread.count, 100 * spread.level);
  e.measure =
      "more measured runs (vitsim train, or a CSV of your training logs) move the ends inward; a quieter "
      "machine narrows the spread";
  e.epoch_at_low_s = p.epoch_time_s * spread.ratio_low;
  e.epoch_at_high_s = p.epoch_time_s * spread.ratio_high;
  return e;
}

}  // namespace vitsim::sim
