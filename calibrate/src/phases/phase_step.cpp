// Step phase of `vitsim calibrate`: the trainer's own data-parallel steps (real::train_point_on) at every
// calibration micro-batch on all ranks at once, and what a step costs at its gradient sync beyond the
// all-reduce the fitted links give: the wait for the slowest rank and the first collective's wake-up after
// the compute (calibration.hpp SyncCalibration). Measured, not modelled: on this machine the trainer's
// exposed all-reduce of a 543 KiB gradient took 0.6-0.9 ms where the all-reduce alone, after a barrier, takes
// 0.15 ms (docs/benchmarks.md "Validation on this machine").
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/phases.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/real/train.hpp"

namespace vitsim::calibrate {

namespace {

// The point as the trainer runs it at micro-batch `mb` for `steps` timed steps.
Scenario step_scenario(const RunContext& x, int mb, int steps) {
  Scenario s = x.s;
  s.training.micro_batch = mb;
  s.training.grad_accum = 1;
  s.training.epochs = 1;
  s.simulation.warmup = x.o.warmup;
  s.run.max_steps = x.o.warmup + steps;
  s.run.checkpoint_dir.clear();
  s.run.checkpoint_every = 0;
  s.run.check_every = 0;
  s.run.eval_samples = 64;  // the epoch's evaluation: not what is measured, kept short
  return s;
}

StepRow measure_step(RunContext& x, int mb, int steps) {
  real::TrainOptions opt;
  opt.verbose = false;
  const ReportPoint p = real::train_point_on(x.world, step_scenario(x, mb, steps), opt);
  StepRow row;
  row.micro_batch = mb;
  const double n = static_cast<double>(p.per_rank.size());
  for (const RankReport& r : p.per_rank) {
    const Breakdown& b = r.breakdown_s;
    row.compute += (b.compute_fwd + b.compute_bwd) / n;
    row.exposed += b.comm_exposed / n;
    row.optimizer += b.optimizer / n;
    row.data += b.data / n;
  }
  return row;
}

// What the simulator makes of the ranks' compute: each rank its device type's calibrated forward +
// backward, so the ranks of a faster type wait for the slowest type's (a slow device type) by that much.
// The rest is what the simulated sync lacks beside it; ranks of one type that differ in a run (jitter, one
// core busier) are part of the rest.
void settle_step(const RunContext& x, const ComputePhase& compute, const RingFit& fit, int steps,
                 StepRow& row) {
  const int mb = row.micro_batch;
  auto calibrated = [&](int r) {
    for (const ComputePoint& cp : compute.by_type.at(x.devices[static_cast<size_t>(r)]).points)
      if (cp.micro_batch == mb) return cp.fwd_s + cp.bwd_s;
    return 0.0;
  };
  double slowest = 0, mean = 0;
  for (int r = 0; r < x.nranks; ++r) {
    slowest = std::max(slowest, calibrated(r));
    mean += calibrated(r) / x.nranks;
  }
  row.imbalance = slowest - mean;
  row.calibrated = mean;
  row.allreduce = 0;
  for (const GradBucket& b : gradient_buckets(step_scenario(x, mb, steps)))
    row.allreduce += ring_allreduce_time(fit, b.bytes, x.nranks);
}

// extra = fixed + per_compute x compute, least squares over the micro-batches, both terms >= 0; one
// micro-batch: proportional (as calibrate scales a single compute point).
SyncCalibration fit_sync(const std::vector<StepRow>& rows, int ranks) {
  SyncCalibration sc;
  sc.ranks = ranks;
  const double n = static_cast<double>(rows.size());
  double sc_ = 0, sx = 0, scc = 0, scx = 0;
  for (const StepRow& r : rows) {
    const double e = std::max(0.0, r.extra());
    sc_ += r.compute;
    sx += e;
    scc += r.compute * r.compute;
    scx += r.compute * e;
  }
  const double det = n * scc - sc_ * sc_;
  if (rows.size() >= 2 && det > 0) {
    sc.per_compute = (n * scx - sc_ * sx) / det;
    sc.fixed_s = (sx - sc.per_compute * sc_) / n;
  }
  if (rows.size() < 2 || det <= 0 || sc.fixed_s < 0) {  // through the origin
    sc.fixed_s = 0;
    sc.per_compute = scc > 0 ? scx / scc : 0;
  } else if (sc.per_compute < 0) {  // a constant
    sc.per_compute = 0;
    sc.fixed_s = sx / n;
  }
  sc.per_compute = std::clamp(sc.per_compute, 0.0, 1.0);
  sc.fixed_s = std::clamp(sc.fixed_s, 0.0, 0.999);
  return sc;
}

}  // namespace

StepRounds start_step(RunContext& x) {
  StepRounds r;
  if (x.nranks < 2 || !x.o.step_phase) return r;
  r.active = true;
  // The rest is a difference of noisy means whose steps have a long tail (a step's exposed sync: median 0.53
  // ms, mean 0.76 ms here): rounds, as the compute phase's, each of at least 10 timed steps.
  r.steps = std::max(10, x.o.iters / kStepRounds);
  x.say(fmt::format(
      "step: the trainer's own steps, {} rounds (interleaved with the compute phase's; up to {} more where "
      "they spread beyond {:.0f}%) of {} warm-up + {} timed at each micro-batch on all {} ranks\n",
      kStepRounds, kMaxRoundRepeats, 100 * kRoundSpreadLimit, x.o.warmup, r.steps, x.nranks));
  return r;
}

void step_round(RunContext& x, StepRounds& r) {
  for (int mb : x.mbs) {
    x.world.barrier("calibrate step barrier");
    r.by_mb[mb].push_back(measure_step(x, mb, r.steps));
  }
}

double step_spread(const StepRounds& r) {
  double worst = 0;
  for (const auto& [mb, rounds] : r.by_mb) {
    std::vector<double> t;
    for (const StepRow& o : rounds) t.push_back(o.compute + o.exposed);
    worst = std::max(worst, round_spread(t));
  }
  return worst;
}

StepPhase finish_step(RunContext& x, StepRounds& sr, const ComputePhase& compute, const RingFit& fit) {
  if (!sr.active) return {};
  auto& by_mb = sr.by_mb;
  for (auto& [mb, rounds] : by_mb)
    for (StepRow& o : rounds) settle_step(x, compute, fit, sr.steps, o);
  x.say(fmt::format(
      "step: {} rounds kept, the median round by its rest: forward + backward, the exposed gradient sync, "
      "the "
      "all-reduce of its buckets on the fitted edge, the slowest device type's lead in compute (simulated), "
      "and the rest: waiting for the slowest rank's jitter and the first collective's wake-up (ms, means "
      "over the ranks)\n{:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
      by_mb.at(x.mbs.front()).size(), "micro", "fwd+bwd", "exposed", "allreduce", "imbalance", "rest",
      "optimizer", "data"));
  std::vector<StepRow> rows;
  json jrows = json::array();
  StepPhase out;
  // Every round's rest at each micro-batch, in the order measured (before the rounds are sorted below): the
  // sync span's rounds (sync_span_of), and the details' record of them.
  std::vector<std::vector<double>> rests;
  json jrounds = json::array();
  for (size_t r = 0; r < by_mb.at(x.mbs.front()).size(); ++r) {
    rests.emplace_back();
    json jround = json::array();
    for (int mb : x.mbs) {
      const StepRow& o = by_mb.at(mb).at(r);
      rests.back().push_back(o.extra());
      jround.push_back({{"micro_batch", mb},
                        {"compute_s", o.compute},
                        {"exposed_s", o.exposed},
                        {"rest_s", o.extra()},
                        {"calibrated_s", o.calibrated}});
    }
    jrounds.push_back(jround);
  }
  out.rounds = static_cast<int>(by_mb.at(x.mbs.front()).size());
  for (const auto& [mb, rounds] : by_mb)
    for (const StepRow& o : rounds)
      if (o.calibrated > 0 && o.compute > 0) {
        out.trainer_low = std::min(out.trainer_low, o.compute / o.calibrated);
        out.trainer_high = std::max(out.trainer_high, o.compute / o.calibrated);
        out.trainer_rounds++;
      }
  for (int mb : x.mbs) {
    std::vector<StepRow>& rounds = by_mb[mb];
    std::sort(rounds.begin(), rounds.end(),
              [](const StepRow& a, const StepRow& b) { return a.extra() < b.extra(); });
    const StepRow r = rounds[(rounds.size() - 1) / 2];
    rows.push_back(r);
    x.say(fmt::format("{:>6} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f}\n", mb,
                      1e3 * r.compute, 1e3 * r.exposed, 1e3 * r.allreduce, 1e3 * r.imbalance, 1e3 * r.extra(),
                      1e3 * r.optimizer, 1e3 * r.data));
    jrows.push_back({{"micro_batch", mb},
                     {"compute_s", r.compute},
                     {"exposed_s", r.exposed},
                     {"allreduce_s", r.allreduce},
                     {"imbalance_s", r.imbalance},
                     {"rest_s", r.extra()},
                     {"optimizer_s", r.optimizer},
                     {"data_s", r.data}});
  }
  out.sync = fit_sync(rows, x.nranks);
  const SyncCalibration& sc = out.sync;
  std::vector<double> fitted;
  for (const StepRow& r : rows) fitted.push_back(sc.fixed_s + sc.per_compute * r.compute);
  const SyncSpanFigure span = sync_span_of(rests, fitted);
  if (!span.rounds.empty()) {
    out.span.low = span.low;
    out.span.high = span.high;
    out.span.why = fmt::format(
        "measured: vitsim calibrate's {} step rounds, each round's rest (the exposed sync beyond the fitted "
        "all-reduce and the compute difference) summed over its {} micro-batch(es) over the sync fit's "
        "summed there (x{:.2f}), lowest and highest; floored at x0.01, capped at x100",
        span.rounds.size(), x.mbs.size(), fmt::join(span.rounds, ", x"));
    x.say(
        fmt::format("sync span: each round's rest, summed over the micro-batches, at x{:.2f} of the sync "
                    "fit's: x{:.2f}..x{:.2f}\n",
                    fmt::join(span.rounds, ", x"), span.low, span.high));
  }
  if (out.trainer_rounds > 0)
    x.say(
        fmt::format("the trainer's forward + backward in these rounds: x{:.3f}..x{:.3f} of the calibrated "
                    "figures (the compute span takes them in)\n",
                    out.trainer_low, out.trainer_high));
  x.say(fmt::format(
      "sync fit: rest = {} + {:.2f}% of the step's forward + backward (least squares over the micro-batches, "
      "both >= 0): predict adds it at each gradient sync on {} ranks\n",
      units::format_time(sc.fixed_s), 100 * sc.per_compute, x.nranks));
  x.details["step"] = {
      {"rows", jrows},
      {"rounds", jrounds},
      {"sync_span_rounds", span.rounds},
      {"sync", {{"ranks", sc.ranks}, {"fixed_s", sc.fixed_s}, {"per_compute", sc.per_compute}}}};
  return out;
}

}  // namespace vitsim::calibrate
