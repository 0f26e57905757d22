#pragma once
// DeepSpeed's ZeRO-Offload (zero_optimization.offload_optimizer / offload_param, v0.14.4): what one step
// adds when the optimizer state and step, or ZeRO-3's parameters, live on the host: the optimizer step on the
// host's cores (DeepSpeedCPUAdam), the PCIe traffic (gradients down, parameters up), NVMe swaps, and the
// bytes moved off the GPU. docs/model.md "ZeRO-Offload" tells it; each constant's source is in
// docs/sources.md "ZeRO-Offload".
#include <string>
#include <vector>

#include "vitsim/core/model/vit.hpp"

namespace vitsim {

// DeepSpeedCPUAdam's rate: ASSUMPTION until checked (docs/sources.md "ZeRO-Offload"): figures recalled from
// ZeRO-Offload (Ren et al., arXiv 2101.06840) Table 3, which could not be read here, CPU-Adam on a DGX-2's
// 2 x 24-core Xeon Platinum 8168: 1B parameters in 0.22 s .. 10B in 2.57 s, i.e. 6.9e7 .. 9.5e7 parameters
// per second per core; 8.1e7 taken. Also ASSUMPTION: linear in the cores it gets (OpenMP over AVX-512
// lanes). Timing DeepSpeedCPUAdam.step on the host, or the paper's table read, replaces it.
constexpr double kCpuAdamParamsPerCoreS = 8.1e7;
constexpr double kCpuAdamParamsPerCoreSLow = 6.9e7, kCpuAdamParamsPerCoreSHigh = 9.5e7;
// ASSUMPTION: one NVMe drive per node at 3.5 GB/s (PCIe 4 x4 drives' datasheet sequential rates span
// 2 .. 7 GB/s); a measured rate (DeepSpeed's ds_io or fio on nvme_path) would replace it.
constexpr double kNvmeBytesPerS = 3.5e9;
constexpr double kNvmeBytesPerSLow = 2e9, kNvmeBytesPerSHigh = 7e9;

struct OffloadInputs {
  std::string optimizer_device = "none";  // none, cpu, nvme: as configured
  std::string param_device = "none";
  int zero_stage = 0;
  int dp_ranks = 1;  // the partition's divisor
  Precision precision = Precision::FP32;
  int grad_accum = 1;
  std::string optimizer = "adamw";
  double params = 0;       // model parameters
  double pcie_bw = 0;      // bytes/s of this GPU's host link (the batch copy's path)
  double host_cores = 1;   // cores this rank's CPU Adam gets: the node's cores over its ranks
  int ranks_per_node = 1;  // ranks sharing the node's NVMe drive
};

// Which offloads DeepSpeed v0.14.4 uses (engine.py _configure_zero_optimizer): the optimizer's at ZeRO 1-3
// (DeepSpeedZeroOptimizer, DeepSpeedZeroOptimizer_Stage3 take offload_optimizer_config), the parameters' at
// ZeRO-3 only (no other optimizer takes offload_param_config); at ZeRO-0 neither.
bool offloads_optimizer(const std::string& device, int zero_stage);
bool offloads_params(const std::string& device, int zero_stage);

struct OffloadStep {
  double d2h_bytes = 0, h2d_bytes = 0;  // over this GPU's host link, one step
  double pcie_s = 0;                    // (d2h + h2d) / pcie_bw: ASSUMPTION, not overlapped with compute
  double cpu_adam_s = 0;                // the partition's step on host_cores
  double nvme_bytes = 0;                // this node's NVMe reads and writes, one step
  double nvme_s = 0;
  double host_bytes = 0;  // per GPU: optimizer state, fp32 gradients, parameters on the host
  double seconds() const { return pcie_s + cpu_adam_s + nvme_s; }
  std::vector<std::string> notes;  // one line each: what was added and from which figures
};

// One step's offload work for one rank; all zero when nothing is offloaded at this stage.
OffloadStep offload_step(const OffloadInputs& in);

}  // namespace vitsim
