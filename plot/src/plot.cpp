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

namespace {

// Parameters that are the x axis of each kind; everything else in `params` tells series apart.
const std::set<std::string>& axis_keys(Kind kind) {
  static const std::set<std::string> scaling{"gpus", "nodes", "cluster.nodes", "cluster.gpus_per_node"};
  static const std::set<std::string> batch{"micro_batch", "training.micro_batch"};
  return kind == Kind::Batch ? batch : scaling;
}

// The scenario-file spelling of a canonical report key: a label shows only the canonical one.
const std::map<std::string, std::string>& spelled_as() {
  static const std::map<std::string, std::string> m{{"cluster.gpus_per_node", "gpus"},
                                                    {"cluster.nodes", "nodes"},
                                                    {"training.micro_batch", "micro_batch"},
                                                    {"training.grad_accum", "grad_accum"}};
  return m;
}

std::string label_part(const std::string& key, const std::string& value) {
  if (key == "scenario") return value;
  if (key == "gpus") return fmt::format("{} GPU{}", value, value == "1" ? "" : "s");
  if (key == "nodes") return fmt::format("{} node{}", value, value == "1" ? "" : "s");
  if (key == "micro_batch") return fmt::format("micro-batch {}", value);
  if (key == "grad_accum") return fmt::format("accumulation {}", value);
  return key + "=" + value;
}

using Params = std::map<std::string, std::string>;

// Points grouped by everything but the x axis, in the order each group first appears.
std::vector<std::pair<Params, std::vector<const ReportPoint*>>> groups_of(const Report& r, Kind kind) {
  std::vector<std::pair<Params, std::vector<const ReportPoint*>>> groups;
  for (const auto& p : r.points) {
    Params key = p.params;
    for (const auto& k : axis_keys(kind)) key.erase(k);
    // The GPU count can sit in cluster.gpus_per_node or cluster.nodes; for a scaling plot only the total
    // matters, and a node order (cluster.hosts) is the same cluster whatever prefix of it is used.
    if (kind == Kind::Scaling) key.erase("cluster.hosts");
    auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == key; });
    if (it == groups.end()) {
      groups.push_back({key, {}});
      it = groups.end() - 1;
    }
    it->second.push_back(&p);
  }
  return groups;
}

std::string gp_string(const std::string& s) {  // a gnuplot double-quoted string
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += ' ';
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string data_text(const std::vector<std::pair<double, double>>& xy) {
  std::string out;
  for (const auto& [x, y] : xy) out += fmt::format("{:.9g} {:.9g}\n", x, y);
  return out;
}

// A series' epoch time at a linear speed-up from its point with the fewest GPUs (Series::ideal).
std::vector<std::pair<double, double>> ideal_scaling(const std::vector<const ReportPoint*>& pts) {
  const ReportPoint* base = nullptr;
  for (const ReportPoint* p : pts)
    if (p->throughput_img_s > 0 && (!base || p->gpus < base->gpus)) base = p;
  std::vector<std::pair<double, double>> out;
  if (!base) return out;
  for (const ReportPoint* p : pts)
    if (p->throughput_img_s > 0)
      out.push_back({static_cast<double>(p->gpus), p->epoch_time_s / 60.0 * p->throughput_img_s * base->gpus /
                                                       (p->gpus * base->throughput_img_s)});
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

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

Report merge_reports(const std::vector<Report>& reports) {
  if (reports.empty()) throw Error("no report to plot");
  if (reports.size() == 1) return reports.front();
  Report out;
  out.source = reports.front().source;
  for (const auto& r : reports) {
    out.scenario += (out.scenario.empty() ? "" : " vs ") + r.scenario;
    for (auto p : r.points) {
      p.params["scenario"] = r.scenario;
      out.points.push_back(std::move(p));
    }
  }
  return out;
}

Kind resolve_kind(const Report& r, Kind requested) {
  std::set<int> gpus, micro;
  for (const auto& p : r.points) {
    gpus.insert(p.gpus);
    micro.insert(p.micro_batch);
  }
  if (r.points.empty()) throw Error(fmt::format("report '{}' has no points to plot", r.scenario));
  if (requested == Kind::Auto) {
    // The swept axis with more distinct values is the x axis; the other one tells curves apart.
    if (micro.size() > 1 && micro.size() > gpus.size()) return Kind::Batch;
    if (gpus.size() > 1) return Kind::Scaling;
    if (micro.size() > 1) return Kind::Batch;
    throw Error(
        fmt::format("report '{}' sweeps neither the GPU count nor the micro-batch: nothing to plot "
                    "(a scaling plot needs several GPU counts, a batch plot several micro-batches)",
                    r.scenario));
  }
  if (requested == Kind::Scaling && gpus.size() < 2)
    throw Error(fmt::format("report '{}' has a single GPU count ({}): a scaling plot needs several",
                            r.scenario, *gpus.begin()));
  if (requested == Kind::Batch && micro.size() < 2)
    throw Error(fmt::format("report '{}' has a single micro-batch ({}): a batch plot needs several",
                            r.scenario, *micro.begin()));
  return requested;
}

std::vector<Series> make_series(const Report& r, Kind kind) {
  if (kind == Kind::Auto) throw Error("make_series: resolve the plot kind first");
  auto groups = groups_of(r, kind);
  // Keys whose value differs between groups make the labels.
  std::vector<std::string> differing;
  for (const auto& [key, pts] : groups)
    for (const auto& [k, v] : key)
      if (std::find(differing.begin(), differing.end(), k) == differing.end())
        for (const auto& other : groups) {
          auto it = other.first.find(k);
          if (it == other.first.end() || it->second != v) {
            differing.push_back(k);
            break;
          }
        }
  std::erase_if(differing, [&](const std::string& k) {
    auto it = spelled_as().find(k);
    return it != spelled_as().end() &&
           std::find(differing.begin(), differing.end(), it->second) != differing.end();
  });
  std::vector<Series> out;
  for (const auto& [key, pts] : groups) {
    Series s;
    for (const auto& k : differing) {
      auto it = key.find(k);
      std::string part =
          label_part(spelled_as().count(k) ? spelled_as().at(k) : k, it == key.end() ? "-" : it->second);
      s.label += (s.label.empty() ? "" : ", ") + part;
    }
    if (s.label.empty()) s.label = r.scenario.empty() ? "prediction" : r.scenario;
    for (const ReportPoint* p : pts) {
      if (kind == Kind::Scaling) {
        s.time.push_back({static_cast<double>(p->gpus), p->epoch_time_s / 60.0});
        if (p->scaling_efficiency >= 0)
          s.efficiency.push_back({static_cast<double>(p->gpus), 100.0 * p->scaling_efficiency});
      } else if (p->global_batch > 0) {
        s.time.push_back({static_cast<double>(p->micro_batch), 1e3 * p->step_time_s.mean / p->global_batch});
      }
    }
    std::sort(s.time.begin(), s.time.end());
    std::sort(s.efficiency.begin(), s.efficiency.end());
    if (kind == Kind::Scaling) s.ideal = ideal_scaling(pts);
    if (!s.time.empty()) out.push_back(std::move(s));
  }
  if (out.empty())
    throw Error(
        fmt::format("report '{}': no point has the figures a {} plot needs", r.scenario, kind_name(kind)));
  return out;
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

// One panel's plot command: each series' curve (member), its ideal line (scaling time panel), a measured
// run's points over them, and `extra` (the efficiency panel's 100% line).
struct PanelDraw {
  const std::vector<Series>& series;
  const std::vector<Series>& measured;
  Script& sc;
  std::string plot(const std::string& prefix, std::vector<std::pair<double, double>> Series::*member,
                   bool ideal, const std::string& extra) {
    std::string line = "plot ";
    int k = 0;
    const std::string tag = measured.empty() ? "" : "predicted: ";
    for (size_t i = 0; i < series.size(); ++i) {
      const auto& xy = series[i].*member;
      if (xy.empty()) continue;
      const std::string file = fmt::format("{}{}.dat", prefix, i);
      sc.data[file] = data_text(xy);
      line += fmt::format("{}{} using 1:2 with linespoints linetype {} linewidth 2 title {}", k++ ? ", " : "",
                          gp_string(file), i + 1, gp_string(tag + series[i].label));
      if (!ideal || series[i].ideal.size() < 2) continue;
      const std::string ideal_file = fmt::format("ideal{}.dat", i);
      sc.data[ideal_file] = data_text(series[i].ideal);
      line += fmt::format(
          ", {} using 1:2 with lines linetype {} linewidth 1 dashtype 2 title {}", gp_string(ideal_file),
          i + 1, gp_string(series.size() == 1 ? "ideal (linear) scaling" : "ideal: " + series[i].label));
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
    if (k && !extra.empty()) line += ", " + extra;
    return k ? line + "\n" : std::string();
  }
};

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
  if (kind == Kind::Scaling) {
    t += "set multiplot layout 1,2 title " + gp_string(title + ": " + what + " scaling") + "\n";
    t += "set xlabel \"GPUs\"\nset ylabel \"epoch time (min)\"\nset yrange [0:*]\n";
    t += draw.plot("time", &Series::time, true, "");
    std::string eff = draw.plot("efficiency", &Series::efficiency, false,
                                "100 with lines linecolor rgb \"gray\" dashtype 2 title \"ideal (100%)\"");
    t += "set ylabel \"scaling efficiency (%)\"\nset yrange [0:110]\n";
    // Without a 1-GPU point there is no efficiency: say so in the second panel instead of leaving it blank.
    t += eff.empty() ? "set label 1 \"no 1-GPU point: no efficiency\" at graph 0.5,0.5 center\n"
                       "plot NaN notitle\n"
                     : eff;
    t += "unset multiplot\n";
  } else {
    t += "set title " + gp_string(title + ": " + what + " per-sample time against micro-batch") + "\n";
    t += "set xlabel \"micro-batch per GPU\"\nset ylabel \"time per sample (ms)\"\nset yrange [0:*]\n";
    t += draw.plot("batch", &Series::time, false, "");
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
