// validate as a guide: the likely causes of a failed validation from what validate has (validate.hpp
// diagnose): the predicted report's notes (which compute model each device used), the per-phase errors and
// the run's own spread.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/validate/validate.hpp"

namespace vitsim::validate {

namespace {

// The phases of a step, as the breakdown names them; comm_total overlaps the others and is left out.
const char* const kPhases[] = {"data", "h2d", "compute_fwd", "compute_bwd", "optimizer", "comm_exposed"};

// Device types whose compute came from the platform file's figures: the simulator's note
// "compute on D: op-level model (platform figures), ..." (sim/src/point/rank_setup.cpp, compute_model.cpp).
std::set<std::string> uncalibrated_devices(const Report& predicted) {
  std::set<std::string> out;
  const std::string head = "compute on ", tail = ": op-level model (platform figures)";
  for (const auto& p : predicted.points)
    for (const auto& n : p.notes)
      if (n.rfind(head, 0) == 0) {
        const size_t at = n.find(tail);
        if (at != std::string::npos) out.insert(n.substr(head.size(), at - head.size()));
      }
  return out;
}

std::string join(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string describe(const std::map<std::string, std::string>& params) {
  std::string out;
  for (const auto& [k, v] : params) out += (out.empty() ? "" : " ") + k + "=" + v;
  return out;
}

Cause uncalibrated(const std::set<std::string>& devices, const Report& predicted,
                   const DiagnoseContext& ctx) {
  double peak = 0;
  for (const auto& p : predicted.points) peak = std::max(peak, p.peak_flops);
  const std::string figures =
      peak > 0 ? fmt::format(" (a peak of {:.3g} GFLOP/s per device)", peak / 1e9) : std::string();
  const std::string why = ctx.calibration.empty() ? "no --calibration was given"
                                                  : fmt::format("the calibration {} has no figures for {}",
                                                                ctx.calibration, join(devices));
  return {
      "uncalibrated",
      fmt::format("no calibration: compute on {} rests on the platform file's assumed figures{}, not on "
                  "measurements of this machine ({}). Measure it, then validate against the "
                  "measurements: mpirun -np {} vitsim calibrate {} --out calib.json --emit-platform "
                  "calibrated.xml; point the scenario's cluster.platform at calibrated.xml; vitsim validate "
                  "{} --calibration calib.json ...",
                  join(devices), figures, why, std::max(2, ctx.ranks), ctx.scenario, ctx.scenario)};
}

// What makes a phase's prediction differ from the run, by phase and by the sign of the error.
std::string phase_hint(const std::string& phase, double rel, bool calibrated) {
  const bool high = rel > 0;  // predicted above measured
  if (phase == "compute_fwd" || phase == "compute_bwd" || phase == "optimizer") {
    if (!calibrated) return "compute comes from the platform's figures (above)";
    return high ? "the calibration measured this device slower than the run found it: was the machine busy "
                  "while calibrating? Calibrate again when it is idle (calibrate prints its spread), then "
                  "train"
                : "the run was slower than the calibration measured: was the machine busy during the run, or "
                  "did the run have fewer cores per rank than the calibration (other processes, loader "
                  "workers, more ranks per host)? Calibrate with the ranks per host you train with, on an "
                  "idle machine";
  }
  if (phase == "comm_exposed")
    return high ? "the gradient all-reduce ran faster than the platform's links predict: calibrate measures "
                  "them with the trainer's communicator (--emit-platform writes them)"
                : "the exposed all-reduce includes the wait for the slowest rank and the waking of the "
                  "communication thread; calibrate measures both at the gradient's size with all ranks "
                  "computing (its 'step sync' line, docs/calibrate-validate.md), and a platform from "
                  "calibrate --emit-platform carries them";
  if (phase == "data")
    return "waiting for the loader: the calibration's loader figure (one worker's images/s) or "
           "loader.workers does not match the run";
  return "host-to-device copies: the calibration's copy bandwidth does not match the run";
}

}  // namespace

std::vector<Cause> diagnose(const Validation& v, const Report& predicted, const DiagnoseContext& ctx) {
  std::vector<Cause> out;
  if (v.pass) return out;
  const std::set<std::string> devices = uncalibrated_devices(predicted);
  if (!devices.empty()) out.push_back(uncalibrated(devices, predicted, ctx));

  // The phase furthest off, in seconds averaged over the points.
  double step_err = 0, best = 0;
  std::string phase;
  const MetricError* worst = nullptr;
  const PointComparison* worst_point = nullptr;
  for (const char* name : kPhases) {
    double sum = 0;
    const MetricError* w = nullptr;
    const PointComparison* wp = nullptr;
    for (const auto& p : v.points)
      for (const auto& e : p.metrics)
        if (e.metric == name) {
          sum += std::fabs(e.predicted - e.measured);
          if (!w || std::fabs(e.predicted - e.measured) > std::fabs(w->predicted - w->measured)) {
            w = &e;
            wp = &p;
          }
        }
    if (sum > best) {
      best = sum;
      phase = name;
      worst = w;
      worst_point = wp;
    }
  }
  for (const auto& p : v.points)
    for (const auto& e : p.metrics)
      if (e.metric == "step_time") step_err += std::fabs(e.predicted - e.measured);
  if (worst && best >= 0.25 * step_err && best > 0) {
    const double rel =
        worst->measured > 0 ? (worst->predicted - worst->measured) / worst->measured : INFINITY;
    out.push_back(
        {"phase",
         fmt::format("{} is the phase furthest off: predicted {} against {} measured ({}) at point {}; it "
                     "accounts for {:.0f}% of the step-time error over the points. {}",
                     phase, units::format_time(worst->predicted), units::format_time(worst->measured),
                     signed_percent(rel, 1), describe(worst_point->params),
                     std::min(100.0, 100 * best / std::max(step_err, 1e-300)),
                     phase_hint(phase, rel, devices.empty()))});
  }
  if (v.noise > v.tolerance)
    out.push_back(
        {"noise",
         fmt::format("the machine's noise is {:.1f}%: the run's step times spread by that much (p95 over the "
                     "median, point {}), more than the tolerance of {:.1f}%, so one run cannot show an error "
                     "below it. Measure when the machine is idle (uptime), or compare the mean of several "
                     "runs (bench/validate_local.sh)",
                     100 * v.noise, v.noise_point, 100 * v.tolerance)});
  return out;
}

}  // namespace vitsim::validate
