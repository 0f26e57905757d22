#include "point/point_report.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "vitsim/core/formats/identity.hpp"
#include "vitsim/core/formats/whatif.hpp"
#include "vitsim/core/model/energy.hpp"

namespace vitsim::sim {
namespace {

// What the statistics cover: after a steady-state search, the steady window (the steps before it were the
// transient the search ran past); without one, every measured step.
struct Window {
  std::vector<double> step_max;  // the slowest rank's time per counted step
  SteadyState verdict;
  int first = 0, counted = 0, measured = 0;
};
Window statistics_window(const PointRun& run, bool full) {
  const StepHorizon& h = run.horizon;
  Window win;
  win.measured = h.steps - h.warmup;
  std::vector<double> all_max(win.measured, 0.0);
  for (const auto& rs : run.ranks)
    for (int i = 0; i < win.measured; ++i) all_max[i] = std::max(all_max[i], rs.step_times[i]);
  if (!full) win.verdict = steady_state(all_max, h.period, h.loader_step_s);
  win.first = h.extended && win.verdict.steady ? win.measured - win.verdict.window : 0;
  win.counted = win.measured - win.first;
  win.step_max.assign(all_max.begin() + win.first, all_max.end());
  return win;
}

// A rank's breakdown per step over the window.
Breakdown rank_breakdown(const RankState& rs, const Window& win) {
  Breakdown b = rs.totals;
  b.comm_total = rs.comm_busy;
  if (win.first > 0) {
    b = Breakdown{};
    for (int i = win.first; i < win.measured; ++i) {
      add_step(b, rs.step_b[i]);
      if (static_cast<size_t>(i) < rs.step_comm.size()) b.comm_total += rs.step_comm[i];
    }
  }
  for (double* v : {&b.data, &b.h2d, &b.compute_fwd, &b.compute_bwd, &b.optimizer, &b.comm_total,
                    &b.comm_exposed, &b.straggler_wait})
    *v /= win.counted;
  return b;
}

// Per-rank reports and their mean breakdown.
void rank_reports(const PointRun& run, const Window& win, ReportPoint& p) {
  const int n = static_cast<int>(run.ranks.size());
  Breakdown mean;
  p.per_rank.reserve(run.ranks.size());
  for (const auto& rs : run.ranks) {
    RankReport rr;
    rr.rank = rs.rank;
    rr.host = rs.host->get_name();
    rr.device = rs.device->name;
    rr.step_time_s = step_stats(std::vector<double>(rs.step_times.begin() + win.first, rs.step_times.end()));
    const Breakdown b = rank_breakdown(rs, win);
    rr.breakdown_s = b;
    mean.data += b.data / n;
    mean.h2d += b.h2d / n;
    mean.compute_fwd += b.compute_fwd / n;
    mean.compute_bwd += b.compute_bwd / n;
    mean.optimizer += b.optimizer / n;
    mean.comm_total += b.comm_total / n;
    mean.comm_exposed += b.comm_exposed / n;
    mean.straggler_wait += b.straggler_wait / n;
    p.per_rank.push_back(std::move(rr));
  }
  p.breakdown_s = mean;
}

// Energy per epoch (core/model/energy.hpp): each rank's GPU power and busy time per step; the platform's
// price_per_kwh (a zone property; predict/plan --price-per-kwh override it) gives its cost.
void point_energy_of(ReportPoint& p, const PlatformFacts& facts, const RankPlacement& place,
                     std::vector<std::string>& notes) {
  std::vector<GpuPower> power;
  std::vector<double> busy;
  for (size_t r = 0; r < place.hosts.size(); ++r) {
    const GpuFacts& g = facts.gpu.at(place.hosts[r]);
    power.push_back({g.power_busy_w, g.power_idle_w});
    busy.push_back(gpu_busy_s(p.per_rank[r].breakdown_s));
  }
  const auto price = facts.props.find("price_per_kwh");
  p.energy =
      point_energy(power, busy, p.step_time_s.mean, p.epoch_time_s,
                   price == facts.props.end()
                       ? 0
                       : parse_price_per_kwh(price->second, facts.path + ": zone property price_per_kwh"));
  if (p.energy.known())
    notes.push_back(fmt::format(
        "energy: GPUs busy {:.0f}% of the epoch (compute and collectives at gpu_power_busy, loader "
        "waits and host-to-device copies at gpu_power_idle); GPU power only, no hosts, network or cooling",
        100 * p.energy.busy_fraction));
}

// How the epoch time was reached (simulated, extrapolated, unsafe).
std::string window_note(const PointRun& run, const Window& win, bool full, long long steps_per_epoch) {
  const Scenario& s = run.s;
  const StepHorizon& h = run.horizon;
  if (full)
    return h.extended ? fmt::format(
                            "epoch simulated step by step: the first {} steps were not steady, so the "
                            "steady-state search ran the whole epoch",
                            s.simulation.steps)
                      : "epoch simulated step by step";
  if (win.verdict.steady && h.extended)
    return fmt::format(
        "epoch time extrapolated from the last {} steps of {} simulated (the first {} were not "
        "steady: the steady-state search ran more) to the epoch's steps_per_epoch",
        win.counted, h.steps, s.simulation.steps);
  if (win.verdict.steady)
    return fmt::format(
        "epoch time extrapolated from {} steady-state steps ({} warm-up steps excluded) to "
        "the epoch's steps_per_epoch",
        win.measured, h.warmup);
  return fmt::format(
      "extrapolation unsafe: after {} simulated steps (the bound: simulation.max_steps {}, "
      "the epoch {}, memory) {}; the epoch time extrapolated from them may be far off: "
      "simulate the epoch with --set simulation.full_epoch=true",
      h.steps, s.simulation.max_steps, steps_per_epoch, win.verdict.why);
}

// The point's shape as reported, also in its params.
void describe(const Scenario& s, ReportPoint& p) {
  p.params = s.params;
  p.scenario_id = scenario_id(s);  // the identity a report fed back in is checked against
  p.nodes = s.cluster.nodes;
  p.gpus = s.ranks();
  p.micro_batch = s.training.micro_batch;
  p.grad_accum = s.training.grad_accum;
  p.params["nodes"] = std::to_string(p.nodes);
  p.params["gpus"] = std::to_string(p.gpus);
  p.params["micro_batch"] = std::to_string(p.micro_batch);
  p.params["grad_accum"] = std::to_string(p.grad_accum);
  p.global_batch = s.global_batch();
}

}  // namespace

ReportPoint point_report(const PointRun& run, const PlatformFacts& facts, const RankPlacement& place,
                         StepBudget budget, const MemoryVerdict& mem, double end_time,
                         std::vector<std::string> notes) {
  const Scenario& s = run.s;
  const int steps = run.horizon.steps;
  ReportPoint p;
  describe(s, p);
  p.steps_per_epoch = budget.epoch.steps;
  p.epoch_samples = budget.epoch.samples;
  // The steady-state search may have simulated to the end of the epoch: then nothing is extrapolated.
  if (!budget.full && steps >= budget.epoch.steps) budget.full = true;
  const Window win = statistics_window(run, budget.full);
  rank_reports(run, win, p);
  p.step_time_s = step_stats(win.step_max);
  p.bound = bound_of(p.breakdown_s);
  p.simulated_steps = steps;
  p.extrapolated = !budget.full;
  p.epoch_time_s = budget.full ? end_time : p.step_time_s.mean * budget.epoch.exact_steps();
  p.throughput_img_s = p.step_time_s.mean > 0 ? p.global_batch / p.step_time_s.mean : 0;
  p.memory = mem.max;
  p.memory_per_gpu_bytes = mem.max.total();
  p.fits_in_memory = mem.fits;
  // MFU: the op model's FLOPs per rank and step over the GPUs' dense peak in this precision.
  const StepFlops fl = step_flops(run.w, s.training.micro_batch, s.training.grad_accum, compute_inputs(s));
  p.model_flops = fl.model;
  p.recompute_flops = fl.recompute;
  p.peak_flops =
      mean_peak_flops(place, facts, s.training.precision);  // core/formats/placement.hpp, the trainer's too
  point_energy_of(p, facts, place, notes);
  notes.push_back(window_note(run, win, budget.full, budget.epoch.steps));
  if (!mem.fits) notes.push_back("does not fit in GPU memory: predicted time is for a run that would fail");
  if (s.parallel.overlap_ignored)
    notes.push_back(
        fmt::format("overlap: parallelism.overlap=true ({}) has no effect at DeepSpeed's ZeRO-0, whose "
                    "engine reduces the "
                    "gradients after backward (engine.py allreduce_gradients; only the ZeRO optimizers read "
                    "overlap_comm): simulated without overlap",
                    s.origin_of("parallelism.overlap").str()));
  for (const auto& o : s.deepspeed_overrides) notes.push_back("deepspeed: " + o);
  for (const auto& wi : s.what_ifs) notes.push_back("what-if: " + wi);
  for (auto& n : what_if_unused_notes(s.what_ifs, facts, place.hosts)) notes.push_back(std::move(n));
  p.notes = std::move(notes);
  return p;
}

}  // namespace vitsim::sim
