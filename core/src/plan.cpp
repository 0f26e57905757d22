#include "vitsim/core/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "vitsim/core/error.hpp"
#include "vitsim/core/identity.hpp"
#include "json_reader.hpp"
#include "vitsim/core/suggest.hpp"
#include "vitsim/core/units.hpp"

namespace vitsim {
using json = nlohmann::json;

namespace {

std::string settings_text(const PlanPoint& p) {
  std::string s = fmt::format("{} node{} x {} GPU{}, micro-batch {}, accumulation {}, ZeRO-{}, {}, {} all-reduce, overlap {}",
                              p.nodes, p.nodes == 1 ? "" : "s", p.gpus_per_node, p.gpus_per_node == 1 ? "" : "s",
                              p.micro_batch, p.grad_accum, p.zero, p.precision, p.collective, p.overlap ? "on" : "off");
  if (p.sequence_parallel > 1) s += fmt::format(", patch parallelism over {} GPUs", p.sequence_parallel);
  return s;
}

std::string cost_text(const PlanResult& plan, double cost) {
  return plan.price_per_gpu_hour > 0 ? fmt::format("${:.2f}", cost) : fmt::format("{:.2f} GPU-h", cost);
}

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

double pct(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0; }

// The swept keys: those whose value differs between points of the plan.
std::vector<std::string> varying_keys(const PlanResult& plan) {
  std::map<std::string, std::set<std::string>> values;
  for (const auto& p : plan.points)
    for (const auto& [k, v] : p.params) values[k].insert(v);
  std::vector<std::string> out;
  for (const auto& [k, vs] : values)
    if (vs.size() > 1 && k != "nodes" && k != "gpus" && k != "micro_batch" && k != "grad_accum") out.push_back(k);
  return out;
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
    for (size_t i = 0; i < sim.size(); ++i) sim[i]->result.scaling_efficiency = r.points[i].scaling_efficiency;
  }
  for (auto& p : plan.points) {
    p.rank = 0;
    p.pareto = false;
    if (!p.simulated) continue;  // excluded before simulating; the reason is already set
    p.excluded.clear();
    p.time_to_train_s = p.result.epoch_time_s * plan.epochs;
    p.gpu_hours = p.time_to_train_s * p.gpus / 3600.0;
    p.cost = plan.price_per_gpu_hour > 0 ? p.gpu_hours * plan.price_per_gpu_hour : p.gpu_hours;
    // Energy of the epochs (core/energy.hpp), priced at the plan's price per kWh.
    p.result.energy.price_per_kwh = p.result.energy.known() ? plan.price_per_kwh : 0;
    p.energy_kwh = p.result.energy.known() ? p.result.energy.epoch_kwh * plan.epochs : 0;
    p.energy_cost = p.energy_kwh * plan.price_per_kwh;
    if (plan.objective == "energy" && !p.result.energy.known())
      throw Error(fmt::format("plan --objective energy: point {} ({}) has no energy figures: its platform states no "
                              "gpu_power_busy/gpu_power_idle (vitsim platform writes them; README \"Energy and cost per epoch\")",
                              p.index, settings_text(p)));
    if (c.must_fit && !p.result.fits_in_memory)
      p.excluded = fmt::format("memory: needs {} per GPU", units::format_bytes(p.result.memory_per_gpu_bytes));
    else if (c.deadline_s && p.time_to_train_s > *c.deadline_s)
      p.excluded = fmt::format("deadline: {} take {} > {}", count_noun(plan.epochs, "epoch"), units::format_time(p.time_to_train_s),
                               units::format_time(*c.deadline_s));
    else if (c.budget && p.cost > *c.budget)
      p.excluded = fmt::format("budget: {} > {}", cost_text(plan, p.cost), cost_text(plan, *c.budget));
  }
  std::vector<PlanPoint> feasible, excluded;
  for (auto& p : plan.points) (p.excluded.empty() && p.simulated ? feasible : excluded).push_back(std::move(p));
  std::sort(feasible.begin(), feasible.end(), [&](const PlanPoint& a, const PlanPoint& b) { return better(plan, a, b); });
  std::sort(excluded.begin(), excluded.end(), [](const PlanPoint& a, const PlanPoint& b) { return a.index < b.index; });
  for (size_t i = 0; i < feasible.size(); ++i) feasible[i].rank = static_cast<int>(i) + 1;
  plan.points = std::move(feasible);
  for (auto& p : excluded) plan.points.push_back(std::move(p));
  std::set<int> front;
  for (const PlanPoint* p : pareto_front(plan)) front.insert(p->index);
  for (auto& p : plan.points) p.pareto = front.count(p.index) > 0;
  plan.ranked = true;
  plan.explanation = explain_plan(plan);
}

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
      throw Error(fmt::format("{}: /plan_id: this shard is of another plan than {} ({} vs {}): the scenario, its "
                              "platform, what-ifs, calibration, epochs, objective, constraints or space differ; "
                              "merge only the shards of one `vitsim plan --shard I/K` command",
                              name(s), name(first), s.plan_id.substr(0, 19), first.plan_id.substr(0, 19)));
    if (s.space_size != out.space_size || s.epochs != out.epochs || s.what_ifs != out.what_ifs ||
        s.objective != out.objective || s.price_per_gpu_hour != out.price_per_gpu_hour ||
        s.price_per_kwh != out.price_per_kwh || s.scenario != out.scenario)
      throw Error(fmt::format("{}: shard {}/{} is of another plan than {} (scenario, space, epochs, objective, price "
                              "or what-ifs differ)", name(s), s.shard_index, s.shard_count, name(first)));
    if (s.shard_count != first.shard_count)
      throw Error(fmt::format("{}: /shard/count: {} shards, but {} says {}", name(s), s.shard_count, name(first),
                              first.shard_count));
    if (!shard_seen.emplace(s.shard_index, name(s)).second)
      throw Error(fmt::format("{}: /shard/index: shard {}/{} given twice (also {})", name(s), s.shard_index,
                              s.shard_count, shard_seen[s.shard_index]));
    for (size_t i = 0; i < s.points.size(); ++i) {
      const PlanPoint& p = s.points[i];
      if (p.index % s.shard_count != s.shard_index)
        throw Error(fmt::format("{}: /points/{}/index: point {} does not belong to shard {}/{} (index % {} = {})", name(s), i,
                                p.index, s.shard_index, s.shard_count, s.shard_count, p.index % s.shard_count));
      auto [it, fresh] = seen.emplace(p.index, name(s));
      if (!fresh)
        throw Error(fmt::format("{}: /points/{}/index: point {} appears twice (also in {})", name(s), i, p.index, it->second));
      out.points.push_back(p);
    }
  }
  if (static_cast<int>(seen.size()) != out.space_size) {
    const int count = shards.front().shard_count;
    std::string absent;
    for (int k = 0; k < count && k < 64; ++k)
      if (!shard_seen.count(k)) absent += fmt::format("{}{}/{}", absent.empty() ? "" : ", ", k, count);
    throw Error(fmt::format("merge: the shards hold {} of the plan's {} points{}", seen.size(), out.space_size,
                            absent.empty() ? "" : " (missing shard " + absent + ")"));
  }
  std::sort(out.points.begin(), out.points.end(), [](const PlanPoint& a, const PlanPoint& b) { return a.index < b.index; });
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
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
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
  out.push_back(fmt::format("Top pick ({} of {} feasible points, by {}): {}. {} epoch{} in {}, {}, {:.0f} images/s{}.",
                            1, feasible, plan.objective, settings_text(top), plan.epochs, plan.epochs == 1 ? "" : "s",
                            units::format_time(top.time_to_train_s), cost_text(plan, top.cost), r.throughput_img_s,
                            r.scaling_efficiency >= 0 ? fmt::format(", {:.0f}% scaling efficiency", 100 * r.scaling_efficiency) : ""));
  if (r.energy.known())
    out.push_back(fmt::format("Energy: {:.4g} kWh for {} (GPUs busy {:.0f}% of the time){}.", top.energy_kwh,
                              count_noun(plan.epochs, "epoch"), 100 * r.energy.busy_fraction,
                              plan.price_per_kwh > 0 ? fmt::format(", {:.2f} at {:g} per kWh", top.energy_cost, plan.price_per_kwh) : ""));
  const double compute = b.compute_fwd + b.compute_bwd;
  out.push_back(fmt::format("What bounds it: {} per step of {}: compute {:.0f}%, exposed communication {:.0f}% (of {} "
                            "in flight), data loading {:.0f}%, host-to-device {:.0f}%, optimizer {:.0f}%.",
                            r.bound, units::format_time(step), pct(compute, step), pct(b.comm_exposed, step),
                            units::format_time(b.comm_total), pct(b.data, step), pct(b.h2d, step), pct(b.optimizer, step)));
  out.push_back(fmt::format("Memory: {} of {} per GPU (activations {}, weights+gradients+optimizer {}).",
                            units::format_bytes(top.memory_per_gpu_bytes), units::format_bytes(top.gpu_memory_bytes),
                            units::format_bytes(r.memory.activations),
                            units::format_bytes(r.memory.params + r.memory.grads + r.memory.optimizer)));
}

// The advice for one term of the step (`percent` of it); `lead` is "To move it" or "Also".
std::string term_advice(const std::string& name, const std::string& lead, double percent, bool overlap) {
  if (name == "compute")
    return lead + ": compute (" + fmt::format("{:.0f}%", percent) +
           "): more GPUs (if the global batch allows) or faster ones (--what-if gpu:NODES=NODE|SPEC.json:TYPE); "
           "fp16/bf16 where the GPU has tensor cores.";
  if (name == "exposed_comm")
    return fmt::format(
        "{}: exposed communication ({:.0f}%): {}a larger micro-batch or accumulation (fewer gradient reductions per "
        "image), a node-aware collective (parallelism.collective=hierarchical), or faster links "
        "(--what-if link:NIC:bandwidth=...).",
        lead, percent,
        overlap ? "buckets well under the gradients' size (parallelism.bucket_size=25MB: a single bucket leaves "
                  "nothing to overlap), "
                : "overlap with backward (parallelism.overlap=true, with parallelism.bucket_size well under the "
                  "gradients' size, e.g. 25MB), ");
  if (name == "data")
    return fmt::format("{}: data loading ({:.0f}%): more loader workers (--what-if loader:workers=N) or cheaper "
                       "decoding (pre-resized images, a faster loader_bw).",
                       lead, percent);
  if (name == "h2d")
    return fmt::format("{}: host-to-device copies ({:.0f}%): pinned memory (loader.pinned=true) or a faster "
                       "host link (--what-if link:NODE.h2d:bandwidth=...).",
                       lead, percent);
  return fmt::format("{}: the optimizer step ({:.0f}%): ZeRO-1 or higher splits it over the ranks.", lead, percent);
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
  std::stable_sort(terms.begin(), terms.end(), [](const Term& x, const Term& y) { return x.seconds > y.seconds; });
  for (const auto& t : terms) {
    if (t.name != r.bound && !(step > 0 && t.seconds / step >= 0.2)) continue;
    out.push_back(term_advice(t.name, t.name == r.bound ? "To move it" : "Also", pct(t.seconds, step), top.overlap));
  }
}

// Whether q has the top pick's settings but another value of `key`.
bool neighbour_in(const PlanPoint& q, const PlanPoint& top, const std::string& key) {
  if (!q.params.count(key) || !top.params.count(key) || q.params.at(key) == top.params.at(key)) return false;
  for (const auto& [k, v] : top.params) {
    if (k == key || k == "grad_accum" || k == "training.grad_accum" || k == "nodes" || k == "gpus" || k == "micro_batch")
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
      const std::string time = signed_percent(pct(q.time_to_train_s - top.time_to_train_s, top.time_to_train_s) / 100);
      const std::string cost = signed_percent(pct(q.cost - top.cost, top.cost) / 100);
      if (q.rank > 0)
        moves.push_back(fmt::format("{}={}: {} time, {} cost", key, q.params.at(key), time, cost));
      else if (q.simulated && q.excluded.rfind("memory", 0) != 0)
        moves.push_back(fmt::format("{}={}: {} time, {} cost, but excluded ({})", key, q.params.at(key), time, cost, q.excluded));
      else
        moves.push_back(fmt::format("{}={}: excluded ({})", key, q.params.at(key), q.excluded));
    }
  }
  if (moves.empty()) return;
  out.push_back("One setting changed from the top pick:");
  const size_t shown = std::min<size_t>(moves.size(), 12);
  for (size_t i = 0; i < shown; ++i) out.push_back("  " + moves[i]);
  if (moves.size() > shown) out.push_back(fmt::format("  ... and {} more (--format json lists every point)", moves.size() - shown));
}

// What ZeRO unlocks: the largest micro-batch that fits per stage, among points otherwise like the top pick.
void explain_zero(const PlanResult& plan, const PlanPoint& top, std::vector<std::string>& out) {
  std::map<int, int> largest_fit;
  bool zero_swept = false;
  for (const auto& q : plan.points) {
    if (q.zero != top.zero) zero_swept = true;
    if (q.nodes != top.nodes || q.gpus_per_node != top.gpus_per_node || q.precision != top.precision ||
        q.sequence_parallel != top.sequence_parallel)
      continue;
    if (q.memory_per_gpu_bytes <= q.gpu_memory_bytes) largest_fit[q.zero] = std::max(largest_fit[q.zero], q.micro_batch);
  }
  if (!zero_swept || largest_fit.size() <= 1) return;
  std::string s = "Largest micro-batch that fits, by ZeRO stage (at the top pick's GPUs and precision):";
  for (const auto& [z, mb] : largest_fit) s += fmt::format(" ZeRO-{} {};", z, mb);
  s.back() = '.';
  out.push_back(s);
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
  explain_advice(*top, out);
  explain_neighbours(plan, *top, out);
  explain_zero(plan, *top, out);
  return out;
}

std::vector<std::string> compare_plans(const PlanResult& baseline, const PlanResult& edited) {
  std::vector<std::string> out;
  const PlanPoint* b = top_pick(baseline);
  const PlanPoint* e = top_pick(edited);
  std::string edits;
  for (const auto& w : edited.what_ifs) edits += (edits.empty() ? "" : "; ") + w;
  out.push_back(fmt::format("What the what-ifs change ({}):", edits.empty() ? "none" : edits));
  if (!b || !e) {
    out.push_back(fmt::format("  feasible points: {} without, {} with them", b ? "some" : "none", e ? "some" : "none"));
    return out;
  }
  out.push_back(fmt::format("  top pick without: {}: {}, {}", settings_text(*b), units::format_time(b->time_to_train_s),
                            cost_text(baseline, b->cost)));
  out.push_back(fmt::format("  top pick with:    {}: {}, {} ({} time, {} cost)", settings_text(*e),
                            units::format_time(e->time_to_train_s), cost_text(edited, e->cost),
                            signed_percent(pct(e->time_to_train_s - b->time_to_train_s, b->time_to_train_s) / 100),
                            signed_percent(pct(e->cost - b->cost, b->cost) / 100)));
  for (const auto& q : edited.points)
    if (q.index == b->index) {
      if (q.rank > 0)
        out.push_back(fmt::format("  the same settings as the top pick without: {} ({})", units::format_time(q.time_to_train_s),
                                  signed_percent(pct(q.time_to_train_s - b->time_to_train_s, b->time_to_train_s) / 100)));
      else
        out.push_back(fmt::format("  the same settings as the top pick without: excluded ({})", q.excluded));
    }
  return out;
}

// --- formats ---

namespace {
json constraints_json(const PlanConstraints& c) {
  json j = json::object();
  if (c.global_batch) j["global_batch"] = *c.global_batch;
  if (c.global_batch_min) j["global_batch_min"] = *c.global_batch_min;
  if (c.global_batch_max) j["global_batch_max"] = *c.global_batch_max;
  if (c.deadline_s) j["deadline_s"] = *c.deadline_s;
  if (c.budget) j["budget"] = *c.budget;
  j["must_fit"] = c.must_fit;
  return j;
}
PlanConstraints constraints_from(const detail::JsonField& f) {
  PlanConstraints c;
  constexpr long long kMax = std::numeric_limits<long long>::max();
  if (f.has("global_batch")) c.global_batch = f.at("global_batch").integer(1, kMax);
  if (f.has("global_batch_min")) c.global_batch_min = f.at("global_batch_min").integer(1, kMax);
  if (f.has("global_batch_max")) c.global_batch_max = f.at("global_batch_max").integer(1, kMax);
  if (f.has("deadline_s")) c.deadline_s = f.at("deadline_s").non_negative("the deadline");
  if (f.has("budget")) c.budget = f.at("budget").non_negative("the budget");
  c.must_fit = f.at("must_fit").boolean();
  return c;
}
}  // namespace

std::string plan_to_json(const PlanResult& plan) {
  json j = json_file_head("vitsim.plan/2", "plan");
  j["plan_id"] = plan.plan_id;
  j["scenario"] = plan.scenario;
  j["provenance"] = plan.provenance;
  j["what_ifs"] = plan.what_ifs;
  j["what_if_changes"] = plan.what_if_changes;
  j["epochs"] = plan.epochs;
  j["price_per_gpu_hour"] = plan.price_per_gpu_hour;
  if (plan.price_per_kwh > 0) j["price_per_kwh"] = plan.price_per_kwh;
  j["cost_unit"] = plan.cost_unit();
  j["objective"] = plan.objective;
  j["constraints"] = constraints_json(plan.constraints);
  j["space_size"] = plan.space_size;
  j["shard"] = {{"index", plan.shard_index}, {"count", plan.shard_count}};
  j["ranked"] = plan.ranked;
  j["explanation"] = plan.explanation;
  // The simulated points as a report, so that its parser reads them back.
  Report sims;
  for (const auto& p : plan.points)
    if (p.simulated) sims.points.push_back(p.result);
  json sim_points = json::parse(report_to_json(sims))["points"];
  size_t k = 0;
  j["points"] = json::array();
  for (const auto& p : plan.points) {
    json pj;
    pj["index"] = p.index;
    pj["params"] = p.params;
    pj["nodes"] = p.nodes;
    pj["gpus_per_node"] = p.gpus_per_node;
    pj["gpus"] = p.gpus;
    pj["micro_batch"] = p.micro_batch;
    pj["grad_accum"] = p.grad_accum;
    pj["zero"] = p.zero;
    pj["sequence_parallel"] = p.sequence_parallel;
    pj["precision"] = p.precision;
    pj["collective"] = p.collective;
    pj["overlap"] = p.overlap;
    pj["global_batch"] = p.global_batch;
    pj["memory_per_gpu_bytes"] = p.memory_per_gpu_bytes;
    pj["gpu_memory_bytes"] = p.gpu_memory_bytes;
    pj["simulated"] = p.simulated;
    pj["excluded"] = p.excluded.empty() ? json(nullptr) : json(p.excluded);
    pj["time_to_train_s"] = p.time_to_train_s;
    pj["gpu_hours"] = p.gpu_hours;
    pj["cost"] = p.cost;
    if (p.simulated && p.result.energy.known()) pj["energy_kwh"] = p.energy_kwh, pj["energy_cost"] = p.energy_cost;
    pj["pareto"] = p.pareto;
    pj["rank"] = p.rank;
    pj["result"] = p.simulated ? sim_points.at(k++) : json(nullptr);
    j["points"].push_back(pj);
  }
  return j.dump(2) + "\n";
}

namespace {

// Only vitsim.plan/2 is read; an older plan or another vitsim file gets a message that says what it is.
void check_plan_schema(const json& j, const std::string& origin) {
  const std::string schema = j.is_object() && j.contains("schema") && j["schema"].is_string() ? j["schema"].get<std::string>() : "";
  if (schema == "vitsim.plan/1")
    throw Error(fmt::format("{}: a vitsim.plan/1 file (written before plans carried their identity): run `vitsim plan` "
                            "again with this vitsim ({})", origin, vitsim_version()));
  if (schema != "vitsim.plan/2") {
    const std::string what = detail::what_schema(j);
    if (!what.empty())
      throw Error(fmt::format("{}: this is {}, not a plan: give the JSON of `vitsim plan [--shard I/K] --format json`",
                              origin, what));
    throw Error(fmt::format("{}: not a vitsim plan (expected \"schema\": \"vitsim.plan/2\")", origin));
  }
}

// The plan's fields above its points.
void plan_header_from(const detail::JsonField& top, PlanResult& plan) {
  if (top.at("kind").string() != "plan") top.at("kind").fail("expected \"plan\"");
  plan.vitsim_version = top.at("vitsim_version").string();
  plan.plan_id = top.at("plan_id").string();
  bool hex = plan.plan_id.size() == 7 + 64 && plan.plan_id.rfind("sha256:", 0) == 0;
  for (size_t i = 7; hex && i < plan.plan_id.size(); ++i) hex = std::isxdigit(static_cast<unsigned char>(plan.plan_id[i]));
  if (!hex) top.at("plan_id").fail("expected \"sha256:\" and 64 hex digits (the plan's identity)");
  plan.scenario = top.at("scenario").string();
  plan.provenance = top.at("provenance").string_map();
  plan.what_ifs = top.at("what_ifs").strings();
  plan.what_if_changes = top.at("what_if_changes").strings();
  plan.epochs = static_cast<int>(top.at("epochs").integer(1, 1 << 20));
  plan.price_per_gpu_hour = top.at("price_per_gpu_hour").non_negative("the price per GPU-hour");
  if (top.has("price_per_kwh")) plan.price_per_kwh = top.at("price_per_kwh").non_negative("the price per kWh");
  plan.objective = top.at("objective").string();
  if (plan.objective != "time" && plan.objective != "cost" && plan.objective != "throughput" && plan.objective != "energy")
    top.at("objective").fail(fmt::format("unknown objective '{}'; valid: cost, energy, throughput, time", plan.objective.substr(0, 40)));
  plan.constraints = constraints_from(top.at("constraints"));
  plan.space_size = static_cast<int>(top.at("space_size").integer(1, std::numeric_limits<int>::max()));
  plan.shard_count = static_cast<int>(top.at("shard").at("count").integer(1, plan.space_size));
  plan.shard_index = static_cast<int>(top.at("shard").at("index").integer(0, plan.shard_count - 1));
  plan.ranked = top.at("ranked").boolean();
  plan.explanation = top.at("explanation").strings();
}

// A point's own fields (its simulated result aside); `indices` are those read so far.
PlanPoint plan_point_from(const detail::JsonField& pj, const PlanResult& plan, std::set<int>& indices) {
  constexpr long long kMaxCount = std::numeric_limits<int>::max();
  PlanPoint p;
  p.index = static_cast<int>(pj.at("index").integer(0, plan.space_size - 1));
  if (!indices.insert(p.index).second) pj.at("index").fail(fmt::format("point {} appears twice", p.index));
  p.params = pj.at("params").string_map();
  p.simulated = pj.at("simulated").boolean();
  const long long least = p.simulated ? 1 : 0;  // a point excluded before placement has no shape
  p.nodes = static_cast<int>(pj.at("nodes").integer(least, kMaxCount));
  p.gpus_per_node = static_cast<int>(pj.at("gpus_per_node").integer(least, kMaxCount));
  p.gpus = static_cast<int>(pj.at("gpus").integer(least, kMaxCount));
  p.micro_batch = static_cast<int>(pj.at("micro_batch").integer(least, kMaxCount));
  p.grad_accum = static_cast<int>(pj.at("grad_accum").integer(least, kMaxCount));
  p.zero = static_cast<int>(pj.at("zero").integer(0, 3));
  p.sequence_parallel = static_cast<int>(pj.at("sequence_parallel").integer(1, kMaxCount));
  p.precision = pj.at("precision").string();
  p.collective = pj.at("collective").string();
  p.overlap = pj.at("overlap").boolean();
  p.global_batch = pj.at("global_batch").integer(0, std::numeric_limits<long long>::max());
  p.memory_per_gpu_bytes = pj.at("memory_per_gpu_bytes").non_negative("the memory per GPU");
  p.gpu_memory_bytes = pj.at("gpu_memory_bytes").non_negative("a GPU's memory");
  if (p.gpu_memory_bytes > kMaxMemoryPerGpuBytes)
    pj.at("gpu_memory_bytes").fail(fmt::format("{:.6g} bytes is beyond any device (limit 16 TiB)", p.gpu_memory_bytes));
  p.excluded = pj.at("excluded").is_null() ? "" : pj.at("excluded").string();
  if (!p.simulated && p.excluded.empty()) pj.at("excluded").fail("a point that was not simulated must say why it was excluded");
  p.time_to_train_s = pj.at("time_to_train_s").non_negative("the time to train");
  p.gpu_hours = pj.at("gpu_hours").non_negative("the GPU-hours");
  p.cost = pj.at("cost").non_negative("the cost");
  if (pj.has("energy_kwh") || pj.has("energy_cost")) {
    p.energy_kwh = pj.at("energy_kwh").non_negative("an energy");
    p.energy_cost = pj.at("energy_cost").non_negative("a cost");
  }
  p.pareto = pj.at("pareto").boolean();
  p.rank = static_cast<int>(pj.at("rank").integer(0, plan.space_size));
  return p;
}

// A ranked point's derived figures must be its result's: time to train = epochs x epoch time, and so on.
void check_derived(const detail::JsonField& pj, const PlanPoint& p, const PlanResult& plan) {
  const ReportPoint& r = p.result;
  const double time = r.epoch_time_s * plan.epochs, hours = time * p.gpus / 3600.0;
  const double cost = plan.price_per_gpu_hour > 0 ? hours * plan.price_per_gpu_hour : hours;
  auto same = [](double a, double b) { return std::fabs(a - b) <= 1e-6 * std::max(std::fabs(a), std::fabs(b)) + 1e-12; };
  if (!same(p.time_to_train_s, time))
    pj.at("time_to_train_s").fail(fmt::format("{:.6g} s disagrees with epochs x epoch time = {} x {:.6g} s", p.time_to_train_s,
                                              plan.epochs, r.epoch_time_s));
  if (!same(p.gpu_hours, hours))
    pj.at("gpu_hours").fail(fmt::format("{:.6g} disagrees with time to train x GPUs = {:.6g}", p.gpu_hours, hours));
  if (!same(p.cost, cost)) pj.at("cost").fail(fmt::format("{:.6g} disagrees with the GPU-hours and the price: {:.6g}", p.cost, cost));
  const double kwh = r.energy.known() ? r.energy.epoch_kwh * plan.epochs : 0;
  if (!same(p.energy_kwh, kwh))
    pj.at(pj.has("energy_kwh") ? "energy_kwh" : "result")
        .fail(fmt::format("{:.6g} kWh disagrees with epochs x the result's epoch_kwh = {:.6g} kWh", p.energy_kwh, kwh));
  if (!same(p.energy_cost, kwh * plan.price_per_kwh))
    pj.at("energy_cost").fail(fmt::format("{:.6g} disagrees with energy_kwh x price_per_kwh = {:.6g}", p.energy_cost,
                                          kwh * plan.price_per_kwh));
}

// A simulated point's result, which must agree with the point's own fields.
void plan_result_from(const detail::JsonField& pj, PlanPoint& p, const PlanResult& plan) {
  p.result = report_point_from_json(pj.at("result").raw(), plan.origin, pj.pointer() + "/result", false);
  const ReportPoint& r = p.result;
  if (r.nodes != p.nodes || r.gpus != p.gpus || r.micro_batch != p.micro_batch || r.grad_accum != p.grad_accum ||
      r.global_batch != p.global_batch)
    pj.at("result").fail("the simulated result's nodes, gpus, micro_batch, grad_accum or global_batch differ from the point's");
  if (p.gpus != p.nodes * p.gpus_per_node)
    pj.at("gpus").fail(fmt::format("{} GPUs, but nodes x gpus_per_node = {} x {}", p.gpus, p.nodes, p.gpus_per_node));
  if (std::fabs(p.memory_per_gpu_bytes - r.memory_per_gpu_bytes) > 1e-6 * r.memory_per_gpu_bytes + 1)
    pj.at("memory_per_gpu_bytes").fail(fmt::format("{:.6g} bytes disagrees with the simulated result's {:.6g}",
                                                   p.memory_per_gpu_bytes, r.memory_per_gpu_bytes));
  if (plan.ranked) check_derived(pj, p, plan);
}

}  // namespace

PlanResult plan_from_json(const std::string& text, const std::string& origin) {
  const json j = detail::parse_json(text, origin);
  const detail::JsonField top(j, origin, "");
  check_plan_schema(j, origin);
  PlanResult plan;
  plan.origin = origin;
  plan_header_from(top, plan);
  const detail::JsonField points = top.at("points");
  std::set<int> indices;
  for (size_t i = 0, n = points.size(); i < n; ++i) {
    const detail::JsonField pj = points[i];
    PlanPoint p = plan_point_from(pj, plan, indices);
    if (p.simulated)
      plan_result_from(pj, p, plan);
    else if (!pj.at("result").is_null())
      pj.at("result").fail("a point that was not simulated has no result (expected null)");
    plan.points.push_back(std::move(p));
  }
  if (plan.ranked && plan.shard_count > 1) top.at("ranked").fail("a shard's points are unranked; this one says ranked");
  return plan;
}

std::string plan_to_table(const PlanResult& plan, int top) {
  std::string out = fmt::format("vitsim plan: {} ({}, {}, ranked by {})\n", plan.scenario,
                                count_noun(plan.space_size, "point"), count_noun(plan.epochs, "epoch"), plan.objective);
  for (size_t i = 0; i < plan.what_ifs.size(); ++i) out += fmt::format("what-if {}: {}\n", i + 1, plan.what_ifs[i]);
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
  std::vector<std::string> extra;
  for (const auto& k : varying_keys(plan))
    if (k != "cluster.nodes" && k != "cluster.gpus_per_node" && k != "training.micro_batch" &&
        k != "training.grad_accum" && k != "parallelism.zero" && k != "parallelism.sequence_parallel" &&
        k != "training.precision" && k != "parallelism.collective" && k != "parallelism.overlap")
      extra.push_back(k);
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"#", "nodes", "gpn", "micro", "accum", "zero", "sp", "prec", "coll", "ovl"});
  for (const auto& k : extra) rows[0].push_back(k.substr(k.find('.') + 1));
  for (const char* h : {"gbatch", "epoch"}) rows[0].push_back(h);
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
    std::vector<std::string> row{std::to_string(p.rank), std::to_string(p.nodes), std::to_string(p.gpus_per_node),
                                 std::to_string(p.micro_batch), std::to_string(p.grad_accum), std::to_string(p.zero),
                                 std::to_string(p.sequence_parallel), p.precision, p.collective, p.overlap ? "on" : "off"};
    for (const auto& k : extra) row.push_back(p.params.count(k) ? p.params.at(k) : "");
    for (std::string v : {std::to_string(p.global_batch), units::format_time(r.epoch_time_s),
                          units::format_time(p.time_to_train_s), fmt::format("{:.0f}", r.throughput_img_s),
                          r.scaling_efficiency < 0 ? std::string("-") : fmt::format("{:.0f}%", 100 * r.scaling_efficiency),
                          r.mfu() > 0 ? fmt::format("{:.1f}%", 100 * r.mfu()) : std::string("-"),
                          units::format_bytes(p.memory_per_gpu_bytes), std::string(r.fits_in_memory ? "yes" : "NO"),
                          fmt::format("{:.2f}", p.cost)})
      row.push_back(v);
    if (energy) row.push_back(r.energy.known() ? fmt::format("{:.4g}", p.energy_kwh) : "-");
    if (energy && plan.price_per_kwh > 0) row.push_back(r.energy.known() ? fmt::format("{:.2f}", p.energy_cost) : "-");
    row.push_back(r.bound);
    row.push_back(p.pareto ? "*" : "");
    rows.push_back(std::move(row));
  }
  std::vector<size_t> w(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) out += fmt::format("{:>{}}{}", row[i], w[i], i + 1 < row.size() ? "  " : "\n");
  if (shown < feasible)
    out += fmt::format("({} not shown; --top 0 shows all)\n", count_noun(feasible - shown, "more feasible point"));
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
    for (const auto& [k, w] : why) out += fmt::format("  {} {}, e.g. {}\n", w.first, k, w.second);  // "3 memory, e.g. ..."
  }
  for (const auto& line : plan.explanation) out += line + "\n";
  return out;
}

std::string plan_to_csv(const PlanResult& plan) {
  std::vector<std::string> keys;
  const std::vector<std::string> fixed{"nodes", "gpus", "micro_batch", "grad_accum"};
  for (const auto& p : plan.points)
    for (const auto& [k, v] : p.params)
      if (std::find(keys.begin(), keys.end(), k) == keys.end() && std::find(fixed.begin(), fixed.end(), k) == fixed.end())
        keys.push_back(k);
  std::string out = "rank,index,";
  for (const auto& k : keys) out += k + ",";
  out += "nodes,gpus_per_node,gpus,micro_batch,grad_accum,zero,sequence_parallel,precision,collective,overlap,"
         "global_batch,step_mean_s,epoch_time_s,time_to_train_s,throughput_img_s,scaling_efficiency,"
         "memory_per_gpu_bytes,gpu_memory_bytes,gpu_hours,cost,bound,pareto,excluded,tflops_per_gpu,mfu,energy_kwh,energy_cost\n";
  // A figure the point does not have is an empty cell, not 0: no rank for an excluded point, no times,
  // throughput, GPU-hours, cost or bound for one excluded before simulating.
  auto num = [](bool has, double v) { return has ? fmt::format("{:.9g}", v) : std::string(); };
  for (const auto& p : plan.points) {
    out += fmt::format("{},{},", p.rank > 0 ? std::to_string(p.rank) : std::string(), p.index);
    for (const auto& k : keys) {
      auto it = p.params.find(k);
      std::string v = it == p.params.end() ? "" : it->second;
      out += (v.find(',') != std::string::npos ? "\"" + v + "\"" : v) + ",";
    }
    const ReportPoint& r = p.result;
    std::string excl = p.excluded;
    std::replace(excl.begin(), excl.end(), '"', '\'');
    const bool sim = p.simulated;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.0f},{:.0f},{},{},{},{},{},{},{},{},{}\n",
                       p.nodes, p.gpus_per_node, p.gpus, p.micro_batch, p.grad_accum, p.zero, p.sequence_parallel,
                       p.precision, p.collective, p.overlap ? "true" : "false", p.global_batch, num(sim, r.step_time_s.mean),
                       num(sim, r.epoch_time_s), num(sim, p.time_to_train_s), num(sim, r.throughput_img_s),
                       !sim || r.scaling_efficiency < 0 ? std::string() : fmt::format("{:.6g}", r.scaling_efficiency),
                       p.memory_per_gpu_bytes, p.gpu_memory_bytes, num(sim, p.gpu_hours), num(sim, p.cost), sim ? r.bound : "",
                       p.pareto ? "true" : "false", excl.empty() ? "" : "\"" + excl + "\"",
                       r.model_flops > 0 ? fmt::format("{:.6g}", r.tflops_per_gpu()) : std::string(),
                       r.mfu() > 0 ? fmt::format("{:.6g}", r.mfu()) : std::string(),
                       num(sim && r.energy.known(), p.energy_kwh),
                       num(sim && r.energy.known() && plan.price_per_kwh > 0, p.energy_cost));
  }
  return out;
}

}  // namespace vitsim
