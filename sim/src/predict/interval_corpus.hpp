#pragma once
// The public corpus' part of an interval (issue 37 item 3; docs/predict.md "The model's own error"): which
// points take it in, and the band at the interval's quantiles.
#include <set>
#include <string>

#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/results/report.hpp"

namespace vitsim {
struct Calibration;
}

namespace vitsim::sim {

// Whether `calib` measured every GPU type of `gpu_models` (the point's platform) on the point's model and
// precision: its own times of that shape, or its op model fitted on that device. A point so calibrated keeps
// the interval of its figures and the calibration's spans; any other takes in the model's error on the
// corpus.
bool point_calibrated(const Scenario& s, const Calibration* calib, const std::set<std::string>& gpu_models);

// The corpus band (core/results/corpus_error.hpp, the shipped table) at the interval's quantiles, with what
// leaving each origin out held.
CorpusSpread corpus_spread(double p_low, double p_high);

}  // namespace vitsim::sim
