#pragma once
// The report point of a finished simulation: statistics over the steady window, per-rank breakdowns, MFU,
// energy, memory and the notes that say how the epoch time was reached; and its gradient reduction in
// numbers for the plan's advice (comm_regime.cpp).
#include <string>
#include <vector>

#include "point/point_setup.hpp"

namespace vitsim::sim {

ReportPoint point_report(const PointRun& run, const PlatformFacts& facts, const RankPlacement& place,
                         StepBudget budget, const MemoryVerdict& mem, double end_time,
                         std::vector<std::string> notes);

// The point's gradient reduction (core/model/comm_regime.hpp) by the formulas its run used, read after the
// run from its data-parallel group's routes and, under `auto`, NCCL's choices; empty (ranks 0) on one rank.
CommRegime comm_regime(const PointRun& run, const PlatformFacts& facts);

}  // namespace vitsim::sim
