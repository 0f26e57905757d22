#pragma once
// Plots of a capacity plan ("vitsim.plan/1", core/results/plan.hpp), drawn by gnuplot like report plots:
// - nodes:  time to train against the node count, one curve per micro-batch (the best feasible point at
//           each node count and micro-batch, over the other swept settings);
// - pareto: every feasible point's time to train against its cost, the Pareto front as a line;
// - memory: memory per GPU against image size, one curve per patch-parallel degree (every point, fitting
//           or not: the memory model needs no simulation), with the smallest GPU memory as a line.
// `auto`: memory when the plan sweeps model.image_size, else nodes when it sweeps the node count, else
// pareto.
#include <string>
#include <vector>

#include "vitsim/core/results/plan.hpp"
#include "vitsim/plot/plot.hpp"

namespace vitsim::plot {

enum class PlanKind { Auto, Nodes, Pareto, Memory };
const std::vector<KindName<PlanKind>>& plan_kinds();  // auto, memory, nodes, pareto
// Throws Error("unknown plan plot kind 'X'; valid: auto, memory, nodes, pareto").
PlanKind parse_plan_kind(const std::string& name);
// Every value `vitsim plot --kind` takes: the report kinds, then the plan kinds not among them.
std::vector<std::string> plot_kind_names();
PlanKind resolve_plan_kind(const PlanResult& plan, PlanKind requested);  // throws when nothing can be drawn

// The gnuplot script (and data) that draws the plan into `svg_name`; pure, for the tests.
Script make_plan_script(const PlanResult& plan, PlanKind kind, const std::string& svg_name);
void plot_plan(const PlanResult& plan, const std::string& svg_path, PlanKind kind, const Options& opt);

}  // namespace vitsim::plot
