#pragma once
// The op-model phase of `vitsim calibrate` (phase_op_model.cpp) and its report (op_model_report.cpp): what
// the op timings of every rank hold for one device type, the fit's start, the details entries and the tables.
#include <map>
#include <string>
#include <vector>

#include "harness/phases.hpp"

namespace vitsim::calibrate {

struct RankDevice {  // what the fit's start takes from a rank's device
  double threads = 0, sm_count = 0;
};

// What the op timings of every rank hold for one device type.
struct DeviceOps {
  std::string type;
  std::vector<int> members;    // its ranks
  std::vector<double> pooled;  // per op of the list: the median over the ranks (0: skipped)
  RankDevice shape;            // the first member's threads and SMs
};

// The fit's start: the sync mode and SMs of the device, the peak from --peak-flops or the best sweep
// GEMM, the bandwidth from --mem-bw or the sweep copies. `mem_bw_source` says which copy.
struct FitStart {
  DeviceFigures figures;
  std::string mem_bw_source;
};
// Every op's details entry (what it is, its times, the fit's prediction); each timed op's
// |predicted - measured| / measured by class.
json op_samples_json(const RunContext& x, const DeviceOps& d, const std::vector<OpBenchmark>& list,
                     const std::vector<OpTiming>& timings, const std::vector<std::vector<double>>& times,
                     const DeviceFigures& f, std::map<OpClass, std::vector<double>>& residuals);
// Stage 1's table: per op class its efficiency and the spread of its residuals; the kernel families'
// own costs and the convolutions' efficiency.
void print_stage1(const RunContext& x, const FitStart& st, const OpModelCalibration& oc,
                  const std::map<OpClass, std::vector<double>>& residuals);
// Stage 2: the host time per kernel from this device's whole forward + backward passes measured in the
// compute phase (the calibration shape, every calibration micro-batch), the device figures of stage 1
// fixed. Prints the fit and returns its details entry.
json stage2_host_time(const RunContext& x, const DeviceCalibration& measured, const DeviceFigures& stage1,
                      HostFit& hf);
// A device's figures as the details file writes them.
json figures_json(const DeviceFigures& f);

}  // namespace vitsim::calibrate
