#include "vitsim/plot/plot.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "gnuplot_text.hpp"
#include "vitsim/core/base/enum_names.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/units.hpp"

extern char** environ;

namespace vitsim::plot {
namespace fs = std::filesystem;

const std::vector<KindName<Kind>>& report_kinds() {
  static const std::vector<KindName<Kind>> k{
      {Kind::Auto, "auto"}, {Kind::Scaling, "scaling"}, {Kind::Batch, "batch"}};
  return k;
}

Kind parse_kind(const std::string& name) {
  return value_of(report_kinds(), name, "plot kind");
}

const char* kind_name(Kind kind) {
  return name_of(report_kinds(), kind);
}

void check_plot_input(const std::string& text, const std::string& path) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text[first] != '<') return;  // JSON (or not): the reader says
  const bool scenario = text.find("<scenario") != std::string::npos;
  const bool platform = text.find("<platform") != std::string::npos;
  if (scenario)
    throw Error(fmt::format(
        "{}: a scenario file, not a report: run `vitsim predict {} --format json --out report.json` first, "
        "then `vitsim plot report.json --out plot.svg`",
        path, path));
  throw Error(fmt::format(
      "{}: an XML file{}, not a report: vitsim plot draws the JSON of `vitsim predict SCENARIO.xml --format "
      "json` (or of `vitsim train`, `vitsim plan`); run vitsim predict --format json first",
      path, platform ? " (a platform)" : ""));
}

namespace {

// The x range of every curve drawn.
std::pair<double, double> x_extent(const std::vector<Series>& series, const std::vector<Series>& measured) {
  double xmin = 1e300, xmax = 0;
  for (const auto* set : {&series, &measured})
    for (const auto& s : *set)
      for (const auto& [x, y] : s.time) {
        xmin = std::min(xmin, x);
        xmax = std::max(xmax, x);
      }
  return {xmin, xmax};
}

// What a panel draws besides each series' curve.
struct PanelParts {
  bool ideal = false;      // the scaling time panel: each series' ideal (linear) scaling, dashed
  bool band = false;       // a time panel: each series' interval as a shaded band under its curve
  bool reference = false;  // the efficiency panel: a series' reference in its label where not all agree
  std::string extra;       // the efficiency panel's 100% line
};

std::string gpus_text(int gpus) {
  return fmt::format("{} GPU{}", gpus, gpus == 1 ? "" : "s");
}

// One panel's plot command: each series' band (its interval) and curve (member), its ideal line, a measured
// run's points over them, and the panel's extra line.
struct PanelDraw {
  const std::vector<Series>& series;
  const std::vector<Series>& measured;
  Script& sc;
  bool mixed_references = false;  // the series' efficiencies are measured against different GPU counts
  std::string plot(const std::string& prefix, std::vector<std::pair<double, double>> Series::*member,
                   const PanelParts& parts) {
    std::string line = "plot ";
    int k = 0;
    const std::string tag = measured.empty() ? "" : "predicted: ";
    for (size_t i = 0; i < series.size(); ++i) {
      const Series& s = series[i];
      const auto& xy = s.*member;
      if (xy.empty()) continue;
      if (parts.band && !s.band.empty()) {  // under the curve: drawn first
        const std::string band_file = fmt::format("{}{}_band.dat", prefix, i);
        std::string rows;
        for (const auto& [x, low, high] : s.band) rows += fmt::format("{:.9g} {:.9g} {:.9g}\n", x, low, high);
        sc.data[band_file] = rows;
        line += fmt::format(
            "{}{} using 1:2:3 with filledcurves linetype {} fillstyle transparent solid 0.2 noborder title "
            "{}",
            k++ ? ", " : "", gp_string(band_file), i + 1, gp_string(s.band_label + ": " + s.label));
      }
      std::string label = tag + s.label;
      if (parts.reference && mixed_references && s.efficiency_reference != 1)
        label += " (against " + gpus_text(s.efficiency_reference) + ")";
      const std::string file = fmt::format("{}{}.dat", prefix, i);
      sc.data[file] = data_text(xy);
      line += fmt::format("{}{} using 1:2 with linespoints linetype {} linewidth 2 title {}", k++ ? ", " : "",
                          gp_string(file), i + 1, gp_string(label));
      if (!parts.ideal || s.ideal.size() < 2) continue;
      const std::string ideal_file = fmt::format("ideal{}.dat", i);
      sc.data[ideal_file] = data_text(s.ideal);
      line += fmt::format(", {} using 1:2 with lines linetype {} linewidth 1 dashtype 2 title {}",
                          gp_string(ideal_file), i + 1,
                          gp_string(series.size() == 1 ? "ideal (linear) scaling" : "ideal: " + s.label));
    }
    for (size_t i = 0; i < measured.size(); ++i) {
      const auto& xy = measured[i].*member;
      if (xy.empty()) continue;
      const std::string file = fmt::format("measured_{}{}.dat", prefix, i);
      sc.data[file] = data_text(xy);
      line += fmt::format("{}{} using 1:2 with points linetype {} pointtype 7 pointsize 1.4 title {}",
                          k++ ? ", " : "", gp_string(file), series.size() + i + 1,
                          gp_string("measured: " + measured[i].label));
    }
    if (k && !parts.extra.empty()) line += ", " + parts.extra;
    return k ? line + "\n" : std::string();
  }
};

// The efficiency panel's y label: against 1 GPU (the report's own efficiencies), against the one GPU count
// every curve starts from when none has a 1-GPU point, or against each curve's own smallest point.
std::string efficiency_axis(const std::vector<Series>& series, const std::vector<Series>& measured,
                            bool& mixed) {
  std::set<int> refs;
  for (const auto* set : {&series, &measured})
    for (const auto& s : *set)
      if (!s.efficiency.empty()) refs.insert(s.efficiency_reference);
  mixed = refs.size() > 1;
  if (refs.empty() || (refs.size() == 1 && *refs.begin() == 1)) return "scaling efficiency (%)";
  if (refs.size() == 1)
    return fmt::format("efficiency against {} (%): no 1-GPU point", gpus_text(*refs.begin()));
  return "efficiency against 1 GPU, else the fewest (%)";
}

}  // namespace

Script make_script(const Report& r, Kind kind, const std::string& svg_name, const Report* measured) {
  kind = resolve_kind(r, kind);
  const std::vector<Series> series = make_series(r, kind);
  const std::vector<Series> measured_series = measured ? make_series(*measured, kind) : std::vector<Series>{};
  Script sc;
  const auto [xmin, xmax] = x_extent(series, measured_series);
  const bool log_x = kind == Kind::Batch || xmax / xmin > 8;
  const std::string title = r.scenario.empty() ? "vitsim" : r.scenario;
  const std::string what = measured ? "predicted and measured" : "predicted";
  std::string t;
  t += "# Written by vitsim plot; run with: gnuplot plot.gp\n";
  t += terminal_line(output_format(svg_name), 1000, 440);
  t += "set output " + gp_string(svg_name) + "\n";
  t += "set grid\nset key top right\nset pointsize 0.8\n";
  if (log_x) t += "set logscale x 2\n";
  t += fmt::format("set xrange [{:.9g}:{:.9g}]\n", log_x ? xmin / 1.25 : std::max(0.0, xmin - 0.5),
                   log_x ? xmax * 1.25 : xmax + 0.5);
  PanelDraw draw{series, measured_series, sc};
  PanelParts time_parts;
  time_parts.band = true;
  if (kind == Kind::Scaling) {
    t += "set multiplot layout 1,2 title " + gp_string(title + ": " + what + " scaling") + "\n";
    t += "set xlabel \"GPUs\"\nset ylabel \"epoch time (min)\"\nset yrange [0:*]\n";
    time_parts.ideal = true;
    t += draw.plot("time", &Series::time, time_parts);
    PanelParts eff_parts;
    eff_parts.reference = true;
    eff_parts.extra = "100 with lines linecolor rgb \"gray\" dashtype 2 title \"ideal (100%)\"";
    const std::string axis = efficiency_axis(series, measured_series, draw.mixed_references);
    std::string eff = draw.plot("efficiency", &Series::efficiency, eff_parts);
    t += "set ylabel " + gp_string(axis) + "\nset yrange [0:110]\n";
    // No point with a throughput: no efficiency; say so in the second panel instead of leaving it blank.
    t += eff.empty() ? "set label 1 \"no point with a throughput: no efficiency\" at graph 0.5,0.5 center\n"
                       "plot NaN notitle\n"
                     : eff;
    t += "unset multiplot\n";
  } else {
    t += "set title " + gp_string(title + ": " + what + " per-sample time against micro-batch") + "\n";
    t += "set xlabel \"micro-batch per GPU\"\nset ylabel \"time per sample (ms)\"\nset yrange [0:*]\n";
    t += draw.plot("batch", &Series::time, time_parts);
  }
  sc.text = t;
  return sc;
}

std::string output_format(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  const auto dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0) return "svg";  // /dev/stdout, a FIFO: SVG, as before
  std::string ext = name.substr(dot + 1);
  for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (ext == "svg" || ext == "png" || ext == "pdf") return ext;
  throw Error(fmt::format("{}: unknown plot format '{}'; valid: .svg, .png, .pdf", echo(path),
                          echo(name.substr(dot))));
}

std::string terminal_line(const std::string& format, int width, int height) {
  if (format == "png")
    return fmt::format("set terminal pngcairo size {},{} noenhanced font \"sans,11\" background \"white\"\n",
                       width, height);
  if (format == "pdf")  // pdfcairo sizes in inches
    return fmt::format(
        "set terminal pdfcairo size {:.2f}in,{:.2f}in noenhanced font \"sans,11\" background \"white\"\n",
        width / 100.0, height / 100.0);
  return fmt::format("set terminal svg size {},{} dynamic noenhanced font \"sans,11\" background \"white\"\n",
                     width, height);
}

void plot_report(const Report& r, const std::string& svg_path, const Options& opt) {
  run_script(make_script(r, opt.kind, "plot." + output_format(svg_path), opt.measured), svg_path, opt);
}

void run_script(const Script& sc, const std::string& svg_path, const Options& opt) {
  const std::string image = "plot." + output_format(svg_path);
  const TempDir tmp_dir("vitsim-plot-");  // core's registry: removed on Ctrl-C too
  const fs::path dir = tmp_dir.path();
  for (const auto& [name, content] : sc.data) write_file_atomic((dir / name).string(), content);
  write_file_atomic((dir / "plot.gp").string(), "cd " + gp_string(dir.string()) + "\n" + sc.text);

  const std::string err_path = (dir / "gnuplot.err").string();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::string script = (dir / "plot.gp").string();
  std::vector<char*> argv{const_cast<char*>(opt.gnuplot.c_str()), script.data(), nullptr};
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, opt.gnuplot.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc == ENOENT || rc == EACCES)
    throw Error(
        fmt::format("cannot run '{}': {}; vitsim plot needs gnuplot (Debian: apt-get install gnuplot-nox, "
                    "or scripts/setup.sh)",
                    opt.gnuplot, std::strerror(rc)));
  if (rc != 0) throw Error(fmt::format("cannot run '{}': {}", opt.gnuplot, std::strerror(rc)));
  register_child(pid);  // ended by an interruption
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      throw Error(fmt::format("waiting for {} failed: {}", opt.gnuplot, std::strerror(errno)));
  unregister_child(pid);
  stop_if_interrupted();
  std::string err;
  try {
    err = read_file(err_path);
  } catch (const Error&) {
  }
  // posix_spawnp reports a missing program through the child on some libcs: exit status 127.
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && !fs::exists(dir / image))
    throw Error(
        fmt::format("cannot run '{}'; vitsim plot needs gnuplot (Debian: apt-get install gnuplot-nox, "
                    "or scripts/setup.sh)",
                    opt.gnuplot));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error(fmt::format("{} failed ({}): {}", opt.gnuplot,
                            WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                              : fmt::format("signal {}", WTERMSIG(status)),
                            err.empty() ? "no message" : err));
  const fs::path svg = dir / image;
  if (!fs::exists(svg) || fs::file_size(svg) == 0)
    throw Error(fmt::format("{} wrote no {}{}", opt.gnuplot,
                            output_format(svg_path) == "svg"   ? "SVG"
                            : output_format(svg_path) == "png" ? "PNG"
                                                               : "PDF",
                            err.empty() ? "" : ": " + err));
  write_file_atomic(svg_path, read_file(svg.string()));
}

}  // namespace vitsim::plot
