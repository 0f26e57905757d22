// The plan's table and CSV (core/results/plan.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "results/plan_detail.hpp"
#include "results/report_interval.hpp"
#include "vitsim/core/base/csv.hpp"
#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/results/plan.hpp"

namespace vitsim {

std::string plan_to_table(const PlanResult& plan, int top) {
  std::string out =
      fmt::format("vitsim plan: {} ({}, {}, ranked by {})\n", plan.scenario,
                  count_noun(plan.space_size, "point"), count_noun(plan.epochs, "epoch"), plan.objective);
  for (const auto& line : plan.space_notes) out += line + "\n";
  if (plan.space_size == 1)
    out +=
        "One point: this plan compares nothing, every setting is fixed; open an axis with --set "
        "KEY=V1,V2,... "
        "or a <sweep> (docs/plan.md)\n";
  for (size_t i = 0; i < plan.what_ifs.size(); ++i)
    out += fmt::format("what-if {}: {}\n", i + 1, plan.what_ifs[i]);
  {
    // Up to 4 changes per edit (a glob can touch every node); the JSON lists them all.
    std::map<std::string, int> per_edit;
    for (const auto& c : plan.what_if_changes) {
      const std::string edit = c.substr(0, c.find(']') + 1);
      if (++per_edit[edit] <= 4) out += "  changed: " + c + "\n";
    }
    for (const auto& [edit, n] : per_edit)
      if (n > 4) out += fmt::format("  changed: {} ... and {} more\n", edit, n - 4);
  }
  // Swept keys that the fixed columns do not show get a column of their own.
  const std::vector<std::string> extra = param_columns(
      plan.points,
      {"nodes", "gpus", "micro_batch", "grad_accum", "cluster.nodes", "cluster.gpus_per_node",
       "training.micro_batch", "training.grad_accum", "parallelism.zero", "parallelism.sequence_parallel",
       "training.precision", "parallelism.collective", "parallelism.overlap"},
      true);
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"#", "nodes", "gpn", "micro", "accum", "zero", "sp", "prec", "coll", "ovl"});
  for (const auto& k : extra) rows[0].push_back(param_column_head(k));
  for (const char* h : {"gbatch", "epoch"}) rows[0].push_back(h);
  // plan --interval: the top candidates' interval of the epoch ("-" for the others).
  const PointInterval* interval = nullptr;
  for (const auto& p : plan.points)
    if (p.rank > 0 && p.result.interval.samples > 0 && !interval) interval = &p.result.interval;
  if (interval) rows[0].push_back("epoch " + quantile_range(*interval));
  rows[0].push_back(fmt::format("{} ep", plan.epochs));  // a column head: "1 ep", "3 ep"
  for (const char* h : {"img/s", "eff", "MFU", "mem/GPU", "fits"}) rows[0].push_back(h);
  rows[0].push_back(fmt::format("cost {}", plan.cost_unit()));
  bool energy = false;
  for (const auto& p : plan.points) energy = energy || (p.rank > 0 && p.result.energy.known());
  if (energy) rows[0].push_back("kWh");
  if (energy && plan.price_per_kwh > 0) rows[0].push_back("energy cost");
  for (const char* h : {"bound", "pareto"}) rows[0].push_back(h);
  int shown = 0, feasible = 0;
  for (const auto& p : plan.points) {
    if (p.rank == 0) continue;
    ++feasible;
    if (top > 0 && shown >= top && !p.pareto) continue;
    ++shown;
    const ReportPoint& r = p.result;
    std::vector<std::string> row{std::to_string(p.rank),
                                 std::to_string(p.nodes),
                                 std::to_string(p.gpus_per_node),
                                 std::to_string(p.micro_batch),
                                 std::to_string(p.grad_accum),
                                 std::to_string(p.zero),
                                 std::to_string(p.sequence_parallel),
                                 p.precision,
                                 p.collective,
                                 p.overlap ? "on" : "off"};
    for (const auto& k : extra) row.push_back(p.params.count(k) ? p.params.at(k) : "");
    row.push_back(std::to_string(p.global_batch));
    row.push_back(units::format_time(r.epoch_time_s));
    if (interval) row.push_back(interval_cell(r));
    for (std::string v :
         {units::format_time(p.time_to_train_s), fmt::format("{:.0f}", r.throughput_img_s),
          r.scaling_efficiency < 0 ? std::string("-") : fmt::format("{:.0f}%", 100 * r.scaling_efficiency),
          r.mfu() > 0 ? fmt::format("{:.1f}%", 100 * r.mfu()) : std::string("-"),
          units::format_bytes(p.memory_per_gpu_bytes), std::string(r.fits_in_memory ? "yes" : "NO"),
          fmt::format("{:.2f}", p.cost)})
      row.push_back(v);
    if (energy) row.push_back(r.energy.known() ? fmt::format("{:.4g}", p.energy_kwh) : "-");
    if (energy && plan.price_per_kwh > 0)
      row.push_back(r.energy.known() ? fmt::format("{:.2f}", p.energy_cost) : "-");
    row.push_back(r.bound);
    row.push_back(p.pareto ? "*" : "");
    rows.push_back(std::move(row));
  }
  out += align_columns(rows);
  if (shown < feasible)
    out += fmt::format("({} not shown; --top 0 shows all)\n",
                       count_noun(feasible - shown, "more feasible point"));
  auto front = pareto_front(plan);
  if (!front.empty()) {
    out += "Pareto front (time to train against cost; no other point is both faster and cheaper):\n";
    for (const PlanPoint* p : front)
      out += fmt::format("  #{:<4} {:>10}  {:>12}  {}\n", p->rank, units::format_time(p->time_to_train_s),
                         cost_text(plan, p->cost), settings_text(*p));
  }
  std::map<std::string, std::pair<int, std::string>> why;  // reason -> count, first example
  for (const auto& p : plan.points)
    if (p.rank == 0) {
      auto& w = why[p.excluded.substr(0, p.excluded.find(':'))];
      if (w.first++ == 0) w.second = p.excluded;
    }
  if (!why.empty()) {
    out += "Excluded (count, first example; --format json lists each point's reason):\n";
    for (const auto& [k, w] : why)
      out += fmt::format("  {} {}, e.g. {}\n", w.first, k, w.second);  // "3 memory, e.g. ..."
  }
  for (const auto& line : plan.explanation) out += line + "\n";
  return out;
}

std::string plan_to_csv(const PlanResult& plan) {
  const std::vector<std::string> keys = csv_param_keys(plan.points);
  std::string out = "rank,index,";
  for (const auto& k : keys) out += csv_cell(k) + ",";
  out +=
      "nodes,gpus_per_node,gpus,micro_batch,grad_accum,zero,sequence_parallel,precision,collective,overlap,"
      "global_batch,step_mean_s,epoch_time_s,time_to_train_s,throughput_img_s,scaling_efficiency,"
      "memory_per_gpu_bytes,gpu_memory_bytes,gpu_hours,cost,bound,pareto,excluded,tflops_per_gpu,mfu,energy_"
      "kwh,energy_cost";
  // plan --interval: the interval's columns (report_interval.hpp, as predict's CSV), empty cells for the
  // points without one.
  const bool intervals = std::any_of(plan.points.begin(), plan.points.end(),
                                     [](const PlanPoint& p) { return p.result.interval.samples > 0; });
  out += intervals ? "," + interval_csv_header() + "\n" : "\n";
  // A figure the point does not have is an empty cell, not 0: no rank for an excluded point, no times,
  // throughput, GPU-hours, cost or bound for one excluded before simulating.
  auto num = [](bool has, double v) { return has ? fmt::format("{:.9g}", v) : std::string(); };
  for (const auto& p : plan.points) {
    out += fmt::format("{},{},", p.rank > 0 ? std::to_string(p.rank) : std::string(), p.index);
    for (const auto& k : keys) {
      auto it = p.params.find(k);
      out += csv_cell(it == p.params.end() ? "" : it->second) + ",";
    }
    const ReportPoint& r = p.result;
    const bool sim = p.simulated;
    out += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.0f},{:.0f},{},{},{},{},{},{},{},{},{}\n", p.nodes,
        p.gpus_per_node, p.gpus, p.micro_batch, p.grad_accum, p.zero, p.sequence_parallel,
        csv_cell(p.precision), csv_cell(p.collective), p.overlap ? "true" : "false", p.global_batch,
        num(sim, r.step_time_s.mean), num(sim, r.epoch_time_s), num(sim, p.time_to_train_s),
        num(sim, r.throughput_img_s),
        !sim || r.scaling_efficiency < 0 ? std::string() : fmt::format("{:.6g}", r.scaling_efficiency),
        p.memory_per_gpu_bytes, p.gpu_memory_bytes, num(sim, p.gpu_hours), num(sim, p.cost),
        sim ? r.bound : "", p.pareto ? "true" : "false", p.excluded.empty() ? "" : csv_quoted(p.excluded),
        r.model_flops > 0 ? fmt::format("{:.6g}", r.tflops_per_gpu()) : std::string(),
        r.mfu() > 0 ? fmt::format("{:.6g}", r.mfu()) : std::string(),
        num(sim && r.energy.known(), p.energy_kwh),
        num(sim && r.energy.known() && plan.price_per_kwh > 0, p.energy_cost));
    if (intervals) out.insert(out.size() - 1, "," + interval_csv_cells(r));
  }
  return out;
}

}  // namespace vitsim
