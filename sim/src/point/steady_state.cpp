// The steady-state search (docs/model.md, simulated window): the verdict over a run of step times, and the
// search itself while the ranks run (StepHorizon::extend, rank_state.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "point/rank_state.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/sim/point/simulate.hpp"

namespace vitsim::sim {

SteadyState steady_state(const std::vector<double>& step_s, int period, double loader_step_s,
                         double tolerance) {
  SteadyState v;
  // A loader that sustains twice the pace of the steps keeps its queue full: its bursts do not show in
  // the steps, so they need not be averaged over whole periods.
  const double overall =
      step_s.empty() ? 0 : std::accumulate(step_s.begin(), step_s.end(), 0.0) / step_s.size();
  const bool loader_binds = loader_step_s > 0 && loader_step_s >= 0.5 * overall;
  const size_t q = static_cast<size_t>(loader_binds ? std::max(1, period) : 1);
  const size_t m = step_s.size() / (2 * q);
  if (m == 0) {
    v.why =
        fmt::format("{} measured steps are fewer than two loader periods ({} steps each)", step_s.size(), q);
    return v;
  }
  const size_t half = m * q;
  const auto first = step_s.end() - static_cast<ptrdiff_t>(2 * half),
             mid = first + static_cast<ptrdiff_t>(half);
  const double a = std::accumulate(first, mid, 0.0) / half,
               b = std::accumulate(mid, step_s.end(), 0.0) / half;
  const double mean = (a + b) / 2;
  v.window = static_cast<int>(2 * half);
  if (std::fabs(b - a) > tolerance * std::max(a, b)) {
    v.why = fmt::format("the step time still trends ({} then {} over two halves of {} steps)",
                        units::format_time(a), units::format_time(b), half);
    return v;
  }
  if (loader_step_s > 0 && mean < loader_step_s * (1 - tolerance)) {
    v.why = fmt::format(
        "steps of {} are faster than the loader can sustain ({} a step): its prefetched queue is "
        "draining",
        units::format_time(mean), units::format_time(loader_step_s));
    return v;
  }
  v.steady = true;
  return v;
}

bool StepHorizon::extend(int k, const std::vector<RankState>& ranks) {
  if (decided_at == k) return steps > k;  // another rank decided at this boundary
  decided_at = k;
  if (k >= bound) return false;
  size_t known = SIZE_MAX;
  for (const auto& r : ranks) known = std::min(known, r.step_times.size());
  std::vector<double> step_max(known, 0.0);
  for (const auto& r : ranks)
    for (size_t i = 0; i < known; ++i) step_max[i] = std::max(step_max[i], r.step_times[i]);
  if (steady_state(step_max, period, loader_step_s).steady) return false;
  steps =
      static_cast<int>(std::min<long long>(bound, std::max<long long>(2LL * k, warmup + 4LL * period + 2)));
  extended = true;
  return steps > k;
}

}  // namespace vitsim::sim
