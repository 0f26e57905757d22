#pragma once
// Energy and its cost per epoch (docs/model.md "Energy and cost per epoch"). Pure arithmetic: the simulation
// (sim/simulate.cpp) gives each GPU's busy time, the platform each GPU's power, this file the rest.
//
// The power model, per GPU: `busy_w` while a kernel runs, `idle_w` otherwise (two levels, no DVFS curve).
// The platform states them as gpu_power_busy and gpu_power_idle ("700W"); `vitsim platform` writes the
// catalogue's TDP as the busy power and the catalogue's gpu_idle_power_fraction of it as the idle power
// (data/catalogue.json, docs/sources.md). A platform without them gets no energy figures.
//
// What counts as busy (gpu_busy_s in core/results/report.hpp, from a rank's breakdown): forward, backward,
// the optimizer step, and communication the rank waits for (exposed). Communication hidden behind backward
// overlaps kernels already counted. Collectives count as busy because NCCL's kernels hold SMs for the
// whole collective, spinning on their peers while they wait: the GPU does not fall to its idle clocks. Idle:
// waiting for the loader and host-to-device copies (the copy engines run; the SMs wait). GPU power only: no
// host CPUs, NICs, switches or cooling.
#include <string>
#include <vector>

namespace vitsim {

struct GpuPower {
  double busy_w = 0;  // 0: unknown
  double idle_w = 0;
  bool known() const { return busy_w > 0; }
};

// Energy per epoch of a point (ReportPoint::energy). Unknown (busy_w 0) when the platform states no GPU
// power; optional in reports.
struct PointEnergy {
  double busy_w = 0, idle_w = 0;  // summed over the point's GPUs
  double busy_fraction = 0;       // of the epoch the GPUs are busy, weighted by each GPU's busy_w - idle_w
  double epoch_kwh = 0;
  double price_per_kwh = 0;  // 0: no price given, no energy cost
  bool known() const { return busy_w > 0; }
  double epoch_cost() const { return epoch_kwh * price_per_kwh; }
};

// "700W", "1.2kW" -> watts. Throws Error("'x' is not a power: ...") without location; > 0 required.
double parse_power(const std::string& text);

// Joules one GPU uses over `wall_s` seconds of which `busy_s` are busy (busy_s is clamped to [0, wall_s]):
// busy_w x busy_s + idle_w x (wall_s - busy_s).
double gpu_energy_j(const GpuPower& p, double busy_s, double wall_s);

// A point's energy per epoch from its ranks' power and busy time per step: each rank is busy for
// min(1, busy_s / step_s) of the epoch (the step being the point's, the slowest rank's), idle the rest.
// Leaves it unknown (busy_w 0) when any rank's power is unknown.
// `price_per_kwh` 0: no energy cost.
PointEnergy point_energy(const std::vector<GpuPower>& power, const std::vector<double>& busy_s_per_step,
                         double step_s, double epoch_s, double price_per_kwh);

// The kWh a point's figures give: epoch_s x (idle_w + busy_fraction x (busy_w - idle_w)) / 3.6e6.
double energy_kwh(const PointEnergy& e, double epoch_s);

// A price per kWh as users give it ("0.12"): a finite number >= 0. Throws Error naming `what`.
double parse_price_per_kwh(const std::string& text, const std::string& what);

}  // namespace vitsim
