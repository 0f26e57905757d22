#pragma once
// The discrete-event model of one scenario point on SimGrid. SimGrid allows one engine per process:
// call simulate_point() once per process (app/ forks one process per sweep point).
#include <string>
#include <vector>

#include "vitsim/core/calibration.hpp"
#include "vitsim/core/platform.hpp"
#include "vitsim/core/report.hpp"
#include "vitsim/core/scenario.hpp"

namespace vitsim::sim {

// One Chrome trace event ("X" phase): a span on one rank's track.
struct TraceEvent {
  std::string name;  // "data", "h2d", "fwd", "bwd", "allreduce b3", "optimizer", ...
  std::string cat;   // "data", "compute", "comm", "optimizer"
  int rank = 0;
  int track = 0;     // 0: the rank's compute stream, 1: its communication stream
  double start_s = 0;
  double dur_s = 0;
};

struct SimResult {
  ReportPoint point;
  std::vector<TraceEvent> trace;  // empty unless asked for
};

// Which platform hosts the scenario's ranks run on (node-major): checks node names and counts and
// throws Error naming the scenario attribute at fault.
struct RankPlacement {
  std::vector<std::string> hosts;  // SimGrid host name per rank
  std::vector<int> node;           // node index (in PlatformFacts::nodes) per rank
};
RankPlacement place_ranks(const Scenario& s, const PlatformFacts& facts);

// Checks what can be checked without running (collective name, placement); throws Error.
void check_point(const Scenario& s, const PlatformFacts& facts);

// Patch parallelism (DeepSpeed-Ulysses): bytes one rank holds of one activation tensor [b, T/sp, d].
// Each attention layer moves 4 such tensors through all-to-alls in forward (Q, K, V before, the output
// after) and 4 in backward; an all-to-all sends (sp-1)/sp of them to the other group members.
double ulysses_tensor_bytes(const ViTConfig& model, int micro_batch, int sp, int elem_bytes);

SimResult simulate_point(const Scenario& s, const PlatformFacts& facts, const Calibration* calib, bool want_trace);

}  // namespace vitsim::sim
