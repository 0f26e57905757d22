#pragma once
// The discrete-event model of one scenario point on SimGrid. SimGrid allows one engine per process:
// call simulate_point() once per process, or prepare_engine() once (engine.hpp) and simulate_prepared() in
// forked children (predict and plan: process_pool.hpp).
//
// By stage (sim/src/): the point set-up (point_setup.cpp: checks, placement and collective once, steps within
// memory; rank_setup.cpp: devices, loaders, copy paths, groups), the engine (engine.cpp), the rank actors
// (rank_actors.cpp on rank_state.hpp), the point report (point_report.cpp, steady_state.cpp); simulate.cpp
// runs them in that order.
#include <memory>
#include <string>
#include <vector>

#include "vitsim/core/formats/calibration.hpp"
#include "vitsim/core/formats/placement.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/model/comm_regime.hpp"
#include "vitsim/core/model/memory.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/results/report.hpp"
#include "vitsim/core/results/trace.hpp"
#include "vitsim/sim/compute/step_actions.hpp"
#include "vitsim/sim/engine/engine.hpp"

namespace vitsim::sim {

class Collective;

struct SimResult {
  ReportPoint point;
  std::vector<TraceEvent>
      trace;  // core/results/trace.hpp's events of the traced ranks; empty unless asked for
  bool trace_truncated = false;  // a rank reached kTraceEventsPerRank: its later events are not recorded
  CommRegime comm;  // with PointSetup::comm_regime: the gradient reduction (sim/src/point/comm_regime.cpp)
};

// What a point's checks make and its simulation takes: which platform hosts its ranks run on (core's
// place_ranks, vitsim/core/formats/placement.hpp, the trainer's rule too) and its collective. Made once
// (check_point); predict and plan hand it to the child forked for the point, which inherits it.
struct PointSetup {
  RankPlacement place;
  std::shared_ptr<const Collective> collective;
  bool comm_regime = false;  // fill SimResult::comm after the run (plan's advice; predict has no use for it)
};

// Checks what can be checked without running (placement, collective name, compute model) and returns what the
// point's simulation takes; throws Error.
PointSetup check_point(const Scenario& s, const PlatformFacts& facts);
// Needing no platform: the dataset holds one global batch (core/model/epoch.hpp), so that a point whose batch
// exceeds it is refused (predict) or excluded (plan, after placement and memory) before any simulating.
void check_epoch(const Scenario& s);

// Patch parallelism (DeepSpeed-Ulysses): bytes one rank holds of one activation tensor [b, T/sp, d].
// Each attention layer moves 4 such tensors through all-to-alls in forward (Q, K, V before, the output
// after) and 4 in backward; an all-to-all sends (sp-1)/sp of them to the other group members.
double ulysses_tensor_bytes(const ViTConfig& model, int micro_batch, int sp, int elem_bytes);

// Steady state of a run of step times (docs/model.md "Epoch time", Steady state). Steady when, over the last
// 2m whole loader periods (m as large as fits; `period` steps is how often the loader's delivery pattern
// repeats), (1) the two halves' means differ by at most `tolerance` (the times no longer trend), and (2) the
// mean is not below `loader_step_s` by more than `tolerance` (steps faster than the loader can feed them are
// eating its prefetched queue: it drains). Fewer than two periods is not steady. A loader that sustains
// at least twice the steps' pace (loader_step_s < half their mean) keeps its queue full: period 1 then.
// `window` is how many of the last steps the verdict rests on; `why` says what is not steady.
struct SteadyState {
  bool steady = false;
  int window = 0;
  std::string why;
};
SteadyState steady_state(const std::vector<double>& step_s, int period, double loader_step_s,
                         double tolerance = 0.02);

// What simulating `s` is estimated to need in memory (bytes), before the engine starts: the actors'
// stacks and state per rank, the platform's hosts, the loader's and the statistics' records per step.
// simulate_point refuses a point above simulation.max_memory (default: half the machine's memory).
// Measured (peak RSS of vitsim predict, docs/benchmarks.md "vitsim predict on flat-star platforms: cost
// against GPU count up to 131,072 GPUs"): see the constants.
inline constexpr double kSimBytesPerRank =
    48 * 1024.0;  // actors' touched stacks, mailboxes, rank state, report
inline constexpr double kSimBytesPerHost = 6 * 1024.0;  // a platform host: its links and routes
inline constexpr double kSimBytesPerRankStep = 200;     // statistics' records per rank and micro-batch step
double estimated_sim_memory(const Scenario& s, const PlatformFacts& facts, long long steps);

// The memory model's inputs for a rank of `s` on a GPU with `reserved_bytes` of runtime overhead: the one
// builder for the simulation and plan's memory pre-check.
MemoryInputs memory_inputs(const Scenario& s, double reserved_bytes);

// want_trace: record core/results/trace.hpp's events (one trace format with `vitsim train --trace`) of the
// ranks in trace_ranks (empty: traced_ranks(nullptr, ranks), the first 64). prepare_engine +
// simulate_prepared.
SimResult simulate_point(const Scenario& s, const PlatformFacts& facts, const Calibration* calib,
                         bool want_trace, const std::vector<int>& trace_ranks = {});

// simulate_point on a prepared engine (engine.hpp) of s.cluster.platform that has run no point yet. The
// point's own checks (collective, placement, memory) come first, then the platform's error if it failed to
// load.
SimResult simulate_prepared(PreparedEngine& pe, const Scenario& s, const PlatformFacts& facts,
                            const Calibration* calib, bool want_trace,
                            const std::vector<int>& trace_ranks = {});
// The same with the point's placement and collective made already (check_point): its checks then are the
// memory's.
SimResult simulate_prepared(PreparedEngine& pe, const PointSetup& setup, const Scenario& s,
                            const PlatformFacts& facts, const Calibration* calib, bool want_trace,
                            const std::vector<int>& trace_ranks = {});

// The gradient buckets the simulated backward reduces, in order: core's gradient_buckets(s) (the layout
// the real trainer uses), each ready once the Workload layer holding its last tensor has run backward.
std::vector<BackwardBucket> backward_buckets(const Scenario& s);
// The collectives of one rank's step (everything of StepShape but the device's times: layers, optimizer_s):
// gradient buckets and the op reducing them, the step's own small all-reduces, parameter gathers
// (sim/src/point/step_shape.cpp; DeepSpeed's as v0.14.4 issues them, docs/model.md "Framework step").
StepShape step_shape(const Scenario& s, const Workload& w);

}  // namespace vitsim::sim
