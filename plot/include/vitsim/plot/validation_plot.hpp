#pragma once
// A validation (`vitsim validate --format json`, "vitsim.validation/2", core/results/validation.hpp) drawn
// by gnuplot like report plots, as predicted beside measured:
// - left: each point's step time, predicted and measured, as a pair of bars (the points labelled by the
//   parameters that tell them apart: "2 GPUs, micro-batch 64");
// - right: each point's step-time error, (predicted - measured) / measured in %, with the validation's
//   tolerance as dashed lines at +/- it; the title gives the step-time MAPE and PASS or FAIL.
#include <string>

#include "vitsim/core/results/validation.hpp"
#include "vitsim/plot/plot.hpp"

namespace vitsim::plot {

// The gnuplot script (and its data, "validation.dat": label, predicted ms, measured ms, error %) that
// draws `v` into `svg_name`; pure, for the tests. Throws Error when no point has a step time.
Script make_validation_script(const Validation& v, const std::string& svg_name);
void plot_validation(const Validation& v, const std::string& svg_path, const Options& opt);

}  // namespace vitsim::plot
