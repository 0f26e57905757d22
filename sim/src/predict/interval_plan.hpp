#pragma once
// The interval's simulations planned (sim/predict/interval.hpp's add_intervals and IntervalPlan, in two
// files by concern: this one plans the runs, interval.cpp simulates and reads them): per platform of the
// points, its ranged figures and the calibration's measured spans, the Latin hypercube's rows and each
// figure's two ends as copies of the platform and the calibration, and the runs over them.
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/sim/predict/interval.hpp"

namespace vitsim::sim {

struct IntervalOptions;

// What one simulation of the interval is: point `point`, sample `sample` (or figure `figure` at an end).
// Figures 0..k-1 are the platform's ranged figures, k.. the calibration's measured spans.
struct Run {
  size_t point = 0;
  int sample = -1;  // >= 0: a sample of the design
  int figure = -1;  // >= 0 with sample < 0: figure at its low (end 0) or high (end 1)
  int end = 0;
};

// A measured span of the calibration (core/formats/calibration.hpp) that a platform's points may use: a
// device type the platform has; its compute or sync figures (MeasuredSpan, a factor), or its occupancy
// factor (the alone factor drawn between the measured one and 1: the occupancy phase timed the largest
// calibration micro-batch only, how much of it holds at another is not measured), or its step cv (the
// straggler figure, drawn in the least..most of calibrate's per-rank, per-micro-batch cvs).
struct SpanFigure {
  enum Kind { Compute, Sync, Occupancy, StepCv };
  size_t device = 0;
  Kind kind = Compute;
  double low = 1, high = 1;
  std::string why, device_type;
  double value = 1;  // where the point as predicted has it (a factor of 1; the occupancy, the cv as measured)
};

// One platform file of the points: its figures, the calibration's spans, and the design over both.
struct PlatformPlan {
  std::vector<RangedFigure> figures;
  std::vector<SpanFigure> spans;
  std::string text;
  std::set<std::string> gpu_models;                  // the GPU types of the platform
  std::vector<std::unique_ptr<Calibration>> calibs;  // the sampled and one-at-a-time calibrations
  // `text` parsed once, for the copies read in their children (Slot::platform_values); null when they are
  // written (figures that need their own engine) or there are none.
  std::unique_ptr<PlatformDocument> doc;
};

// The points' platforms by path, each planned once for all the interval's batches (its text read, figures and
// spans found and the document parsed once: the ends', the checks' and a fallback's runs share them).
using PlatformPlans = std::map<std::string, PlatformPlan>;

// The sampled and one-at-a-time platform files and calibrations of every platform of the points, and the
// runs over them.
struct IntervalRuns {
  std::vector<Scenario> scenarios;
  std::vector<std::string> engine_of;      // per scenario: the platform whose engine it runs on
  std::vector<const Calibration*> calibs;  // per scenario: the calibration it runs with
  std::vector<Run> runs;
  const PlatformPlans* plans = nullptr;  // the plans the runs were made from (plan_runs' `plans`)
  // per scenario: its platform copy's figure values where its child makes the copy (Slot::platform_values)
  std::vector<std::vector<double>> copy_values;
  std::vector<std::string> plan_of;  // per scenario: the points' platform path (its key in `plans`)
  // Scenario n's copy as its child reads it: the points' file with the copy's values in effect. Called for
  // the copies on the points' engine only (simulate_points' copy_facts), which all have values: a written
  // copy runs on its own engine and is read as a file.
  PlatformFacts copy_facts(size_t n) const;
};

// Each figure's range and value, platform figures then the calibration's spans (the design's columns), the
// output at both ends `centre` until simulated.
std::vector<FigureEnds> figure_ends(const PlatformPlan& pp, double centre);

// The runs of one batch: per platform, the design rows `rows_of(path)` and, with `ends`, the figures' ends;
// copies that need their own engine are written into `dir`. A platform not in `plans` yet is planned and
// added; the calibration copies the batch makes are kept in its plan (they must outlive the batch's runs).
IntervalRuns plan_runs(const std::vector<Scenario>& points, const Calibration* calib,
                       const IntervalOptions& io, const TempDir& dir, PlatformCache& platforms,
                       PlatformPlans& plans,
                       const std::function<std::vector<int>(const std::string&)>& rows_of, bool ends);

}  // namespace vitsim::sim
