// Occupancy phase of `vitsim calibrate`: the largest micro-batch again on rank 0 alone while the others wait.
#include <fmt/format.h>

#include "harness/phases.hpp"

namespace vitsim::calibrate {

// Devices that share a host's resources (CPU cores sharing memory bandwidth or a physical core, GPUs
// sharing a PCIe switch) can run slower when all are busy; the simulator takes a device's calibrated
// speed whatever the rest of the node does, so a calibration is good for the rank count it was made at.
// Returns fwd+bwd with all ranks busy over rank 0 alone (1 when not measured: one rank, or several hosts).
double occupancy_phase(RunContext& x, const ComputePhase& compute) {
  if (!(x.nranks > 1 && x.world.nodes() == 1)) return 1;
  x.world.barrier("calibrate occupancy barrier");
  double alone = 0;
  if (x.root) {
    ComputeSample cs = measure_compute(x.s, x.dev, x.mbs.back(), x.repeats(), x.nranks);
    alone = cs.fwd.mean + cs.bwd.mean;
  }
  x.world.broadcast(&alone, sizeof alone, 0, "calibrate occupancy broadcast");
  const DeviceCalibration& d0 = compute.by_type.at(x.devices[0]);
  const double together = d0.points.back().fwd_s + d0.points.back().bwd_s;
  const double ratio = together / alone;
  x.say(fmt::format(
      "occupancy: micro-batch {} fwd+bwd takes {:.6f} s on rank 0 alone, {:.6f} s with all {} ranks busy "
      "(x{:.2f}): this calibration holds for {} busy ranks per host\n",
      x.mbs.back(), alone, together, x.nranks, ratio, x.world.local_size()));
  x.details["occupancy"] = {{"micro_batch", x.mbs.back()}, {"alone_s", alone}, {"all_busy_s", together}};
  return ratio;
}

}  // namespace vitsim::calibrate
