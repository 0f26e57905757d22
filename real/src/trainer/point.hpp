#pragma once
// One scenario point trained on this rank (internal to real/, without Torch): what the sweep (trainer.cpp)
// gets back from the point's trainer (point_trainer.hpp), and the error that ends every rank together.
#include <atomic>
#include <vector>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/results/report.hpp"
#include "vitsim/core/results/trace.hpp"
#include "vitsim/real/comm.hpp"
#include "vitsim/real/train.hpp"

namespace vitsim::real {

// An error every rank raises at the same step with the same message (training diverged: the decision
// rests on the all-reduced gradient and loss): the ranks end together, without MPI_Abort.
struct Diverged : Error {
  using Error::Error;
};

struct PointResult {
  ReportPoint point;
  std::vector<TraceEvent>
      trace;  // this rank's (core/results/trace.hpp), times from the start of the first step
  std::vector<MemorySample> memory;  // this rank's "memory" counter, times as trace's
  bool trace_truncated = false;
};

// Where the run stands, for the line an interruption prints (trainer.cpp's set_interrupt_note): written by
// the training thread, read by the interruption's watcher thread, so atomics only.
struct Progress {
  std::atomic<int> phase{0};  // 0 setting up a point, 1 training it, 2 after the last (writing outputs)
  std::atomic<int> point{0}, epoch{0};
  std::atomic<long long> step_in_epoch{0}, steps_per_epoch{0}, global_step{0};
  std::atomic<long long> checkpoint_step{-1};  // the global step of the checkpoint in place (-1: none)
};
Progress& progress();

// Sets up and trains one scenario point on this rank (point_setup.cpp, point_loop.cpp). tracing: this
// rank records core/results/trace.hpp's events (`vitsim train --trace`, the ranks --trace-ranks keeps).
PointResult train_point(const Scenario& s, World& world, const TrainOptions& opt, bool tracing);

}  // namespace vitsim::real
