// Rounds over time (calibrate.hpp run_rounds): the phases' rounds interleaved, their spread judged against a
// stated limit, a noisy phase repeated; and the step-to-step variability of a repeated step. No Torch, no
// MPI: the phases give their rounds and spreads as functions, the tests give injected ones.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "vitsim/calibrate/calibrate.hpp"
#include "vitsim/core/base/error.hpp"

namespace vitsim::calibrate {

double round_spread(std::vector<double> rounds) {
  if (rounds.size() < 2) return 0;
  std::sort(rounds.begin(), rounds.end());
  const size_t k = (rounds.size() - 1) / 2;
  const double kept = rounds[k];
  if (!(kept > 0))
    throw Error(fmt::format("round_spread: the kept round's figure must be > 0, got {}", kept));
  const double below = rounds[k > 0 ? k - 1 : 0];
  const double above = rounds[std::min(k + 1, rounds.size() - 1)];
  return (above - below) / kept;
}

double step_cv_of(const std::vector<std::vector<double>>& rounds) {
  double sum_sq = 0;
  int counted = 0;
  for (const std::vector<double>& r : rounds) {
    if (r.size() < 2) continue;
    double mean = 0;
    for (double t : r) mean += t / static_cast<double>(r.size());
    if (!(mean > 0)) throw Error(fmt::format("step_cv_of: a round's mean step must be > 0, got {}", mean));
    double var = 0;
    for (double t : r) var += (t - mean) * (t - mean) / static_cast<double>(r.size() - 1);
    sum_sq += var / (mean * mean);
    ++counted;
  }
  return counted > 0 ? std::sqrt(sum_sq / counted) : 0;
}

std::vector<RoundCheck> run_rounds(const std::vector<RoundedPhase>& phases, const RoundRules& rules,
                                   const std::function<void(const std::string&)>& say) {
  if (rules.rounds < 1 || rules.max_repeats < 0 || !(rules.limit > 0))
    throw Error(fmt::format("run_rounds: need rounds >= 1, max_repeats >= 0 and limit > 0, got {}, {}, {}",
                            rules.rounds, rules.max_repeats, rules.limit));
  std::vector<RoundCheck> checks(phases.size());
  for (RoundCheck& c : checks) c.limit = rules.limit;
  for (int round = 0; round < rules.rounds; ++round)
    for (size_t p = 0; p < phases.size(); ++p) {
      phases[p].measure_round();
      checks[p].rounds++;
    }
  for (size_t p = 0; p < phases.size(); ++p) checks[p].spread = phases[p].spread();
  for (int repeat = 1; repeat <= rules.max_repeats; ++repeat) {
    bool any = false;
    for (size_t p = 0; p < phases.size(); ++p) {
      RoundCheck& c = checks[p];
      if (!(c.spread > rules.limit)) continue;
      any = true;
      say(fmt::format("{} rounds spread {:.1f}% (limit {:.0f}%): repeating, round {} of at most {}",
                      phases[p].name, 100 * c.spread, 100 * rules.limit, c.rounds + 1,
                      rules.rounds + rules.max_repeats));
      phases[p].measure_round();
      c.rounds++;
      c.repeats++;
    }
    if (!any) break;
    for (size_t p = 0; p < phases.size(); ++p)
      if (checks[p].repeats == repeat) checks[p].spread = phases[p].spread();
  }
  for (size_t p = 0; p < phases.size(); ++p) {
    RoundCheck& c = checks[p];
    c.noisy = c.spread > rules.limit;
    if (c.noisy)
      say(fmt::format(
          "warning: the {} rounds still spread {:.1f}% after {} repeat(s) (limit {:.0f}%): the machine was "
          "noisy while they ran; the calibration marks the phase noisy (\"rounds\" in the file)",
          phases[p].name, 100 * c.spread, c.repeats, 100 * rules.limit));
  }
  return checks;
}

SyncSpanFigure sync_span_of(const std::vector<std::vector<double>>& rests,
                            const std::vector<double>& fitted) {
  SyncSpanFigure f;
  double total = 0;
  for (double x : fitted) total += std::max(0.0, x);
  if (rests.size() < 2 || !(total > 0)) return f;
  for (const std::vector<double>& round : rests) {
    if (round.size() != fitted.size())
      throw Error(fmt::format("sync_span_of: a round has {} micro-batch(es), the fit {}", round.size(),
                              fitted.size()));
    double sum = 0;
    for (double x : round) sum += std::max(0.0, x);
    f.rounds.push_back(sum / total);
  }
  const auto [least, most] = std::minmax_element(f.rounds.begin(), f.rounds.end());
  f.low = std::clamp(*least, 0.01, 1.0);
  f.high = std::clamp(*most, 1.0, 100.0);
  return f;
}

StepCvFigure step_cv_figure(const std::vector<double>& cvs) {
  if (cvs.empty()) throw Error("step_cv_figure: no step cv measured");
  constexpr double kMostCv =
      0.999;  // the file's bound: a cv in [0, 1) (core/src/formats/calibration_json.cpp)
  const auto [least, most] = std::minmax_element(cvs.begin(), cvs.end());
  StepCvFigure f;
  f.value = std::min(spread_of(cvs).median, kMostCv);
  f.low = std::min(*least, f.value);
  f.high = std::min(*most, kMostCv);
  return f;
}

}  // namespace vitsim::calibrate
