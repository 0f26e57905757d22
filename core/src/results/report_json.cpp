// The report's JSON ("vitsim.report/2"): one mapping per struct (vitsim/core/base/json_reader.hpp) that
// report_to_json writes and report_from_json reads back, with the checks of a report fed back in
// (docs/reports.md).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/json_reader.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/identity.hpp"
#include "vitsim/core/model/epoch.hpp"
#include "vitsim/core/results/json_file.hpp"
#include "vitsim/core/results/report.hpp"

namespace vitsim {
using json = nlohmann::json;

namespace {
using detail::JsonField, detail::JsonIn, detail::JsonOut, detail::MappedAs, detail::non_negative,
    detail::within;

// The JSON mapping of each struct of a report (vitsim/core/base/json_reader.hpp): its writer and its reader.

// A step's statistics: finite, a step takes time, the median is not above the 95th percentile.
const auto kStatsFields = [](auto& io, auto& s) {
  io.number("mean", s.mean, non_negative("a step time"));
  io.number("p50", s.p50, non_negative("a step time"));
  io.number("p95", s.p95, non_negative("a step time"));
  io.check([&](const JsonField& f) {
    if (s.mean <= 0) f.at("mean").fail("a step takes time: the mean step time is 0");
    if (s.p50 > s.p95 * (1 + 1e-9))
      f.at("p50").fail(
          fmt::format("the median step ({:.6g} s) is above the 95th percentile ({:.6g} s)", s.p50, s.p95));
  });
};

constexpr std::pair<const char*, double Breakdown::*> kBreakdownMembers[] = {
    {"data", &Breakdown::data},
    {"h2d", &Breakdown::h2d},
    {"compute_fwd", &Breakdown::compute_fwd},
    {"compute_bwd", &Breakdown::compute_bwd},
    {"optimizer", &Breakdown::optimizer},
    {"comm_total", &Breakdown::comm_total},
    {"comm_exposed", &Breakdown::comm_exposed}};
const auto kBreakdownFields = [](auto& io, auto& b) {
  for (const auto& [key, member] : kBreakdownMembers) io.number(key, b.*member, non_negative("a time"));
  // Written where a straggler wait was modelled (issue 37); a report without it (the trainer's, older ones)
  // has none.
  if (io.present(b.straggler_wait > 0, {"straggler_wait"}))
    io.number("straggler_wait", b.straggler_wait, non_negative("a time"));
};

constexpr std::pair<const char*, double MemoryBreakdown::*> kMemoryMembers[] = {
    {"params", &MemoryBreakdown::params},       {"grads", &MemoryBreakdown::grads},
    {"optimizer", &MemoryBreakdown::optimizer}, {"activations", &MemoryBreakdown::activations},
    {"buffers", &MemoryBreakdown::buffers},     {"reserved", &MemoryBreakdown::reserved}};
const auto kMemoryFields = [](auto& io, auto& m) {
  for (const auto& [key, member] : kMemoryMembers) io.number(key, m.*member, non_negative("a memory figure"));
};

// Written since issue 15; mfu, hfu and tflops_per_gpu derive from these.
const auto kFlopsFields = [](auto& io, auto& p) {
  io.number("model", p.model_flops, non_negative("a FLOP count"));
  io.number("recompute", p.recompute_flops, non_negative("a FLOP count"));
};

// Written since issue 14 when the platform states GPU power.
const auto kEnergyFields = [](auto& io, auto& e) {
  io.number("gpus_busy_w", e.busy_w, non_negative("a power"));
  io.number("gpus_idle_w", e.idle_w, non_negative("a power"));
  io.number("busy_fraction", e.busy_fraction, within(0, 1, "a fraction of the epoch"));
  io.number("epoch_kwh", e.epoch_kwh, non_negative("an energy"));
  io.check([&](const JsonField& f) {
    if (!(e.busy_w > 0))
      f.at("gpus_busy_w").fail("the GPUs' busy power is 0: a report without power figures has no \"energy\"");
    if (e.idle_w > e.busy_w * (1 + 1e-12))
      f.at("gpus_idle_w").fail(fmt::format("{:.6g} W is above the busy power {:.6g} W", e.idle_w, e.busy_w));
  });
  if (io.present(e.price_per_kwh > 0, {"price_per_kwh", "epoch_cost"})) {
    io.number("price_per_kwh", e.price_per_kwh, non_negative("a price per kWh"));
    double cost = e.epoch_cost();
    io.number("epoch_cost", cost, non_negative("a cost"));
    io.check([&](const JsonField& f) {
      if (std::fabs(cost - e.epoch_cost()) > 1e-6 * std::max(cost, e.epoch_cost()) + 1e-12)
        f.at("epoch_cost")
            .fail(fmt::format("{:.6g} disagrees with epoch_kwh x price_per_kwh = {:.6g} x {:.6g}", cost,
                              e.epoch_kwh, e.price_per_kwh));
    });
  }
};

// Written since issue 28 by predict: the whole run (the scenario's epochs), each figure derived from the
// point's as ReportPoint's total_* say; check_point compares them with the point once it is read whole (so a
// point whose epoch time was edited is refused for its epoch, not for its totals).
const auto kTotalsFields = [](auto& io, auto& p) {
  io.integer("epochs", p.total_epochs, 1, 1LL << 31);
  double time_s = p.total_time_s(), gpu_hours = p.total_gpu_hours(), cost = p.total_cost(),
         kwh = p.total_kwh();
  io.number("time_s", time_s, non_negative("a time"));
  io.number("gpu_hours", gpu_hours, non_negative("GPU-hours"));
  if (io.present(p.price_per_gpu_hour > 0, {"price_per_gpu_hour", "cost"})) {
    io.number("price_per_gpu_hour", p.price_per_gpu_hour, non_negative("a price per GPU-hour"));
    io.number("cost", cost, non_negative("a cost"));
  }
  if (io.present(p.energy.known(), {"energy_kwh"})) io.number("energy_kwh", kwh, non_negative("an energy"));
};

// A point's totals (when it has them) against its own figures.
void check_totals(const JsonField& point, const ReportPoint& p) {
  if (!point.has("totals")) return;
  const JsonField f = point.at("totals");
  auto agree = [&](const char* key, double derived, const char* how) {
    if (!f.has(key)) return;
    const double stored = f.at(key).number();
    if (std::fabs(stored - derived) > 1e-6 * std::max(stored, derived) + 1e-12)
      f.at(key).fail(fmt::format("{:.6g} disagrees with {} = {:.6g}", stored, how, derived));
  };
  agree("time_s", p.total_time_s(), "epoch_time_s x epochs");
  agree("gpu_hours", p.total_gpu_hours(), "time_s x gpus / 3600");
  agree("cost", p.total_cost(), "gpu_hours x price_per_gpu_hour");
  agree("energy_kwh", p.total_kwh(), "energy.epoch_kwh x epochs");
}

// Written with `--interval` (issue 26 item 3): the quantiles within (0, 1), low below high, and the
// times' ends in order.
// The measured runs' spread (--runs): order statistics within the runs, in order, the ratios in order.
const auto kRunsFields = [](auto& io, auto& r) {
  io.integer("count", r.count, 1, 1 << 20);
  io.integer("k_low", r.k_low, 1, 1 << 20);
  io.integer("k_high", r.k_high, 1, 1 << 20);
  io.number("ratio_low", r.ratio_low, within(kMinTimeRatio, kMaxTimeRatio, "a ratio of times"));
  io.number("ratio_high", r.ratio_high, within(kMinTimeRatio, kMaxTimeRatio, "a ratio of times"));
  io.number("level", r.level, within(0, 1, "a level"));
  io.check([&](const JsonField& f) {
    if (r.k_low > r.k_high) f.at("k_low").fail("above k_high");
    if (r.k_high > r.count) f.at("k_high").fail("above count");
    if (r.ratio_low > r.ratio_high) f.at("ratio_low").fail("above ratio_high");
  });
};
// The public corpus' band (an uncalibrated point): rows and origins counted, the ratios in order.
const auto kCorpusFields = [](auto& io, auto& c) {
  io.integer("rows", c.rows, 1, 1 << 20);
  io.integer("origins", c.origins, 2, 1 << 20);
  io.number("ratio_low", c.ratio_low, within(kMinTimeRatio, kMaxTimeRatio, "a ratio of times"));
  io.number("ratio_high", c.ratio_high, within(kMinTimeRatio, kMaxTimeRatio, "a ratio of times"));
  io.number("held_out", c.held_out, within(0, 1, "a share of rows"));
  io.number("figures_epoch_low_s", c.figures_epoch_low_s, non_negative("an epoch time"));
  io.number("figures_epoch_high_s", c.figures_epoch_high_s, non_negative("an epoch time"));
  io.number("figures_step_low_s", c.figures_step_low_s, non_negative("a step time"));
  io.number("figures_step_high_s", c.figures_step_high_s, non_negative("a step time"));
  io.check([&](const JsonField& f) {
    if (c.ratio_low > c.ratio_high) f.at("ratio_low").fail("above ratio_high");
    if (c.figures_epoch_low_s > c.figures_epoch_high_s)
      f.at("figures_epoch_low_s").fail("above figures_epoch_high_s");
    if (c.figures_step_low_s > c.figures_step_high_s)
      f.at("figures_step_low_s").fail("above figures_step_high_s");
  });
};
const auto kIntervalFields = [](auto& io, auto& v) {
  io.integer("samples", v.samples, 1, 1 << 20);
  if (io.present(v.surrogate, {"surrogate"})) io.boolean("surrogate", v.surrogate);
  io.integer("seed", v.seed, 0, std::numeric_limits<long long>::max());
  io.number("p_low", v.p_low, within(0, 1, "a quantile"));
  io.number("p_high", v.p_high, within(0, 1, "a quantile"));
  io.integer("figures", v.figures, 0, 1 << 20);
  io.number("epoch_low_s", v.epoch_low_s, non_negative("an epoch time"));
  io.number("epoch_high_s", v.epoch_high_s, non_negative("an epoch time"));
  io.number("step_low_s", v.step_low_s, non_negative("a step time"));
  io.number("step_high_s", v.step_high_s, non_negative("a step time"));
  if (io.present(v.runs.count > 0, {"runs"})) io.object("runs", v.runs, kRunsFields);
  if (io.present(v.corpus.rows > 0, {"corpus"})) io.object("corpus", v.corpus, kCorpusFields);
  io.check([&](const JsonField& f) {
    if (!(v.p_low < v.p_high)) f.at("p_low").fail("the low quantile is not below the high one");
    if (v.epoch_low_s > v.epoch_high_s) f.at("epoch_low_s").fail("above epoch_high_s");
    if (v.step_low_s > v.step_high_s) f.at("step_low_s").fail("above step_high_s");
  });
};
const auto kSensitivityFields = [](auto& io, auto& s) {
  io.string("figure", s.figure);
  io.string("where", s.where);
  io.string("range", s.range);
  io.string("why", s.why);
  io.string("measure", s.measure);
  io.number("epoch_at_low_s", s.epoch_at_low_s, non_negative("an epoch time"));
  io.number("epoch_at_high_s", s.epoch_at_high_s, non_negative("an epoch time"));
};

const char* const kBounds[] = {"compute", "exposed_comm", "data", "h2d", "optimizer", "straggler_wait"};
constexpr long long kMaxCount = 1LL << 31;  // nodes, GPUs, micro-batch, accumulation: an int
constexpr long long kMaxLong = std::numeric_limits<long long>::max();

// One rank of a point of `gpus` ranks; `seen`: the ranks read so far.
template <class Io, MappedAs<RankReport> R>
void rank_fields(Io& io, R& rr, int gpus, std::vector<bool>& seen) {
  io.integer("rank", rr.rank, 0, gpus - 1);
  io.check([&](const JsonField& f) {
    if (static_cast<size_t>(rr.rank) >= seen.size()) return;
    if (seen[rr.rank]) f.at("rank").fail(fmt::format("rank {} appears twice", rr.rank));
    seen[rr.rank] = true;
  });
  io.string("host", rr.host);
  io.string("device", rr.device);
  io.object("step_time_s", rr.step_time_s, kStatsFields);
  io.object("breakdown_s", rr.breakdown_s, kBreakdownFields);
}

// A point's fields, each with its type and range; a schema-1 point has no scenario_id.
template <class Io, MappedAs<ReportPoint> P>
void point_fields(Io& io, P& p, int schema_version) {
  io.string_map("params", p.params);
  if (Io::writing || schema_version >= 2) {
    io.string("scenario_id", p.scenario_id);
    io.check([&](const JsonField& f) {
      if (!is_sha256_id(p.scenario_id))
        f.at("scenario_id")
            .fail("expected \"sha256:\" and 64 hex digits (the identity of the scenario point)");
    });
  }
  io.integer("nodes", p.nodes, 1, kMaxCount - 1);
  io.integer("gpus", p.gpus, 1, kMaxCount - 1);
  io.integer("micro_batch", p.micro_batch, 1, kMaxCount - 1);
  io.integer("grad_accum", p.grad_accum, 1, kMaxCount - 1);
  io.integer("global_batch", p.global_batch, 1, kMaxLong);
  io.integer("steps_per_epoch", p.steps_per_epoch, 1, kMaxLong);
  if (io.present(p.epoch_samples > 0, {"epoch_samples"}))
    io.integer("epoch_samples", p.epoch_samples, 1, kMaxLong);
  io.object("step_time_s", p.step_time_s, kStatsFields);
  io.object("breakdown_s", p.breakdown_s, kBreakdownFields);
  io.number("epoch_time_s", p.epoch_time_s, non_negative("the epoch time"));
  io.number("throughput_img_s", p.throughput_img_s, non_negative("the throughput"));
  if (io.non_null("scaling_efficiency", !(p.scaling_efficiency < 0)))  // null: no 1-GPU reference (-1)
    io.number("scaling_efficiency", p.scaling_efficiency, non_negative("the scaling efficiency"));
  io.number("memory_per_gpu_bytes", p.memory_per_gpu_bytes, non_negative("the memory per GPU"));
  io.object("memory_breakdown_bytes", p.memory, kMemoryFields);
  io.boolean("fits_in_memory", p.fits_in_memory);
  if (io.present(p.model_flops > 0, {"flops_per_gpu_step"})) {  // issue 15: MFU (absent from older reports)
    io.object("flops_per_gpu_step", p, kFlopsFields);
    io.number("peak_flops_per_gpu", p.peak_flops, non_negative("a peak FLOP/s"));
    io.put("tflops_per_gpu", p.tflops_per_gpu());
    io.put("mfu", p.mfu());
    io.put("hfu", p.hfu());
  }
  if (io.present(p.energy.known(), {"energy"}))  // issue 14: absent without GPU power figures
    io.object("energy", p.energy, kEnergyFields);
  if (io.present(p.total_epochs > 0, {"totals"}))  // issue 28: predict's whole run
    io.object("totals", p, kTotalsFields);
  if (io.present(p.interval.samples > 0, {"interval"}))  // issue 26: only with --interval
    io.object("interval", p.interval, kIntervalFields);
  if (io.present(!p.sensitivity.empty(), {"sensitivity"}))
    io.list("sensitivity", p.sensitivity, kSensitivityFields);
  io.string("bound", p.bound);
  io.boolean("extrapolated", p.extrapolated);
  io.integer("simulated_steps", p.simulated_steps, 0, kMaxCount - 1);
  io.numbers("test_accuracy", p.test_accuracy, within(0, 1, "an accuracy"));
  io.strings("notes", p.notes);
  std::vector<bool> seen(Io::writing ? 0 : static_cast<size_t>(std::min<long long>(p.gpus, 1 << 20)), false);
  io.list("per_rank", p.per_rank, [&](auto& rank_io, auto& rr) {
    rank_fields(rank_io, rr, p.gpus, seen);
    // The point's step is the slowest rank's (or the per-step maximum over ranks): never below a rank's.
    io.check([&](const JsonField& f) {
      if (rr.step_time_s.mean > p.step_time_s.mean * (1 + 1e-9))
        f.at("step_time_s")
            .at("mean")
            .fail(fmt::format("the point's mean step ({:.6g} s) is below rank {}'s ({:.6g} s)",
                              p.step_time_s.mean, rr.rank, rr.step_time_s.mean));
    });
  });
}

// Steps per epoch follow from the epoch's samples and the global batch by the trainer's rule (epoch.hpp).
void check_epoch_steps(const JsonField& f, const ReportPoint& p) {
  if (p.epoch_samples <= 0) return;
  const long long per_replica_batch = 1LL * p.micro_batch * p.grad_accum;
  if (p.global_batch % per_replica_batch != 0)
    f.at("global_batch")
        .fail(fmt::format("{} is not a whole number of replicas of micro_batch x grad_accum = {}",
                          p.global_batch, per_replica_batch));
  const long long replicas = p.global_batch / per_replica_batch;
  EpochShape e;
  try {
    e = epoch_shape(p.epoch_samples, static_cast<int>(replicas), p.micro_batch, p.grad_accum);
  } catch (const Error& err) {
    f.at("epoch_samples").fail(err.what());
  }
  if (e.steps != p.steps_per_epoch)
    f.at("steps_per_epoch")
        .fail(fmt::format("{} disagrees with the epoch's {} samples over {} replicas at micro-batch {} x "
                          "accumulation {}: {} steps",
                          p.steps_per_epoch, p.epoch_samples, replicas, p.micro_batch, p.grad_accum,
                          e.steps));
}

// The figures of a point read back must agree with each other.
void check_point(const JsonField& f, const ReportPoint& p, bool measured) {
  for (const auto& [key, value] :
       std::initializer_list<std::pair<const char*, long long>>{{"nodes", p.nodes},
                                                                {"gpus", p.gpus},
                                                                {"micro_batch", p.micro_batch},
                                                                {"grad_accum", p.grad_accum}}) {
    auto it = p.params.find(key);
    if (it != p.params.end() && it->second != std::to_string(value))
      f.at("params").at(key).fail(
          fmt::format("\"{}\" disagrees with the point's {} ({})", it->second, key, value));
  }
  if (p.gpus < p.nodes)
    f.at("gpus").fail(fmt::format("{} GPUs on {} nodes: fewer GPUs than nodes", p.gpus, p.nodes));
  const double replicas_batch = 1.0 * p.micro_batch * p.grad_accum * p.gpus;
  if (p.global_batch > replicas_batch)
    f.at("global_batch")
        .fail(fmt::format("{} is more than micro_batch x grad_accum x gpus = {:.0f}", p.global_batch,
                          replicas_batch));
  check_epoch_steps(f, p);
  // No GPU does more than its peak: (model + recompute FLOPs per GPU step) / (mean step x peak) <= 1.
  if (p.peak_flops > 0 && p.hfu() > 1 + 1e-9)
    f.at("peak_flops_per_gpu")
        .fail(fmt::format("{:.6g} FLOP per GPU step in a mean step of {:.6g} s is {:.4g} x the GPU's peak of "
                          "{:.6g} FLOP/s (MFU {:.4g}%): no GPU computes above its peak",
                          p.model_flops + p.recompute_flops, p.step_time_s.mean, p.hfu(), p.peak_flops,
                          100 * p.mfu()));
  const double step = p.step_time_s.mean;
  const double steps = static_cast<double>(p.steps_per_epoch);
  const double expected_epoch = step * steps;
  if (p.extrapolated) {
    if (std::fabs(p.epoch_time_s - expected_epoch) > kEpochTolerance * expected_epoch + kWarmupSteps * step)
      f.at("epoch_time_s")
          .fail(fmt::format("{:.6g} s disagrees with the mean step x steps_per_epoch = {:.6g} s x {} = "
                            "{:.6g} s (an extrapolated epoch "
                            "must be within {:.0f}% + {:.0f} steps of it)",
                            p.epoch_time_s, step, p.steps_per_epoch, expected_epoch, 100 * kEpochTolerance,
                            kWarmupSteps));
  } else {
    const double factor = measured ? kMeasuredEpochMaxFactor : kFullEpochMaxFactor;
    if (p.epoch_time_s < step * (1 - 1e-9) || p.epoch_time_s > factor * expected_epoch)
      f.at("epoch_time_s")
          .fail(fmt::format("{:.6g} s is outside [one mean step, {:.0f} x mean step x steps_per_epoch] = "
                            "[{:.6g} s, {:.6g} s] for an "
                            "epoch run in full",
                            p.epoch_time_s, factor, step, factor * expected_epoch));
  }
  {
    const double expected = p.global_batch / step;
    const double low =
        p.steps_per_epoch > 1 ? expected * (steps - 1) / steps * (1 - kThroughputTolerance) : 0;
    if (p.throughput_img_s > expected * (1 + kThroughputTolerance) || p.throughput_img_s < low ||
        p.throughput_img_s <= 0)
      f.at("throughput_img_s")
          .fail(fmt::format(
              "{:.6g} images/s disagrees with global_batch / mean step = {} / {:.6g} s = {:.6g} images/s",
              p.throughput_img_s, p.global_batch, step, expected));
  }
  if (p.energy.known()) {
    const double kwh = energy_kwh(p.energy, p.epoch_time_s);
    if (std::fabs(p.energy.epoch_kwh - kwh) > 1e-6 * std::max(p.energy.epoch_kwh, kwh) + 1e-15)
      f.at("energy")
          .at("epoch_kwh")
          .fail(fmt::format("{:.6g} kWh disagrees with epoch_time_s x (gpus_idle_w + busy_fraction x "
                            "(gpus_busy_w - gpus_idle_w)) = {:.6g} kWh",
                            p.energy.epoch_kwh, kwh));
  }
  if ((p.fits_in_memory || measured) && p.memory_per_gpu_bytes > kMaxMemoryPerGpuBytes)
    f.at("memory_per_gpu_bytes")
        .fail(fmt::format("{:.6g} bytes ({:.1f} TiB) per GPU is beyond any device (limit 16 TiB)",
                          p.memory_per_gpu_bytes, p.memory_per_gpu_bytes / std::pow(1024.0, 4)));
  {
    const double sum = p.memory.total();
    if (sum > 0 && std::fabs(sum - p.memory_per_gpu_bytes) > 1e-6 * sum + 1)
      f.at("memory_per_gpu_bytes")
          .fail(fmt::format("{:.6g} bytes disagrees with the sum of memory_breakdown_bytes ({:.6g})",
                            p.memory_per_gpu_bytes, sum));
  }
  if (std::find(std::begin(kBounds), std::end(kBounds), p.bound) == std::end(kBounds))
    f.at("bound").fail(
        fmt::format("unknown bound '{}'; valid: compute, exposed_comm, data, h2d, optimizer, straggler_wait",
                    p.bound.size() > 40 ? p.bound.substr(0, 40) + "..." : p.bound));
  if (p.bound != bound_of(p.breakdown_s))
    f.at("bound").fail(
        fmt::format("\"{}\", but the breakdown's largest term is {}", p.bound, bound_of(p.breakdown_s)));
  if (measured && p.simulated_steps != 0)
    f.at("simulated_steps").fail(fmt::format("{} simulated steps in a measured report", p.simulated_steps));
  if (measured && (p.interval.samples > 0 || !p.sensitivity.empty()))
    f.at(p.interval.samples > 0 ? "interval" : "sensitivity")
        .fail(
            "in a measured report: only vitsim predict --interval writes one (a prediction relabelled "
            "measured); give the report vitsim train wrote");
  check_totals(f, p);
}

// A measured report holding what only a simulation writes: a predicted report relabelled "measured" by hand
// (source, kind and simulated_steps edited) validated as a PASS against its own prediction (issue 39 item
// 29). vitsim train's provenance names the host, date, LibTorch, ranks and command; predict's and plan's
// name their generator (vitsim and SimGrid) and the platforms' digests; an interval or a sensitivity comes
// from predict --interval only. (Reports are not signed: a relabelling that also rewrites these is not
// caught.)
void refuse_simulation_marks(const JsonField& f, const Report& r) {
  for (const char* key : {"generator", "platform_sha256"})
    if (r.provenance.count(key))
      f.at("provenance")
          .at(key)
          .fail(fmt::format("\"{}\" in a measured report: vitsim predict wrote this report (a simulation's "
                            "provenance), and it was relabelled measured; give the report vitsim train wrote",
                            echo(r.provenance.at(key))));
}

ReportPoint read_point(const JsonField& f, bool measured, int schema_version) {
  ReportPoint p;
  JsonIn in(f);
  point_fields(in, p, schema_version);
  check_point(f, p, measured);
  return p;
}

// The head of a schema-2 report: its kind (agreeing with its source) and the vitsim that wrote it.
void read_report_head(const JsonField& top, Report& r) {
  const std::string kind = top.at("kind").string();
  if (kind != "predicted" && kind != "measured")
    top.at("kind").fail(fmt::format("\"{}\": a report is \"predicted\" or \"measured\"", kind.substr(0, 40)));
  if (kind != r.kind())
    top.at("kind").fail(fmt::format("\"{}\" contradicts \"source\": \"{}\"", kind, r.source));
  r.vitsim_version = top.at("vitsim_version").string();
}

// A report's fields above its points' (schema, kind and vitsim_version: json_file_head, read_report_head).
template <class Io, MappedAs<Report> R>
void report_fields(Io& io, R& r) {
  io.string("scenario", r.scenario);
  io.string("source", r.source);
  if constexpr (!Io::writing)
    io.check([&](const JsonField& f) {
      if (r.source != "simulated" && r.source != "measured")
        f.at("source").fail(
            fmt::format("\"{}\": expected \"simulated\" or \"measured\"", r.source.substr(0, 40)));
      if (r.schema_version >= 2) read_report_head(f, r);
    });
  if (io.present(true, {"provenance"})) io.string_map("provenance", r.provenance);
  if constexpr (!Io::writing)
    io.check([&](const JsonField& f) {
      if (r.source == "measured") refuse_simulation_marks(f, r);
    });
  io.list("points", r.points, [&](auto& point_io, auto& p) {
    point_fields(point_io, p, r.schema_version);
    point_io.check([&](const JsonField& f) { check_point(f, p, r.source == "measured"); });
  });
  if (io.present(!r.failed.empty(), {"failed_points"}))
    io.list("failed_points", r.failed, [](auto& fio, auto& fp) {
      fio.integer("point", fp.point, 1, kMaxCount - 1);
      fio.string_map("params", fp.params);
      fio.string("reason", fp.reason);
    });
  if (Io::writing || r.schema_version >= 2) {
    std::string id = Io::writing ? report_scenario_id(r) : std::string();
    io.string("scenario_id", id);
    io.check([&](const JsonField& f) {
      if (id != report_scenario_id(r))
        f.at("scenario_id").fail("does not match the points' scenario_id values (the report was edited)");
    });
  }
}
}  // namespace

std::string report_scenario_id(const Report& r) {
  std::string ids;
  for (const auto& p : r.points) ids += p.scenario_id + "\n";
  return "sha256:" + sha256_hex(ids);
}

json json_file_head(const std::string& schema, const std::string& kind) {
  return {{"schema", schema}, {"kind", kind}, {"vitsim_version", vitsim_version()}};
}

std::string report_to_json(const Report& r) {
  return json_file_text("vitsim.report/2", r.kind(), r, [](auto& io, auto& v) { report_fields(io, v); });
}

json report_to_json_value(const Report& r) {
  return json_file_value("vitsim.report/2", r.kind(), r, [](auto& io, auto& v) { report_fields(io, v); });
}

json report_point_to_json(const ReportPoint& p) {
  return JsonOut::write(p, [](auto& io, auto& q) { point_fields(io, q, 2); });
}

ReportPoint report_point_from_json(const json& j, const std::string& origin, const std::string& pointer,
                                   bool measured, int schema_version) {
  return read_point(JsonField(j, origin, pointer), measured, schema_version);
}

Report report_from_json(const std::string& text, const std::string& origin) {
  return report_from_json_value(detail::parse_json(text, origin), origin);
}

Report report_from_json_value(const json& j, const std::string& origin) {
  const JsonField top(j, origin, "");
  const std::string schema =
      top.has("schema") && j["schema"].is_string() ? j["schema"].get<std::string>() : "";
  Report r;
  r.origin = origin;
  if (schema == "vitsim.report/1") {
    r.schema_version = 1;
  } else if (schema != "vitsim.report/2") {
    const std::string what = detail::what_schema(j);
    if (!what.empty() && schema.rfind("vitsim.report/", 0) != 0)
      throw Error(fmt::format("{}: this is {}, not a report (vitsim predict or vitsim train)", origin, what));
    throw Error(fmt::format(
        "{}: not a vitsim report (expected \"schema\": \"vitsim.report/2\" or \"vitsim.report/1\")", origin));
  }
  JsonIn in(top);
  report_fields(in, r);
  // A stored scaling efficiency must be the one its 1-GPU reference gives.
  Report recomputed = r;
  fill_scaling_efficiency(recomputed);
  const JsonField points = top.at("points");
  for (size_t i = 0; i < r.points.size(); ++i) {
    const double stored = r.points[i].scaling_efficiency, again = recomputed.points[i].scaling_efficiency;
    if (stored >= 0 && (again < 0 || std::fabs(stored - again) > 1e-6 * std::max(1.0, again)))
      points[i]
          .at("scaling_efficiency")
          .fail(again < 0
                    ? fmt::format(
                          "{:.6g}, but the report has no 1-GPU point with the same settings to compare with",
                          stored)
                    : fmt::format("{:.6g} disagrees with throughput / (gpus x the 1-GPU throughput) = {:.6g}",
                                  stored, again));
  }
  return r;
}

void require_report_kind(const Report& r, const std::string& kind, const std::string& purpose) {
  if (r.schema_version < 2)
    throw Error(
        fmt::format("{}: a vitsim.report/1 file (written before reports carried their kind and scenario "
                    "identity): {} needs a report from this vitsim ({}); run it again",
                    r.origin, purpose, vitsim_version()));
  if (r.kind() == kind) return;
  if (r.kind() == "predicted")
    throw Error(fmt::format(
        "{}: /kind: this report is predicted (simulated by vitsim predict), not measured: {} needs "
        "a report written by `vitsim train`",
        r.origin, purpose));
  throw Error(
      fmt::format("{}: /kind: this report is {}, but {} needs a {} one", r.origin, r.kind(), purpose, kind));
}

}  // namespace vitsim
