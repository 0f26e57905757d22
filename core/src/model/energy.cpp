#include "vitsim/core/model/energy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim {

double parse_power(const std::string& text) {
  // "<number>W" or "<number>kW"; the number by the one strict reader (no NaN, hex, trailing text).
  std::string_view t(text);
  double scale = 1;
  if (t.size() >= 2 && t.substr(t.size() - 2) == "kW") {
    scale = 1e3;
    t.remove_suffix(2);
  } else if (!t.empty() && t.back() == 'W') {
    t.remove_suffix(1);
  } else {
    throw Error(
        fmt::format("'{}' is not a power: expected watts with their unit (\"700W\", \"1.2kW\")", echo(text)));
  }
  try {
    return scale * units::parse_number(t, units::positive());
  } catch (const Error& e) {
    throw Error(fmt::format("'{}' is not a power: {}", echo(text), e.what()));
  }
}

double gpu_energy_j(const GpuPower& p, double busy_s, double wall_s) {
  const double busy = std::clamp(busy_s, 0.0, std::max(0.0, wall_s));
  return p.busy_w * busy + p.idle_w * (wall_s - busy);
}

PointEnergy point_energy(const std::vector<GpuPower>& power, const std::vector<double>& busy_s_per_step,
                         double step_s, double epoch_s, double price_per_kwh) {
  PointEnergy e;
  if (power.empty() || power.size() != busy_s_per_step.size() || !(step_s > 0)) return e;
  for (const auto& p : power)
    if (!p.known()) return e;
  double joules = 0, dynamic = 0, weighted = 0, plain = 0;
  for (size_t r = 0; r < power.size(); ++r) {
    const double fraction = std::clamp(busy_s_per_step[r] / step_s, 0.0, 1.0);
    joules += gpu_energy_j(power[r], fraction * epoch_s, epoch_s);
    e.busy_w += power[r].busy_w;
    e.idle_w += power[r].idle_w;
    dynamic += power[r].busy_w - power[r].idle_w;
    weighted += (power[r].busy_w - power[r].idle_w) * fraction;
    plain += fraction;
  }
  // Weighted by each GPU's dynamic power, the fraction gives the energy back in one line (energy_kwh);
  // GPUs that draw the same busy or idle make it the plain mean.
  e.busy_fraction = dynamic > 0 ? weighted / dynamic : plain / power.size();
  e.epoch_kwh = joules / 3.6e6;
  e.price_per_kwh = price_per_kwh;
  return e;
}

double energy_kwh(const PointEnergy& e, double epoch_s) {
  return epoch_s * (e.idle_w + e.busy_fraction * (e.busy_w - e.idle_w)) / 3.6e6;
}

double parse_price_per_kwh(const std::string& text, const std::string& what) {
  try {
    return units::parse_number(text, units::non_negative());
  } catch (const Error& e) {
    throw Error(
        fmt::format("{}: {} (a price per kWh, in the currency of the report, e.g. 0.12)", what, e.what()));
  }
}

}  // namespace vitsim
