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

ComputePhase compute_phase(RunContext& x) {
  // Rounds over all micro-batches, each with its share of the timed iterations: on a shared machine a slow
  // spell lasts seconds (here the 384 point of one calibration ran 18% slow while the others did not), and
  // a figure measured in one go takes it whole.
  const Repeats per_round{x.o.warmup, std::max(3, (x.o.iters + kComputeRounds - 1) / kComputeRounds)};
  x.say(
      fmt::format("compute: {} rounds over the micro-batches, each {} warm-up + {} timed iterations per "
                  "micro-batch on all "
                  "ranks at once, the median round kept; per rank the mean (kept), the median, the spread "
                  "(p75-p25)/median and [min, max] (seconds)\n",
                  kComputeRounds, per_round.warmup, per_round.iters));
  ComputePhase phase;
  for (const auto& type : x.type_order) phase.by_type[type] = fresh_device(x, type);
  phase.rank_rates.assign(x.nranks, 0);
  x.details["compute"] = json::array();
  x.say(fmt::format("{:>6} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}\n", "micro", "rank",
                    "fwd_mean", "fwd_med", "bwd_mean", "bwd_med", "opt_mean", "iqr/med", "GFLOP/s"));
  std::map<int, std::vector<ComputeSample>> by_mb;
  for (int round = 0; round < kComputeRounds; ++round)
    for (int mb : x.mbs) {
      x.world.barrier("calibrate compute barrier");
      by_mb[mb].push_back(measure_compute(x.s, x.dev, mb, per_round, x.nranks));
    }
  for (int mb : x.mbs) {
    const ComputeSample cs = median_round(by_mb[mb]);
    // Per rank: the mean (stored), the median and spread (shown); layers' means split the whole.
    const std::vector<RankCompute> ranks =
        allgather_record(x.world, rank_compute(cs, by_mb[mb]), "calibrate compute gather");
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
      for (int r : x.members(type)) {
        d.compute_span.low = std::min(d.compute_span.low, ranks[r].round_low);
        d.compute_span.high = std::max(d.compute_span.high, ranks[r].round_high);
      }
    }
  }
  if (kComputeRounds > 1)
    for (auto& [type, d] : phase.by_type) {
      d.compute_span.why = fmt::format(
          "measured: vitsim calibrate's {} compute rounds, each round's forward + backward mean over the "
          "kept "
          "(median) round's, lowest and highest over the {} rank(s) and micro-batches {}",
          kComputeRounds, x.members(type).size(), fmt::join(x.mbs, ","));
      x.say(fmt::format("compute span ({}): the rounds' fwd+bwd at x{:.3f}..x{:.3f} of the kept round's\n",
                        type, d.compute_span.low, d.compute_span.high));
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
