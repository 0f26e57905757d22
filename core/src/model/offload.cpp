#include "vitsim/core/model/offload.hpp"
// ZeRO-Offload's step as DeepSpeed v0.14.4 runs it (commit d254d75e; docs/sources.md "ZeRO-Offload"):
// ZeRO 1/2, runtime/zero/stage_1_and_2.py: async_accumulate_grad_in_cpu_via_gpu brings the host's accumulated
// gradients up and sends them back down on every micro-batch but the last (in the parameters' dtype);
// async_inplace_copy_grad_to_fp32_buffer_from_gpu sends the partition's gradients down as fp32 at the
// accumulation boundary; step() runs DeepSpeedCPUAdam on the fp32 partition and copies it up with
// fp32_partition.to(device) (4 bytes an element) into the bit16 partition. ZeRO-3, runtime/zero/stage3.py:
// the partition's gradients go down into the fp32 host buffer every micro-batch (ASSUMPTION: 4 bytes an
// element, as stages 1/2), the step runs on the host and the bit16 partition is copied up (in the
// parameters' dtype, ASSUMPTION: converted on the host) unless the parameters live there too; with
// offload_param each module's partition comes up before its all-gather, in forward and again in backward.
#include <fmt/format.h>

#include <algorithm>

#include "vitsim/core/base/units.hpp"
#include "vitsim/core/model/memory.hpp"

namespace vitsim {

bool offloads_optimizer(const std::string& device, int zero_stage) {
  return device != "none" && zero_stage >= 1;
}
bool offloads_params(const std::string& device, int zero_stage) {
  return device != "none" && zero_stage == 3;
}

OffloadStep offload_step(const OffloadInputs& in) {
  OffloadStep out;
  const bool opt = offloads_optimizer(in.optimizer_device, in.zero_stage);
  const bool par = offloads_params(in.param_device, in.zero_stage);
  if (!opt && !par) return out;
  const double pp = in.params / std::max(1, in.dp_ranks);  // this rank's partition
  const double e = precision_bytes(in.precision);
  const double a = std::max(1, in.grad_accum);
  // The fp32 master and the optimizer's moments live on the host whatever the GPU's dtype (DeepSpeed keeps
  // an fp32 partition there: single_partition_of_fp32_groups, fp32_partitioned_groups_flat).
  const double state = optimizer_bytes_per_param(in.optimizer, Precision::BF16);
  double nvme_per_rank = 0;
  if (opt) {
    if (in.zero_stage <= 2) {
      out.d2h_bytes += (a - 1) * pp * e + pp * 4;
      out.h2d_bytes += (a - 1) * pp * e + pp * 4;
    } else {
      out.d2h_bytes += a * pp * 4;
      if (!par) out.h2d_bytes += pp * e;
    }
    out.cpu_adam_s = pp / (kCpuAdamParamsPerCoreS * std::max(in.host_cores, 1e-9));
    out.host_bytes += pp * (state + 4);  // master, moments and the fp32 gradients
    if (in.optimizer_device == "nvme") nvme_per_rank += 2 * pp * state;  // swapped in and out each step
  }
  if (par) {
    out.h2d_bytes += 2 * a * pp * e;
    out.host_bytes += pp * e;
    if (in.param_device == "nvme") nvme_per_rank += 2 * a * pp * e + pp * e;  // read each pass, written once
  }
  if (in.pcie_bw > 0) out.pcie_s = (out.d2h_bytes + out.h2d_bytes) / in.pcie_bw;
  out.nvme_bytes = nvme_per_rank * std::max(1, in.ranks_per_node);
  out.nvme_s = out.nvme_bytes / kNvmeBytesPerS;
  const auto gib = [](double b) { return units::format_bytes(b); };
  std::string what = opt ? fmt::format("optimizer to {}", in.optimizer_device) : "";
  if (par) what += fmt::format("{}parameters to {}", what.empty() ? "" : ", ", in.param_device);
  out.notes.push_back(fmt::format(
      "ZeRO-Offload ({}): +{} a step, not overlapped with compute (an upper bound): PCIe {} down + {} up at "
      "{}/s{}{}; {} per GPU held in host memory instead",
      what, units::format_time(out.seconds()), gib(out.d2h_bytes), gib(out.h2d_bytes), gib(in.pcie_bw),
      opt ? fmt::format(", CPU Adam over {:.3g} parameters on {:.3g} cores {} ({:.2g} .. {:.2g} "
                        "parameters/s a core, ZeRO-Offload's CPU-Adam)",
                        pp, in.host_cores, units::format_time(out.cpu_adam_s), kCpuAdamParamsPerCoreSLow,
                        kCpuAdamParamsPerCoreSHigh)
          : "",
      out.nvme_bytes > 0 ? fmt::format(", NVMe {} a node {} (ASSUMPTION {}/s a drive)", gib(out.nvme_bytes),
                                       units::format_time(out.nvme_s), gib(kNvmeBytesPerS))
                         : "",
      gib(out.host_bytes)));
  return out;
}

}  // namespace vitsim
