// Compute phase of `vitsim calibrate`: forward, backward and optimizer step of the whole model, and layer
// by layer, at every calibration micro-batch, on all ranks at once; a device type's figure is the median
// over its ranks.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/phases.hpp"
#include "vitsim/real/gather.hpp"

namespace vitsim::calibrate {

using real::allgather_record;  // vitsim/real/gather.hpp: per-rank records cross as named structs
using real::allgather_records;

namespace {

// One rank's whole-model figures at one micro-batch, as every rank receives them.
struct RankCompute {
  double fwd_mean = 0, bwd_mean = 0, optimizer_mean = 0;
  double fwd_rel_iqr = 0, bwd_rel_iqr = 0;
  double fwd_min = 0, fwd_max = 0, bwd_min = 0, bwd_max = 0;
  double fwd_median = 0, bwd_median = 0;
  double round_low = 1, round_high = 1;  // the rounds' fwd + bwd means over the kept round's
  double step_cv = 0;                    // step_cv_of the rounds' forward + backward per timed step
};
struct LayerMeans {
  double fwd = 0, bwd = 0;
};

DeviceCalibration fresh_device(const RunContext& x, const std::string& type) {
  DeviceCalibration dc;
  dc.device_type = type;
  dc.model = x.s.model;
  dc.precision = x.s.training.precision;
  dc.peak_flops = x.o.peak_flops;
  dc.mem_bw = x.o.mem_bw;
  return dc;
}

RankCompute rank_compute(const ComputeSample& cs, const std::vector<ComputeSample>& rounds) {
  RankCompute rc;
  const double kept = cs.fwd.mean + cs.bwd.mean;
  for (const ComputeSample& r : rounds) {
    rc.round_low = std::min(rc.round_low, (r.fwd.mean + r.bwd.mean) / kept);
    rc.round_high = std::max(rc.round_high, (r.fwd.mean + r.bwd.mean) / kept);
  }
  std::vector<std::vector<double>> steps;
  for (const ComputeSample& r : rounds) steps.push_back(r.step_s);
  rc.step_cv = step_cv_of(steps);
  rc.fwd_mean = cs.fwd.mean;
  rc.bwd_mean = cs.bwd.mean;
  rc.optimizer_mean = cs.optimizer.mean;
  rc.fwd_rel_iqr = cs.fwd.rel_iqr();
  rc.bwd_rel_iqr = cs.bwd.rel_iqr();
  rc.fwd_min = cs.fwd.min;
  rc.fwd_max = cs.fwd.max;
  rc.bwd_min = cs.bwd.min;
  rc.bwd_max = cs.bwd.max;
  rc.fwd_median = cs.fwd.median;
  rc.bwd_median = cs.bwd.median;
  return rc;
}

// The table row and the details entry of every rank at one micro-batch; the rates and the spread.
json report_compute_ranks(RunContext& x, ComputePhase& phase, int mb, const std::vector<RankCompute>& ranks) {
  json jranks = json::array();
  for (int r = 0; r < x.nranks; ++r) {
    const RankCompute& v = ranks[r];
    const double rate = mb * (x.workload.fwd_flops_per_sample() + x.workload.bwd_flops_per_sample()) /
                        (v.fwd_mean + v.bwd_mean);
    if (mb == x.mbs.back()) phase.rank_rates[r] = rate;
    phase.worst_rel_iqr = std::max({phase.worst_rel_iqr, v.fwd_rel_iqr, v.bwd_rel_iqr});
    x.say(fmt::format(
        "{:>6} {:>6} {:>10.6f} {:>10.6f} {:>10.6f} {:>10.6f} {:>10.6f} {:>8} {:>8.2f}   fwd [{:.6f}, {:.6f}] "
        "bwd [{:.6f}, {:.6f}]\n",
        mb, r, v.fwd_mean, v.fwd_median, v.bwd_mean, v.bwd_median, v.optimizer_mean,
        pct(std::max(v.fwd_rel_iqr, v.bwd_rel_iqr)), rate / 1e9, v.fwd_min, v.fwd_max, v.bwd_min, v.bwd_max));
    jranks.push_back({{"rank", r},
                      {"device_type", x.devices[r]},
                      {"fwd_s_mean", v.fwd_mean},
                      {"bwd_s_mean", v.bwd_mean},
                      {"optimizer_s_mean", v.optimizer_mean},
                      {"fwd_rel_iqr", v.fwd_rel_iqr},
                      {"bwd_rel_iqr", v.bwd_rel_iqr},
                      {"fwd_min", v.fwd_min},
                      {"fwd_max", v.fwd_max},
                      {"bwd_min", v.bwd_min},
                      {"bwd_max", v.bwd_max},
                      {"fwd_s_median", v.fwd_median},
                      {"bwd_s_median", v.bwd_median}});
  }
  return jranks;
}

// A device type's point at one micro-batch: the median over its ranks of each rank's mean.
ComputePoint pool_compute_point(const RunContext& x, const std::string& type, int mb, const ComputeSample& cs,
                                const std::vector<RankCompute>& ranks,
                                const std::vector<std::vector<LayerMeans>>& layers, double& worst_rank_gap) {
  const std::vector<int> members = x.members(type);
  auto med = [&](auto figure) {
    std::vector<double> v;
    for (int r : members) v.push_back(figure(r));
    return median_of(v);
  };
  ComputePoint cp;
  cp.micro_batch = mb;
  cp.fwd_s = med([&](int r) { return ranks[r].fwd_mean; });
  cp.bwd_s = med([&](int r) { return ranks[r].bwd_mean; });
  cp.optimizer_s = med([&](int r) { return ranks[r].optimizer_mean; });
  for (size_t l = 0; l < cs.layers.size(); ++l)
    cp.layers.push_back({cs.layers[l].name, med([&](int r) { return layers[r][l].fwd; }),
                         med([&](int r) { return layers[r][l].bwd; })});
  double lo = INFINITY, hi = 0;
  for (int r : members) {
    const double t = ranks[r].fwd_mean + ranks[r].bwd_mean;
    lo = std::min(lo, t);
    hi = std::max(hi, t);
  }
  worst_rank_gap = std::max(worst_rank_gap, hi / lo - 1);
  return cp;
}

// Each rank measures its own device while the others measure theirs (as in training: the ranks share
// the node's memory bandwidth and, on CPU, its cores); a device's figure is the median over its ranks.

// Of one micro-batch's rounds, the one whose forward + backward mean is the median (the first of the two
// middle ones for an even count): a slow spell of the machine spoils a round, not the figure.
ComputeSample median_round(std::vector<ComputeSample> rounds) {
  std::sort(rounds.begin(), rounds.end(), [](const ComputeSample& a, const ComputeSample& b) {
    return a.fwd.mean + a.bwd.mean < b.fwd.mean + b.bwd.mean;
  });
  return rounds[(rounds.size() - 1) / 2];
}

}  // namespace

ComputeRounds start_compute(RunContext& x) {
  // Rounds over all micro-batches, each with its share of the timed iterations: on a shared machine a slow
  // spell lasts seconds (here the 384 point of one calibration ran 18% slow while the others did not), and
  // a figure measured in one go takes it whole.
  ComputeRounds r;
  r.per_round = {x.o.warmup, std::max(3, (x.o.iters + kComputeRounds - 1) / kComputeRounds)};
  x.say(fmt::format(
      "compute: {} rounds over the micro-batches (interleaved with the step phase's; up to {} more "
      "where they spread beyond {:.0f}%), each {} warm-up + {} timed iterations per micro-batch on "
      "all ranks at once, the median round kept\n",
      kComputeRounds, kMaxRoundRepeats, 100 * kRoundSpreadLimit, r.per_round.warmup, r.per_round.iters));
  return r;
}

void compute_round(RunContext& x, ComputeRounds& r) {
  for (int mb : x.mbs) {
    x.world.barrier("calibrate compute barrier");
    r.by_mb[mb].push_back(measure_compute(x.s, x.dev, mb, r.per_round, x.nranks));
  }
}

double compute_spread(RunContext& x, const ComputeRounds& r) {
  double mine = 0;
  for (const auto& [mb, rounds] : r.by_mb) {
    std::vector<double> t;
    for (const ComputeSample& c : rounds) t.push_back(c.fwd.mean + c.bwd.mean);
    mine = std::max(mine, round_spread(t));
  }
  const std::vector<double> all = x.world.allgather({mine}, "calibrate compute spread");
  return *std::max_element(all.begin(), all.end());
}

ComputePhase finish_compute(RunContext& x, const ComputeRounds& r) {
  ComputePhase phase;
  for (const auto& type : x.type_order) phase.by_type[type] = fresh_device(x, type);
  phase.rank_rates.assign(x.nranks, 0);
  phase.rounds = static_cast<int>(r.by_mb.at(x.mbs.front()).size());
  x.details["compute"] = json::array();
  x.say(fmt::format(
      "compute: {} rounds kept; per rank the mean (kept), the median, the spread (p75-p25)/median and [min, "
      "max] (seconds)\n{:>6} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}\n",
      phase.rounds, "micro", "rank", "fwd_mean", "fwd_med", "bwd_mean", "bwd_med", "opt_mean", "iqr/med",
      "GFLOP/s"));
  std::map<std::string, std::vector<double>> step_cvs;  // per device type, over its ranks and micro-batches
  for (int mb : x.mbs) {
    const std::vector<ComputeSample>& rounds = r.by_mb.at(mb);
    const ComputeSample cs = median_round(rounds);
    // Per rank: the mean (stored), the median and spread (shown); layers' means split the whole.
    const std::vector<RankCompute> ranks =
        allgather_record(x.world, rank_compute(cs, rounds), "calibrate compute gather");
    std::vector<LayerMeans> my_layers;
    for (const auto& l : cs.layers) my_layers.push_back({l.fwd.mean, l.bwd.mean});
    const auto layers = allgather_records(x.world, my_layers, "calibrate layer gather");
    json jmb = {{"micro_batch", mb}, {"ranks", report_compute_ranks(x, phase, mb, ranks)}};
    if (x.root) {
      json jl = json::array();
      for (const auto& l : cs.layers)
        jl.push_back({{"name", l.name}, {"fwd", spread_json(l.fwd)}, {"bwd", spread_json(l.bwd)}});
      jmb["rank0"] = {{"fwd", spread_json(cs.fwd)},
                      {"bwd", spread_json(cs.bwd)},
                      {"optimizer", spread_json(cs.optimizer)},
                      {"layers", jl}};
    }
    x.details["compute"].push_back(jmb);
    for (const auto& type : x.type_order) {
      DeviceCalibration& d = phase.by_type[type];
      d.points.push_back(pool_compute_point(x, type, mb, cs, ranks, layers, phase.worst_rank_gap));
      for (int rank : x.members(type)) {
        d.compute_span.low = std::min(d.compute_span.low, ranks[rank].round_low);
        d.compute_span.high = std::max(d.compute_span.high, ranks[rank].round_high);
        step_cvs[type].push_back(ranks[rank].step_cv);
      }
    }
  }
  for (auto& [type, d] : phase.by_type) {
    if (phase.rounds > 1) {
      d.compute_span.why = fmt::format(
          "measured: vitsim calibrate's {} compute rounds, each round's forward + backward mean over the "
          "kept (median) round's, lowest and highest over the {} rank(s) and micro-batches {}",
          phase.rounds, x.members(type).size(), fmt::join(x.mbs, ","));
      x.say(fmt::format("compute span ({}): the rounds' fwd+bwd at x{:.3f}..x{:.3f} of the kept round's\n",
                        type, d.compute_span.low, d.compute_span.high));
    }
    // The step-to-step variability (the platform's gpu_step_cv, docs/model.md "Stragglers"): a value the
    // file's reader takes, [0, 1).
    // With its spread (issue 37 item 2): the least and most of the ranks' and micro-batches' cvs, which
    // predict --interval samples; where they agree (one rank at one micro-batch) the file states none.
    const StepCvFigure figure = step_cv_figure(step_cvs[type]);
    const double cv = figure.value;
    {
      d.step_cv.value = cv;
      d.step_cv.low = figure.low;
      d.step_cv.high = figure.high;
      d.step_cv.why = fmt::format(
          "measured: vitsim calibrate's {} compute rounds of {} timed steps at micro-batches {}: per round "
          "the standard deviation of a step's forward + backward over its mean, the root mean square over "
          "the rounds, the median over the {} rank(s) and micro-batches (low, high: the least and most of "
          "them)",
          phase.rounds, r.per_round.iters, fmt::join(x.mbs, ","), x.members(type).size());
      x.say(
          fmt::format("step cv ({}): a step's forward + backward varies {:.2f}% from step to step "
                      "({:.2f}..{:.2f}% over the ranks and micro-batches; the straggler figure, "
                      "gpu_step_cv)\n",
                      type, 100 * cv, 100 * d.step_cv.low, 100 * d.step_cv.high));
    }
  }
  // The peak the emitted platform states: the best GEMM rate, on all ranks at once.
  x.world.barrier("calibrate gemm barrier");
  const double peak = measure_gemm_rate(x.dev, x.s.training.precision, x.repeats());
  phase.rank_peaks = x.world.allgather({peak}, "calibrate gemm gather");
  x.say(
      fmt::format("peak: a 1024^3 GEMM's best rate on each rank at once: {:.1f} GFLOP/s (median over the "
                  "ranks; the emitted platform's gpu_flops)\n",
                  median_of(phase.rank_peaks) / 1e9));
  return phase;
}

}  // namespace vitsim::calibrate
