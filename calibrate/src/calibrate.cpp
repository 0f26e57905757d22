// The measurement run of `vitsim calibrate`: compute on every rank, copies, the loader, the all-reduce
// sweep with the trainer's communicator; the calibration file, the details file and the platform file.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "measure.hpp"
#include "vitsim/calibrate/calibrate.hpp"
#include "vitsim/core/error.hpp"
#include "vitsim/core/identity.hpp"
#include "vitsim/core/system.hpp"
#include "vitsim/core/io.hpp"
#include "vitsim/core/units.hpp"
#include "vitsim/core/vit.hpp"
#include "vitsim/real/comm.hpp"
#include "vitsim/real/data.hpp"
#include "vitsim/real/train.hpp"

namespace vitsim::calibrate {
namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto c = line.find(':');
      return c == std::string::npos ? line : line.substr(c + 2);
    }
  return "unknown";
}

double mem_total_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  while (in >> key >> kib) {
    if (key == "MemTotal:") return kib * 1024.0;
    in.ignore(256, '\n');
  }
  return 0;
}

std::string mpi_version() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  if (MPI_Get_library_version(buf, &len) != MPI_SUCCESS) return "unknown";
  std::string s(buf, static_cast<size_t>(len));
  auto nl = s.find_first_of("\n,");
  return nl == std::string::npos ? s : s.substr(0, nl);
}

double median_of(std::vector<double> v) { return spread_of(std::move(v)).median; }

// The largest data or unified cache of CPU 0 (/sys/devices/system/cpu/cpu0/cache/index*/size): bytes,
// 0 when sysfs does not say.
double last_level_cache_bytes() {
  double best = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", i);
    std::ifstream size(dir + "size"), type(dir + "type");
    std::string text, kind;
    if (!std::getline(size, text)) continue;
    if (std::getline(type, kind) && kind == "Instruction") continue;
    best = std::max(best, parse_cache_size(text));
  }
  return best;
}

// The device name each rank calibrates as.
std::vector<std::string> rank_devices(const Options& o, int ranks) {
  if (o.device_types.empty()) throw Error("calibrate: --device-type needs a name");
  if (o.device_types.size() == 1) return std::vector<std::string>(ranks, o.device_types.front());
  if (static_cast<int>(o.device_types.size()) != ranks)
    throw Error(fmt::format("calibrate: --device-type lists {} names for {} ranks; give one name, or one per rank",
                            o.device_types.size(), ranks));
  return o.device_types;
}

void refuse_overwrite(const std::string& path, const char* what, bool force) {
  if (path.empty()) return;
  if (!force && fs::exists(path)) throw Error(fmt::format("{}: {} exists; pass --force to overwrite it", path, what));
  check_writable(path);  // before the measurements, not after them
}

json spread_json(const Spread& s) {
  return {{"mean", s.mean}, {"median", s.median}, {"min", s.min}, {"max", s.max}, {"p25", s.p25}, {"p75", s.p75}, {"count", s.count}};
}

std::string pct(double x) { return fmt::format("{:.1f}%", 100 * x); }

// Stage 1 of the op-model fit weights each op sample by its measured time (README "vitsim calibrate").
constexpr bool kWeightByTime = false;
// Passes over the op list (measure_ops): an op's time is the median of its rounds' means.
constexpr int kOpRounds = 3;

}  // namespace

Calibration run(const Scenario& s, const Options& o) {
  if (o.out.empty()) throw Error("calibrate: --out FILE is required");
  if (o.warmup < 0 || o.iters < 3) throw Error(fmt::format("calibrate: need warm-up >= 0 and at least 3 timed runs, got {} and {}", o.warmup, o.iters));
  refuse_overwrite(o.out, "calibration file", o.force || o.append);
  refuse_overwrite(o.emit_platform, "platform file", o.force);
  refuse_overwrite(o.details, "details file", o.force);

  // Freed memory stays in the process, as in `vitsim train` (real/src/io.cpp): the compute phase then
  // times steps as the trainer runs them, without page faults on every step's activations.
  real::keep_freed_memory();
  real::World world(s.run.timeout_s);
  const int rank = world.rank(), nranks = world.size();
  const bool root = rank == 0;
  const std::vector<std::string> devices = rank_devices(o, nranks);
  if (!o.emit_platform.empty() && nranks < 2)
    throw Error("--emit-platform needs the all-reduce fit: run calibrate under mpirun with 2 or more ranks");
  DeviceInfo dev = open_device(s, world.local_rank(), world.local_size());
  const Workload workload = build_workload(s.model);
  auto say = [&](const std::string& text) {
    if (root && o.verbose) {
      fmt::print("{}", text);
      std::fflush(stdout);
    }
  };
  json details = {{"schema", "vitsim.calibration-details/1"}, {"ranks", nranks}, {"devices", devices}};

  std::vector<int> mbs = o.micro_batches;
  if (mbs.empty()) {
    const int b = s.training.micro_batch;
    mbs = {std::max(1, b / 2), b, 2 * b};
  }
  std::sort(mbs.begin(), mbs.end());
  mbs.erase(std::unique(mbs.begin(), mbs.end()), mbs.end());
  if (mbs.front() < 1) throw Error(fmt::format("calibrate: micro-batch sizes must be positive, got {}", mbs.front()));

  say(fmt::format("vitsim calibrate: {} rank(s), {} on each ({} intra-op thread(s)), ViT {}px patch {} width {} depth {}, {}\n",
                  nranks, dev.device, dev.threads, s.model.image_size, s.model.patch, s.model.width, s.model.depth,
                  precision_name(s.training.precision)));
  say(fmt::format("compute: {} warm-up + {} timed iterations per micro-batch on all ranks at once; per rank the "
                  "mean (kept), the median, the spread (p75-p25)/median and [min, max] (seconds)\n",
                  o.warmup, o.iters));

  // ---- compute ----
  // Each rank measures its own device while the others measure theirs (as in training: the ranks share
  // the node's memory bandwidth and, on CPU, its cores); a device's figure is the median over its ranks.
  std::map<std::string, DeviceCalibration> by_type;
  std::vector<std::string> type_order;
  for (const auto& d : devices)
    if (!by_type.count(d)) {
      type_order.push_back(d);
      DeviceCalibration dc;
      dc.device_type = d;
      dc.model = s.model;
      dc.precision = s.training.precision;
      dc.peak_flops = o.peak_flops;
      dc.mem_bw = o.mem_bw;
      by_type[d] = dc;
    }
  std::vector<double> rank_rates(nranks, 0);  // achieved FLOP/s per rank at the largest micro-batch
  double worst_rel_iqr = 0, worst_rank_gap = 0;
  details["compute"] = json::array();
  say(fmt::format("{:>6} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}\n", "micro", "rank", "fwd_mean", "fwd_med",
                  "bwd_mean", "bwd_med", "opt_mean", "iqr/med", "GFLOP/s"));
  for (int mb : mbs) {
    world.barrier("calibrate compute barrier");
    ComputeSample cs = measure_compute(s, dev, mb, o.warmup, o.iters, nranks);
    // Per rank: the mean (stored), the median and spread (shown); layers' means split the whole.
    std::vector<double> mine{cs.fwd.mean, cs.bwd.mean, cs.optimizer.mean, cs.fwd.rel_iqr(), cs.bwd.rel_iqr(),
                             cs.fwd.min, cs.fwd.max, cs.bwd.min, cs.bwd.max, cs.fwd.median, cs.bwd.median};
    for (const auto& l : cs.layers) {
      mine.push_back(l.fwd.mean);
      mine.push_back(l.bwd.mean);
    }
    const size_t K = mine.size();
    auto all = world.allgather(mine, "calibrate compute gather");
    json jmb = {{"micro_batch", mb}, {"ranks", json::array()}};
    for (int r = 0; r < nranks; ++r) {
      const double* v = &all[r * K];
      const double rate = mb * (workload.fwd_flops_per_sample() + workload.bwd_flops_per_sample()) / (v[0] + v[1]);
      if (mb == mbs.back()) rank_rates[r] = rate;
      worst_rel_iqr = std::max({worst_rel_iqr, v[3], v[4]});
      say(fmt::format("{:>6} {:>6} {:>10.6f} {:>10.6f} {:>10.6f} {:>10.6f} {:>10.6f} {:>8} {:>8.2f}   fwd [{:.6f}, {:.6f}] "
                      "bwd [{:.6f}, {:.6f}]\n",
                      mb, r, v[0], v[9], v[1], v[10], v[2], pct(std::max(v[3], v[4])), rate / 1e9, v[5], v[6], v[7], v[8]));
      jmb["ranks"].push_back({{"rank", r}, {"device_type", devices[r]}, {"fwd_s_mean", v[0]}, {"bwd_s_mean", v[1]},
                              {"optimizer_s_mean", v[2]}, {"fwd_rel_iqr", v[3]}, {"bwd_rel_iqr", v[4]},
                              {"fwd_min", v[5]}, {"fwd_max", v[6]}, {"bwd_min", v[7]}, {"bwd_max", v[8]},
                              {"fwd_s_median", v[9]}, {"bwd_s_median", v[10]}});
    }
    if (root) {
      json jl = json::array();
      for (const auto& l : cs.layers) jl.push_back({{"name", l.name}, {"fwd", spread_json(l.fwd)}, {"bwd", spread_json(l.bwd)}});
      jmb["rank0"] = {{"fwd", spread_json(cs.fwd)}, {"bwd", spread_json(cs.bwd)}, {"optimizer", spread_json(cs.optimizer)},
                      {"layers", jl}};
    }
    details["compute"].push_back(jmb);
    for (const auto& type : type_order) {
      std::vector<int> members;
      for (int r = 0; r < nranks; ++r)
        if (devices[r] == type) members.push_back(r);
      auto med = [&](size_t idx) {
        std::vector<double> v;
        for (int r : members) v.push_back(all[r * K + idx]);
        return median_of(v);
      };
      ComputePoint cp;
      cp.micro_batch = mb;
      cp.fwd_s = med(0);
      cp.bwd_s = med(1);
      cp.optimizer_s = med(2);
      for (size_t l = 0; l < cs.layers.size(); ++l) cp.layers.push_back({cs.layers[l].name, med(11 + 2 * l), med(12 + 2 * l)});
      double lo = INFINITY, hi = 0;
      for (int r : members) {
        const double t = all[r * K] + all[r * K + 1];
        lo = std::min(lo, t);
        hi = std::max(hi, t);
      }
      worst_rank_gap = std::max(worst_rank_gap, hi / lo - 1);
      by_type[type].points.push_back(cp);
    }
  }

  // ---- op model: the model's ops and a device sweep, each timed alone, fitted per op class ----
  // Every rank times the same list at once (as in the compute phase); an op's time for a device type is
  // the median over its ranks; every rank fits (deterministic), so the calibration is the same on all.
  std::vector<OpModelCalibration> op_models;
  if (o.op_model) {
    const double llc = last_level_cache_bytes();
    const std::vector<OpBenchmark> list =
        op_benchmarks(workload, mbs, s.training.precision, s.training.micro_batch * s.model.tokens(), llc);
    size_t model_ops = 0;
    for (const auto& b : list) model_ops += b.micro_batch > 0;
    world.barrier("calibrate op barrier");
    const auto t0 = Clock::now();
    // Operands cold: each op cycles through input sets of twice the last-level cache (64 MiB when sysfs
    // does not say).
    const double cold_bytes = 2 * (llc > 0 ? llc : 32.0 * 1024 * 1024);
    const std::vector<OpTiming> timings = measure_ops(s, dev, list, o.warmup, o.iters, cold_bytes, kOpRounds);
    const double took = seconds(t0, Clock::now());
    std::vector<double> mine;
    for (const auto& t : timings) mine.push_back(t.skipped ? 0.0 : t.round_median);
    mine.push_back(dev.threads);
    mine.push_back(dev.sm_count);
    const size_t K = mine.size(), L = list.size();
    auto all = world.allgather(mine, "calibrate op gather");
    say(fmt::format("op model: {} ops timed alone on every rank at once in {:.1f} s ({} of the model at micro-batch {}, "
                    "{} in the device sweep), {} rounds over the list, at least {} runs each after {} warm-up, operands "
                    "cold (input sets of {} in turn); an op's time the median of its rounds' means, per device type "
                    "the median over its ranks, fitted by least squares on ln(predicted / measured)\n",
                    L, took, model_ops, fmt::join(mbs, ","), L - model_ops, kOpRounds, std::max(3, o.iters),
                    std::max(1, o.warmup), units::format_bytes(cold_bytes)));
    json jops = json::object();
    for (const auto& type : type_order) {
      std::vector<int> members;
      for (int r = 0; r < nranks; ++r)
        if (devices[r] == type) members.push_back(r);
      std::vector<double> pooled(L, 0);
      for (size_t i = 0; i < L; ++i) {
        std::vector<double> v;
        for (int r : members) v.push_back(all[r * K + i]);
        pooled[i] = *std::min_element(v.begin(), v.end()) > 0 ? median_of(v) : 0;
      }
      DeviceFigures start;
      start.device_type = type;
      const bool cpu = dev.device == "cpu";
      const int threads = static_cast<int>(all[members.front() * K + L]);
      const int sms = static_cast<int>(all[members.front() * K + L + 1]);
      start.sm_count = cpu ? std::max(1, threads) : std::max(1, sms);
      start.async = !cpu;
      // The reference bandwidth: copies that stream from memory, at least 4x the last-level cache read
      // and written (smaller ones run from the cache); without a known cache size, the largest copy.
      double best_gemm = 0, big_copy = 0, largest_copy = 0, largest_copy_bw = 0;
      for (size_t i = 0; i < L; ++i) {
        if (list[i].micro_batch != 0 || !(pooled[i] > 0)) continue;
        const Op& op = list[i].op;
        if (op.cls == OpClass::Gemm) best_gemm = std::max(best_gemm, op.flops / pooled[i]);
        if (op.name.rfind("sweep.copy.", 0) != 0) continue;
        if (llc > 0 && op.bytes >= 4 * llc) big_copy = std::max(big_copy, op.bytes / pooled[i]);
        if (op.bytes > largest_copy) {
          largest_copy = op.bytes;
          largest_copy_bw = op.bytes / pooled[i];
        }
      }
      const double best_copy = big_copy > 0 ? big_copy : largest_copy_bw;
      const std::string copy_source =
          o.mem_bw > 0 ? "--mem-bw"
          : big_copy > 0 ? fmt::format("best sweep copy of >= 4x the {} last-level cache", units::format_bytes(llc))
                         : "the largest sweep copy (last-level cache size unknown)";
      start.peak_flops = o.peak_flops > 0 ? o.peak_flops : best_gemm;
      start.mem_bw = o.mem_bw > 0 ? o.mem_bw : best_copy;
      std::vector<OpSample> samples;
      for (size_t i = 0; i < L; ++i)
        if (pooled[i] > 0) samples.push_back({list[i].op, pooled[i]});
      OpModelCalibration oc = fit_op_model(samples, start, OpFitOptions{kWeightByTime});
      oc.precision = s.training.precision;
      const DeviceFigures stage1 = oc.figures;
      const DeviceFigures& f = stage1;
      say(fmt::format("  {}: peak {} ({}), bandwidth {} ({}), {} {}\n  stage 1, ops alone ({}): host_op_s {}, "
                      "matrix_s {}, tile {}x{}, k_half {:g}, n_half {:g}\n",
                      type, units::format_flops(f.peak_flops), o.peak_flops > 0 ? "--peak-flops" : "best sweep GEMM",
                      units::format_bandwidth(f.mem_bw), copy_source, f.sm_count,
                      cpu ? "thread(s), synchronous" : "SMs, asynchronous",
                      kWeightByTime ? "each sample weighted by its time" : "relative errors, every sample alike",
                      units::format_time(f.host_op_s), units::format_time(f.matrix_s), f.tile_m, f.tile_n, f.gemm_k_half,
                      f.gemm_n_half));
      say(fmt::format("  {:<12} {:>5} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}\n", "class", "ops", "efficiency", "host_op_s",
                      "k_half", "tile", "med|res|", "max|res|"));
      json jsamples = json::array();
      std::map<OpClass, std::vector<double>> res;
      std::vector<double> res_all;
      for (size_t i = 0; i < L; ++i) {
        const Op& op = list[i].op;
        json js = {{"name", op.name}, {"micro_batch", list[i].micro_batch}, {"class", op_class_name(op.cls)}, {"kind", op_kind_name(op.kind)}, {"elems", op.elems}, {"rows", op.rows},
                   {"pass", pass_name(op.pass)}, {"batch", op.batch}, {"m", op.m}, {"n", op.n}, {"k", op.k},
                   {"flops", op.flops}, {"bytes", op.bytes}, {"kernels", op.kernels}, {"kernel", timings[i].how},
                   {"input_sets", timings[i].copies}};
        std::vector<double> per_rank;
        for (int r : members) per_rank.push_back(all[r * K + i]);
        js["seconds_per_rank"] = per_rank;
        if (pooled[i] > 0) {
          const double pred = op_sample_time(op, f);
          js["seconds"] = pooled[i];
          js["predicted_s"] = pred;
          const double r = std::abs(pred - pooled[i]) / pooled[i];
          res[op.cls].push_back(r);
          res_all.push_back(r);
          if (op.flops > 0) js["flops_per_s"] = op.flops / pooled[i];
          if (op.bytes > 0) js["bytes_per_s"] = op.bytes / pooled[i];
        } else {
          js["skipped"] = true;
        }
        if (root && members.front() == 0 && !timings[i].skipped) {
          js["rank0"] = spread_json(timings[i].seconds);
          js["rank0_round_median"] = timings[i].round_median;
        }
        jsamples.push_back(js);
      }
      for (OpClass c : {OpClass::Gemm, OpClass::AttnMatmul, OpClass::Memory, OpClass::Norm}) {
        if (!res.count(c)) continue;
        const Spread sp = spread_of(res[c]);
        const double eff = c == OpClass::Gemm         ? f.gemm_efficiency
                           : c == OpClass::AttnMatmul ? f.attn_efficiency
                           : c == OpClass::Norm       ? (f.norm_efficiency > 0 ? f.norm_efficiency : f.mem_efficiency)
                                                      : f.mem_efficiency;
        const bool mm = c == OpClass::Gemm || c == OpClass::AttnMatmul;
        say(fmt::format("  {:<12} {:>5} {:>10.3f} {:>10} {:>10} {:>10} {:>9} {:>9}\n", op_class_name(c), sp.count, eff,
                        units::format_time(f.host_op_s), mm ? fmt::format("{:g}", f.gemm_k_half) : "-",
                        mm ? fmt::format("{}x{}", f.tile_m, f.tile_n) : "-", pct(sp.median), pct(sp.max)));
      }
      say(fmt::format("  {:<12} {:>5} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}\n", "all", oc.samples, "", "", "", "",
                      pct(oc.median_rel_residual), pct(oc.max_rel_residual)));
      // The kernel families' own costs (hot sweeps) and the convolutions' efficiency.
      for (int k = 1; k < kOpKinds; ++k) {
        const auto& kf = f.kinds[static_cast<size_t>(k)];
        if (kf.elem_s > 0 || kf.row_s > 0)
          say(fmt::format("  kind {:<15} {:.3g} ns per element, {:.3g} ns per row\n", op_kind_name(static_cast<OpKind>(k)),
                          1e9 * kf.elem_s, 1e9 * kf.row_s));
        if (kf.efficiency > 0)
          say(fmt::format("  kind {:<15} efficiency {:.3f}\n", op_kind_name(static_cast<OpKind>(k)), kf.efficiency));
      }
      // Stage 2: the host time per kernel from this device's whole forward + backward passes measured in
      // the compute phase above (the calibration shape, every calibration micro-batch), the device
      // figures of stage 1 fixed.
      std::vector<PassSample> passes;
      for (const auto& cp : by_type[type].points) passes.push_back({cp.micro_batch, cp.fwd_s + cp.bwd_s});
      const HostFit hf = fit_host_op(workload, passes, stage1, OpOptions{s.training.precision});
      oc.figures.host_op_s = hf.host_op_s;
      say(fmt::format("  stage 2, whole passes (forward + backward of this shape; measured = s x device sum + host_op_s "
                      "x kernels, least squares on relative errors): host_op_s {} (stage 1: {}), s = {:.3f} (the "
                      "passes' speed against the ops'); largest residual {}\n",
                      units::format_time(hf.host_op_s), units::format_time(stage1.host_op_s), hf.speed,
                      pct(hf.max_rel_residual)));
      say(fmt::format("  {:>6} {:>12} {:>12} {:>8} {:>12} {:>12} {:>9} {:>9}\n", "micro", "measured", "device sum",
                      "kernels", "(m-d)/kern", "predicted", "pred/meas", "residual"));
      json jpasses = json::array();
      for (const auto& pt : hf.points) {
        say(fmt::format("  {:>6} {:>12} {:>12} {:>8.0f} {:>12} {:>12} {:>+8.1f}% {:>+8.1f}%\n", pt.micro_batch,
                        units::format_time(pt.measured_s), units::format_time(pt.device_s), pt.kernels,
                        units::format_time(pt.implied_host_op_s), units::format_time(pt.predicted_s),
                        100 * (pt.predicted_s / pt.measured_s - 1), 100 * pt.residual));
        jpasses.push_back({{"micro_batch", pt.micro_batch}, {"measured_s", pt.measured_s}, {"device_s", pt.device_s},
                           {"kernels", pt.kernels}, {"implied_host_op_s", pt.implied_host_op_s},
                           {"predicted_s", pt.predicted_s}, {"residual", pt.residual}});
      }
      const DeviceFigures& f2 = oc.figures;
      jops[type] = {{"figures",
                     {{"peak_flops", f2.peak_flops}, {"mem_bw", f2.mem_bw}, {"sm_count", f2.sm_count}, {"tile_m", f2.tile_m},
                      {"tile_n", f2.tile_n}, {"gemm_efficiency", f2.gemm_efficiency}, {"gemm_k_half", f2.gemm_k_half}, {"gemm_n_half", f2.gemm_n_half},
                      {"attn_efficiency", f2.attn_efficiency}, {"mem_efficiency", f2.mem_efficiency},
                      {"norm_efficiency", f2.norm_efficiency}, {"matrix_s", f2.matrix_s}, {"kernel_s", f2.kernel_s},
                      {"host_op_s", f2.host_op_s}, {"async", f2.async}}},
                    {"stage1_host_op_s", stage1.host_op_s},
                    {"stage2", {{"host_op_s", hf.host_op_s}, {"speed", hf.speed}, {"max_rel_residual", hf.max_rel_residual},
                                {"passes", jpasses}}},
                    {"weight_by_time", kWeightByTime},
                    {"last_level_cache_bytes", llc},
                    {"peak_flops_source", o.peak_flops > 0 ? "--peak-flops" : "best sweep GEMM"},
                    {"mem_bw_source", copy_source},
                    {"samples", oc.samples}, {"median_rel_residual", oc.median_rel_residual},
                    {"max_rel_residual", oc.max_rel_residual}, {"ops", jsamples}};
      op_models.push_back(oc);
    }
    details["op_model"] = {{"precision", precision_name(s.training.precision)}, {"seconds_taken_rank0", took},
                           {"device_types", jops}};
  }

  // ---- occupancy: the largest micro-batch again on rank 0 alone while the others wait ----
  // Devices that share a host's resources (CPU cores sharing memory bandwidth or a physical core, GPUs
  // sharing a PCIe switch) can run slower when all are busy; the simulator takes a device's calibrated
  // speed whatever the rest of the node does, so a calibration is good for the rank count it was made at.
  double alone_ratio = 1;
  if (nranks > 1 && world.nodes() == 1) {
    world.barrier("calibrate occupancy barrier");
    double alone = 0;
    if (root) {
      ComputeSample cs = measure_compute(s, dev, mbs.back(), o.warmup, o.iters, nranks);
      alone = cs.fwd.mean + cs.bwd.mean;
    }
    world.broadcast(&alone, sizeof alone, 0, "calibrate occupancy broadcast");
    const DeviceCalibration& d0 = by_type[devices[0]];
    const double together = d0.points.back().fwd_s + d0.points.back().bwd_s;
    alone_ratio = together / alone;
    say(fmt::format("occupancy: micro-batch {} fwd+bwd takes {:.6f} s on rank 0 alone, {:.6f} s with all {} ranks busy "
                    "(x{:.2f}): this calibration holds for {} busy ranks per host\n",
                    mbs.back(), alone, together, nranks, alone_ratio, world.local_size()));
    details["occupancy"] = {{"micro_batch", mbs.back()}, {"alone_s", alone}, {"all_busy_s", together}};
  }

  // ---- host-to-device copies: one batch of the largest micro-batch, as the loader hands it over ----
  const double batch_bytes = 4.0 * mbs.back() * s.model.channels * s.model.image_size * s.model.image_size;
  CopySample copy = measure_copy(dev, std::max(batch_bytes, 1024.0 * 1024.0), o.warmup, o.iters);
  std::vector<double> copy_all =
      world.allgather({copy.bytes / copy.pinned_s.median, copy.bytes / copy.pageable_s.median}, "calibrate copy gather");
  std::vector<double> pinned_bw, pageable_bw;
  for (int r = 0; r < nranks; ++r) {
    pinned_bw.push_back(copy_all[2 * r]);
    pageable_bw.push_back(copy_all[2 * r + 1]);
  }
  const double h2d_pinned = median_of(pinned_bw), h2d_pageable = median_of(pageable_bw);
  say(fmt::format("host-to-device: {} per copy, pinned {} pageable {} (median over ranks){}\n", units::format_bytes(copy.bytes),
                  units::format_bandwidth(h2d_pinned), units::format_bandwidth(h2d_pageable),
                  copy.on_cpu ? "; CPU device: a memcpy into a freshly allocated tensor, pinned = pageable" : ""));
  details["h2d"] = {{"bytes", copy.bytes}, {"on_cpu", copy.on_cpu}, {"pinned_bw_per_rank", pinned_bw},
                    {"pageable_bw_per_rank", pageable_bw}, {"rank0_pinned_s", spread_json(copy.pinned_s)},
                    {"rank0_pageable_s", spread_json(copy.pageable_s)}};

  // ---- loader: one worker, the scenario's dataset, resize and augmentation ----
  LoaderCalibration loader_cal;
  {
    world.barrier("calibrate loader barrier");
    real::DatasetSplit set = real::open_dataset(s.dataset, s.model, "train");
    real::Transform tf{s.model.image_size, s.run.augment, set.norm, static_cast<uint64_t>(s.training.seed)};
    const int mb = s.training.micro_batch;
    long long batches = o.loader_batches > 0 ? o.loader_batches : (2048 + mb - 1) / mb;
    batches = std::max(1LL, std::min<long long>(batches, static_cast<long long>(set.source->size()) / nranks / mb));
    std::vector<double> rates;
    for (int rep = 0; rep < 1 + 3; ++rep) {  // one warm-up pass (page cache, allocator), three timed
      auto idx = real::shard_indices(set.source->size(), rank, nranks, s.training.seed, rep, true, true);
      idx.resize(static_cast<size_t>(batches * mb));
      auto a = Clock::now();
      real::Loader loader(*set.source, tf, idx, mb, rep, 0, /*workers=*/1, s.loader.prefetch);
      long long images = 0;
      while (auto b = loader.next()) images += b->size;
      auto e = Clock::now();
      if (rep > 0) rates.push_back(images / seconds(a, e));
    }
    auto all = world.allgather({median_of(rates)}, "calibrate loader gather");
    loader_cal.dataset = s.dataset.name;
    loader_cal.resize = s.model.image_size;
    loader_cal.images_per_s_per_worker = median_of(all);
    Spread sp = spread_of(all);
    say(fmt::format("loader: {} at {} px, one worker, {} batches of {}: {:.0f} images/s (ranks: [{:.0f}, {:.0f}])\n",
                    s.dataset.name, s.model.image_size, batches, mb, sp.median, sp.min, sp.max));
    details["loader"] = {{"dataset", s.dataset.name}, {"resize", s.model.image_size}, {"batches", batches},
                         {"micro_batch", mb}, {"images_per_s_per_rank", all}};
  }

  // ---- all-reduce with the trainer's communicator ----
  std::vector<LinkCalibration> links;
  RingFit fit;
  if (nranks > 1) {
    // What the scenario's trainer reduces per step: the whole fp32 gradient (fp32 whatever the
    // precision), in buckets of at most bucket_size sent back to back. The fit runs up to the whole
    // gradient, so that it describes the sustained rate of a step's all-reduces, not the burst of one
    // small message (a token-bucket-shaped link passes a lone 4 KiB message at several times its rate).
    const double gradient = 4.0 * workload.total_params();
    const double bucket = std::min(s.parallel.bucket_bytes, gradient);
    std::vector<double> sizes = o.sizes;
    if (sizes.empty()) {
      for (double b = 4096; b <= 64.0 * 1024 * 1024; b *= 4) sizes.push_back(b);
      // Both measured exactly, so the fit holds where it is used.
      sizes.push_back(std::floor(bucket / 4) * 4);
      sizes.push_back(std::floor(gradient / 4) * 4);
      std::sort(sizes.begin(), sizes.end());
      sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    }
    auto comm = real::make_mpi_communicator(world);
    const std::string link_class = !o.link_class.empty() ? o.link_class : world.nodes() > 1 ? "inter_node" : "intra_node";
    say(fmt::format("all-reduce ({}, {} ranks, class {}): per size {} warm-up + {} timed, each after a barrier; "
                    "time = the slowest rank's\n{:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10}\n",
                    comm->name(), nranks, link_class, 5, std::max(10, o.iters), "bytes", "median_s", "min_s", "max_s",
                    "algbw", "busbw", "fit"));
    std::vector<AllreduceSample> samples;
    json jar = json::array();
    std::vector<Spread> spreads;
    for (double bytes : sizes) {
      const size_t n = std::max<size_t>(1, static_cast<size_t>(bytes / sizeof(float)));
      std::vector<float> buf(n, 1.0f);
      std::vector<double> times;
      const int iters = std::max(10, o.iters);
      for (int it = 0; it < 5 + iters; ++it) {
        world.barrier("calibrate all-reduce barrier");
        auto a = Clock::now();
        comm->allreduce_sum(buf.data(), n, comm->mark_ready());
        auto e = Clock::now();
        if (it >= 5) times.push_back(seconds(a, e));
      }
      auto all = world.allgather(times, "calibrate all-reduce gather");
      std::vector<double> slowest(times.size(), 0);
      for (int r = 0; r < nranks; ++r)
        for (size_t i = 0; i < times.size(); ++i) slowest[i] = std::max(slowest[i], all[r * times.size() + i]);
      Spread sp = spread_of(slowest);
      const double real_bytes = n * sizeof(float);
      samples.push_back({real_bytes, sp.median});
      spreads.push_back(sp);
      jar.push_back({{"bytes", real_bytes}, {"time_s", spread_json(sp)}, {"algbw", algbw(real_bytes, sp.median)},
                     {"busbw", busbw_allreduce(real_bytes, sp.median, nranks)}});
    }
    double fit_max = o.fit_max_bytes;
    if (fit_max <= 0) fit_max = gradient;
    std::vector<AllreduceSample> fitted;
    for (const auto& smp : samples)
      if (smp.bytes <= fit_max * 1.0001) fitted.push_back(smp);
    // At least the two smallest sizes, so a fit always exists.
    if (fitted.size() < 2) fitted.assign(samples.begin(), samples.begin() + std::min<size_t>(2, samples.size()));
    fit = fit_ring_allreduce(fitted, nranks);
    for (size_t i = 0; i < samples.size(); ++i) {
      const auto& sp = spreads[i];
      const double b = samples[i].bytes;
      say(fmt::format("{:>12.0f} {:>12.6g} {:>12.6g} {:>12.6g} {:>12} {:>12} {:>+9.1f}%\n", b, sp.median, sp.min, sp.max,
                      units::format_bandwidth(algbw(b, sp.median)), units::format_bandwidth(busbw_allreduce(b, sp.median, nranks)),
                      100 * (ring_allreduce_time(fit, b, nranks) / sp.median - 1)));
    }
    say(fmt::format("fit t = 2(n-1) a + 2(n-1)/n S/B (least squares, relative residuals) over the {} sizes up to {} "
                    "(a step's whole gradient): a = {}, B = {}; largest residual there {}\n",
                    fitted.size(), units::format_bytes(fitted.back().bytes), units::format_time(fit.latency_s),
                    units::format_bandwidth(fit.bandwidth), pct(fit.max_rel_residual)));
    links.push_back({link_class, fit.bandwidth, fit.latency_s, nranks});
    details["allreduce"] = {{"communicator", comm->name()}, {"link_class", link_class}, {"samples", jar},
                            {"fit", {{"latency_s", fit.latency_s}, {"bandwidth", fit.bandwidth},
                                     {"max_rel_residual", fit.max_rel_residual}, {"fitted_up_to_bytes", fitted.back().bytes}}}};
  }

  // ---- the calibration ----
  Calibration c;
  if (o.append && fs::exists(o.out)) c = read_calibration(o.out);
  auto hosts = world.gather(world.host(), 0, "calibrate host gather");
  const std::string date = now_utc();
  std::string earlier;
  if (!c.provenance.empty()) earlier = fmt::format("{} ({})", c.provenance["command"], c.provenance["date"]);
  c.provenance.clear();
  std::set<std::string> host_set(hosts.begin(), hosts.end());
  std::string host_list;
  for (const auto& h : host_set) host_list += (host_list.empty() ? "" : " ") + h;
  c.provenance["host"] = host_list;
  c.provenance["date"] = date;
  c.provenance["command"] = o.command;
  c.provenance["versions"] = fmt::format("vitsim {}; libtorch {}; {}", vitsim_version(), torch_version(), mpi_version());
  c.provenance["cpu"] = cpu_model();
  c.provenance["ranks"] = fmt::format("{} ({} per host, {} intra-op thread(s) each, device {})", nranks,
                                      world.local_size(), dev.threads, dev.device);
  c.provenance["method"] = fmt::format(
      "compute: {} warm-up + {} timed iterations per micro-batch on every rank at once, mean per rank, then the median "
      "over the ranks of a device; layers timed one by one with detached inputs (their shares split the whole-model "
      "times); all-reduce: 5 warm-up + {} timed per size after a barrier, the slowest rank's time, median; loader: one "
      "worker, 3 timed passes after one warm-up pass{}",
      o.warmup, o.iters, std::max(10, o.iters),
      o.op_model ? "; op model: every op of the model's layers and a GEMM/bmm/copy sweep timed alone with LibTorch "
                   "kernels (mean of the timed runs, median over a device's ranks), efficiencies per op class, host "
                   "time per op, GEMM tile and k_half fitted on ln(predicted / measured)"
                 : "");
  c.provenance["noise"] = fmt::format(
      "compute (p75-p25)/median up to {} over iterations; ranks of one device differ by up to {} (fwd+bwd)",
      pct(worst_rel_iqr), pct(worst_rank_gap));
  if (alone_ratio != 1)
    c.provenance["occupancy"] = fmt::format(
        "fwd+bwd at micro-batch {} is x{:.2f} the time of rank 0 alone when all {} ranks of the host compute: the "
        "compute figures hold for {} busy ranks per host",
        mbs.back(), alone_ratio, world.local_size(), world.local_size());
  if (copy.on_cpu) c.provenance["h2d"] = "CPU device: memcpy into a freshly allocated tensor; pinned = pageable";
  if (!earlier.empty()) c.provenance["appended_to"] = earlier;
  for (const auto& type : type_order) {
    DeviceCalibration& d = by_type[type];
    auto same = [&](const DeviceCalibration& e) {
      return e.device_type == d.device_type && e.precision == d.precision && same_shape(e.model, d.model);
    };
    c.devices.erase(std::remove_if(c.devices.begin(), c.devices.end(), same), c.devices.end());
    c.devices.push_back(d);
  }
  for (const auto& l : links) {
    c.links.erase(std::remove_if(c.links.begin(), c.links.end(),
                                 [&](const LinkCalibration& e) { return e.link_class == l.link_class && e.ranks == l.ranks; }),
                  c.links.end());
    c.links.push_back(l);
  }
  c.loaders.erase(std::remove_if(c.loaders.begin(), c.loaders.end(),
                                 [&](const LoaderCalibration& e) {
                                   return e.dataset == loader_cal.dataset && e.resize == loader_cal.resize;
                                 }),
                  c.loaders.end());
  c.loaders.push_back(loader_cal);
  for (const auto& m : op_models) {
    c.op_models.erase(std::remove_if(c.op_models.begin(), c.op_models.end(),
                                     [&](const OpModelCalibration& e) {
                                       return e.figures.device_type == m.figures.device_type && e.precision == m.precision;
                                     }),
                      c.op_models.end());
    c.op_models.push_back(m);
  }
  c.h2d_pinned_bw = h2d_pinned;
  c.h2d_pageable_bw = h2d_pageable;

  if (root) {
    write_file_atomic(o.out, calibration_to_json(c));
    say(fmt::format("wrote {}\n", o.out));
    if (!o.details.empty()) {
      details["provenance"] = c.provenance;
      write_file_atomic(o.details, details.dump(1) + "\n");
      say(fmt::format("wrote {}\n", o.details));
    }
    if (!o.emit_platform.empty()) {
      PlatformText pt;
      pt.name = "calibrated";
      const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      const double loader_overhead = 1.0 / loader_cal.images_per_s_per_worker;
      auto device_fig = [&](int r) {
        PlatformDevice pd;
        pd.gpu_model = devices[r];
        pd.flops = rank_rates[r];
        pd.mem_bw = h2d_pageable;
        pd.mem_bytes = dev.mem_bytes > 0 ? dev.mem_bytes : mem_total_bytes() / std::max(1, world.local_size());
        return pd;
      };
      std::set<std::string> types(devices.begin(), devices.end());
      if (types.size() == 1 && host_set.size() == 1) {
        // One host, one kind of device: one cluster of platform_devices devices (default: the cores).
        PlatformNode n;
        n.id = *host_set.begin();
        n.cpu_cores = cores;
        const int count = o.platform_devices > 0 ? o.platform_devices : cores;
        PlatformDevice pd = device_fig(0);
        std::vector<double> rates(rank_rates.begin(), rank_rates.end());
        pd.flops = median_of(rates);
        n.devices.assign(count, pd);
        n.link_bw = fit.bandwidth;
        n.link_lat = fit.latency_s;
        n.h2d_bw = h2d_pinned;
        n.loader_image_overhead = loader_overhead;
        pt.nodes.push_back(n);
      } else {
        // Several kinds of device, or several hosts: one node per rank, in rank order, joined by links
        // carrying the fitted ring edge (the route between two nodes has the fitted latency).
        for (int r = 0; r < nranks; ++r) {
          PlatformNode n;
          n.id = fmt::format("{}-r{}", hosts[r], r);
          n.cpu_cores = cores;
          n.devices.push_back(device_fig(r));
          n.link_bw = fit.bandwidth;
          n.link_lat = 0;
          n.h2d_bw = h2d_pinned;
          n.loader_image_overhead = loader_overhead;
          pt.nodes.push_back(n);
        }
        pt.nic_bw = fit.bandwidth;
        pt.nic_lat = fit.latency_s;
      }
      std::string prov;
      prov += fmt::format("  Measured by: {}\n  on {} at {} ({}; {}).\n", o.command, host_list, date, c.provenance["cpu"],
                          c.provenance["versions"]);
      prov += fmt::format(
          "  - gpu_model: the calibration's device_type; the compute figures come from the calibration file, whose\n"
          "    devices match by this name.\n"
          "  - gpu_flops_fp32 / gpu_efficiency 1: the measured training rate (forward + backward FLOPs of the ViT at\n"
          "    micro-batch {} over the measured time), median over the ranks of the device; a roofline fallback only.\n"
          "  - gpu_mem_bw: the measured host-to-device copy bandwidth (on CPU a memcpy), a stand-in for memory bandwidth.\n"
          "  - gpu_mem: {}.\n"
          "  - links: the fitted ring all-reduce edge, a = {} per step and B = {} (largest residual {});\n"
          "    each private link carries a/2 so a device-to-device route has latency a.\n"
          "  - loopback (host-to-device path): the measured copy bandwidth {}.\n"
          "  - loader_image_overhead: 1 / the measured images/s of one loader worker ({:.0f}/s).\n"
          "  - cpu_cores: the cores this host reports.\n",
          mbs.back(),
          dev.device == "cpu" ? "MemTotal of /proc/meminfo over the ranks of the host"
                              : "NOT the GPU's memory (LibTorch does not report it): host MemTotal over the ranks; "
                                "replace it with the datasheet figure",
          units::format_time(fit.latency_s), units::format_bandwidth(fit.bandwidth), pct(fit.max_rel_residual),
          units::format_bandwidth(h2d_pinned), loader_cal.images_per_s_per_worker);
      pt.provenance = prov;
      write_file_atomic(o.emit_platform, calibrated_platform_xml(pt));  // core's one platform writer
      say(fmt::format("wrote {}\n", o.emit_platform));
    }
  }
  world.barrier("calibrate final barrier");
  return c;
}

}  // namespace vitsim::calibrate
