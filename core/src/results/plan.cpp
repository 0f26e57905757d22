#include "vitsim/core/results/plan.hpp"
#include "vitsim/core/formats/whatif.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "results/plan_detail.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim {

std::string settings_text(const PlanPoint& p) {
  std::string s = fmt::format(
      "{} node{} x {} GPU{}, micro-batch {}, accumulation {}, ZeRO-{}, {}, {} all-reduce, overlap {}",
      p.nodes, p.nodes == 1 ? "" : "s", p.gpus_per_node, p.gpus_per_node == 1 ? "" : "s", p.micro_batch,
      p.grad_accum, p.zero, p.precision, p.collective, p.overlap ? "on" : "off");
  if (p.sequence_parallel > 1) s += fmt::format(", patch parallelism over {} GPUs", p.sequence_parallel);
  return s;
}

std::string cost_text(const PlanResult& plan, double cost) {
  return plan.price_per_gpu_hour > 0 ? fmt::format("${:.2f}", cost) : fmt::format("{:.2f} GPU-h", cost);
}

double pct(double part, double whole) {
  return whole > 0 ? 100.0 * part / whole : 0;
}

namespace {

double objective_value(const PlanResult& plan, const PlanPoint& p) {
  if (plan.objective == "cost") return p.cost;
  if (plan.objective == "energy") return p.energy_kwh;
  if (plan.objective == "throughput") return -p.result.throughput_img_s;
  return p.time_to_train_s;
}

bool better(const PlanResult& plan, const PlanPoint& a, const PlanPoint& b) {
  const double va = objective_value(plan, a), vb = objective_value(plan, b);
  if (va != vb) return va < vb;
  if (a.time_to_train_s != b.time_to_train_s) return a.time_to_train_s < b.time_to_train_s;
  if (a.cost != b.cost) return a.cost < b.cost;
  return a.index < b.index;
}

// The swept keys: those whose value differs between points of the plan (report.hpp's param_columns).
std::vector<std::string> varying_keys(const PlanResult& plan) {
  return param_columns(plan.points, {"nodes", "gpus", "micro_batch", "grad_accum"}, true);
}

}  // namespace

std::vector<const PlanPoint*> pareto_front(const PlanResult& plan) {
  std::vector<const PlanPoint*> feasible;
  for (const auto& p : plan.points)
    if (p.excluded.empty() && p.simulated) feasible.push_back(&p);
  std::sort(feasible.begin(), feasible.end(), [](const PlanPoint* a, const PlanPoint* b) {
    if (a->time_to_train_s != b->time_to_train_s) return a->time_to_train_s < b->time_to_train_s;
    if (a->cost != b->cost) return a->cost < b->cost;
    return a->index < b->index;
  });
  std::vector<const PlanPoint*> front;
  double best_cost = INFINITY;
  for (const PlanPoint* p : feasible)
    if (p->cost < best_cost) {  // not dominated: every faster point costs more
      front.push_back(p);
      best_cost = p->cost;
    }
  return front;
}

void rank_plan(PlanResult& plan) {
  const PlanConstraints& c = plan.constraints;
  // Scaling efficiency against the 1-GPU point with the same other settings, as predict reports it.
  {
    Report r;
    std::vector<PlanPoint*> sim;
    for (auto& p : plan.points)
      if (p.simulated) {
        r.points.push_back(p.result);
        sim.push_back(&p);
      }
    fill_scaling_efficiency(r);
    for (size_t i = 0; i < sim.size(); ++i)
      sim[i]->result.scaling_efficiency = r.points[i].scaling_efficiency;
  }
  for (auto& p : plan.points) {
    p.rank = 0;
    p.pareto = false;
    if (!p.simulated) continue;  // excluded before simulating; the reason is already set
    p.excluded.clear();
    p.time_to_train_s = p.result.epoch_time_s * plan.epochs;
    p.gpu_hours = p.time_to_train_s * p.gpus / 3600.0;
    p.cost = plan.price_per_gpu_hour > 0 ? p.gpu_hours * plan.price_per_gpu_hour : p.gpu_hours;
    // Energy of the epochs (core/model/energy.hpp), priced at the plan's price per kWh.
    p.result.energy.price_per_kwh = p.result.energy.known() ? plan.price_per_kwh : 0;
    p.energy_kwh = p.result.energy.known() ? p.result.energy.epoch_kwh * plan.epochs : 0;
    p.energy_cost = p.energy_kwh * plan.price_per_kwh;
    if (plan.objective == "energy" && !p.result.energy.known())
      throw Error(
          fmt::format("plan --objective energy: point {} ({}) has no energy figures: its platform states no "
                      "gpu_power_busy/gpu_power_idle (vitsim platform writes them; docs/model.md \"Energy "
                      "and cost per epoch\")",
                      p.index, settings_text(p)));
    if (c.must_fit && !p.result.fits_in_memory)
      p.excluded =
          fmt::format("memory: needs {} per GPU", units::format_bytes(p.result.memory_per_gpu_bytes));
    else if (c.deadline_s && p.time_to_train_s > *c.deadline_s)
      p.excluded = fmt::format("deadline: {} take {} > {}", count_noun(plan.epochs, "epoch"),
                               units::format_time(p.time_to_train_s), units::format_time(*c.deadline_s));
    else if (c.budget && p.cost > *c.budget)
      p.excluded = fmt::format("budget: {} > {}", cost_text(plan, p.cost), cost_text(plan, *c.budget));
  }
  std::vector<PlanPoint> feasible, excluded;
  for (auto& p : plan.points)
    (p.excluded.empty() && p.simulated ? feasible : excluded).push_back(std::move(p));
  std::sort(feasible.begin(), feasible.end(),
            [&](const PlanPoint& a, const PlanPoint& b) { return better(plan, a, b); });
  std::sort(excluded.begin(), excluded.end(),
            [](const PlanPoint& a, const PlanPoint& b) { return a.index < b.index; });
  for (size_t i = 0; i < feasible.size(); ++i) feasible[i].rank = static_cast<int>(i) + 1;
  plan.points = std::move(feasible);
  for (auto& p : excluded) plan.points.push_back(std::move(p));
  std::set<int> front;
  for (const PlanPoint* p : pareto_front(plan)) front.insert(p->index);
  for (auto& p : plan.points) p.pareto = front.count(p.index) > 0;
  plan.ranked = true;
  plan.explanation = explain_plan(plan);
}

namespace {
// One plan, one dataset: every simulated point trains on the dataset's samples an epoch or, with
// dataset.per_gpu_fraction, on as many per data-parallel replica (core DatasetSpec::effective_train_samples,
// rounded to a sample). The reading most points share is the plan's; the first point outside it is named (a
// shard edited to one step an epoch, its samples with it, was ranked first: issue 39 item 22).
void check_one_dataset(const std::vector<PlanPoint>& points, const std::map<int, std::string>& file_of) {
  auto dp = [](const PlanPoint& p) { return std::max(p.gpus / std::max(p.sequence_parallel, 1), 1); };
  std::map<long long, int> whole, per_replica;
  for (const PlanPoint& p : points)
    if (p.simulated) {
      ++whole[p.result.epoch_samples];
      ++per_replica[std::llround(static_cast<double>(p.result.epoch_samples) / dp(p))];
    }
  auto mode = [](const std::map<long long, int>& m) {
    return std::max_element(m.begin(), m.end(), [](auto& a, auto& b) { return a.second < b.second; });
  };
  if (whole.size() <= 1) return;
  const auto w = mode(whole), r = mode(per_replica);
  const bool by_replica = r->second > w->second;
  for (const PlanPoint& p : points) {
    if (!p.simulated) continue;
    const double per = static_cast<double>(p.result.epoch_samples) / dp(p);
    if (by_replica ? std::fabs(per - static_cast<double>(r->first)) <= 1 : p.result.epoch_samples == w->first)
      continue;
    throw Error(
        fmt::format("{}: point {}: result/epoch_samples: {} samples an epoch on {} replica(s), where the "
                    "plan's other points "
                    "say {}: the points of one plan train on one dataset",
                    file_of.at(p.index), p.index, p.result.epoch_samples, dp(p),
                    by_replica ? fmt::format("{} per replica", r->first) : fmt::format("{}", w->first)));
  }
}
}  // namespace

PlanResult merge_plans(const std::vector<PlanResult>& shards) {
  if (shards.empty()) throw Error("merge: no plans given");
  PlanResult out = shards.front();
  out.points.clear();
  out.shard_index = 0;
  out.shard_count = 1;
  auto name = [](const PlanResult& s) { return s.origin.empty() ? std::string("a shard") : s.origin; };
  std::map<int, std::string> seen;        // point index -> the shard that holds it
  std::map<int, std::string> shard_seen;  // shard index -> its file
  for (const auto& s : shards) {
    const PlanResult& first = shards.front();
    if (s.plan_id != first.plan_id)
      throw Error(
          fmt::format("{}: /plan_id: this shard is of another plan than {} ({} vs {}): the scenario, its "
                      "platform, what-ifs, calibration, epochs, objective, constraints or space differ; "
                      "merge only the shards of one `vitsim plan --shard I/K` command",
                      name(s), name(first), s.plan_id.substr(0, 19), first.plan_id.substr(0, 19)));
    if (s.space_size != out.space_size || s.epochs != out.epochs || s.what_ifs != out.what_ifs ||
        s.objective != out.objective || s.price_per_gpu_hour != out.price_per_gpu_hour ||
        s.price_per_kwh != out.price_per_kwh || s.scenario != out.scenario)
      throw Error(
          fmt::format("{}: shard {}/{} is of another plan than {} (scenario, space, epochs, objective, price "
                      "or what-ifs differ)",
                      name(s), s.shard_index, s.shard_count, name(first)));
    if (s.shard_count != first.shard_count)
      throw Error(fmt::format("{}: /shard/count: {} shards, but {} says {}", name(s), s.shard_count,
                              name(first), first.shard_count));
    if (!shard_seen.emplace(s.shard_index, name(s)).second)
      throw Error(fmt::format("{}: /shard/index: shard {}/{} given twice (also {})", name(s), s.shard_index,
                              s.shard_count, shard_seen[s.shard_index]));
    for (size_t i = 0; i < s.points.size(); ++i) {
      const PlanPoint& p = s.points[i];
      if (p.index % s.shard_count != s.shard_index)
        throw Error(fmt::format(
            "{}: /points/{}/index: point {} does not belong to shard {}/{} (index % {} = {})", name(s), i,
            p.index, s.shard_index, s.shard_count, s.shard_count, p.index % s.shard_count));
      auto [it, fresh] = seen.emplace(p.index, name(s));
      if (!fresh)
        throw Error(fmt::format("{}: /points/{}/index: point {} appears twice (also in {})", name(s), i,
                                p.index, it->second));
      out.points.push_back(p);
    }
  }
  if (static_cast<int>(seen.size()) != out.space_size) {
    const int count = shards.front().shard_count;
    std::string absent;
    for (int k = 0; k < count && k < 64; ++k)
      if (!shard_seen.count(k)) absent += fmt::format("{}{}/{}", absent.empty() ? "" : ", ", k, count);
    throw Error(fmt::format("merge: the shards hold {} of the plan's {} points{}", seen.size(),
                            out.space_size, absent.empty() ? "" : " (missing shard " + absent + ")"));
  }
  std::sort(out.points.begin(), out.points.end(),
            [](const PlanPoint& a, const PlanPoint& b) { return a.index < b.index; });
  check_one_dataset(out.points, seen);
  out.provenance.erase("shard");
  out.origin.clear();
  rank_plan(out);
  return out;
}

std::string infeasible_reason(const PlanResult& plan) {
  for (const auto& p : plan.points)
    if (p.rank > 0) return {};
  std::map<std::string, int> why;
  for (const auto& p : plan.points) why[p.excluded.substr(0, p.excluded.find(':'))]++;
  std::vector<std::pair<std::string, int>> order(why.begin(), why.end());
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string list;
  for (const auto& [k, n] : order)
    list += list.empty() ? fmt::format(", {} excluded by {}", n, k) : fmt::format(", {} by {}", n, k);
  return fmt::format("no point meets the constraints: {}{}; relax them or widen the space",
                     count_noun(static_cast<long long>(plan.points.size()), "point"), list);
}

namespace {

// The point ranked first (rank_plan gives each rank once), or none.
const PlanPoint* top_pick(const PlanResult& plan) {
  for (const auto& p : plan.points)
    if (p.rank == 1) return &p;
  return nullptr;
}

// The top pick's settings, time and cost, energy, what bounds its step and its memory.
void explain_top(const PlanResult& plan, const PlanPoint& top, std::vector<std::string>& out) {
  const ReportPoint& r = top.result;
  const Breakdown& b = r.breakdown_s;
  const double step = r.step_time_s.mean;
  int feasible = 0;
  for (const auto& p : plan.points) feasible += p.rank > 0;
  out.push_back(fmt::format(
      "Top pick ({} of {} feasible points, by {}): {}. {} epoch{} in {}, {}, {:.0f} images/s{}.", 1, feasible,
      plan.objective, settings_text(top), plan.epochs, plan.epochs == 1 ? "" : "s",
      units::format_time(top.time_to_train_s), cost_text(plan, top.cost), r.throughput_img_s,
      r.scaling_efficiency >= 0 ? fmt::format(", {:.0f}% scaling efficiency", 100 * r.scaling_efficiency)
                                : ""));
  if (r.energy.known())
    out.push_back(fmt::format(
        "Energy: {:.4g} kWh for {} (GPUs busy {:.0f}% of the time){}.", top.energy_kwh,
        count_noun(plan.epochs, "epoch"), 100 * r.energy.busy_fraction,
        plan.price_per_kwh > 0 ? fmt::format(", {:.2f} at {:g} per kWh", top.energy_cost, plan.price_per_kwh)
                               : ""));
  const double compute = b.compute_fwd + b.compute_bwd;
  out.push_back(fmt::format(
      "What bounds it: {} per step of {}: compute {:.0f}%, exposed communication {:.0f}% (of {} "
      "in flight), data loading {:.0f}%, host-to-device {:.0f}%, optimizer {:.0f}%.",
      r.bound, units::format_time(step), pct(compute, step), pct(b.comm_exposed, step),
      units::format_time(b.comm_total), pct(b.data, step), pct(b.h2d, step), pct(b.optimizer, step)));
  // Every term of the breakdown, so that the total is their sum (issue 39 item 27: 29.72 GiB beside terms of
  // about 5.2 GiB, the buffers and the runtime's reserve left out).
  const MemoryBreakdown& m = r.memory;
  const bool same = std::fabs(m.total() - top.memory_per_gpu_bytes) <= 1e-6 * top.memory_per_gpu_bytes;
  out.push_back(fmt::format(
      "Memory: {} of {} per GPU (activations {}, weights+gradients+optimizer {}, communication buffers {}, "
      "reserved by the runtime {}){}.",
      units::format_bytes(m.total()), units::format_bytes(top.gpu_memory_bytes),
      units::format_bytes(m.activations), units::format_bytes(m.params + m.grads + m.optimizer),
      units::format_bytes(m.buffers), units::format_bytes(m.reserved),
      same ? ""
           : fmt::format("; {} on the rank that needs the most",
                         units::format_bytes(top.memory_per_gpu_bytes))));
}

// The advice for one term of the step (`percent` of it); `lead` is "To move it" or "Also". Exposed
// communication's, in the pick's own numbers where they are known (plan_advice.cpp).
std::string term_advice(const std::string& name, const std::string& lead, double percent,
                        const PlanPoint& top) {
  const bool overlap = top.overlap;
  if (name == "exposed_comm")
    if (std::string a = comm_term_advice(top, lead, percent); !a.empty()) return a;
  if (name == "compute")
    return lead + ": compute (" + fmt::format("{:.0f}%", percent) +
           "): more GPUs (if the global batch allows) or faster ones (--what-if "
           "gpu:NODES=NODE|SPEC.json:TYPE); "
           "fp16/bf16 where the GPU has tensor cores.";
  if (name == "exposed_comm")
    return fmt::format(
        "{}: exposed communication ({:.0f}%): {}a larger micro-batch or accumulation (fewer gradient "
        "reductions per image), {}or faster links (--what-if link:NIC:bandwidth=...).",
        lead, percent,
        overlap
            ? "buckets well under the gradients' size (parallelism.bucket_size=25MB: a single bucket leaves "
              "nothing to overlap), "
            : overlap_advice(top, ", with parallelism.bucket_size well under the gradients' size, e.g. 25MB"),
        // A plan without the pick's figures (written before they were, or hand-made): NCCL's choice where the
        // pick names another collective; nothing where it runs NCCL's choice already.
        top.collective == "auto" || top.collective.empty()
            ? ""
            : "NCCL's choice of collective (parallelism.collective=auto), ");
  if (name == "data")
    return fmt::format(
        "{}: data loading ({:.0f}%): more loader workers (--what-if loader:workers=N) or cheaper "
        "decoding (pre-resized images, a faster loader_bw).",
        lead, percent);
  if (name == "h2d")
    return fmt::format(
        "{}: host-to-device copies ({:.0f}%): pinned memory (loader.pinned=true) or a faster "
        "host link (--what-if link:NODE.h2d:bandwidth=...).",
        lead, percent);
  return fmt::format("{}: the optimizer step ({:.0f}%): ZeRO-1 or higher splits it over the ranks.", lead,
                     percent);
}

// What would move it: advice for the bounding term and for every other term over a fifth of the step.
void explain_advice(const PlanPoint& top, std::vector<std::string>& out) {
  const ReportPoint& r = top.result;
  const Breakdown& b = r.breakdown_s;
  const double step = r.step_time_s.mean;
  struct Term {
    double seconds;
    std::string name;
  };
  std::vector<Term> terms{{b.compute_fwd + b.compute_bwd, "compute"},
                          {b.comm_exposed, "exposed_comm"},
                          {b.data, "data"},
                          {b.h2d, "h2d"},
                          {b.optimizer, "optimizer"}};
  std::stable_sort(terms.begin(), terms.end(),
                   [](const Term& x, const Term& y) { return x.seconds > y.seconds; });
  for (const auto& t : terms) {
    if (t.name != r.bound && !(step > 0 && t.seconds / step >= kAdviceShare)) continue;
    out.push_back(term_advice(t.name, t.name == r.bound ? "To move it" : "Also", pct(t.seconds, step), top));
  }
}

// Whether q has the top pick's settings but another value of `key`.
bool neighbour_in(const PlanPoint& q, const PlanPoint& top, const std::string& key) {
  if (!q.params.count(key) || !top.params.count(key) || q.params.at(key) == top.params.at(key)) return false;
  for (const auto& [k, v] : top.params) {
    if (k == key || k == "grad_accum" || k == "training.grad_accum" || k == "nodes" || k == "gpus" ||
        k == "micro_batch")
      continue;  // accumulation may follow a fixed global batch; the rest mirror swept keys
    auto it = q.params.find(k);
    if (it == q.params.end() || it->second != v) return false;
  }
  return true;
}

// Neighbours: the same settings but one swept key, and what that changes.
void explain_neighbours(const PlanResult& plan, const PlanPoint& top, std::vector<std::string>& out) {
  std::vector<std::string> moves;
  for (const auto& key : varying_keys(plan)) {
    for (const auto& q : plan.points) {
      if (q.index == top.index || !neighbour_in(q, top, key)) continue;
      const std::string time =
          signed_percent(pct(q.time_to_train_s - top.time_to_train_s, top.time_to_train_s) / 100);
      const std::string cost = signed_percent(pct(q.cost - top.cost, top.cost) / 100);
      if (q.rank > 0)
        moves.push_back(fmt::format("{}={}: {} time, {} cost", key, q.params.at(key), time, cost));
      else if (q.simulated && q.excluded.rfind("memory", 0) != 0)
        moves.push_back(fmt::format("{}={}: {} time, {} cost, but excluded ({})", key, q.params.at(key), time,
                                    cost, q.excluded));
      else
        moves.push_back(fmt::format("{}={}: excluded ({})", key, q.params.at(key), q.excluded));
    }
  }
  if (moves.empty()) return;
  out.push_back("One setting changed from the top pick:");
  const size_t shown = std::min<size_t>(moves.size(), 12);
  for (size_t i = 0; i < shown; ++i) out.push_back("  " + moves[i]);
  if (moves.size() > shown)
    out.push_back(fmt::format("  ... and {} more (--format json lists every point)", moves.size() - shown));
}

// What ZeRO unlocks: the largest micro-batch that fits at each stage, by the memory model at the top pick's
// GPUs, precision and ranks (screened per point, sim::plan), whatever values the space swept.
void explain_zero(const PlanResult& plan, const PlanPoint& top, std::vector<std::string>& out) {
  if (!top.largest_known) return;
  int swept_max = 0;
  for (const auto& q : plan.points) swept_max = std::max(swept_max, q.micro_batch);
  std::string s =
      "Largest micro-batch that fits, by ZeRO stage (memory model, at the top pick's GPUs, precision "
      "and ranks):";
  for (int z = 0; z < 4; ++z)
    s += top.largest_micro_batch[z] > 0 ? fmt::format(" ZeRO-{} {};", z, top.largest_micro_batch[z])
                                        : fmt::format(" ZeRO-{} none;", z);
  s.back() = ' ';
  out.push_back(s + fmt::format("(the space swept micro-batches up to {}).", swept_max));
}

// A global batch past the reference (the scenario's DeepSpeed train_batch_size, else the published
// recipes' largest) trains to another accuracy unless its learning rate and optimizer are retuned.
void explain_batch(const PlanResult& plan, const PlanPoint& top, std::vector<std::string>& out) {
  if (plan.batch_reference <= 0 || plan.constraints.global_batch || top.global_batch <= plan.batch_reference)
    return;
  out.push_back(fmt::format(
      "Global batch: the top pick's {} images per step is past {} ({}); convergence at that batch is not "
      "what this plan predicts: fix it with --global-batch N (or bound it with --global-batch-max N).",
      top.global_batch, plan.batch_reference, plan.batch_reference_source));
}

}  // namespace

std::vector<std::string> explain_plan(const PlanResult& plan) {
  std::vector<std::string> out;
  const PlanPoint* top = top_pick(plan);
  if (!top) {
    std::string why = infeasible_reason(plan);
    if (!why.empty()) why[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(why[0])));
    out.push_back(why + ".");
    return out;
  }
  explain_top(plan, *top, out);
  explain_intervals(plan, *top, out);
  explain_advice(*top, out);
  explain_comm(*top, out);
  explain_neighbours(plan, *top, out);
  explain_zero(plan, *top, out);
  explain_batch(plan, *top, out);
  return out;
}

namespace {

// Why a what-if changed nothing (under 0.05% of the time): the edits' own notes on what still limits the
// edited links (an effective bandwidth unchanged: whatif.cpp), then what bounds the top pick's step and
// what would move it.
void explain_no_op(const PlanResult& edited, const PlanPoint& top, std::vector<std::string>& out) {
  out.push_back("  why nothing changed:");
  for (const auto& c : edited.what_if_changes)
    if (c.find("effective bandwidth unchanged") != std::string::npos) out.push_back("    " + c);
  const ReportPoint& r = top.result;
  for (const auto& n : r.notes)  // edits of nodes the top pick does not use (whatif.hpp what_if_unused_notes)
    if (n.rfind("what-if '", 0) == 0 && n.find(kWhatIfUnusedMark) != std::string::npos)
      out.push_back("    " + n);
  const Breakdown& b = r.breakdown_s;
  const double step = r.step_time_s.mean;
  const std::string bound = r.bound == "exposed_comm" ? "communication" : r.bound == "h2d" ? "copy" : r.bound;
  out.push_back(fmt::format(
      "    the top pick is {}-bound: exposed communication is {:.1f}% of its step of {} (of "
      "{} in flight), so a network edit can gain at most that",
      bound, pct(b.comm_exposed, step), units::format_time(step), units::format_time(b.comm_total)));
  // The bound is the breakdown's largest term by name (report.cpp bound_of).
  const double seconds = r.bound == "exposed_comm" ? b.comm_exposed
                         : r.bound == "data"       ? b.data
                         : r.bound == "h2d"        ? b.h2d
                         : r.bound == "optimizer"  ? b.optimizer
                                                   : b.compute_fwd + b.compute_bwd;
  out.push_back("    " + term_advice(r.bound, "To move it", pct(seconds, step), top));
}

}  // namespace

std::vector<std::string> compare_plans(const PlanResult& baseline, const PlanResult& edited) {
  std::vector<std::string> out;
  const PlanPoint* b = top_pick(baseline);
  const PlanPoint* e = top_pick(edited);
  std::string edits;
  for (const auto& w : edited.what_ifs) edits += (edits.empty() ? "" : "; ") + w;
  out.push_back(fmt::format("What the what-ifs change ({}):", edits.empty() ? "none" : edits));
  if (!b || !e) {
    out.push_back(
        fmt::format("  feasible points: {} without, {} with them", b ? "some" : "none", e ? "some" : "none"));
    return out;
  }
  out.push_back(fmt::format("  top pick without: {}: {}, {}", settings_text(*b),
                            units::format_time(b->time_to_train_s), cost_text(baseline, b->cost)));
  out.push_back(
      fmt::format("  top pick with:    {}: {}, {} ({} time, {} cost)", settings_text(*e),
                  units::format_time(e->time_to_train_s), cost_text(edited, e->cost),
                  signed_percent(pct(e->time_to_train_s - b->time_to_train_s, b->time_to_train_s) / 100),
                  signed_percent(pct(e->cost - b->cost, b->cost) / 100)));
  if (std::fabs(e->time_to_train_s - b->time_to_train_s) <= 5e-4 * b->time_to_train_s)
    explain_no_op(edited, *e, out);
  for (const auto& q : edited.points)
    if (q.index == b->index) {
      if (q.rank > 0)
        out.push_back(fmt::format(
            "  the same settings as the top pick without: {} ({})", units::format_time(q.time_to_train_s),
            signed_percent(pct(q.time_to_train_s - b->time_to_train_s, b->time_to_train_s) / 100)));
      else
        out.push_back(fmt::format("  the same settings as the top pick without: excluded ({})", q.excluded));
    }
  return out;
}

}  // namespace vitsim
