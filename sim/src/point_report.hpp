#pragma once
// The report point of a finished simulation: statistics over the steady window, per-rank breakdowns, MFU,
// energy, memory and the notes that say how the epoch time was reached.
#include <string>
#include <vector>

#include "point_setup.hpp"

namespace vitsim::sim {

ReportPoint point_report(const PointRun& run, const PlatformFacts& facts, const RankPlacement& place,
                         StepBudget budget, const MemoryVerdict& mem, double end_time,
                         std::vector<std::string> notes);

}  // namespace vitsim::sim
