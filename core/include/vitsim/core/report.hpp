#pragma once
// The one result schema ("vitsim.report/1") written by the simulator and the real trainer alike.
#include <map>
#include <string>
#include <vector>

#include "vitsim/core/memory.hpp"

namespace vitsim {

struct StepStats {
  double mean = 0, p50 = 0, p95 = 0;
};
StepStats step_stats(std::vector<double> samples);  // empty -> zeros

// Seconds per optimizer step, averaged over steps (a rank's view; the point's is the slowest rank's
// for the step time and the mean over ranks for the terms).
struct Breakdown {
  double data = 0;          // waiting for the loader
  double h2d = 0;           // host->device copies
  double compute_fwd = 0;
  double compute_bwd = 0;
  double optimizer = 0;
  double comm_total = 0;    // time collectives were in flight
  double comm_exposed = 0;  // part of it nothing else overlapped (the rank waited)
};

struct RankReport {
  int rank = 0;
  std::string host;
  std::string device;
  StepStats step_time_s;
  Breakdown breakdown_s;
};

struct ReportPoint {
  std::map<std::string, std::string> params;  // swept/overridden values + nodes, gpus, micro_batch, grad_accum
  int nodes = 0, gpus = 0, micro_batch = 0, grad_accum = 0;
  long long global_batch = 0;
  long long steps_per_epoch = 0;  // optimizer steps per epoch
  StepStats step_time_s;
  Breakdown breakdown_s;
  double epoch_time_s = 0;
  double throughput_img_s = 0;
  double scaling_efficiency = -1;  // -1: no 1-GPU reference in the sweep
  double memory_per_gpu_bytes = 0;
  MemoryBreakdown memory;
  bool fits_in_memory = true;
  std::string bound;               // what dominates the step: compute, exposed_comm, data, h2d, optimizer
  bool extrapolated = true;        // epoch time extrapolated from steady-state steps
  int simulated_steps = 0;
  std::vector<double> test_accuracy;  // per epoch (real runs)
  std::vector<std::string> notes;
  std::vector<RankReport> per_rank;
};

struct Report {
  std::string scenario;
  std::string source;  // "simulated" or "measured"
  std::map<std::string, std::string> provenance;
  std::vector<ReportPoint> points;
};

// Fills scaling_efficiency for every point that has a 1-GPU point with the same other parameters:
// throughput / (gpus * throughput of that point), valid for strong and weak scaling alike.
void fill_scaling_efficiency(Report& r);
std::string bound_of(const Breakdown& b);

std::string report_to_json(const Report& r);  // deterministic: sorted keys, fixed number format
Report report_from_json(const std::string& text, const std::string& origin);
std::string report_to_csv(const Report& r);
std::string report_to_table(const Report& r);

}  // namespace vitsim
