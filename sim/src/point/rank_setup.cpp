// Each rank's state once the platform is loaded: its device (compute model and step actions), its loader, its
// host->device copy path, its communication stream; the groups the collectives run over, and whether the ring
// can run without flows.
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "point/point_setup.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/model/offload.hpp"
#include "vitsim/sim/fluid/fluid.hpp"

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {
namespace {

// A calibrated device's forward + backward per micro-batch (after its occupancy factor or a sampled span)
// must not compute faster than the platform's peak for its GPU (issue 39 items 1, 7, 17: a calibration's
// peak_flops of 1e-300, an alone_factor or a span's low of 0.1 made the point's report fail its own MFU
// check with a message naming neither file nor field, or a zero compute abort the fluid model). Refused
// here, naming the calibration, the device entry and what scaled it.
void check_calibrated_compute(const PointRun& run, const GpuFacts& g, const ComputeInputs& in,
                              const Calibration& calib, const std::vector<LayerTimes>& layers,
                              double occupancy) {
  const DeviceCalibration* dc = calib.find(g.model, run.w.model, in.precision);
  if (!dc) dc = calib.find_any(run.w.model, in.precision);
  if (!dc) return;  // the op model's own figures (core/model/ops.hpp): never above the peak
  double compute = 0;
  for (const LayerTimes& t : layers) compute += t.fwd_s + t.bwd_s;
  const int micro = run.s.training.micro_batch;
  const StepFlops fl = step_flops(run.w, micro, 1, in);
  const double peak = g.peak_flops(in.precision);
  const double need = (fl.model + fl.recompute) / peak;  // s: the least time the peak allows
  const bool finite = std::isfinite(compute) && compute > 0;
  if (finite && compute >= need * (1 - 1e-9) && compute <= units::plausible(units::Kind::Time).hi) return;
  const size_t index = static_cast<size_t>(dc - calib.devices.data());
  // The field that scaled the measured times, the last applied first.
  std::string field = ".points", by;
  if (dc->device_type != g.model) {
    field = ".peak_flops";
    by = fmt::format(" (scaled to {} by its peak_flops {:.4g} and mem_bw {:.4g})", g.model, dc->peak_flops,
                     dc->mem_bw);
  }
  if (!dc->scaled_by.empty()) field = ".spans.compute", by = " (" + dc->scaled_by + ")";
  if (occupancy != 1)
    field = ".occupancy.alone_factor", by = fmt::format(" (x{:.4g} with fewer busy ranks)", occupancy);
  throw Error(fmt::format(
      "{}: devices[{}] ('{}'){}: forward + backward at micro-batch {} come to {}{} for {:.4g} FLOP: {}, the "
      "least the peak of {} ({}) allows is {}; correct the calibration",
      calib.path.empty() ? "the calibration" : calib.path, index, echo(dc->device_type), field, micro,
      units::format_time(compute), by, fl.model + fl.recompute,
      finite ? fmt::format("{:.3g} x faster than the GPU's peak", need / compute) : "not a plausible time",
      g.model, units::format_flops(peak), units::format_time(need)));
}

// The device a GPU model's ranks share: its compute model's layer times and the step actions they make. The
// first rank of a device type builds it (and adds its notes), the others find it.
// The bandwidth of a GPU's host link as the platform routes its batch copy (the slowest link of its
// host -> device route; 0 where the route has no link).
double host_link_bw(sg4::Host* host) {
  std::vector<sg4::Link*> links;
  double lat = 0;
  host->route_to(host, links, &lat);
  double bw = 0;
  for (sg4::Link* l : links) bw = bw == 0 ? l->get_bandwidth() : std::min(bw, l->get_bandwidth());
  return bw;
}

// DeepSpeed's ZeRO-Offload on this device (core/model/offload.hpp): its seconds added to the optimizer
// step, its note said.
double offload_seconds(const PointRun& run, const NodeFacts& node, sg4::Host* host,
                       std::vector<std::string>& notes) {
  const Scenario& s = run.s;
  OffloadInputs oi;
  oi.optimizer_device = s.parallel.offload_optimizer;
  oi.param_device = s.parallel.offload_param;
  oi.zero_stage = s.parallel.zero;
  oi.dp_ranks = s.ranks();
  oi.precision = s.training.precision;
  oi.grad_accum = s.training.grad_accum;
  oi.optimizer = s.training.optimizer;
  oi.params = static_cast<double>(run.w.total_params());
  oi.ranks_per_node = s.cluster.gpus_per_node;
  oi.host_cores = static_cast<double>(std::max(1, node.cpu_cores)) / std::max(1, s.cluster.gpus_per_node);
  const bool used = offloads_optimizer(oi.optimizer_device, oi.zero_stage) ||
                    offloads_params(oi.param_device, oi.zero_stage);
  if (!used) {
    if (oi.optimizer_device != "none" || oi.param_device != "none")
      notes.push_back(fmt::format(
          "ZeRO-Offload not used at ZeRO-{}: DeepSpeed v0.14.4 offloads the optimizer at ZeRO 1-3 and the "
          "parameters at ZeRO-3 only",
          oi.zero_stage));
    return 0;
  }
  oi.pcie_bw = host_link_bw(host);
  const OffloadStep step = offload_step(oi);
  for (const auto& line : step.notes) notes.push_back(line);
  if (oi.param_device != "none" && oi.zero_stage < 3)
    notes.push_back("ZeRO-Offload of the parameters not used below ZeRO-3 (DeepSpeed v0.14.4 ignores it)");
  return step.seconds();
}

const Device& device_of(PointRun& run, const GpuFacts& g, const NodeFacts& node, sg4::Host* host,
                        const ComputeInputs& in, const Calibration* calib, const StepShape& shape,
                        std::vector<std::string>& notes) {
  auto [it, fresh] = run.devices.try_emplace(g.model);
  Device& d = it->second;
  if (!fresh) return d;
  const auto cm = make_compute_model(run.w, in, g, calib);
  notes.push_back(fmt::format("compute on {}: {}, {} framework step", g.model, cm->name(),
                              framework_name(run.s.training.framework)));
  for (auto& line : cm->notes(run.s.training.micro_batch)) notes.push_back(std::move(line));
  d.name = g.model;
  d.layers = cm->layers(run.s.training.micro_batch);
  // Fewer busy ranks per host than calibrated: calibrate's occupancy phase (core/formats/calibration.hpp).
  const DeviceCalibration* dc = calib ? calib->find(g.model, run.w.model, in.precision) : nullptr;
  if (const double f = dc ? dc->occupancy_factor(run.s.cluster.gpus_per_node) : 1; f != 1) {
    for (LayerTimes& t : d.layers) {
      t.fwd_s *= f;
      t.bwd_s *= f;
    }
    notes.push_back(fmt::format(
        "compute on {}: x{:.3f} with {} busy rank(s) per host where calibrate had {} (its occupancy phase: "
        "one rank alone x{:.3f})",
        g.model, f, run.s.cluster.gpus_per_node, dc->occupancy_busy_ranks, dc->occupancy_alone_factor));
  }
  if (calib)
    check_calibrated_compute(run, g, in, *calib, d.layers,
                             dc ? dc->occupancy_factor(run.s.cluster.gpus_per_node) : 1);
  StepShape sh = shape;
  sh.layers = d.layers;
  sh.optimizer_s = cm->optimizer_s() + offload_seconds(run, node, host, notes);
  auto step_compute_s = [&] {  // the rank's forward + backward of one step, all its micro-batches
    double compute = 0;
    for (const LayerTimes& t : d.layers) compute += t.fwd_s + t.bwd_s;
    return compute * shape.grad_accum;
  };
  if (const SyncCalibration* sy = calib ? calib->sync(g.model) : nullptr; sy && shape.ranks > 1) {
    const double compute = step_compute_s();
    sh.sync_wait_s = sync_wait_s(*sy, compute, shape.ranks);
    notes.push_back(
        fmt::format("gradient sync on {}: +{} a step beyond the all-reduce (calibrate's step phase on {} "
                    "ranks: {} + {:.2f}% of "
                    "the step's forward + backward{})",
                    g.model, units::format_time(sh.sync_wait_s), sy->ranks, units::format_time(sy->fixed_s),
                    100 * sy->per_compute,
                    shape.ranks != sy->ranks
                        ? fmt::format(", the latter x{:.3f} for {} ranks: the expected slowest of {} "
                                      "against {}",
                                      expected_max_normal(shape.ranks) / expected_max_normal(sy->ranks),
                                      shape.ranks, shape.ranks, sy->ranks)
                        : std::string()));
  } else if (const MeasuredFigure* cv = calib ? calib->step_cv(g.model) : nullptr; shape.ranks > 1 && cv) {
    // The same stragglers with the step-to-step variability calibrate measured on this device (its
    // compute rounds; docs/calibrate-validate.md "Noisy rounds") in place of the platform's gpu_step_cv.
    const double compute = step_compute_s();
    sh.straggler_wait_s = straggler_wait_s(cv->value, compute, shape.ranks);
    notes.push_back(fmt::format(
        "stragglers on {}: step cv {:.3g} as calibrated (calibrate's compute rounds, in place of the "
        "platform's gpu_step_cv {:.3g}): each step waits cv x forward + backward x E[max of N normals] for "
        "the slowest of its N ranks",
        g.model, cv->value, g.step_cv));
  } else if (shape.ranks > 1 && g.step_cv > 0) {
    // Stragglers (docs/model.md "Stragglers"): each rank's step compute varies with coefficient of variation
    // gpu_step_cv, independently from rank to rank (an assumption: normal draws); the sync waits for the
    // slowest of the step's ranks, E[max of N] = mu (1 + cv e_N), e_N = expected_max_normal(N).
    const double compute = step_compute_s();
    sh.straggler_wait_s = straggler_wait_s(g.step_cv, compute, shape.ranks);
    // One line for every point of a sweep (the wait itself is the table's column).
    notes.push_back(fmt::format(
        "stragglers on {}: gpu_step_cv {:.3g}: each step waits cv x forward + backward x E[max of N normals] "
        "for the slowest of its N ranks (the straggler wait; calibrate's step phase measures it instead)",
        g.model, g.step_cv));
  }
  d.step = step_actions(sh);
  const OpModelCalibration* fitted = calib ? calib->op_model(g.model, in.precision) : nullptr;
  d.async = fitted ? fitted->figures.async : g.async;
  return d;
}

// The rank's DataLoader: measured images/s per worker, else the node's stated CPU figures.
void set_loader(PointRun& run, RankState& rs, const GpuFacts& g, const NodeFacts& node,
                const Calibration* calib, double image_bytes) {
  const Scenario& s = run.s;
  double per_image = 0;
  const LoaderCalibration* lc = calib ? calib->loader(s.dataset.name, s.model.image_size) : nullptr;
  if (lc)
    per_image = 1.0 / lc->images_per_s_per_worker;
  else if (node.loader_bw > 0 || node.loader_image_overhead > 0)
    per_image = node.loader_image_overhead + (node.loader_bw > 0 ? image_bytes / node.loader_bw : 0);
  const double per_image_base = per_image;
  const int ranks_on_node = s.cluster.gpus_per_node;
  const int cores = std::max(1, node.cpu_cores);
  // One core per training process (it launches kernels and waits at each synchronisation on it: an
  // assumption, docs/model.md "Loader"); loader workers share the rest. With no core left (cores <=
  // ranks) a worker competes with its rank for the rank's core and cannot hide the loading: the batch is
  // made as by num_workers=0, in the training process before each micro-batch, on the rank's share of
  // the cores (ranks / cores when more ranks than cores). So 0 workers is never faster than 1 there.
  const int free_cores = cores - ranks_on_node;
  const double rank_share = std::max(1.0, static_cast<double>(ranks_on_node) / cores);
  const int workers_on_node = s.loader.workers * ranks_on_node;
  if (free_cores > 0 && workers_on_node > free_cores)
    per_image *= static_cast<double>(workers_on_node) / free_cores;
  // A CPU device (device_kind cpu): the rank's loader workers are threads of the rank's process, bound to its
  // cores as the rank is (mpirun binds a rank's threads to its cores), so the batch is made on the cores the
  // compute uses: each micro-batch's loading adds to the step as if loaded in the training thread (measured
  // here: the trainer's data wait is one batch at calibrate's images/s per worker, docs/benchmarks.md
  // "Validation on this machine").
  const bool cpu_serial = !g.async && per_image > 0;
  const bool serial = cpu_serial || s.loader.workers == 0 || free_cores <= 0;
  if (cpu_serial)
    per_image = per_image_base;
  else if (serial)
    per_image = per_image_base * rank_share;
  rs.loader = Loader(serial ? 0 : s.loader.workers, s.loader.prefetch, per_image * s.training.micro_batch);
  if (!serial && s.loader.workers > 0 && per_image > 0) {
    // W workers deliver W batches per batch time: a step of `accum` batches needs accum x batch / W at
    // least, and the delivery pattern repeats every W batches (W / gcd(W, accum) steps).
    const int accum = s.training.grad_accum;
    StepHorizon& h = run.horizon;
    h.loader_step_s =
        std::max(h.loader_step_s, accum * per_image * s.training.micro_batch / s.loader.workers);
    h.period = s.loader.workers / std::gcd(s.loader.workers, accum);
  }
}

// The rank's host->device copy: a measured or pageable bandwidth, a link of its own, or a shared path.
void set_host_to_device(PointRun& run, RankState& rs, const NodeFacts& node, const Calibration* calib,
                        const LatencyModel& latency) {
  const Scenario& s = run.s;
  if (calib && calib->h2d_pinned_bw > 0 && s.loader.pinned) rs.h2d_sleep_bw = calib->h2d_pinned_bw;
  if (!s.loader.pinned) {
    double pageable = calib && calib->h2d_pageable_bw > 0 ? calib->h2d_pageable_bw : node.h2d_pageable_bw;
    rs.h2d_sleep_bw = pageable;  // 0: no pageable figure, the copy runs at the link's speed
  }
  // A host->device path that is a single link of this GPU's own (the cluster loopback) shares with
  // nothing, so a transfer over it lasts exactly latency + bytes / bandwidth: skip the flow.
  std::vector<sg4::Link*> links;
  double ignored = 0;
  rs.host->route_to(rs.host, links, &ignored);
  const double lat = latency.route_latency(rs.host, rs.host);
  if (links.size() == 1 && links[0]->get_sharing_policy() == sg4::Link::SharingPolicy::FATPIPE)
    rs.h2d_private_s = lat + run.h2d_bytes / links[0]->get_bandwidth();
  else
    rs.h2d_latency_s = lat;
}

}  // namespace

void make_groups(PointRun& run, const RankHosts& rh, std::vector<std::string>& notes) {
  const Scenario& s = run.s;
  const std::vector<int>& node = rh.place.node;
  run.group = std::make_unique<Group>("dp", rh.hosts, node, rh.latency);
  run.sp = s.parallel.sequence_parallel;
  const int sp = run.sp;
  if (sp <= 1) return;
  for (int g = 0; g < s.ranks() / sp; ++g)
    run.sp_groups.push_back(std::make_unique<Group>(
        fmt::format("sp{}", g),
        std::vector<sg4::Host*>(rh.hosts.begin() + g * sp, rh.hosts.begin() + (g + 1) * sp),
        std::vector<int>(node.begin() + g * sp, node.begin() + (g + 1) * sp), rh.latency));
  run.a2a_bytes =
      ulysses_tensor_bytes(s.model, s.training.micro_batch, sp, precision_bytes(s.training.precision));
  notes.push_back(
      fmt::format("patch parallelism over {} GPUs (Ulysses): {} all-to-alls of {} per rank per "
                  "micro-batch around the attention layers",
                  sp, 8 * s.model.depth, units::format_bytes(run.a2a_bytes)));
}

MemoryVerdict setup_ranks(PointRun& run, const PlatformFacts& facts, const Calibration* calib,
                          const RankHosts& rh, std::vector<std::string>& notes) {
  const Scenario& s = run.s;
  const int n = s.ranks();
  const ComputeInputs compute_in = compute_inputs(s);
  const StepShape shape = step_shape(s, run.w);
  // The batch as the loader hands it over: float32 tensors at the model's input size.
  const double image_bytes = 4.0 * s.model.image_size * s.model.image_size * s.model.channels;
  run.h2d_bytes = s.training.micro_batch * image_bytes;
  std::map<double, MemoryBreakdown> memory;  // by the GPU's reserved bytes, the one per-GPU input
  MemoryVerdict v;
  run.ranks.resize(n);
  for (int r = 0; r < n; ++r) {
    RankState& rs = run.ranks[r];
    rs.rank = r;
    rs.host = rh.hosts[r];
    const GpuFacts& g = facts.gpu.at(rh.place.hosts[r]);
    const NodeFacts& node = facts.nodes[rh.place.node[r]];
    rs.device = &device_of(run, g, node, rs.host, compute_in, calib, shape, notes);
    set_loader(run, rs, g, node, calib, image_bytes);
    if (rs.device->async) set_host_to_device(run, rs, node, calib, rh.latency);
    if (!run.inline_comm()) rs.comm = std::make_unique<CommStream>();
    auto [it, fresh] = memory.try_emplace(g.reserved_bytes);
    if (fresh) it->second = memory_per_gpu(run.w, memory_inputs(s, g.reserved_bytes));
    const MemoryBreakdown& mb = it->second;
    if (mb.total() > g.mem_bytes) v.fits = false;
    if (mb.total() > v.max.total()) v.max = mb;
  }
  const NodeFacts& node0 = facts.nodes[rh.place.node[0]];
  if (!(calib && calib->loader(s.dataset.name, s.model.image_size)) && node0.loader_bw <= 0 &&
      node0.loader_image_overhead <= 0)
    notes.push_back(
        "data loading not modelled: no loader calibration and no loader_bw/loader_image_overhead in the "
        "platform");
  return v;
}

// Nothing but the group's collective makes transfers (no Ulysses all-to-all; every host->device copy timed
// without a flow) and no link changes its figures during the run (no profiles): the group is marked as the
// only traffic (Group::set_only_traffic: `auto` may then compute NCCL's algorithms without flows, FluidNet).
// Where the collective is moreover the fused ring (`ring`, or `auto` where it can pick nothing else) and no
// link but FATPIPE ones carries two of the ring's transfers (lone_ring_bandwidths), the ring is a lone ring;
// else a named collective with a schedule for every operation is computed without flows (fluid_collective).
// simulation.flows=always keeps the flows.
void choose_fast_paths(PointRun& run, const PlatformFacts& facts, const RankHosts& rh,
                       std::vector<std::string>& notes) {
  const Scenario& s = run.s;
  if (s.simulation.flows != "auto" || run.sp > 1 || facts.link_profiles || rh.hosts.size() < 2 || !run.group)
    return;
  for (const RankState& r : run.ranks)
    if (run.h2d_bytes > 0 && r.device->async && r.h2d_sleep_bw <= 0 && r.h2d_private_s < 0) return;
  run.group->set_only_traffic();
  std::vector<double> bw;
  if (run.coll->fused_ring(*run.group)) bw = lone_ring_bandwidths(rh.hosts);
  if (bw.empty()) {
    // Not a lone ring: a named collective with a schedule for the operations the point issues (ZeRO's
    // reduce-scatter and all-gather, DeepSpeed bf16's all-gather, beside the all-reduce) runs as one meeting
    // per call.
    std::set<CollOp> issued;  // the operations the ranks' steps issue: one step plan per device type
    std::set<const Device*> seen;
    for (const RankState& r : run.ranks)
      if (seen.insert(r.device).second)
        for (const StepJob& job : r.device->step.jobs) issued.insert(job.op);
    const std::vector<CollOp> ops(issued.begin(), issued.end());
    if (auto fluid = fluid_collective(*run.coll, *run.group, ops)) {
      run.fluid_coll = std::move(fluid);
      run.coll = run.fluid_coll.get();
      notes.push_back(fmt::format(
          "{}: nothing but its calls sends, so each call's transfers are computed without SimGrid flows: "
          "max-min shares over the links, re-solved whenever a transfer starts or ends (the flows' instants; "
          "simulation.flows=always makes them flows)",
          run.coll->name()));
    }
    return;
  }
  run.group->set_lone_ring(std::move(bw));
  notes.push_back(
      "ring: no link carries two of its transfers and nothing else makes any, so each transfer ends at its "
      "bytes over its route's narrowest link from when both ends are there: computed without SimGrid flows "
      "(the same instants; simulation.flows=always makes them flows)");
}

}  // namespace vitsim::sim
