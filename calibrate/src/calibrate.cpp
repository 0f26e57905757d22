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
#include "vitsim/real/gather.hpp"
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

// Stage 1 of the op-model fit weights each op sample by its measured time (docs/calibrate-validate.md).
constexpr bool kWeightByTime = false;
// Passes over the op list (measure_ops): an op's time is the median of its rounds' means.
constexpr int kOpRounds = 3;
// All-reduce timing: warm-up runs thrown away, then at least this many timed runs per size.
constexpr int kAllreduceWarmup = 5, kAllreduceMinIters = 10;

using real::allgather_record;  // vitsim/real/gather.hpp: per-rank records cross as named structs
using real::allgather_records;

// What every phase of one run shares: the job, this rank's device, the scenario's model and the
// micro-batches measured, the details document and the terminal.
struct RunContext {
  RunContext(const Scenario& scenario, const Options& options, real::World& w) : s(scenario), o(options), world(w) {}
  const Scenario& s;
  const Options& o;
  real::World& world;
  int rank = 0, nranks = 1;
  bool root = true;
  std::vector<std::string> devices;     // the device type of each rank
  std::vector<std::string> type_order;  // the distinct device types, in rank order
  DeviceInfo dev;
  Workload workload;
  std::vector<int> mbs;                 // calibration micro-batches, ascending
  json details;

  void say(const std::string& text) const {
    if (root && o.verbose) {
      fmt::print("{}", text);
      std::fflush(stdout);
    }
  }
  std::vector<int> members(const std::string& type) const {  // the ranks of one device type
    std::vector<int> out;
    for (int r = 0; r < nranks; ++r)
      if (devices[r] == type) out.push_back(r);
    return out;
  }
};

void check_options(const Options& o) {
  if (o.out.empty()) throw Error("calibrate: --out FILE is required");
  if (o.warmup < 0 || o.iters < 3) throw Error(fmt::format("calibrate: need warm-up >= 0 and at least 3 timed runs, got {} and {}", o.warmup, o.iters));
  refuse_overwrite(o.out, "calibration file", o.force || o.append);
  refuse_overwrite(o.emit_platform, "platform file", o.force);
  refuse_overwrite(o.details, "details file", o.force);
}

// --micro-batches, else the scenario's micro-batch / 2, x1, x2; ascending, each once.
std::vector<int> calibration_micro_batches(const Scenario& s, const Options& o) {
  std::vector<int> mbs = o.micro_batches;
  if (mbs.empty()) {
    const int b = s.training.micro_batch;
    mbs = {std::max(1, b / 2), b, 2 * b};
  }
  std::sort(mbs.begin(), mbs.end());
  mbs.erase(std::unique(mbs.begin(), mbs.end()), mbs.end());
  if (mbs.front() < 1) throw Error(fmt::format("calibrate: micro-batch sizes must be positive, got {}", mbs.front()));
  return mbs;
}

std::vector<std::string> distinct_in_order(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& n : names)
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  return out;
}

// ---- compute: forward, backward and optimizer step of the whole model, and layer by layer ----

// One rank's whole-model figures at one micro-batch, as every rank receives them.
struct RankCompute {
  double fwd_mean = 0, bwd_mean = 0, optimizer_mean = 0;
  double fwd_rel_iqr = 0, bwd_rel_iqr = 0;
  double fwd_min = 0, fwd_max = 0, bwd_min = 0, bwd_max = 0;
  double fwd_median = 0, bwd_median = 0;
};
struct LayerMeans {
  double fwd = 0, bwd = 0;
};

struct ComputePhase {
  std::map<std::string, DeviceCalibration> by_type;  // one entry per device type, its points by micro-batch
  std::vector<double> rank_rates;                    // achieved FLOP/s per rank at the largest micro-batch
  double worst_rel_iqr = 0, worst_rank_gap = 0;
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

RankCompute rank_compute(const ComputeSample& cs) {
  RankCompute rc;
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
    const double rate =
        mb * (x.workload.fwd_flops_per_sample() + x.workload.bwd_flops_per_sample()) / (v.fwd_mean + v.bwd_mean);
    if (mb == x.mbs.back()) phase.rank_rates[r] = rate;
    phase.worst_rel_iqr = std::max({phase.worst_rel_iqr, v.fwd_rel_iqr, v.bwd_rel_iqr});
    x.say(fmt::format("{:>6} {:>6} {:>10.6f} {:>10.6f} {:>10.6f} {:>10.6f} {:>10.6f} {:>8} {:>8.2f}   fwd [{:.6f}, {:.6f}] "
                      "bwd [{:.6f}, {:.6f}]\n",
                      mb, r, v.fwd_mean, v.fwd_median, v.bwd_mean, v.bwd_median, v.optimizer_mean,
                      pct(std::max(v.fwd_rel_iqr, v.bwd_rel_iqr)), rate / 1e9, v.fwd_min, v.fwd_max, v.bwd_min,
                      v.bwd_max));
    jranks.push_back({{"rank", r}, {"device_type", x.devices[r]}, {"fwd_s_mean", v.fwd_mean}, {"bwd_s_mean", v.bwd_mean},
                      {"optimizer_s_mean", v.optimizer_mean}, {"fwd_rel_iqr", v.fwd_rel_iqr}, {"bwd_rel_iqr", v.bwd_rel_iqr},
                      {"fwd_min", v.fwd_min}, {"fwd_max", v.fwd_max}, {"bwd_min", v.bwd_min}, {"bwd_max", v.bwd_max},
                      {"fwd_s_median", v.fwd_median}, {"bwd_s_median", v.bwd_median}});
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
ComputePhase compute_phase(RunContext& x) {
  x.say(fmt::format("compute: {} warm-up + {} timed iterations per micro-batch on all ranks at once; per rank the "
                    "mean (kept), the median, the spread (p75-p25)/median and [min, max] (seconds)\n",
                    x.o.warmup, x.o.iters));
  ComputePhase phase;
  for (const auto& type : x.type_order) phase.by_type[type] = fresh_device(x, type);
  phase.rank_rates.assign(x.nranks, 0);
  x.details["compute"] = json::array();
  x.say(fmt::format("{:>6} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}\n", "micro", "rank", "fwd_mean", "fwd_med",
                    "bwd_mean", "bwd_med", "opt_mean", "iqr/med", "GFLOP/s"));
  for (int mb : x.mbs) {
    x.world.barrier("calibrate compute barrier");
    const ComputeSample cs = measure_compute(x.s, x.dev, mb, x.o.warmup, x.o.iters, x.nranks);
    // Per rank: the mean (stored), the median and spread (shown); layers' means split the whole.
    const std::vector<RankCompute> ranks = allgather_record(x.world, rank_compute(cs), "calibrate compute gather");
    std::vector<LayerMeans> my_layers;
    for (const auto& l : cs.layers) my_layers.push_back({l.fwd.mean, l.bwd.mean});
    const auto layers = allgather_records(x.world, my_layers, "calibrate layer gather");
    json jmb = {{"micro_batch", mb}, {"ranks", report_compute_ranks(x, phase, mb, ranks)}};
    if (x.root) {
      json jl = json::array();
      for (const auto& l : cs.layers) jl.push_back({{"name", l.name}, {"fwd", spread_json(l.fwd)}, {"bwd", spread_json(l.bwd)}});
      jmb["rank0"] = {{"fwd", spread_json(cs.fwd)}, {"bwd", spread_json(cs.bwd)}, {"optimizer", spread_json(cs.optimizer)},
                      {"layers", jl}};
    }
    x.details["compute"].push_back(jmb);
    for (const auto& type : x.type_order)
      phase.by_type[type].points.push_back(pool_compute_point(x, type, mb, cs, ranks, layers, phase.worst_rank_gap));
  }
  return phase;
}

// ---- op model: the model's ops and a device sweep, each timed alone, fitted per op class ----

struct RankDevice {  // what the fit's start takes from a rank's device
  double threads = 0, sm_count = 0;
};

// What the op timings of every rank hold for one device type.
struct DeviceOps {
  std::string type;
  std::vector<int> members;                 // its ranks
  std::vector<double> pooled;               // per op of the list: the median over the ranks (0: skipped)
  RankDevice shape;                         // the first member's threads and SMs
};

// The fit's start: the sync mode and SMs of the device, the peak from --peak-flops or the best sweep
// GEMM, the bandwidth from --mem-bw or the sweep copies. `mem_bw_source` says which copy.
struct FitStart {
  DeviceFigures figures;
  std::string mem_bw_source;
};
FitStart op_fit_start(const RunContext& x, const DeviceOps& d, const std::vector<OpBenchmark>& list, double llc) {
  FitStart st;
  DeviceFigures& start = st.figures;
  start.device_type = d.type;
  const bool cpu = x.dev.device == "cpu";
  const int threads = static_cast<int>(d.shape.threads);
  const int sms = static_cast<int>(d.shape.sm_count);
  start.sm_count = cpu ? std::max(1, threads) : std::max(1, sms);
  start.async = !cpu;
  // The reference bandwidth: copies that stream from memory, at least 4x the last-level cache read
  // and written (smaller ones run from the cache); without a known cache size, the largest copy.
  double best_gemm = 0, big_copy = 0, largest_copy = 0, largest_copy_bw = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].micro_batch != 0 || !(d.pooled[i] > 0)) continue;
    const Op& op = list[i].op;
    if (op.cls == OpClass::Gemm) best_gemm = std::max(best_gemm, op.flops / d.pooled[i]);
    if (op.name.rfind("sweep.copy.", 0) != 0) continue;
    if (llc > 0 && op.bytes >= 4 * llc) big_copy = std::max(big_copy, op.bytes / d.pooled[i]);
    if (op.bytes > largest_copy) {
      largest_copy = op.bytes;
      largest_copy_bw = op.bytes / d.pooled[i];
    }
  }
  const double best_copy = big_copy > 0 ? big_copy : largest_copy_bw;
  st.mem_bw_source =
      x.o.mem_bw > 0 ? "--mem-bw"
      : big_copy > 0 ? fmt::format("best sweep copy of >= 4x the {} last-level cache", units::format_bytes(llc))
                     : "the largest sweep copy (last-level cache size unknown)";
  start.peak_flops = x.o.peak_flops > 0 ? x.o.peak_flops : best_gemm;
  start.mem_bw = x.o.mem_bw > 0 ? x.o.mem_bw : best_copy;
  return st;
}

// Every op's details entry (what it is, its times, the fit's prediction); each timed op's
// |predicted - measured| / measured by class.
json op_samples_json(const RunContext& x, const DeviceOps& d, const std::vector<OpBenchmark>& list,
                     const std::vector<OpTiming>& timings, const std::vector<std::vector<double>>& times,
                     const DeviceFigures& f, std::map<OpClass, std::vector<double>>& residuals) {
  json jsamples = json::array();
  for (size_t i = 0; i < list.size(); ++i) {
    const Op& op = list[i].op;
    json js = {{"name", op.name}, {"micro_batch", list[i].micro_batch}, {"class", op_class_name(op.cls)}, {"kind", op_kind_name(op.kind)}, {"elems", op.elems}, {"rows", op.rows},
               {"pass", pass_name(op.pass)}, {"batch", op.batch}, {"m", op.m}, {"n", op.n}, {"k", op.k},
               {"flops", op.flops}, {"bytes", op.bytes}, {"kernels", op.kernels}, {"kernel", timings[i].how},
               {"input_sets", timings[i].copies}};
    std::vector<double> per_rank;
    for (int r : d.members) per_rank.push_back(times[r][i]);
    js["seconds_per_rank"] = per_rank;
    const double measured = d.pooled[i];
    if (measured > 0) {
      const double pred = op_sample_time(op, f);
      js["seconds"] = measured;
      js["predicted_s"] = pred;
      residuals[op.cls].push_back(std::abs(pred - measured) / measured);
      if (op.flops > 0) js["flops_per_s"] = op.flops / measured;
      if (op.bytes > 0) js["bytes_per_s"] = op.bytes / measured;
    } else {
      js["skipped"] = true;
    }
    if (x.root && d.members.front() == 0 && !timings[i].skipped) {
      js["rank0"] = spread_json(timings[i].seconds);
      js["rank0_round_median"] = timings[i].round_median;
    }
    jsamples.push_back(js);
  }
  return jsamples;
}

// Stage 1's table: per op class its efficiency and the spread of its residuals; the kernel families'
// own costs and the convolutions' efficiency.
void print_stage1(const RunContext& x, const FitStart& st, const OpModelCalibration& oc,
                  const std::map<OpClass, std::vector<double>>& residuals) {
  const DeviceFigures& f = oc.figures;
  const bool cpu = x.dev.device == "cpu";
  x.say(fmt::format("  {}: peak {} ({}), bandwidth {} ({}), {} {}\n  stage 1, ops alone ({}): host_op_s {}, "
                    "matrix_s {}, tile {}x{}, k_half {:g}, n_half {:g}\n",
                    f.device_type, units::format_flops(f.peak_flops), x.o.peak_flops > 0 ? "--peak-flops" : "best sweep GEMM",
                    units::format_bandwidth(f.mem_bw), st.mem_bw_source, f.sm_count,
                    cpu ? "thread(s), synchronous" : "SMs, asynchronous",
                    kWeightByTime ? "each sample weighted by its time" : "relative errors, every sample alike",
                    units::format_time(f.host_op_s), units::format_time(f.matrix_s), f.tile_m, f.tile_n, f.gemm_k_half,
                    f.gemm_n_half));
  x.say(fmt::format("  {:<12} {:>5} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}\n", "class", "ops", "efficiency", "host_op_s",
                    "k_half", "tile", "med|res|", "max|res|"));
  for (OpClass c : {OpClass::Gemm, OpClass::AttnMatmul, OpClass::Memory, OpClass::Norm}) {
    if (!residuals.count(c)) continue;
    const Spread sp = spread_of(residuals.at(c));
    const double eff = c == OpClass::Gemm         ? f.gemm_efficiency
                       : c == OpClass::AttnMatmul ? f.attn_efficiency
                       : c == OpClass::Norm       ? (f.norm_efficiency > 0 ? f.norm_efficiency : f.mem_efficiency)
                                                  : f.mem_efficiency;
    const bool mm = c == OpClass::Gemm || c == OpClass::AttnMatmul;
    x.say(fmt::format("  {:<12} {:>5} {:>10.3f} {:>10} {:>10} {:>10} {:>9} {:>9}\n", op_class_name(c), sp.count, eff,
                      units::format_time(f.host_op_s), mm ? fmt::format("{:g}", f.gemm_k_half) : "-",
                      mm ? fmt::format("{}x{}", f.tile_m, f.tile_n) : "-", pct(sp.median), pct(sp.max)));
  }
  x.say(fmt::format("  {:<12} {:>5} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}\n", "all", oc.samples, "", "", "", "",
                    pct(oc.median_rel_residual), pct(oc.max_rel_residual)));
  for (int k = 1; k < kOpKinds; ++k) {
    const auto& kf = f.kinds[static_cast<size_t>(k)];
    if (kf.elem_s > 0 || kf.row_s > 0)
      x.say(fmt::format("  kind {:<15} {:.3g} ns per element, {:.3g} ns per row\n", op_kind_name(static_cast<OpKind>(k)),
                        1e9 * kf.elem_s, 1e9 * kf.row_s));
    if (kf.efficiency > 0)
      x.say(fmt::format("  kind {:<15} efficiency {:.3f}\n", op_kind_name(static_cast<OpKind>(k)), kf.efficiency));
  }
}

// Stage 2: the host time per kernel from this device's whole forward + backward passes measured in the
// compute phase (the calibration shape, every calibration micro-batch), the device figures of stage 1
// fixed. Prints the fit and returns its details entry.
json stage2_host_time(const RunContext& x, const DeviceCalibration& measured, const DeviceFigures& stage1, HostFit& hf) {
  std::vector<PassSample> passes;
  for (const auto& cp : measured.points) passes.push_back({cp.micro_batch, cp.fwd_s + cp.bwd_s});
  hf = fit_host_op(x.workload, passes, stage1, OpOptions{x.s.training.precision});
  x.say(fmt::format("  stage 2, whole passes (forward + backward of this shape; measured = s x device sum + host_op_s "
                    "x kernels, least squares on relative errors): host_op_s {} (stage 1: {}), s = {:.3f} (the "
                    "passes' speed against the ops'); largest residual {}\n",
                    units::format_time(hf.host_op_s), units::format_time(stage1.host_op_s), hf.speed,
                    pct(hf.max_rel_residual)));
  x.say(fmt::format("  {:>6} {:>12} {:>12} {:>8} {:>12} {:>12} {:>9} {:>9}\n", "micro", "measured", "device sum",
                    "kernels", "(m-d)/kern", "predicted", "pred/meas", "residual"));
  json jpasses = json::array();
  for (const auto& pt : hf.points) {
    x.say(fmt::format("  {:>6} {:>12} {:>12} {:>8.0f} {:>12} {:>12} {:>+8.1f}% {:>+8.1f}%\n", pt.micro_batch,
                      units::format_time(pt.measured_s), units::format_time(pt.device_s), pt.kernels,
                      units::format_time(pt.implied_host_op_s), units::format_time(pt.predicted_s),
                      100 * (pt.predicted_s / pt.measured_s - 1), 100 * pt.residual));
    jpasses.push_back({{"micro_batch", pt.micro_batch}, {"measured_s", pt.measured_s}, {"device_s", pt.device_s},
                       {"kernels", pt.kernels}, {"implied_host_op_s", pt.implied_host_op_s},
                       {"predicted_s", pt.predicted_s}, {"residual", pt.residual}});
  }
  return {{"host_op_s", hf.host_op_s}, {"speed", hf.speed}, {"max_rel_residual", hf.max_rel_residual}, {"passes", jpasses}};
}

json figures_json(const DeviceFigures& f) {
  return {{"peak_flops", f.peak_flops}, {"mem_bw", f.mem_bw}, {"sm_count", f.sm_count}, {"tile_m", f.tile_m},
          {"tile_n", f.tile_n}, {"gemm_efficiency", f.gemm_efficiency}, {"gemm_k_half", f.gemm_k_half}, {"gemm_n_half", f.gemm_n_half},
          {"attn_efficiency", f.attn_efficiency}, {"mem_efficiency", f.mem_efficiency},
          {"norm_efficiency", f.norm_efficiency}, {"matrix_s", f.matrix_s}, {"kernel_s", f.kernel_s},
          {"host_op_s", f.host_op_s}, {"async", f.async}};
}

// One device type's op model: stage 1 on its ops, stage 2 on its passes; `jtype` its details entry.
OpModelCalibration fit_device_ops(const RunContext& x, const DeviceOps& d, const DeviceCalibration& measured,
                                  const std::vector<OpBenchmark>& list, const std::vector<OpTiming>& timings,
                                  const std::vector<std::vector<double>>& times, double llc, json& jtype) {
  const FitStart st = op_fit_start(x, d, list, llc);
  std::vector<OpSample> samples;
  for (size_t i = 0; i < list.size(); ++i)
    if (d.pooled[i] > 0) samples.push_back({list[i].op, d.pooled[i]});
  OpModelCalibration oc = fit_op_model(samples, st.figures, OpFitOptions{kWeightByTime});
  oc.precision = x.s.training.precision;
  const DeviceFigures stage1 = oc.figures;
  std::map<OpClass, std::vector<double>> residuals;
  const json jsamples = op_samples_json(x, d, list, timings, times, stage1, residuals);
  print_stage1(x, st, oc, residuals);
  HostFit hf;
  const json jstage2 = stage2_host_time(x, measured, stage1, hf);
  oc.figures.host_op_s = hf.host_op_s;
  jtype = {{"figures", figures_json(oc.figures)},
           {"stage1_host_op_s", stage1.host_op_s},
           {"stage2", jstage2},
           {"weight_by_time", kWeightByTime},
           {"last_level_cache_bytes", llc},
           {"peak_flops_source", x.o.peak_flops > 0 ? "--peak-flops" : "best sweep GEMM"},
           {"mem_bw_source", st.mem_bw_source},
           {"samples", oc.samples}, {"median_rel_residual", oc.median_rel_residual},
           {"max_rel_residual", oc.max_rel_residual}, {"ops", jsamples}};
  return oc;
}

// Every rank times the same list at once (as in the compute phase); an op's time for a device type is
// the median over its ranks; every rank fits (deterministic), so the calibration is the same on all.
std::vector<OpModelCalibration> op_model_phase(RunContext& x, const ComputePhase& compute) {
  const double llc = last_level_cache_bytes();
  const std::vector<OpBenchmark> list =
      op_benchmarks(x.workload, x.mbs, x.s.training.precision, x.s.training.micro_batch * x.s.model.tokens(), llc);
  size_t model_ops = 0;
  for (const auto& b : list) model_ops += b.micro_batch > 0;
  x.world.barrier("calibrate op barrier");
  const auto t0 = Clock::now();
  // Operands cold: each op cycles through input sets of twice the last-level cache (64 MiB when sysfs
  // does not say).
  const double cold_bytes = 2 * (llc > 0 ? llc : 32.0 * 1024 * 1024);
  const std::vector<OpTiming> timings = measure_ops(x.s, x.dev, list, x.o.warmup, x.o.iters, cold_bytes, kOpRounds);
  const double took = seconds(t0, Clock::now());
  std::vector<double> mine;  // per op of the list
  for (const auto& t : timings) mine.push_back(t.skipped ? 0.0 : t.round_median);
  const auto times = allgather_records(x.world, mine, "calibrate op gather");
  const auto shapes = allgather_record(x.world, RankDevice{static_cast<double>(x.dev.threads), static_cast<double>(x.dev.sm_count)},
                                       "calibrate device gather");
  const size_t L = list.size();
  x.say(fmt::format("op model: {} ops timed alone on every rank at once in {:.1f} s ({} of the model at micro-batch {}, "
                    "{} in the device sweep), {} rounds over the list, at least {} runs each after {} warm-up, operands "
                    "cold (input sets of {} in turn); an op's time the median of its rounds' means, per device type "
                    "the median over its ranks, fitted by least squares on ln(predicted / measured)\n",
                    L, took, model_ops, fmt::join(x.mbs, ","), L - model_ops, kOpRounds, std::max(3, x.o.iters),
                    std::max(1, x.o.warmup), units::format_bytes(cold_bytes)));
  std::vector<OpModelCalibration> op_models;
  json jops = json::object();
  for (const auto& type : x.type_order) {
    DeviceOps d;
    d.type = type;
    d.members = x.members(type);
    d.shape = shapes[d.members.front()];
    d.pooled.assign(L, 0);
    for (size_t i = 0; i < L; ++i) {
      std::vector<double> v;
      for (int r : d.members) v.push_back(times[r][i]);
      d.pooled[i] = *std::min_element(v.begin(), v.end()) > 0 ? median_of(v) : 0;
    }
    op_models.push_back(fit_device_ops(x, d, compute.by_type.at(type), list, timings, times, llc, jops[type]));
  }
  x.details["op_model"] = {{"precision", precision_name(x.s.training.precision)}, {"seconds_taken_rank0", took},
                           {"device_types", jops}};
  return op_models;
}

// ---- occupancy: the largest micro-batch again on rank 0 alone while the others wait ----
// Devices that share a host's resources (CPU cores sharing memory bandwidth or a physical core, GPUs
// sharing a PCIe switch) can run slower when all are busy; the simulator takes a device's calibrated
// speed whatever the rest of the node does, so a calibration is good for the rank count it was made at.
// Returns fwd+bwd with all ranks busy over rank 0 alone (1 when not measured: one rank, or several hosts).
double occupancy_phase(RunContext& x, const ComputePhase& compute) {
  if (!(x.nranks > 1 && x.world.nodes() == 1)) return 1;
  x.world.barrier("calibrate occupancy barrier");
  double alone = 0;
  if (x.root) {
    ComputeSample cs = measure_compute(x.s, x.dev, x.mbs.back(), x.o.warmup, x.o.iters, x.nranks);
    alone = cs.fwd.mean + cs.bwd.mean;
  }
  x.world.broadcast(&alone, sizeof alone, 0, "calibrate occupancy broadcast");
  const DeviceCalibration& d0 = compute.by_type.at(x.devices[0]);
  const double together = d0.points.back().fwd_s + d0.points.back().bwd_s;
  const double ratio = together / alone;
  x.say(fmt::format("occupancy: micro-batch {} fwd+bwd takes {:.6f} s on rank 0 alone, {:.6f} s with all {} ranks busy "
                    "(x{:.2f}): this calibration holds for {} busy ranks per host\n",
                    x.mbs.back(), alone, together, x.nranks, ratio, x.world.local_size()));
  x.details["occupancy"] = {{"micro_batch", x.mbs.back()}, {"alone_s", alone}, {"all_busy_s", together}};
  return ratio;
}

// ---- host-to-device copies: one batch of the largest micro-batch, as the loader hands it over ----

struct CopyRates {  // one rank's copy bandwidths (bytes/s)
  double pinned = 0, pageable = 0;
};
struct HostToDevice {
  CopyRates median;  // over the ranks
  bool on_cpu = true;
};

HostToDevice copy_phase(RunContext& x) {
  const double batch_bytes = 4.0 * x.mbs.back() * x.s.model.channels * x.s.model.image_size * x.s.model.image_size;
  CopySample copy = measure_copy(x.dev, std::max(batch_bytes, 1024.0 * 1024.0), x.o.warmup, x.o.iters);
  const std::vector<CopyRates> rates = allgather_record(
      x.world, CopyRates{copy.bytes / copy.pinned_s.median, copy.bytes / copy.pageable_s.median}, "calibrate copy gather");
  std::vector<double> pinned_bw, pageable_bw;
  for (const CopyRates& r : rates) {
    pinned_bw.push_back(r.pinned);
    pageable_bw.push_back(r.pageable);
  }
  HostToDevice h2d;
  h2d.median = {median_of(pinned_bw), median_of(pageable_bw)};
  h2d.on_cpu = copy.on_cpu;
  x.say(fmt::format("host-to-device: {} per copy, pinned {} pageable {} (median over ranks){}\n", units::format_bytes(copy.bytes),
                    units::format_bandwidth(h2d.median.pinned), units::format_bandwidth(h2d.median.pageable),
                    copy.on_cpu ? "; CPU device: a memcpy into a freshly allocated tensor, pinned = pageable" : ""));
  x.details["h2d"] = {{"bytes", copy.bytes}, {"on_cpu", copy.on_cpu}, {"pinned_bw_per_rank", pinned_bw},
                      {"pageable_bw_per_rank", pageable_bw}, {"rank0_pinned_s", spread_json(copy.pinned_s)},
                      {"rank0_pageable_s", spread_json(copy.pageable_s)}};
  return h2d;
}

// ---- loader: one worker, the scenario's dataset, resize and augmentation ----

LoaderCalibration loader_phase(RunContext& x) {
  const Scenario& s = x.s;
  x.world.barrier("calibrate loader barrier");
  real::DatasetSplit set = real::open_dataset(s.dataset, s.model, "train");
  real::Transform tf{s.model.image_size, s.run.augment, set.norm, static_cast<uint64_t>(s.training.seed)};
  const int mb = s.training.micro_batch;
  long long batches = x.o.loader_batches > 0 ? x.o.loader_batches : (2048 + mb - 1) / mb;
  batches = std::max(1LL, std::min<long long>(batches, static_cast<long long>(set.source->size()) / x.nranks / mb));
  std::vector<double> rates;
  for (int rep = 0; rep < 1 + 3; ++rep) {  // one warm-up pass (page cache, allocator), three timed
    auto idx = real::shard_indices(set.source->size(), x.rank, x.nranks, s.training.seed, rep, true, true);
    idx.resize(static_cast<size_t>(batches * mb));
    auto a = Clock::now();
    real::Loader loader(*set.source, tf, idx, mb, rep, 0, /*workers=*/1, s.loader.prefetch);
    long long images = 0;
    while (auto b = loader.next()) images += b->size;
    auto e = Clock::now();
    if (rep > 0) rates.push_back(images / seconds(a, e));
  }
  auto all = x.world.allgather({median_of(rates)}, "calibrate loader gather");  // images/s, one per rank
  LoaderCalibration loader_cal;
  loader_cal.dataset = s.dataset.name;
  loader_cal.resize = s.model.image_size;
  loader_cal.images_per_s_per_worker = median_of(all);
  Spread sp = spread_of(all);
  x.say(fmt::format("loader: {} at {} px, one worker, {} batches of {}: {:.0f} images/s (ranks: [{:.0f}, {:.0f}])\n",
                    s.dataset.name, s.model.image_size, batches, mb, sp.median, sp.min, sp.max));
  x.details["loader"] = {{"dataset", s.dataset.name}, {"resize", s.model.image_size}, {"batches", batches},
                         {"micro_batch", mb}, {"images_per_s_per_rank", all}};
  return loader_cal;
}

// ---- all-reduce with the trainer's communicator ----

struct AllreducePhase {
  std::vector<LinkCalibration> links;  // none with one rank
  RingFit fit;
};

// The message sizes: --sizes, else 4 KiB .. 64 MiB x4 plus one bucket and the whole gradient, each
// measured exactly, so the fit holds where it is used.
std::vector<double> allreduce_sizes(const Options& o, double bucket, double gradient) {
  std::vector<double> sizes = o.sizes;
  if (sizes.empty()) {
    for (double b = 4096; b <= 64.0 * 1024 * 1024; b *= 4) sizes.push_back(b);
    sizes.push_back(std::floor(bucket / 4) * 4);
    sizes.push_back(std::floor(gradient / 4) * 4);
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  }
  return sizes;
}

// One size: warm-up, then timed all-reduces each after a barrier; a run's time is the slowest rank's.
Spread time_allreduce(RunContext& x, real::Communicator& comm, size_t floats) {
  std::vector<float> buf(floats, 1.0f);
  std::vector<double> times;
  const int iters = std::max(kAllreduceMinIters, x.o.iters);
  for (int it = 0; it < kAllreduceWarmup + iters; ++it) {
    x.world.barrier("calibrate all-reduce barrier");
    auto a = Clock::now();
    comm.allreduce_sum(buf.data(), floats, comm.mark_ready());
    auto e = Clock::now();
    if (it >= kAllreduceWarmup) times.push_back(seconds(a, e));
  }
  const auto all = allgather_records(x.world, times, "calibrate all-reduce gather");
  std::vector<double> slowest(times.size(), 0);
  for (const auto& rank_times : all)
    for (size_t i = 0; i < times.size(); ++i) slowest[i] = std::max(slowest[i], rank_times[i]);
  return spread_of(slowest);
}

AllreducePhase allreduce_phase(RunContext& x) {
  AllreducePhase out;
  if (x.nranks < 2) return out;
  // What the scenario's trainer reduces per step: the whole fp32 gradient (fp32 whatever the
  // precision), in buckets of at most bucket_size sent back to back. The fit runs up to the whole
  // gradient, so that it describes the sustained rate of a step's all-reduces, not the burst of one
  // small message (a token-bucket-shaped link passes a lone 4 KiB message at several times its rate).
  const double gradient = 4.0 * x.workload.total_params();
  const double bucket = std::min(x.s.parallel.bucket_bytes, gradient);
  const std::vector<double> sizes = allreduce_sizes(x.o, bucket, gradient);
  auto comm = real::make_mpi_communicator(x.world);
  const std::string link_class =
      !x.o.link_class.empty() ? x.o.link_class : x.world.nodes() > 1 ? "inter_node" : "intra_node";
  x.say(fmt::format("all-reduce ({}, {} ranks, class {}): per size {} warm-up + {} timed, each after a barrier; "
                    "time = the slowest rank's\n{:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10}\n",
                    comm->name(), x.nranks, link_class, kAllreduceWarmup, std::max(kAllreduceMinIters, x.o.iters),
                    "bytes", "median_s", "min_s", "max_s", "algbw", "busbw", "fit"));
  std::vector<AllreduceSample> samples;
  std::vector<Spread> spreads;
  json jar = json::array();
  for (double bytes : sizes) {
    const size_t n = std::max<size_t>(1, static_cast<size_t>(bytes / sizeof(float)));
    const Spread sp = time_allreduce(x, *comm, n);
    const double real_bytes = n * sizeof(float);
    samples.push_back({real_bytes, sp.median});
    spreads.push_back(sp);
    jar.push_back({{"bytes", real_bytes}, {"time_s", spread_json(sp)}, {"algbw", algbw(real_bytes, sp.median)},
                   {"busbw", busbw_allreduce(real_bytes, sp.median, x.nranks)}});
  }
  const double fit_max = x.o.fit_max_bytes > 0 ? x.o.fit_max_bytes : gradient;
  std::vector<AllreduceSample> fitted;
  for (const auto& smp : samples)
    if (smp.bytes <= fit_max * 1.0001) fitted.push_back(smp);
  // At least the two smallest sizes, so a fit always exists.
  if (fitted.size() < 2) fitted.assign(samples.begin(), samples.begin() + std::min<size_t>(2, samples.size()));
  const RingFit fit = fit_ring_allreduce(fitted, x.nranks);
  for (size_t i = 0; i < samples.size(); ++i) {
    const auto& sp = spreads[i];
    const double b = samples[i].bytes;
    x.say(fmt::format("{:>12.0f} {:>12.6g} {:>12.6g} {:>12.6g} {:>12} {:>12} {:>+9.1f}%\n", b, sp.median, sp.min, sp.max,
                      units::format_bandwidth(algbw(b, sp.median)), units::format_bandwidth(busbw_allreduce(b, sp.median, x.nranks)),
                      100 * (ring_allreduce_time(fit, b, x.nranks) / sp.median - 1)));
  }
  x.say(fmt::format("fit t = 2(n-1) a + 2(n-1)/n S/B (least squares, relative residuals) over the {} sizes up to {} "
                    "(a step's whole gradient): a = {}, B = {}; largest residual there {}\n",
                    fitted.size(), units::format_bytes(fitted.back().bytes), units::format_time(fit.latency_s),
                    units::format_bandwidth(fit.bandwidth), pct(fit.max_rel_residual)));
  out.links.push_back({link_class, fit.bandwidth, fit.latency_s, x.nranks});
  out.fit = fit;
  x.details["allreduce"] = {{"communicator", comm->name()}, {"link_class", link_class}, {"samples", jar},
                            {"fit", {{"latency_s", fit.latency_s}, {"bandwidth", fit.bandwidth},
                                     {"max_rel_residual", fit.max_rel_residual}, {"fitted_up_to_bytes", fitted.back().bytes}}}};
  return out;
}

// ---- the calibration ----

// Everything one run measured and fitted.
struct Measured {
  ComputePhase compute;
  std::vector<OpModelCalibration> op_models;
  double alone_ratio = 1;
  HostToDevice h2d;
  LoaderCalibration loader;
  AllreducePhase allreduce;
};

// The hosts of the job, sorted, each once, space-separated.
std::string host_list(const std::vector<std::string>& hosts) {
  const std::set<std::string> host_set(hosts.begin(), hosts.end());
  std::string out;
  for (const auto& h : host_set) out += (out.empty() ? "" : " ") + h;
  return out;
}

std::map<std::string, std::string> provenance(const RunContext& x, const Measured& m, const std::string& hosts,
                                              const std::string& date) {
  const Options& o = x.o;
  std::map<std::string, std::string> p;
  p["host"] = hosts;
  p["date"] = date;
  p["command"] = o.command;
  p["versions"] = fmt::format("vitsim {}; libtorch {}; {}", vitsim_version(), torch_version(), mpi_version());
  p["cpu"] = cpu_model();
  p["ranks"] = fmt::format("{} ({} per host, {} intra-op thread(s) each, device {})", x.nranks, x.world.local_size(),
                           x.dev.threads, x.dev.device);
  p["method"] = fmt::format(
      "compute: {} warm-up + {} timed iterations per micro-batch on every rank at once, mean per rank, then the median "
      "over the ranks of a device; layers timed one by one with detached inputs (their shares split the whole-model "
      "times); all-reduce: {} warm-up + {} timed per size after a barrier, the slowest rank's time, median; loader: one "
      "worker, 3 timed passes after one warm-up pass{}",
      o.warmup, o.iters, kAllreduceWarmup, std::max(kAllreduceMinIters, o.iters),
      o.op_model ? "; op model: every op of the model's layers and a GEMM/bmm/copy sweep timed alone with LibTorch "
                   "kernels (mean of the timed runs, median over a device's ranks), efficiencies per op class, host "
                   "time per op, GEMM tile and k_half fitted on ln(predicted / measured)"
                 : "");
  p["noise"] = fmt::format("compute (p75-p25)/median up to {} over iterations; ranks of one device differ by up to {} (fwd+bwd)",
                           pct(m.compute.worst_rel_iqr), pct(m.compute.worst_rank_gap));
  if (m.alone_ratio != 1)
    p["occupancy"] = fmt::format(
        "fwd+bwd at micro-batch {} is x{:.2f} the time of rank 0 alone when all {} ranks of the host compute: the "
        "compute figures hold for {} busy ranks per host",
        x.mbs.back(), m.alone_ratio, x.world.local_size(), x.world.local_size());
  if (m.h2d.on_cpu) p["h2d"] = "CPU device: memcpy into a freshly allocated tensor; pinned = pageable";
  return p;
}

// `fresh` into `entries`, replacing the entries it measures again.
template <class Entry, class Same>
void replace_entry(std::vector<Entry>& entries, const Entry& fresh, Same same) {
  entries.erase(std::remove_if(entries.begin(), entries.end(), [&](const Entry& e) { return same(e, fresh); }),
                entries.end());
  entries.push_back(fresh);
}

// This run's entries merged into `c` (empty, or the file appended to).
void merge_measured(Calibration& c, const RunContext& x, const Measured& m) {
  for (const auto& type : x.type_order)
    replace_entry(c.devices, m.compute.by_type.at(type), [](const DeviceCalibration& e, const DeviceCalibration& d) {
      return e.device_type == d.device_type && e.precision == d.precision && same_shape(e.model, d.model);
    });
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

PlatformText calibrated_platform_text(const RunContext& x, const Measured& m, const std::vector<std::string>& hosts) {
  PlatformText pt;
  pt.name = "calibrated";
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const double loader_overhead = 1.0 / m.loader.images_per_s_per_worker;
  const RingFit& fit = m.allreduce.fit;
  auto device_fig = [&](int r) {
    PlatformDevice pd;
    pd.gpu_model = x.devices[r];
    pd.flops = m.compute.rank_rates[r];
    pd.mem_bw = m.h2d.median.pageable;
    pd.mem_bytes = x.dev.mem_bytes > 0 ? x.dev.mem_bytes : mem_total_bytes() / std::max(1, x.world.local_size());
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
    pd.flops = median_of(m.compute.rank_rates);
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
  std::string prov = fmt::format("  Measured by: {}\n  on {} at {} ({}; {}).\n", x.o.command, c.provenance.at("host"),
                                 c.provenance.at("date"), c.provenance.at("cpu"), c.provenance.at("versions"));
  prov += fmt::format(
      "  - gpu_model: the calibration's device_type; the compute figures come from the calibration file, whose\n"
      "    devices match by this name.\n"
      "  - gpu_flops_fp32 / gpu_efficiency 1: the measured training rate (forward + backward FLOPs of the ViT at\n"
      "    micro-batch {} over the measured time), median over the ranks of the device; a roofline fallback only.\n"
      "  - gpu_mem_bw: the measured host-to-device copy bandwidth (on CPU a memcpy), a stand-in for memory bandwidth.\n"
      "  - device_kind (CPU devices): cpu, LibTorch runs each op on the thread that issues it and copies no batch.\n"
      "  - gpu_mem: {}.\n"
      "  - links: the fitted ring all-reduce edge, a = {} per step and B = {} (largest residual {});\n"
      "    each private link carries a/2 so a device-to-device route has latency a.\n"
      "  - loopback (host-to-device path): the measured copy bandwidth {}.\n"
      "  - loader_image_overhead: 1 / the measured images/s of one loader worker ({:.0f}/s).\n"
      "  - cpu_cores: the cores this host reports.\n",
      x.mbs.back(),
      x.dev.device == "cpu" ? "MemTotal of /proc/meminfo over the ranks of the host"
                            : "NOT the GPU's memory (LibTorch does not report it): host MemTotal over the ranks; "
                              "replace it with the datasheet figure",
      units::format_time(fit.latency_s), units::format_bandwidth(fit.bandwidth), pct(fit.max_rel_residual),
      units::format_bandwidth(m.h2d.median.pinned), m.loader.images_per_s_per_worker);
  return prov;
}

// Rank 0 writes the calibration, the details and the platform file.
void write_outputs(RunContext& x, const Calibration& c, const Measured& m, const std::vector<std::string>& hosts) {
  if (!x.root) return;
  const Options& o = x.o;
  // What calibrate writes, its readers take: a file they would refuse (times falling with the micro-batch on a
  // busy machine) is not written.
  const std::string text = calibration_to_json(c);
  try {
    read_calibration_text(text, o.out);
  } catch (const Error& e) {
    const std::string why = fmt::format("{}; nothing written: the measured times are noisier than the file's checks allow "
                                        "(a busy machine, or too few --iters): measure again, with more --iters", e.what());
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

}  // namespace

Calibration run(const Scenario& s, const Options& o) {
  check_options(o);
  // Freed memory stays in the process, as in `vitsim train` (real/src/io.cpp): the compute phase then
  // times steps as the trainer runs them, without page faults on every step's activations.
  real::keep_freed_memory();
  real::World world(s.run.timeout_s);
  RunContext x(s, o, world);
  x.rank = world.rank();
  x.nranks = world.size();
  x.root = x.rank == 0;
  x.devices = rank_devices(o, x.nranks);
  x.type_order = distinct_in_order(x.devices);
  if (!o.emit_platform.empty() && x.nranks < 2)
    throw Error("--emit-platform needs the all-reduce fit: run calibrate under mpirun with 2 or more ranks");
  x.dev = open_device(s, world.local_rank(), world.local_size());
  x.workload = build_workload(s.model);
  x.details = {{"schema", "vitsim.calibration-details/1"}, {"ranks", x.nranks}, {"devices", x.devices}};
  x.mbs = calibration_micro_batches(s, o);
  x.say(fmt::format("vitsim calibrate: {} rank(s), {} on each ({} intra-op thread(s)), ViT {}px patch {} width {} depth {}, {}\n",
                    x.nranks, x.dev.device, x.dev.threads, s.model.image_size, s.model.patch, s.model.width, s.model.depth,
                    precision_name(s.training.precision)));

  Measured m;
  m.compute = compute_phase(x);
  if (o.op_model) m.op_models = op_model_phase(x, m.compute);
  m.alone_ratio = occupancy_phase(x, m.compute);
  m.h2d = copy_phase(x);
  m.loader = loader_phase(x);
  m.allreduce = allreduce_phase(x);

  Calibration c;
  if (o.append && fs::exists(o.out)) c = read_calibration(o.out);
  const std::vector<std::string> hosts = world.gather(world.host(), 0, "calibrate host gather");  // rank 0's
  std::string earlier;
  if (!c.provenance.empty()) earlier = fmt::format("{} ({})", c.provenance["command"], c.provenance["date"]);
  c.provenance = provenance(x, m, host_list(hosts), now_utc());
  if (!earlier.empty()) c.provenance["appended_to"] = earlier;
  merge_measured(c, x, m);
  write_outputs(x, c, m, hosts);
  world.barrier("calibrate final barrier");
  return c;
}

}  // namespace vitsim::calibrate
