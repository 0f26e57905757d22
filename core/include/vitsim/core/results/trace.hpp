#pragma once
// One Chrome trace format (Perfetto, chrome://tracing) for predicted and measured runs: `vitsim predict
// --trace` and `vitsim train --trace` write the same processes, tracks and event names through
// write_trace(), so that the two files load side by side in ui.perfetto.dev and a program can diff them.
//
//   process  "rank N (HOST)"      one per traced rank (per point, when a sweep has several)
//   tracks   "compute"            "fwd <layer>" per layer, "bwd <layer>" per layer, "optimizer", "comm wait"
//            "comm"               "allreduce bucket K" (args bytes, algbw_GBps, busbw_GBps), other
//            collectives "data"               "data wait", "h2d"
//            "ProfilerStep#N" on compute, the parent of step N's work (PyTorch profiler's convention)
//   counter  "memory"             args "bytes": the memory model's resident bytes and saved activations
//            (predicted), or what the trainer measured at the same moments (a layer slice's end, a step's
//            start and end): a CUDA device's allocated bytes, a CPU process's resident set size
//   ts, dur  microseconds from the start of the point's first step, to the nanosecond; dur is the rounded
//            end less the rounded start, so adjacent slices never overlap
//
// Layers are core's (build_workload: "patch_embed", "block3.attn", "block3.mlp", "head"); buckets are
// core's gradient_buckets, numbered from 0 in the order backward makes them ready. Bandwidths follow
// nccl-tests: algbw = bytes / time, all-reduce busbw = algbw x 2(n-1)/n, in GB/s (1e9 bytes/s).
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace vitsim {

enum class TraceTrack { Compute = 0, Comm = 1, Data = 2 };
const char* trace_track_name(TraceTrack t);  // "compute", "comm", "data"

// The event names both writers use.
std::string trace_fwd(const std::string& layer);  // "fwd block3.attn"
std::string trace_bwd(const std::string& layer);  // "bwd block3.attn"
std::string trace_allreduce(int bucket);          // "allreduce bucket 4"
// "ProfilerStep#3": step 3 of the trace (from 0), PyTorch profiler's name for a step, on the compute track
// from the end of the previous step's optimizer to the end of its own; write_trace derives them.
std::string trace_step(int step);
inline constexpr const char* kTraceStepCategory = "user_annotation";  // PyTorch's category for them
inline constexpr const char* kTraceMemory = "memory";                 // the memory counter (args "bytes")
inline constexpr const char* kTraceRingFlow = "ring";                 // the flow arrows' name
inline constexpr const char* kTraceOptimizer = "optimizer";
inline constexpr const char* kTraceDataWait = "data wait";
inline constexpr const char* kTraceH2D = "h2d";
inline constexpr const char* kTraceStragglerWait = "straggler wait";  // waiting for the slowest rank
inline constexpr const char* kTraceCommWait = "comm wait";  // the compute stream waiting for collectives

using TraceArgs = std::vector<std::pair<std::string, double>>;
// {"bytes", bytes}, {"algbw_GBps", bytes / seconds / 1e9}, {"busbw_GBps", algbw x 2(n-1)/n} (nccl-tests).
TraceArgs allreduce_args(double bytes, double seconds, int ranks);

struct TraceEvent {
  int rank = 0;
  TraceTrack track = TraceTrack::Compute;
  std::string name;
  double start_s = 0;  // from the start of the point's first step
  double dur_s = 0;
  TraceArgs args;
};

// The memory counter of a point (a "memory" counter track per process, in bytes): what stays resident
// (weights, gradients, optimizer state, buffers, the runtime's reserve), then each "fwd <layer>" slice adds
// the activations `saved_bytes[layer]` keeps for backward at its end and each "bwd <layer>" frees them at its
// end, so the counter peaks at the memory model's figure (core/model/memory.hpp). resident_bytes 0: none.
struct TraceMemory {
  double resident_bytes = 0;
  std::map<std::string, double> saved_bytes;  // layer -> bytes a micro-batch keeps
};

// A measured "memory" sample: seconds from the start of the point's first step, and bytes.
struct MemorySample {
  double t_s = 0;
  double bytes = 0;
};

// The events of one scenario point. `hosts[r]` names rank r's host ("rank r (host)"); `ranks` lists the
// ranks traced (in order); `label` ("" for a one-point scenario) is shown next to each process name.
// `ring_size` > 0: the all-reduces run as a ring over ranks 0..ring_size-1 in rank order, and each traced
// rank's "allreduce bucket K" gets a flow arrow to the next rank's same all-reduce (rank r sends to r + 1).
struct TracePoint {
  std::string label;
  std::vector<int> ranks;
  std::vector<std::string> hosts;
  std::vector<TraceEvent> events;
  TraceMemory memory;
  // A measured run's "memory" counter: rank -> its samples (in any order). A rank that has some gets these
  // in place of the one `memory` derives (a trace from `vitsim train`); none: the model's (predict).
  std::map<int, std::vector<MemorySample>> measured_memory;
  int ring_size = 0;
};

// The Chrome trace JSON of the points: "traceEvents" with process_name ("rank N (HOST)"),
// process_labels (the point's label), thread_name ("compute", "comm", "data") and sort-index metadata,
// then the "X" events (each step's "ProfilerStep#N" first), the "memory" counter ("C" events, when the
// point has one: measured_memory's samples for a rank that has some, else the one `memory` derives) and the
// ring's flow arrows ("s" and "f" events, when it has one); "otherData" records `source` ("predicted" or
// "measured") and `notes`.
std::string write_trace(const std::vector<TracePoint>& points, const std::string& source,
                        const std::vector<std::string>& notes = {});

// Events one rank records at most (predict and train alike): a long run's trace stays loadable; the
// trace's notes say when a rank reached it.
inline constexpr size_t kTraceEventsPerRank = 200000;

// ---- --trace-ranks ----

// Ranks per point a trace keeps without --trace-ranks: the first 64 (a larger trace is slow to open).
inline constexpr int kDefaultTraceRanks = 64;

// A --trace-ranks list: "0,3,8-15". Decimal ranks and inclusive ranges LO-HI, comma-separated, no
// spaces, no empty item, LO <= HI, each rank at most 16777215. Throws Error
// "--trace-ranks 'TEXT': what is wrong" (app/ makes it a command-line error, exit 2).
struct RankList {
  std::vector<std::pair<int, int>> ranges;  // inclusive, as written
  bool contains(int rank) const;
  int max() const;
};
RankList parse_rank_list(const std::string& text);

// The ranks a point of `ranks` ranks traces: the listed ones below `ranks` (list non-null), else
// 0 .. min(ranks, 64) - 1.
std::vector<int> traced_ranks(const RankList* list, int ranks);
// "" unless the default leaves ranks out: "trace: ranks 0-63 of 256 kept; --trace-ranks LIST chooses
// others (e.g. --trace-ranks 0-255 for all)".
std::string trace_ranks_note(const RankList* list, int ranks);

}  // namespace vitsim
