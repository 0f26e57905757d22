// The op-model phase's report (op_model.hpp): each op's details entry, stage 1's table, stage 2's fit.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "phases/op_model.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim::calibrate {

json op_samples_json(const RunContext& x, const DeviceOps& d, const std::vector<OpBenchmark>& list,
                     const std::vector<OpTiming>& timings, const std::vector<std::vector<double>>& times,
                     const DeviceFigures& f, std::map<OpClass, std::vector<double>>& residuals) {
  json jsamples = json::array();
  for (size_t i = 0; i < list.size(); ++i) {
    const Op& op = list[i].op;
    json js = {{"name", op.name},
               {"micro_batch", list[i].micro_batch},
               {"class", op_class_name(op.cls)},
               {"kind", op_kind_name(op.kind)},
               {"elems", op.elems},
               {"rows", op.rows},
               {"pass", pass_name(op.pass)},
               {"batch", op.batch},
               {"m", op.m},
               {"n", op.n},
               {"k", op.k},
               {"flops", op.flops},
               {"bytes", op.bytes},
               {"kernels", op.kernels},
               {"kernel", timings[i].how},
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

void print_stage1(const RunContext& x, const FitStart& st, const OpModelCalibration& oc,
                  const std::map<OpClass, std::vector<double>>& residuals) {
  const DeviceFigures& f = oc.figures;
  const bool cpu = x.dev.device == "cpu";
  x.say(
      fmt::format("  {}: peak {} ({}), bandwidth {} ({}), {} {}\n  stage 1, ops alone ({}): host_op_s {}, "
                  "matrix_s {}, tile {}x{}, k_half {:g}, n_half {:g}\n",
                  f.device_type, units::format_flops(f.peak_flops),
                  x.o.peak_flops > 0 ? "--peak-flops" : "best sweep GEMM", units::format_bandwidth(f.mem_bw),
                  st.mem_bw_source, f.sm_count, cpu ? "thread(s), synchronous" : "SMs, asynchronous",
                  kWeightByTime ? "each sample weighted by its time" : "relative errors, every sample alike",
                  units::format_time(f.host_op_s), units::format_time(f.matrix_s), f.tile_m, f.tile_n,
                  f.gemm_k_half, f.gemm_n_half));
  x.say(fmt::format("  {:<12} {:>5} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}\n", "class", "ops", "efficiency",
                    "host_op_s", "k_half", "tile", "med|res|", "max|res|"));
  for (OpClass c : {OpClass::Gemm, OpClass::AttnMatmul, OpClass::Memory, OpClass::Norm}) {
    if (!residuals.count(c)) continue;
    const Spread sp = spread_of(residuals.at(c));
    const double eff = c == OpClass::Gemm         ? f.gemm_efficiency
                       : c == OpClass::AttnMatmul ? f.attn_efficiency
                       : c == OpClass::Norm ? (f.norm_efficiency > 0 ? f.norm_efficiency : f.mem_efficiency)
                                            : f.mem_efficiency;
    const bool mm = c == OpClass::Gemm || c == OpClass::AttnMatmul;
    x.say(fmt::format("  {:<12} {:>5} {:>10.3f} {:>10} {:>10} {:>10} {:>9} {:>9}\n", op_class_name(c),
                      sp.count, eff, units::format_time(f.host_op_s),
                      mm ? fmt::format("{:g}", f.gemm_k_half) : "-",
                      mm ? fmt::format("{}x{}", f.tile_m, f.tile_n) : "-", pct(sp.median), pct(sp.max)));
  }
  x.say(fmt::format("  {:<12} {:>5} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}\n", "all", oc.samples, "", "", "",
                    "", pct(oc.median_rel_residual), pct(oc.max_rel_residual)));
  for (int k = 1; k < kOpKinds; ++k) {
    const auto& kf = f.kinds[static_cast<size_t>(k)];
    if (kf.elem_s > 0 || kf.row_s > 0)
      x.say(fmt::format("  kind {:<15} {:.3g} ns per element, {:.3g} ns per row\n",
                        op_kind_name(static_cast<OpKind>(k)), 1e9 * kf.elem_s, 1e9 * kf.row_s));
    if (kf.efficiency > 0)
      x.say(fmt::format("  kind {:<15} efficiency {:.3f}\n", op_kind_name(static_cast<OpKind>(k)),
                        kf.efficiency));
  }
}

json stage2_host_time(const RunContext& x, const DeviceCalibration& measured, const DeviceFigures& stage1,
                      HostFit& hf) {
  std::vector<PassSample> passes;
  for (const auto& cp : measured.points) passes.push_back({cp.micro_batch, cp.fwd_s + cp.bwd_s});
  hf = fit_host_op(x.workload, passes, stage1, OpOptions{x.s.training.precision});
  x.say(fmt::format(
      "  stage 2, whole passes (forward + backward of this shape; measured = s x device sum + host_op_s "
      "x kernels, least squares on relative errors): host_op_s {} (stage 1: {}), s = {:.3f} (the "
      "passes' speed against the ops'); largest residual {}\n",
      units::format_time(hf.host_op_s), units::format_time(stage1.host_op_s), hf.speed,
      pct(hf.max_rel_residual)));
  x.say(fmt::format("  {:>6} {:>12} {:>12} {:>8} {:>12} {:>12} {:>9} {:>9}\n", "micro", "measured",
                    "device sum", "kernels", "(m-d)/kern", "predicted", "pred/meas", "residual"));
  json jpasses = json::array();
  for (const auto& pt : hf.points) {
    x.say(fmt::format("  {:>6} {:>12} {:>12} {:>8.0f} {:>12} {:>12} {:>+8.1f}% {:>+8.1f}%\n", pt.micro_batch,
                      units::format_time(pt.measured_s), units::format_time(pt.device_s), pt.kernels,
                      units::format_time(pt.implied_host_op_s), units::format_time(pt.predicted_s),
                      100 * (pt.predicted_s / pt.measured_s - 1), 100 * pt.residual));
    jpasses.push_back({{"micro_batch", pt.micro_batch},
                       {"measured_s", pt.measured_s},
                       {"device_s", pt.device_s},
                       {"kernels", pt.kernels},
                       {"implied_host_op_s", pt.implied_host_op_s},
                       {"predicted_s", pt.predicted_s},
                       {"residual", pt.residual}});
  }
  return {{"host_op_s", hf.host_op_s},
          {"speed", hf.speed},
          {"max_rel_residual", hf.max_rel_residual},
          {"passes", jpasses}};
}

json figures_json(const DeviceFigures& f) {
  return {{"peak_flops", f.peak_flops},
          {"mem_bw", f.mem_bw},
          {"sm_count", f.sm_count},
          {"tile_m", f.tile_m},
          {"tile_n", f.tile_n},
          {"gemm_efficiency", f.gemm_efficiency},
          {"gemm_k_half", f.gemm_k_half},
          {"gemm_n_half", f.gemm_n_half},
          {"attn_efficiency", f.attn_efficiency},
          {"mem_efficiency", f.mem_efficiency},
          {"norm_efficiency", f.norm_efficiency},
          {"matrix_s", f.matrix_s},
          {"kernel_s", f.kernel_s},
          {"host_op_s", f.host_op_s},
          {"async", f.async}};
}

}  // namespace vitsim::calibrate
