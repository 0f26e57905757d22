#include "vitsim/plot/validation_plot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gnuplot_text.hpp"
#include "vitsim/core/base/error.hpp"

namespace vitsim::plot {

namespace {

const ValidationMetric* metric_of(const ValidationPoint& p, const std::string& name) {
  for (const auto& m : p.metrics)
    if (m.metric == name) return &m;
  return nullptr;
}

// A label as one field of a gnuplot data file: double-quoted, without the quotes a data file cannot escape.
std::string data_label(std::string s) {
  std::replace(s.begin(), s.end(), '"', '\'');
  std::replace(s.begin(), s.end(), '\n', ' ');
  return "\"" + s + "\"";
}

}  // namespace

Script make_validation_script(const Validation& v, const std::string& svg_name) {
  std::vector<std::map<std::string, std::string>> sets;
  for (const auto& p : v.points) sets.push_back(p.params);
  const std::vector<std::string> keys = differing_keys(sets);
  std::string rows;
  int drawn = 0;
  for (size_t i = 0; i < v.points.size(); ++i) {
    const ValidationPoint& p = v.points[i];
    const ValidationMetric* step = metric_of(p, "step_time");
    if (!step) continue;
    std::string label = params_label(p.params, keys);
    if (label.empty()) {  // one point, or points alike: its shape
      const std::vector<std::string> shape{"gpus", "micro_batch"};
      label = params_label(p.params, shape);
    }
    if (label.empty()) label = fmt::format("point {}", i + 1);
    // An error not scored (no measured time) is missing to gnuplot: NaN.
    rows +=
        fmt::format("{} {:.9g} {:.9g} {}\n", data_label(label), 1e3 * step->predicted, 1e3 * step->measured,
                    step->scored ? fmt::format("{:.9g}", 100 * step->rel_error) : std::string("NaN"));
    ++drawn;
  }
  if (drawn == 0) throw Error(fmt::format("validation '{}': no point has a step time to plot", v.scenario));
  Script sc;
  sc.data["validation.dat"] = rows;
  const std::string title = v.scenario.empty() ? "vitsim validation" : v.scenario;
  std::string verdict;
  if (auto it = v.mape.find("step_time"); it != v.mape.end())
    verdict = fmt::format("; step-time MAPE {:.1f}%", 100 * it->second);
  if (v.tolerance > 0)
    verdict +=
        fmt::format(" against a tolerance of {:.1f}%: {}", 100 * v.tolerance, v.pass ? "PASS" : "FAIL");
  std::string t = "# Written by vitsim plot; run with: gnuplot plot.gp\n";
  t += terminal_line(output_format(svg_name), 1000, 440);
  t += "set output " + gp_string(svg_name) + "\n";
  t += "set grid ytics\nset key top right\n";
  t += "set multiplot layout 1,2 title " + gp_string(title + ": predicted and measured" + verdict) + "\n";
  t += "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.7 border -1\n";
  t += fmt::format("set xrange [-0.5:{}]\n", drawn - 0.5);
  if (drawn > 3) t += "set xtics rotate by -30\n";
  t += "set ylabel \"step time (ms)\"\nset yrange [0:*]\n";
  t += "plot \"validation.dat\" using 2:xtic(1) linetype 1 title \"predicted\", "
       "\"\" using 3 linetype 2 title \"measured\"\n";
  t += "set ylabel \"step-time error (%)\"\nset yrange [*:*]\n";
  std::string err =
      "plot \"validation.dat\" using 4:xtic(1) linetype 3 title \"error: (predicted - measured) / measured\"";
  if (v.tolerance > 0)
    err += fmt::format(
        ", {0:.9g} with lines linecolor rgb \"gray\" dashtype 2 title {1}, -{0:.9g} with lines linecolor rgb "
        "\"gray\" dashtype 2 notitle",
        100 * v.tolerance, gp_string(fmt::format("tolerance (+/-{:.1f}%)", 100 * v.tolerance)));
  t += err + "\nunset multiplot\n";
  sc.text = t;
  return sc;
}

void plot_validation(const Validation& v, const std::string& svg_path, const Options& opt) {
  run_script(make_validation_script(v, "plot." + output_format(svg_path)), svg_path, opt);
}

}  // namespace vitsim::plot
