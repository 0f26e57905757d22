#include "vitsim/plot/plan_plot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "gnuplot_text.hpp"
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

namespace {

// A curve of a plan plot: its label and (x, y) points.
using Curves = std::map<std::string, std::vector<std::pair<double, double>>>;

// Best time to train (h) per (micro-batch, nodes) among feasible points; curves sorted by micro-batch.
Curves node_curves(const PlanResult& plan) {
  std::map<int, std::map<int, double>> best;
  for (const auto& p : plan.points) {
    if (p.rank == 0) continue;
    auto& slot = best[p.micro_batch];
    auto it = slot.find(p.nodes);
    if (it == slot.end() || p.time_to_train_s < it->second) slot[p.nodes] = p.time_to_train_s;
  }
  Curves curves;
  for (const auto& [mb, by_nodes] : best) {
    auto& c = curves[fmt::format("micro-batch {:>5}", mb)];
    for (const auto& [n, s] : by_nodes) c.push_back({static_cast<double>(n), s / 3600.0});
  }
  return curves;
}

// Memory per GPU (GiB) against image size, the lowest over the other settings, one curve per patch-parallel
// degree; `gpu_mem` the smallest GPU memory (GiB; infinity when no point has a memory).
Curves memory_curves(const PlanResult& plan, double& gpu_mem) {
  gpu_mem = INFINITY;
  std::map<int, std::map<double, double>> by_sp;
  for (const auto& p : plan.points) {
    if (p.memory_per_gpu_bytes <= 0) continue;  // invalid combinations carry no memory
    const double img = param_number(p, "model.image_size", 0);
    auto& slot = by_sp[p.sequence_parallel];
    const double gib = p.memory_per_gpu_bytes / (1024.0 * 1024 * 1024);
    if (!slot.count(img) || gib < slot[img]) slot[img] = gib;
    gpu_mem = std::min(gpu_mem, p.gpu_memory_bytes / (1024.0 * 1024 * 1024));
  }
  Curves curves;
  for (const auto& [sp, xs] : by_sp) {
    auto& c = curves[sp == 1 ? std::string("data parallelism only")
                             : fmt::format("patch parallel over {} GPUs", sp)];
    for (const auto& [img, gib] : xs) c.push_back({img, gib});
  }
  return curves;
}

// Each feasible point's (time to train h, cost) and the Pareto front's.
std::pair<std::vector<std::pair<double, double>>, std::vector<std::pair<double, double>>> pareto_points(
    const PlanResult& plan) {
  std::vector<std::pair<double, double>> all, front;
  for (const auto& p : plan.points)
    if (p.rank > 0) all.push_back({p.time_to_train_s / 3600.0, p.cost});
  for (const PlanPoint* p : pareto_front(plan)) front.push_back({p->time_to_train_s / 3600.0, p->cost});
  std::sort(all.begin(), all.end());
  return {all, front};
}

// The plot command's curves: the plan's solid, its baseline's (when given) dashed in the colour of the
// plan's curve of the same label, both labels then saying which is which.
struct PlanDraw {
  explicit PlanDraw(Script& script, bool baseline) : sc(script), with_baseline(baseline) {}
  Script& sc;
  bool with_baseline = false;
  std::vector<std::string> labels;  // every label drawn, in order: a label's colour
  std::string line = "plot ";
  int k = 0;
  int colour(const std::string& label) {
    auto it = std::find(labels.begin(), labels.end(), label);
    if (it != labels.end()) return static_cast<int>(it - labels.begin()) + 1;
    labels.push_back(label);
    return static_cast<int>(labels.size());
  }
  void curves(const Curves& cs, const std::string& prefix, bool baseline) {
    int n = 0;
    for (const auto& [label, xy] : cs) {
      const std::string file = fmt::format("{}{}.dat", prefix, n++);
      sc.data[file] = data_text(xy);
      line += fmt::format("{}{} using 1:2 with linespoints linetype {} linewidth 2{} title {}",
                          k++ ? ", " : "", gp_string(file), colour(label), baseline ? " dashtype 2" : "",
                          gp_string(who(baseline) + label));
    }
  }
  std::string who(bool baseline) const {
    return !with_baseline ? "" : baseline ? "baseline: " : "what-ifs: ";
  }
};

}  // namespace

Script make_plan_script(const PlanResult& plan, PlanKind requested, const std::string& svg_name) {
  const PlanKind kind = resolve_plan_kind(plan, requested);
  const PlanResult* base = plan.baseline.get();
  Script sc;
  std::string t = "# Written by vitsim plot; run with: gnuplot plot.gp\n";
  t += terminal_line(output_format(svg_name), 900, 480);
  t += "set output " + gp_string(svg_name) + "\nset grid\nset key outside right\nset pointsize 0.8\n";
  const std::string title = plan.scenario.empty() ? "vitsim plan" : plan.scenario;
  // With a baseline (plan --baseline), the title names the what-ifs its curves are drawn beside.
  std::string against;
  if (base) {
    std::string edits;
    for (const auto& w : plan.what_ifs) edits += (edits.empty() ? "" : "; ") + w;
    against = fmt::format("what-if {} (solid), baseline without it (dashed)", edits);
  }
  PlanDraw draw(sc, base != nullptr);
  if (kind == PlanKind::Nodes) {
    t += "set title " +
         gp_lines({fmt::format("{}: time to train {} against nodes (best feasible point)", title,
                               count_noun(plan.epochs, "epoch")),
                   against}) +
         "\n";
    t += "set xlabel \"nodes\"\nset ylabel \"time to train (h)\"\nset logscale xy 2\n";
    draw.curves(node_curves(plan), "nodes", false);
    if (base) draw.curves(node_curves(*base), "baseline_nodes", true);
    t += draw.line + "\n";
  } else if (kind == PlanKind::Pareto) {
    t += "set title " +
         gp_lines({fmt::format("{}: time to train {} against cost", title, count_noun(plan.epochs, "epoch")),
                   against}) +
         "\n";
    t += "set xlabel \"time to train (h)\"\nset ylabel " +
         gp_string(fmt::format("cost ({})", plan.cost_unit())) + "\n";
    t += "set logscale x 2\n";
    std::string line = "plot ";
    for (const PlanResult* p : {&plan, base}) {
      if (!p) continue;
      const bool b = p == base;
      const std::string prefix = b ? "baseline_" : "";
      const auto [all, front] = pareto_points(*p);
      sc.data[prefix + "points.dat"] = data_text(all);
      sc.data[prefix + "front.dat"] = data_text(front);
      // The baseline in the plan's colours: its points hollow, its front dashed.
      line += fmt::format(
          "{}{} using 1:2 with points linetype 1 pointtype {} title {}, {} using 1:2 with linespoints "
          "linetype 2 linewidth 2 pointtype 5{} title {}",
          b ? ", " : "", gp_string(prefix + "points.dat"), b ? 6 : 7,
          gp_string(draw.who(b) + "feasible points"), gp_string(prefix + "front.dat"), b ? " dashtype 2" : "",
          gp_string(draw.who(b) + "Pareto front"));
    }
    t += line + "\n";
  } else {
    double gpu_mem = INFINITY, base_mem = INFINITY;
    const Curves curves = memory_curves(plan, gpu_mem);
    t += "set title " + gp_lines({fmt::format("{}: memory per GPU against image size", title), against}) +
         "\n";
    t += "set xlabel \"image size (px)\"\nset ylabel \"memory per GPU (GiB)\"\nset logscale y 2\n";
    draw.curves(curves, "memory", false);
    if (base) draw.curves(memory_curves(*base, base_mem), "baseline_memory", true);
    if (std::isfinite(gpu_mem))
      draw.line += fmt::format(", {:.9g} with lines dashtype 2 linewidth 2 title {}", gpu_mem,
                               gp_string(fmt::format("GPU memory ({:.1f} GiB)", gpu_mem)));
    if (std::isfinite(base_mem) && base_mem != gpu_mem)  // a what-if that changed the GPUs' memory
      draw.line += fmt::format(", {:.9g} with lines dashtype 3 linewidth 2 title {}", base_mem,
                               gp_string(fmt::format("baseline: GPU memory ({:.1f} GiB)", base_mem)));
    t += draw.line + "\n";
  }
  sc.text = t;
  return sc;
}

void plot_plan(const PlanResult& plan, const std::string& svg_path, PlanKind kind, const Options& opt) {
  run_script(make_plan_script(plan, kind, "plot." + output_format(svg_path)), svg_path, opt);
}

}  // namespace vitsim::plot
