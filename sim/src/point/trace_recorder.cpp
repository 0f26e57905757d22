// The traced ranks' events (rank_state.hpp TraceRecorder): one trace format with `vitsim train --trace`.
#include <utility>

#include "point/rank_state.hpp"

namespace vitsim::sim {

void TraceRecorder::select(int ranks, bool want_trace, const std::vector<int>& trace_ranks) {
  want_ = want_trace;
  if (!want_trace) return;
  const std::vector<int> keep = trace_ranks.empty() ? traced_ranks(nullptr, ranks) : trace_ranks;
  traced_.assign(ranks, 0);
  count_.assign(ranks, 0);
  for (int r : keep)
    if (r >= 0 && r < ranks) traced_[r] = 1;
}

void TraceRecorder::span(int rank, TraceTrack track, std::string name, double start, double end,
                         TraceArgs args) {
  if (!tracing(rank) || end < start) return;
  if (count_[rank] >= kTraceEventsPerRank) {
    truncated = true;
    return;
  }
  ++count_[rank];
  events.push_back({rank, track, std::move(name), start, end - start, std::move(args)});
}

}  // namespace vitsim::sim
