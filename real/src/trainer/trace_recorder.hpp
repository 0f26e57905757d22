#pragma once
// A rank's trace events as it trains (internal to real/, without Torch): core/results/trace.hpp's events,
// timed with the steady clock from the start of the point's first step.
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "vitsim/core/base/system.hpp"
#include "vitsim/core/results/trace.hpp"

namespace vitsim::real {
using Clock = std::chrono::steady_clock;

// This rank's trace events (core/results/trace.hpp), times from the start of the point's first step.
struct TraceRecorder {
  bool on = false;
  int rank = 0;
  Clock::time_point t0 = Clock::now();  // set again at the start of the first step
  std::vector<TraceEvent> events;
  std::vector<MemorySample> memory;  // the "memory" counter's samples, as many at most as events
  bool truncated = false;
  void record(TraceTrack track, std::string name, Clock::time_point a, Clock::time_point b) {
    if (!on) return;
    if (events.size() >= kTraceEventsPerRank) {
      truncated = true;
      return;
    }
    events.push_back({rank, track, std::move(name), seconds(t0, a), seconds(a, b), {}});
  }
  void record_memory(Clock::time_point t, double bytes) {
    if (!on) return;
    if (memory.size() >= kTraceEventsPerRank) {
      truncated = true;
      return;
    }
    memory.push_back({seconds(t0, t), bytes});
  }
};

}  // namespace vitsim::real
