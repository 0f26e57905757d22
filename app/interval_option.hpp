#pragma once
// --interval and its flags (--samples, --interval-mode, --interval-seed, --p-low, --p-high, --runs) of
// `vitsim predict` and `vitsim plan` (sim/predict/interval.hpp; docs/predict.md "Intervals and sensitivity"):
// one definition for both, so that the flags read and refuse alike.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "commands.hpp"
#include "vitsim/sim/predict/predict.hpp"

namespace vitsim::app {

// Samples of an interval when --samples is not given: ASSUMPTION, enough for p10 and p90 to fall between
// distinct samples of a Latin hypercube (docs/predict.md, "Intervals and sensitivity"); cost measured in
// docs/benchmarks.md "Prediction intervals".
inline constexpr int kDefaultSamples = 16;

struct IntervalFlags {
  bool on = false;
  int samples = 0;
  std::string mode = "surrogate";
  // The flags that shape an interval: each given implies --interval, as --samples and --runs do (they were
  // ignored without it, issue 39 item 9).
  std::vector<const CLI::Option*> shaping;
};

inline void add_interval_options(CLI::App* c, IntervalFlags& f, sim::IntervalOptions& o,
                                 const std::string& what) {
  c->add_flag("--interval", f.on,
              fmt::format("{} a p10-p90 interval over the platform's ranges (and a calibration's measured "
                          "spans) and what to measure first (docs/predict.md)",
                          what));
  c->add_option("--samples", f.samples,
                fmt::format("Latin-hypercube samples of the interval (implies --interval; default {})",
                            kDefaultSamples))
      ->check(integer(2, 4096));
  f.shaping.push_back(
      c->add_option("--interval-mode", f.mode,
                    "how the samples are evaluated: surrogate (on the additive surrogate of the figures' "
                    "one-at-a-time ends, which the sensitivity simulates anyway, checked by simulating its "
                    "p10 and p90 samples: every sample simulated where it is off by over 1%) or sampled "
                    "(every sample simulated) (implies --interval; default surrogate; docs/predict.md)")
          ->check(CLI::IsMember({"surrogate", "sampled"})));
  // The seed is written into the report's JSON as a signed 64-bit integer, which plot reads back: beyond
  // 2^63-1 or negative it came out negative and plot refused the report (issue 39 item 8).
  f.shaping.push_back(c->add_option("--interval-seed", o.seed,
                                    "the design's seed, 0 .. 2^63-1 (implies --interval; default 26)")
                          ->check(integer(0, std::numeric_limits<long long>::max())));
  const units::Range open_unit{0, 1, true, true};
  f.shaping.push_back(
      c->add_option("--p-low", o.p_low, "the interval's low quantile (implies --interval; default 0.1)")
          ->check(number(open_unit)));
  f.shaping.push_back(
      c->add_option("--p-high", o.p_high, "the interval's high quantile (implies --interval; default 0.9)")
          ->check(number(open_unit)));
  c->add_option(
       "--runs", o.runs,
       "measured runs held against the model: validations (vitsim validate --format json: the ratio "
       "as validated), vitsim train reports or a CSV of scenario keys and step_time_s or "
       "epoch_time_s as vitsim fit reads (the ratio to the model now); the interval also takes in the "
       "central value times the ratios' split-conformal ends, which hold a new run like them at the "
       "stated rate from 9 runs on for p10-p90 (implies --interval; docs/predict.md)")
      ->expected(1, -1);
}

// `--runs a.json s.xml`: a list option takes every value after it, the scenario too; say so where the
// scenario is then missing (before require_scenario's plainer message).
inline void check_runs_took_scenario(const std::string& command, const std::string& scenario,
                                     const sim::IntervalOptions& o) {
  if (!scenario.empty()) return;
  for (const std::string& run : o.runs)
    if (run.size() > 4 && run.compare(run.size() - 4, 4, ".xml") == 0)
      throw UsageError(
          fmt::format("{}: --runs took '{}' as a measured run, and there is no scenario: give the "
                      "scenario before --runs (vitsim {} SCENARIO.xml --runs FILE...)",
                      command, run, command));
}

// The flags as given: o.samples set when an interval is asked for (--interval, or a flag that implies it);
// UsageError when the quantiles are not in order.
inline void resolve_interval(const IntervalFlags& f, sim::IntervalOptions& o) {
  if (!(o.p_low < o.p_high))
    throw UsageError(fmt::format("--p-low {:g} is not below --p-high {:g}", o.p_low, o.p_high));
  const bool shaped =
      std::any_of(f.shaping.begin(), f.shaping.end(), [](const CLI::Option* x) { return x->count() > 0; });
  if (f.on || shaped || f.samples > 0 || !o.runs.empty())
    o.samples = f.samples > 0 ? f.samples : kDefaultSamples;
  o.mode = value_of(sim::kIntervalModeNames, f.mode, "interval mode");
}

}  // namespace vitsim::app
