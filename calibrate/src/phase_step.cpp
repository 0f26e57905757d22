// Step phase of `vitsim calibrate`: the trainer's own data-parallel steps (real::train_point_on) at every
// calibration micro-batch on all ranks at once, and what a step costs at its gradient sync beyond the
// all-reduce the fitted links give: the wait for the slowest rank and the first collective's wake-up after
// the compute (calibration.hpp SyncCalibration). Measured, not modelled: on this machine the trainer's
// exposed all-reduce of a 543 KiB gradient took 0.6-0.9 ms where the all-reduce alone, after a barrier, takes
// 0.15 ms (docs/benchmarks.md "Validation on this machine").
#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "phases.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/real/train.hpp"

namespace vitsim::calibrate {

namespace {

// One micro-batch's step, as the trainer measured it on every rank (the means over its timed steps).
struct StepRow {
  int micro_batch = 0;
  double compute = 0;    // forward + backward, mean over the ranks
  double exposed = 0;    // exposed gradient sync, mean over the ranks
  double allreduce = 0;  // the step's bucket all-reduces on the fitted ring edge, back to back
  double imbalance = 0;  // slowest rank's compute - the mean (a deterministic difference, simulated)
  double optimizer = 0, data = 0;
  double extra() const { return exposed - allreduce - imbalance; }
};

StepRow measure_step(RunContext& x, const RingFit& fit, int mb) {
  Scenario s = x.s;
  s.training.micro_batch = mb;
  s.training.grad_accum = 1;
  s.training.epochs = 1;
  s.simulation.warmup = x.o.warmup;
  s.run.max_steps = x.o.warmup + x.o.iters;
  s.run.checkpoint_dir.clear();
  s.run.checkpoint_every = 0;
  s.run.check_every = 0;
  s.run.eval_samples = 64;  // the epoch's evaluation: not what is measured, kept short
  real::TrainOptions opt;
  opt.verbose = false;
  const ReportPoint p = real::train_point_on(x.world, s, opt);
  StepRow row;
  row.micro_batch = mb;
  double slowest = 0;
  for (const RankReport& r : p.per_rank) {
    const double c = r.breakdown_s.compute_fwd + r.breakdown_s.compute_bwd;
    slowest = std::max(slowest, c);
    row.compute += c / p.per_rank.size();
    row.exposed += r.breakdown_s.comm_exposed / p.per_rank.size();
    row.optimizer += r.breakdown_s.optimizer / p.per_rank.size();
    row.data += r.breakdown_s.data / p.per_rank.size();
  }
  row.imbalance = slowest - row.compute;
  for (const GradBucket& b : gradient_buckets(s))
    row.allreduce += ring_allreduce_time(fit, b.bytes, x.nranks);
  return row;
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

SyncCalibration step_phase(RunContext& x, const RingFit& fit) {
  if (x.nranks < 2 || !x.o.step_phase) return {};
  x.say(fmt::format(
      "step: the trainer's own steps ({} warm-up + {} timed) at each micro-batch on all {} ranks: forward + "
      "backward, the exposed gradient sync, the all-reduce of its buckets on the fitted edge, the slowest "
      "rank's lead in compute (simulated), and the rest: waiting for the slowest rank's jitter and the first "
      "collective's wake-up (ms, means over the ranks)\n{:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} "
      "{:>10}\n",
      x.o.warmup, x.o.iters, x.nranks, "micro", "fwd+bwd", "exposed", "allreduce", "imbalance", "rest",
      "optimizer", "data"));
  std::vector<StepRow> rows;
  json jrows = json::array();
  for (int mb : x.mbs) {
    x.world.barrier("calibrate step barrier");
    const StepRow r = measure_step(x, fit, mb);
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
  const SyncCalibration sc = fit_sync(rows, x.nranks);
  x.say(fmt::format(
      "sync fit: rest = {} + {:.2f}% of the step's forward + backward (least squares over the micro-batches, "
      "both >= 0): predict adds it at each gradient sync on {} ranks\n",
      units::format_time(sc.fixed_s), 100 * sc.per_compute, x.nranks));
  x.details["step"] = {
      {"rows", jrows},
      {"sync", {{"ranks", sc.ranks}, {"fixed_s", sc.fixed_s}, {"per_compute", sc.per_compute}}}};
  return sc;
}

}  // namespace vitsim::calibrate
