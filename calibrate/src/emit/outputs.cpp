// The files of one `vitsim calibrate` run: the calibration (this run's entries merged into it, with their
// provenance), the details file and the platform file for the machines measured.
#include <algorithm>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "harness/phases.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/system.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/identity.hpp"

namespace vitsim::calibrate {

namespace {

// The hosts of the job, sorted, each once, space-separated.
std::string host_list(const std::vector<std::string>& hosts) {
  const std::set<std::string> host_set(hosts.begin(), hosts.end());
  std::string out;
  for (const auto& h : host_set) out += (out.empty() ? "" : " ") + h;
  return out;
}

std::map<std::string, std::string> provenance(const RunContext& x, const Measured& m,
                                              const std::string& hosts, const std::string& date) {
  const Options& o = x.o;
  std::map<std::string, std::string> p;
  p["host"] = hosts;
  p["date"] = date;
  p["command"] = o.command;
  p["versions"] = fmt::format("vitsim {}; libtorch {}; {}", vitsim_version(), x.env.torch, x.env.mpi);
  p["cpu"] = x.env.cpu;
  p["ranks"] = fmt::format("{} ({} per host, {} intra-op thread(s) each, device {})", x.nranks,
                           x.world.local_size(), x.dev.threads, x.dev.device);
  p["method"] = fmt::format(
      "compute: {} rounds over the micro-batches of {} warm-up + {} timed iterations each on every rank at "
      "once (taking turns with the step phase's rounds), the median round's mean per rank, then the median "
      "over the ranks of a device; layers timed one by one with detached inputs (their shares split the "
      "whole-model "
      "times); all-reduce: {} warm-up + {} timed per size after a barrier, the slowest rank's time, median; "
      "loader: one "
      "worker, 3 timed passes after one warm-up pass{}{}",
      m.compute.rounds, o.warmup, std::max(3, (o.iters + kComputeRounds - 1) / kComputeRounds),
      kAllreduceWarmup, std::max(kAllreduceMinIters, o.iters),
      o.op_model
          ? "; op model: every op of the model's layers and a GEMM/bmm/copy sweep timed alone with LibTorch "
            "kernels (mean of the timed runs, median over a device's ranks), efficiencies per op class, host "
            "time per op, GEMM tile and k_half fitted on ln(predicted / measured)"
          : "",
      m.step.sync.ranks > 0
          ? fmt::format("; step: the trainer's own steps, {} rounds of {} warm-up + {} timed at each "
                        "micro-batch on all {} ranks, the median round's exposed gradient sync beyond the "
                        "fitted all-reduce and the ranks' compute difference, fitted as fixed + a share of "
                        "the forward + backward",
                        m.step.rounds, o.warmup, std::max(10, o.iters / kStepRounds), m.step.sync.ranks)
          : std::string());
  p["noise"] = fmt::format(
      "compute (p75-p25)/median up to {} over iterations; ranks of one device differ by up to {} (fwd+bwd)",
      pct(m.compute.worst_rel_iqr), pct(m.compute.worst_rank_gap));
  if (m.alone_ratio != 1)
    p["occupancy"] = fmt::format(
        "fwd+bwd at micro-batch {} is x{:.2f} the time of rank 0 alone when all {} ranks of the host "
        "compute: the "
        "compute figures hold for {} busy ranks per host",
        x.mbs.back(), m.alone_ratio, x.world.local_size(), x.world.local_size());
  if (m.h2d.on_cpu) p["h2d"] = "CPU device: memcpy into a freshly allocated tensor; pinned = pageable";
  return p;
}

// `fresh` into `entries`, replacing the entries it measures again.
template <class Entry, class Same>
void replace_entry(std::vector<Entry>& entries, const Entry& fresh, Same same) {
  entries.erase(
      std::remove_if(entries.begin(), entries.end(), [&](const Entry& e) { return same(e, fresh); }),
      entries.end());
  entries.push_back(fresh);
}

// The compute span as the run measured it (calibration.hpp MeasuredSpan). With the step phase, what a
// training run's forward + backward is against the calibrated figure: the trainer's own rounds over it (the
// compute rounds' spread of calibrate itself, a slow spell in one round, does not reach the kept median
// round); without it, the compute rounds.
void settle_compute_span(MeasuredSpan& span, const Measured& m) {
  if (span.empty()) return;
  if (m.step.trainer_rounds > 0) {
    span.low = std::min(1.0, m.step.trainer_low);
    span.high = std::max(1.0, m.step.trainer_high);
    span.why = fmt::format(
        "measured: vitsim calibrate's step phase, the trainer's own forward + backward in its {} rounds over "
        "the calibrated figure at the same micro-batch (x{:.3f}..x{:.3f})",
        m.step.trainer_rounds, m.step.trainer_low, m.step.trainer_high);
  }
}

// This run's entries merged into `c` (empty, or the file appended to).
void merge_measured(Calibration& c, const RunContext& x, const Measured& m) {
  for (const auto& type : x.type_order) {
    DeviceCalibration d = m.compute.by_type.at(type);
    d.sync = m.step.sync;  // the step phase's, measured with every rank of the run
    d.sync_span = m.step.span;
    d.rounds = m.rounds;  // the run's: the worst over every rank
    settle_compute_span(d.compute_span, m);
    // The occupancy phase timed rank 0's device alone: its type's figure.
    if (m.alone_ratio != 1 && type == x.devices[0]) {
      d.occupancy_busy_ranks = x.world.local_size();
      d.occupancy_alone_factor = 1 / m.alone_ratio;
    }
    auto same = [](const DeviceCalibration& e, const DeviceCalibration& d) {
      return e.device_type == d.device_type && e.precision == d.precision && same_shape(e.model, d.model);
    };
    // Measured again (--append): the earlier figures against these widen the compute span.
    for (const DeviceCalibration& e : c.devices)
      if (same(e, d)) widen_by_earlier(d, e);
    replace_entry(c.devices, d, same);
  }
  for (const auto& l : m.allreduce.links)
    replace_entry(c.links, l, [](const LinkCalibration& e, const LinkCalibration& f) {
      return e.link_class == f.link_class && e.ranks == f.ranks;
    });
  replace_entry(c.loaders, m.loader, [](const LoaderCalibration& e, const LoaderCalibration& f) {
    return e.dataset == f.dataset && e.resize == f.resize;
  });
  for (const auto& om : m.op_models)
    replace_entry(c.op_models, om, [](const OpModelCalibration& e, const OpModelCalibration& f) {
      return e.figures.device_type == f.figures.device_type && e.precision == f.precision;
    });
  c.h2d_pinned_bw = m.h2d.median.pinned;
  c.h2d_pageable_bw = m.h2d.median.pageable;
}

// ---- the platform file for the machines measured ----

PlatformText calibrated_platform_text(const RunContext& x, const Measured& m,
                                      const std::vector<std::string>& hosts) {
  PlatformText pt;
  pt.name = "calibrated";
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const double loader_overhead = 1.0 / m.loader.images_per_s_per_worker;
  const RingFit& fit = m.allreduce.fit;
  // The peak (the best GEMM rate) and the training rate over it: MFU is against the peak, and the
  // roofline fallback (peak x efficiency) runs at the measured training rate.
  auto set_rate = [](PlatformDevice& pd, double peak, double rate) {
    pd.flops = std::max(peak, rate);
    pd.efficiency = pd.flops > 0 ? std::min(1.0, rate / pd.flops) : 1.0;
  };
  auto device_fig = [&](int r) {
    PlatformDevice pd;
    pd.gpu_model = x.devices[r];
    set_rate(pd, m.compute.rank_peaks[r], m.compute.rank_rates[r]);
    pd.mem_bw = m.h2d.median.pageable;
    pd.mem_bytes =
        x.dev.mem_bytes > 0 ? x.dev.mem_bytes : x.env.mem_total_bytes / std::max(1, x.world.local_size());
    pd.cpu = x.dev.device == "cpu";
    return pd;
  };
  const std::set<std::string> host_set(hosts.begin(), hosts.end());
  if (x.type_order.size() == 1 && host_set.size() == 1) {
    // One host, one kind of device: one cluster of platform_devices devices (default: the cores).
    PlatformNode n;
    n.id = *host_set.begin();
    n.cpu_cores = cores;
    const int count = x.o.platform_devices > 0 ? x.o.platform_devices : cores;
    PlatformDevice pd = device_fig(0);
    set_rate(pd, median_of(m.compute.rank_peaks), median_of(m.compute.rank_rates));
    n.devices.assign(count, pd);
    n.link_bw = fit.bandwidth;
    n.link_lat = fit.latency_s;
    n.h2d_bw = m.h2d.median.pinned;
    n.loader_image_overhead = loader_overhead;
    pt.nodes.push_back(n);
    return pt;
  }
  // Several kinds of device, or several hosts: one node per rank, in rank order, joined by links
  // carrying the fitted ring edge (the route between two nodes has the fitted latency).
  for (int r = 0; r < x.nranks; ++r) {
    PlatformNode n;
    n.id = fmt::format("{}-r{}", hosts[r], r);
    n.cpu_cores = cores;
    n.devices.push_back(device_fig(r));
    n.link_bw = fit.bandwidth;
    n.link_lat = 0;
    n.h2d_bw = m.h2d.median.pinned;
    n.loader_image_overhead = loader_overhead;
    pt.nodes.push_back(n);
  }
  pt.nic_bw = fit.bandwidth;
  pt.nic_lat = fit.latency_s;
  return pt;
}

// The platform file's header: where each figure comes from.
std::string platform_provenance(const RunContext& x, const Measured& m, const Calibration& c) {
  const RingFit& fit = m.allreduce.fit;
  std::string prov =
      fmt::format("  Measured by: {}\n  on {} at {} ({}; {}).\n", x.o.command, c.provenance.at("host"),
                  c.provenance.at("date"), c.provenance.at("cpu"), c.provenance.at("versions"));
  prov += fmt::format(
      "  - gpu_model: the calibration's device_type; the compute figures come from the calibration file, "
      "whose\n"
      "    devices match by this name.\n"
      "  - gpu_flops_fp32: the best rate of a 1024^3 GEMM on every rank at once (median over the ranks), "
      "the\n"
      "    peak a run's MFU is against; gpu_efficiency: the measured training rate (forward + backward "
      "FLOPs\n"
      "    of the ViT at micro-batch {} over the measured time) over it; a roofline fallback only.\n"
      "  - gpu_mem_bw: the measured host-to-device copy bandwidth (on CPU a memcpy), a stand-in for memory "
      "bandwidth.\n"
      "  - device_kind (CPU devices): cpu, LibTorch runs each op on the thread that issues it and copies no "
      "batch.\n"
      "  - gpu_mem: {}.\n"
      "  - links: the fitted ring all-reduce edge, a = {} per step and B = {} (largest residual {});\n"
      "    each private link carries a/2 so a device-to-device route has latency a.\n"
      "  - loopback (host-to-device path): the measured copy bandwidth {}.\n"
      "  - loader_image_overhead: 1 / the measured images/s of one loader worker ({:.0f}/s).\n"
      "  - cpu_cores: the cores this host reports.\n",
      x.mbs.back(),
      x.dev.device == "cpu"
          ? "MemTotal of /proc/meminfo over the ranks of the host"
          : "NOT the GPU's memory (LibTorch does not report it): host MemTotal over the ranks; "
            "replace it with the datasheet figure",
      units::format_time(fit.latency_s), units::format_bandwidth(fit.bandwidth), pct(fit.max_rel_residual),
      units::format_bandwidth(m.h2d.median.pinned), m.loader.images_per_s_per_worker);
  return prov;
}

}  // namespace

void write_outputs(RunContext& x, const Calibration& c, const Measured& m,
                   const std::vector<std::string>& hosts) {
  if (!x.root) return;
  const Options& o = x.o;
  // What calibrate writes, its readers take: a file they would refuse (times falling with the micro-batch on
  // a busy machine) is not written.
  const std::string text = calibration_to_json(c);
  try {
    read_calibration_text(text, o.out);
  } catch (const Error& e) {
    const std::string why = fmt::format(
        "{}; nothing written: the measured times are noisier than the file's checks allow "
        "(a busy machine, or too few --iters): measure again, with more --iters",
        e.what());
    if (x.nranks > 1) x.world.abort(why, 1);  // the other ranks wait at the final barrier
    throw Error(why);
  }
  write_file_atomic(o.out, text);
  x.say(fmt::format("wrote {}\n", o.out));
  if (!o.details.empty()) {
    x.details["provenance"] = c.provenance;
    write_file_atomic(o.details, x.details.dump(1) + "\n");
    x.say(fmt::format("wrote {}\n", o.details));
  }
  if (!o.emit_platform.empty()) {
    PlatformText pt = calibrated_platform_text(x, m, hosts);
    pt.provenance = platform_provenance(x, m, c);
    write_file_atomic(o.emit_platform, calibrated_platform_xml(pt));  // core's one platform writer
    x.say(fmt::format("wrote {}\n", o.emit_platform));
  }
}

void complete_calibration(Calibration& c, const RunContext& x, const Measured& m,
                          const std::vector<std::string>& hosts) {
  std::string earlier;
  if (!c.provenance.empty()) earlier = fmt::format("{} ({})", c.provenance["command"], c.provenance["date"]);
  c.provenance = provenance(x, m, host_list(hosts), now_utc());
  if (!earlier.empty()) c.provenance["appended_to"] = earlier;
  merge_measured(c, x, m);
}

}  // namespace vitsim::calibrate
