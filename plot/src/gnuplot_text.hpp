#pragma once
// The text pieces every plot script is made of (report, plan and validation plots): gnuplot strings and
// data files. Private to plot/.
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace vitsim::plot {

// A gnuplot double-quoted string: quotes and backslashes escaped, a newline as a space.
std::string gp_string(const std::string& s);
// Lines as one gnuplot double-quoted string, "\n" between them (a two-line title); empty lines left out.
std::string gp_lines(const std::vector<std::string>& lines);
// A data file of (x, y) rows, 9 significant digits.
std::string data_text(const std::vector<std::pair<double, double>>& xy);

// One part of a curve's label for a parameter's value: "2 GPUs", "micro-batch 64", "accumulation 4",
// "KEY=VALUE"; `value` null where the points do not set the key ("KEY as in the scenario").
std::string param_label(const std::string& key, const std::string* value);
// The keys whose value differs between the parameter sets (absent counts as a value), in the order first
// seen, without a scenario-file spelling whose canonical key differs too ("training.micro_batch" beside
// "micro_batch"); the canonical key stays.
std::vector<std::string> differing_keys(const std::vector<std::map<std::string, std::string>>& sets);
// The label of one set among them: param_label of each differing key, ", "-joined (the canonical spelling).
std::string params_label(const std::map<std::string, std::string>& set, const std::vector<std::string>& keys);

}  // namespace vitsim::plot
