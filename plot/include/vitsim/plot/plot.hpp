#pragma once
// Plots of a vitsim report, drawn by gnuplot (Debian gnuplot-nox; scripts/setup.sh installs it).
//
// Two kinds:
// - scaling: epoch time and scaling efficiency against the number of GPUs, one curve per series (the
//   points that share every parameter except the GPU and node counts); the efficiency against the 1-GPU
//   point, or without one against the series' point with the fewest GPUs (the axis says which);
// - batch: per-sample time (step time / global batch) against the micro-batch, one curve per GPU count.
// A report with intervals (predict --interval) draws each time curve over its band (p10-p90 by default).
// Several reports are one set of curves each, labelled by what tells them apart (merge_reports). Plans and
// validations have plots of their own: plan_plot.hpp, validation_plot.hpp.
// `auto` takes as x axis whichever of the micro-batch and the GPU count has more distinct values (the GPU
// count on a tie), so a batch sweep on 1 and 2 GPUs is a batch plot and a GPU sweep at two batches a scaling
// one.
//
// The script and its data are plain text built by make_script (no gnuplot needed, so tests can read
// them); plot_report writes them to a temporary folder, runs gnuplot there and moves the SVG into place.
#include <array>
#include <map>
#include <string>
#include <vector>

#include "vitsim/core/results/report.hpp"

namespace vitsim::plot {

enum class Kind { Auto, Scaling, Batch };
// A plot kind and its name. One table per family (report plots here, plan plots in plan_plot.hpp): the
// parser, the names in messages, `vitsim plot --kind`'s valid values and the docs test all read it.
template <class K>
struct KindName {
  K kind;
  const char* name;
};
const std::vector<KindName<Kind>>& report_kinds();  // auto, scaling, batch
Kind parse_kind(
    const std::string& name);  // throws Error("unknown plot kind 'X'; valid: auto, scaling, batch")
const char* kind_name(Kind kind);
// The kind `auto` stands for in this report; throws Error when nothing is swept that a plot could show.
Kind resolve_kind(const Report& r, Kind requested);

// One curve: a label and its (x, y) points, sorted by x.
struct Series {
  std::string label;
  std::vector<std::pair<double, double>> time;        // scaling: (gpus, epoch min); batch: (micro, ms/sample)
  std::vector<std::pair<double, double>> efficiency;  // scaling only: (gpus, efficiency %)
  // The GPUs of the point the efficiency is measured against: 1 when the report's own efficiencies are
  // drawn (each point's throughput against the 1-GPU point's, fill_scaling_efficiency); else the series'
  // point with the fewest GPUs, against which the plot computes it the same way: throughput(g) x g0 /
  // (g x throughput(g0)). 0: no efficiency (no point has a throughput).
  int efficiency_reference = 0;
  // Scaling only: (gpus, epoch min) at a linear speed-up from the series' point with the fewest GPUs:
  // epoch_time(g) x throughput(g) x g0 / (g x throughput(g0)), which is epoch_time(g0) x g0 / g when the
  // epoch's images do not change (strong scaling) and stays right when they grow with g (weak scaling).
  std::vector<std::pair<double, double>> ideal;
  // With intervals (predict --interval, ReportPoint::interval): (x, low, high) of `time` at the interval's
  // quantiles, for the points that have one; `band_label` names them ("p10-p90").
  std::vector<std::array<double, 3>> band;
  std::string band_label;
};
std::vector<Series> make_series(const Report& r, Kind kind);  // kind must be resolved (not Auto)

struct Script {
  std::string text;                         // the gnuplot script
  std::map<std::string, std::string> data;  // file name (relative to the script's folder) -> content
};
// The gnuplot script that draws `r` into `svg_name` (relative to the folder the script runs in). A scaling
// plot draws each series' ideal (linear) scaling as a dashed line, and 100% in the efficiency panel.
// `measured` (vitsim plot --measured): a measured run's points drawn over the prediction, as points
// labelled "measured: ...", with the prediction's curves labelled "predicted: ...".
Script make_script(const Report& r, Kind kind, const std::string& svg_name, const Report* measured = nullptr);

// Several reports in one plot (micro-batch 16 against 64, a what-if against none): their points together,
// each tagged with a "report" parameter that tells its report apart from the others: the scenario's name
// where the scenarios differ, its what-ifs (provenance "what_ifs") or "no what-if" where those differ, its
// calibration where those differ, and its file's name where nothing else does. So every report keeps its
// own curves, labelled by what makes it differ (a --set differs in the points' own parameters, which label
// the curves too). The merged report's scenario is the distinct scenario names joined by " vs ".
Report merge_reports(const std::vector<Report>& reports);

struct Options {
  Kind kind = Kind::Auto;
  std::string gnuplot = "gnuplot";   // program name (searched on PATH) or path
  const Report* measured = nullptr;  // --measured: a measured report drawn over the prediction
};

// What `vitsim plot` was given, read as a report or a plan: JSON text. A file that is not JSON but XML (a
// scenario, a platform) is refused with what to run first ("run vitsim predict ... --format json first")
// instead of a JSON parse error. Throws Error naming `path`.
void check_plot_input(const std::string& text, const std::string& path);
// The image format of an output path, from its extension: "svg" (also for a path without one, such as
// /dev/stdout), "png" or "pdf". Throws Error("PATH: unknown plot format '.jpg'; valid: .svg, .png, .pdf").
std::string output_format(const std::string& path);
// The gnuplot terminal line for a format at a size in SVG pixels: svg, pngcairo (same pixels), pdfcairo
// (inches at 100 px per inch); all with the white background and the sans 11 font.
std::string terminal_line(const std::string& format, int width, int height);

// Draws the report into `svg_path` (written whole or not at all). Throws Error when gnuplot is missing
// or fails (with its message), or when the report has nothing to plot.
void plot_report(const Report& r, const std::string& svg_path, const Options& opt);
// Runs gnuplot on a script whose image is "plot.<format of svg_path>" and moves it to `svg_path`
// (plot_report's second half; plan plots use it too). Throws Error as plot_report does.
void run_script(const Script& sc, const std::string& svg_path, const Options& opt);

}  // namespace vitsim::plot
