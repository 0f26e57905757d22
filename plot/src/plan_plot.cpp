#include "vitsim/plot/plan_plot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "vitsim/core/base/enum_names.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim::plot {

const std::vector<KindName<PlanKind>>& plan_kinds() {
  static const std::vector<KindName<PlanKind>> k{{PlanKind::Auto, "auto"},
                                                 {PlanKind::Memory, "memory"},
                                                 {PlanKind::Nodes, "nodes"},
                                                 {PlanKind::Pareto, "pareto"}};
  return k;
}

PlanKind parse_plan_kind(const std::string& name) {
  return value_of(plan_kinds(), name, "plan plot kind");
}

std::vector<std::string> plot_kind_names() {
  std::vector<std::string> out;
  for (const auto& k : report_kinds()) out.push_back(k.name);
  for (const auto& k : plan_kinds())
    if (std::find(out.begin(), out.end(), k.name) == out.end()) out.push_back(k.name);
  return out;
}

namespace {

std::set<std::string> values_of(const PlanResult& plan, const std::string& key) {
  std::set<std::string> out;
  for (const auto& p : plan.points)
    if (auto it = p.params.find(key); it != p.params.end()) out.insert(it->second);
  return out;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}

std::string data_lines(const std::vector<std::pair<double, double>>& xy) {
  std::string out;
  for (const auto& [x, y] : xy) out += fmt::format("{:.9g} {:.9g}\n", x, y);
  return out;
}

double param_number(const PlanPoint& p, const std::string& key, double def) {
  auto it = p.params.find(key);
  return it == p.params.end() ? def : units::parse_number(it->second, units::Range{});
}

}  // namespace

PlanKind resolve_plan_kind(const PlanResult& plan, PlanKind requested) {
  int feasible = 0;
  for (const auto& p : plan.points) feasible += p.rank > 0;
  PlanKind k = requested;
  if (k == PlanKind::Auto)
    k = values_of(plan, "model.image_size").size() > 1 ? PlanKind::Memory
        : values_of(plan, "nodes").size() > 1          ? PlanKind::Nodes
                                                       : PlanKind::Pareto;
  if (k == PlanKind::Memory && values_of(plan, "model.image_size").size() < 2)
    throw Error("plan plot 'memory' needs a plan that sweeps model.image_size");
  // A shard first: its points are unranked (rank 0), which read as "no feasible point" (issue 39 item 28).
  if (!plan.ranked)
    throw Error(
        fmt::format("{}the plan is shard {}/{}'s unranked points: merge the shards first (vitsim plan "
                    "--merge)",
                    plan.origin.empty() ? "" : plan.origin + ": ", plan.shard_index, plan.shard_count));
  if (k != PlanKind::Memory && feasible == 0) throw Error("the plan has no feasible point to plot");
  return k;
}

Script make_plan_script(const PlanResult& plan, PlanKind requested, const std::string& svg_name) {
  const PlanKind kind = resolve_plan_kind(plan, requested);
  Script sc;
  std::string t = "# Written by vitsim plot; run with: gnuplot plot.gp\n";
  t += terminal_line(output_format(svg_name), 900, 480);
  t += "set output " + quoted(svg_name) + "\nset grid\nset key outside right\nset pointsize 0.8\n";
  const std::string title = plan.scenario.empty() ? "vitsim plan" : plan.scenario;
  auto lines = [&](const std::map<std::string, std::vector<std::pair<double, double>>>& curves,
                   const char* prefix) {
    std::string line = "plot ";
    int k = 0;
    for (const auto& [label, xy] : curves) {
      const std::string file = fmt::format("{}{}.dat", prefix, k);
      sc.data[file] = data_lines(xy);
      line += fmt::format("{}{} using 1:2 with linespoints linewidth 2 title {}", k++ ? ", " : "",
                          quoted(file), quoted(label));
    }
    return line;
  };
  if (kind == PlanKind::Nodes) {
    // Best time to train per (micro-batch, nodes) among feasible points; curves sorted by micro-batch.
    std::map<int, std::map<int, double>> best;
    for (const auto& p : plan.points) {
      if (p.rank == 0) continue;
      auto& slot = best[p.micro_batch];
      auto it = slot.find(p.nodes);
      if (it == slot.end() || p.time_to_train_s < it->second) slot[p.nodes] = p.time_to_train_s;
    }
    std::map<std::string, std::vector<std::pair<double, double>>> curves;
    for (const auto& [mb, by_nodes] : best) {
      auto& c = curves[fmt::format("micro-batch {:>5}", mb)];
      for (const auto& [n, s] : by_nodes) c.push_back({static_cast<double>(n), s / 3600.0});
    }
    t += "set title " +
         quoted(fmt::format("{}: time to train {} against nodes (best feasible point)", title,
                            count_noun(plan.epochs, "epoch"))) +
         "\n";
    t += "set xlabel \"nodes\"\nset ylabel \"time to train (h)\"\nset logscale xy 2\n";
    t += lines(curves, "nodes") + "\n";
  } else if (kind == PlanKind::Pareto) {
    std::vector<std::pair<double, double>> all, front;
    for (const auto& p : plan.points)
      if (p.rank > 0) all.push_back({p.time_to_train_s / 3600.0, p.cost});
    for (const PlanPoint* p : pareto_front(plan)) front.push_back({p->time_to_train_s / 3600.0, p->cost});
    std::sort(all.begin(), all.end());
    sc.data["points.dat"] = data_lines(all);
    sc.data["front.dat"] = data_lines(front);
    t += "set title " +
         quoted(fmt::format("{}: time to train {} against cost", title, count_noun(plan.epochs, "epoch"))) +
         "\n";
    t += "set xlabel \"time to train (h)\"\nset ylabel " +
         quoted(fmt::format("cost ({})", plan.cost_unit())) + "\n";
    t += "set logscale x 2\n";
    t += "plot \"points.dat\" using 1:2 with points pointtype 7 title \"feasible points\", "
         "\"front.dat\" using 1:2 with linespoints linewidth 2 pointtype 5 title \"Pareto front\"\n";
  } else {
    std::map<std::string, std::vector<std::pair<double, double>>> curves;
    double gpu_mem = INFINITY;
    std::map<int, std::map<double, double>> by_sp;
    for (const auto& p : plan.points) {
      if (p.memory_per_gpu_bytes <= 0) continue;  // invalid combinations carry no memory
      const double img = param_number(p, "model.image_size", 0);
      auto& slot = by_sp[p.sequence_parallel];
      const double gib = p.memory_per_gpu_bytes / (1024.0 * 1024 * 1024);
      if (!slot.count(img) || gib < slot[img]) slot[img] = gib;  // the lowest over the other settings
      gpu_mem = std::min(gpu_mem, p.gpu_memory_bytes / (1024.0 * 1024 * 1024));
    }
    for (const auto& [sp, xs] : by_sp) {
      auto& c = curves[sp == 1 ? std::string("data parallelism only")
                               : fmt::format("patch parallel over {} GPUs", sp)];
      for (const auto& [img, gib] : xs) c.push_back({img, gib});
    }
    t += "set title " + quoted(fmt::format("{}: memory per GPU against image size", title)) + "\n";
    t += "set xlabel \"image size (px)\"\nset ylabel \"memory per GPU (GiB)\"\nset logscale y 2\n";
    std::string line = lines(curves, "memory");
    if (std::isfinite(gpu_mem))
      line += fmt::format(", {:.9g} with lines dashtype 2 linewidth 2 title {}", gpu_mem,
                          quoted(fmt::format("GPU memory ({:.1f} GiB)", gpu_mem)));
    t += line + "\n";
  }
  sc.text = t;
  return sc;
}

void plot_plan(const PlanResult& plan, const std::string& svg_path, PlanKind kind, const Options& opt) {
  run_script(make_plan_script(plan, kind, "plot." + output_format(svg_path)), svg_path, opt);
}

}  // namespace vitsim::plot
