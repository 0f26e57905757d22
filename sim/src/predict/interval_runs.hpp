#pragma once
// The measured runs of an interval (predict and plan --runs; sim/predict/interval.hpp MeasuredRun): their
// ratios to the model and their line in the sensitivity.
#include <string>
#include <vector>

#include "vitsim/core/results/report.hpp"
#include "vitsim/sim/predict/interval.hpp"

namespace vitsim::sim {

// The runs' measured / predicted ratios: each configuration (identity and platform file) simulated once.
std::vector<double> run_ratios(const std::vector<MeasuredRun>& runs, const Calibration* calib,
                               const PredictOptions& opt, const std::string& who);
// The measured runs as the sensitivity's last figure: the point's central epoch times the conformal ends.
FigureSensitivity runs_figure(const RunsSpread& spread, const std::vector<MeasuredRun>& runs,
                              const ReportPoint& p);

}  // namespace vitsim::sim
