#pragma once
// The statistics of a rank's steps and the report point's figures from every rank's (internal to real/,
// without Torch): step-time statistics after the warm-up, the breakdown's means, the slowest rank, MFU.
#include <string>
#include <vector>

#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/results/report.hpp"

namespace vitsim::real {

// Per-step measurements of one rank.
struct StepTimes {
  double total = 0;
  Breakdown b;
};

// What each rank measured, gathered by every rank for the report point.
struct RankMeasure {
  StepStats step_time_s;
  Breakdown breakdown_s;
  double epoch_mean_s = 0;       // mean of the whole epochs it ran (0: none)
  double peak_memory_bytes = 0;  // peak_memory_bytes()
};

// The statistics of this rank's steps after the first `warmup`, the mean of its whole epochs, and its
// peak memory (measured by the caller: point_report.cpp's peak_memory_bytes).
RankMeasure measure_rank(const std::vector<StepTimes>& steps, int warmup,
                         const std::vector<double>& epoch_times, double peak_memory_bytes);

// The point's breakdown is the mean of the ranks' terms, its step time the slowest rank's; epoch time and
// memory are the largest rank's. rank_names: "HOST\nDEVICE" per rank (rank 0 only; empty elsewhere).
struct RankSummary {
  double epoch_max_s = 0, memory_max_bytes = 0;
};
RankSummary fill_ranks(const std::vector<RankMeasure>& all, const std::vector<std::string>& rank_names,
                       ReportPoint& p);

// MFU of a measured run (docs/reports.md): the op model's forward + backward FLOPs of one rank's
// micro-batches in a step (core/ops pass_ops, as predict counts them) over the dense peak of the GPUs the
// scenario's platform file gives its ranks (core/formats/placement.hpp: the simulator's placement, for as
// many ranks as this job has), in the precision used. A platform that cannot be read or cannot hold the ranks
// leaves the peak unknown (MFU empty); the TFLOP/s per GPU stay.
void set_model_flops(const Scenario& s, int micro, int accum, int nranks, ReportPoint& p);

}  // namespace vitsim::real
