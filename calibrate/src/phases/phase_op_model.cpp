// Op-model phase of `vitsim calibrate`: every op of one layer of each kind at the calibration micro-batches
// and a device sweep, each timed alone with the LibTorch kernel that stands for it, all ranks at once; per
// device type the op model's figures fitted to them (stage 1) and the host time per kernel to the whole
// passes (stage 2).
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "phases/op_model.hpp"
#include "vitsim/core/base/system.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/real/gather.hpp"

namespace vitsim::calibrate {

using real::allgather_record;
using real::allgather_records;

namespace {

FitStart op_fit_start(const RunContext& x, const DeviceOps& d, const std::vector<OpBenchmark>& list,
                      double llc) {
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
    if (op.id != OpId::SweepCopy) continue;
    if (llc > 0 && op.bytes >= 4 * llc) big_copy = std::max(big_copy, op.bytes / d.pooled[i]);
    if (op.bytes > largest_copy) {
      largest_copy = op.bytes;
      largest_copy_bw = op.bytes / d.pooled[i];
    }
  }
  const double best_copy = big_copy > 0 ? big_copy : largest_copy_bw;
  st.mem_bw_source = x.o.mem_bw > 0 ? "--mem-bw"
                     : big_copy > 0 ? fmt::format("best sweep copy of >= 4x the {} last-level cache",
                                                  units::format_bytes(llc))
                                    : "the largest sweep copy (last-level cache size unknown)";
  start.peak_flops = x.o.peak_flops > 0 ? x.o.peak_flops : best_gemm;
  start.mem_bw = x.o.mem_bw > 0 ? x.o.mem_bw : best_copy;
  return st;
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
           {"samples", oc.samples},
           {"median_rel_residual", oc.median_rel_residual},
           {"max_rel_residual", oc.max_rel_residual},
           {"ops", jsamples}};
  return oc;
}
}  // namespace

// Every rank times the same list at once (as in the compute phase); an op's time for a device type is
// the median over its ranks; every rank fits (deterministic), so the calibration is the same on all.
std::vector<OpModelCalibration> op_model_phase(RunContext& x, const ComputePhase& compute) {
  const double llc = x.env.last_level_cache;
  const std::vector<OpBenchmark> list = op_benchmarks(x.workload, x.mbs, x.s.training.precision,
                                                      x.s.training.micro_batch * x.s.model.tokens(), llc);
  size_t model_ops = 0;
  for (const auto& b : list) model_ops += b.micro_batch > 0;
  x.world.barrier("calibrate op barrier");
  const auto t0 = Clock::now();
  // Operands cold: each op cycles through input sets of twice the last-level cache (64 MiB when sysfs
  // does not say).
  const double cold_bytes = 2 * (llc > 0 ? llc : 32.0 * 1024 * 1024);
  const std::vector<OpTiming> timings = measure_ops(x.s, x.dev, list, x.repeats(), cold_bytes, kOpRounds);
  const double took = seconds(t0, Clock::now());
  std::vector<double> mine;  // per op of the list
  for (const auto& t : timings) mine.push_back(t.skipped ? 0.0 : t.round_median);
  const auto times = allgather_records(x.world, mine, "calibrate op gather");
  const auto shapes = allgather_record(
      x.world, RankDevice{static_cast<double>(x.dev.threads), static_cast<double>(x.dev.sm_count)},
      "calibrate device gather");
  const size_t L = list.size();
  x.say(fmt::format(
      "op model: {} ops timed alone on every rank at once in {:.1f} s ({} of the model at micro-batch {}, "
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
    op_models.push_back(
        fit_device_ops(x, d, compute.by_type.at(type), list, timings, times, llc, jops[type]));
  }
  x.details["op_model"] = {{"precision", precision_name(x.s.training.precision)},
                           {"seconds_taken_rank0", took},
                           {"device_types", jops}};
  return op_models;
}

}  // namespace vitsim::calibrate
