#pragma once
// What a point's simulation holds while it runs: each rank's state (RankState) and what the ranks share
// (PointRun). The point set-up fills it (point_setup.cpp, rank_setup.cpp), the rank actors run on it
// (rank_actors.cpp), the point report reads it (point_report.cpp).
#include <simgrid/s4u.hpp>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/model/vit.hpp"
#include "vitsim/core/results/report.hpp"
#include "vitsim/core/results/trace.hpp"
#include "vitsim/sim/collectives/collective.hpp"
#include "vitsim/sim/compute/compute_model.hpp"
#include "vitsim/sim/compute/step_actions.hpp"

namespace vitsim::sim {

// The DataLoader of one rank: W workers, each with `prefetch` batches in flight, delivering in order.
// Batch i is ready at max(ready[i-W], taken[i-W*prefetch]) + batch_time: a worker starts its next batch
// when it finished its previous one and the queue has room. Exact for PyTorch's in-order delivery. Only
// the last W x prefetch batches are kept (a ring): nothing older is ever read.
class Loader {
 public:
  Loader() = default;
  Loader(int workers, int prefetch, double batch_s)
      : w_(workers), cap_(workers * prefetch), batch_s_(batch_s), ring_(static_cast<size_t>(cap_)) {}
  // Returns how long the trainer waits for its next batch at time `now`.
  double next(double now) {
    if (w_ == 0) return batch_s_;  // num_workers=0: the main process loads synchronously
    double start = 0;
    if (i_ >= w_) start = std::max(start, ring_[static_cast<size_t>((i_ - w_) % cap_)].ready);
    if (i_ >= cap_) start = std::max(start, ring_[static_cast<size_t>(i_ % cap_)].taken);
    const double ready = start + batch_s_;
    const double wait = std::max(0.0, ready - now);
    ring_[static_cast<size_t>(i_ % cap_)] = {ready, now + wait};
    ++i_;
    return wait;
  }

 private:
  struct Batch {
    double ready = 0, taken = 0;
  };
  long long w_ = 0, cap_ = 0, i_ = 0;
  double batch_s_ = 0;
  std::vector<Batch> ring_;
};

// What ranks of one device type share: the compute model's times and the step they make.
struct Device {
  std::string name;
  std::vector<LayerTimes> layers;
  StepActions step;
  // A GPU; false: a CPU device (LibTorch on host threads), which copies no batch. The calibration's fitted
  // figures say which where they exist, else the platform's device_kind.
  bool async = true;
};

// The communication stream of a rank (with overlap or ZeRO): collectives in submission order.
struct CommStream {
  std::deque<const StepJob*> jobs;  // nullptr: stop
  simgrid::s4u::SemaphorePtr job_sem = simgrid::s4u::Semaphore::create(0),
                             done_sem = simgrid::s4u::Semaphore::create(0);
};

// Adds one step's compute-stream breakdown to a sum (comm_total, the communication stream's, is kept apart).
inline void add_step(Breakdown& sum, const Breakdown& step) {
  sum.data += step.data;
  sum.h2d += step.h2d;
  sum.compute_fwd += step.compute_fwd;
  sum.compute_bwd += step.compute_bwd;
  sum.optimizer += step.optimizer;
  sum.comm_exposed += step.comm_exposed;
  sum.straggler_wait += step.straggler_wait;
}

struct RankState {
  int rank = 0;
  simgrid::s4u::Host* host = nullptr;
  const Device* device = nullptr;
  double h2d_sleep_bw = 0;    // >0: copy time from a measured or pageable bandwidth instead of a transfer
  double h2d_private_s = -1;  // >=0: the copy path is one link private to this GPU: its exact time
  double h2d_latency_s = 0;   // route latency of a shared copy path, added before the transfer
  Loader loader;
  std::unique_ptr<CommStream> comm;  // null: the compute stream runs its collectives itself
  int outstanding = 0;
  std::vector<double> step_times;
  Breakdown totals;      // summed over measured steps
  double comm_busy = 0;  // comm stream time during measured steps
  bool measuring = false;
  // Per measured step, for statistics over a later window when the steady-state search ran more steps.
  std::vector<Breakdown> step_b;
  std::vector<double> step_comm;
  int measured_index = 0;  // the measured step the compute stream is in
  void add_comm(double dt) {
    if (!measuring) return;
    comm_busy += dt;
    if (step_comm.size() <= static_cast<size_t>(measured_index)) step_comm.resize(measured_index + 1, 0.0);
    step_comm[measured_index] += dt;
  }
};

// Compute-stream time is accumulated and slept only when the rank must meet another actor (a
// submission, a wait, a transfer): the same simulated times with a fraction of the events.
struct LazyClock {
  double pending = 0;
  double now() const { return simgrid::s4u::Engine::get_clock() + pending; }
  void advance(double dt) { pending += dt; }
  void flush() {
    if (pending > 0) simgrid::s4u::this_actor::sleep_for(pending);
    pending = 0;
  }
};

// The events of the traced ranks (core/results/trace.hpp), at most kTraceEventsPerRank per rank.
class TraceRecorder {
 public:
  // want_trace: record the ranks in trace_ranks (empty: traced_ranks(nullptr, ranks), the first 64).
  void select(int ranks, bool want_trace, const std::vector<int>& trace_ranks);
  bool tracing(int rank) const { return want_ && traced_[rank]; }
  // Callers on hot paths test tracing(rank) first: the event's name is not even built otherwise. A wait
  // that took no time is kept (length 0), so that a step has the same events as the trainer's trace.
  void span(int rank, TraceTrack track, std::string name, double start, double end, TraceArgs args = {});

  std::vector<TraceEvent> events;
  bool truncated = false;  // a rank reached kTraceEventsPerRank: its later events are not recorded

 private:
  bool want_ = false;
  std::vector<char> traced_;   // per rank: recorded
  std::vector<size_t> count_;  // events recorded per rank
};

// How many steps the ranks run. Steady-state search: at the set last step, the first rank to arrive judges
// the steps every rank has finished (steady_state()); when they are not steady it raises `steps` for every
// rank (ranks meet in each step's collectives, so none has started the next step on the old count), up to
// `bound`.
struct StepHorizon {
  int steps = 0, warmup = 0;
  int bound = 0;
  int decided_at = -1;
  int period = 1;            // steps after which the loader's delivery pattern repeats
  double loader_step_s = 0;  // the slowest rank's loader-sustained step time (0: not modelled)
  bool extended = false;
  // Called by a rank at step k == steps: true when it runs step k (the search raised `steps`).
  bool extend(int k, const std::vector<RankState>& ranks);
};

// What the rank actors of one point share.
struct PointRun {
  explicit PointRun(const Scenario& sc) : s(sc), w(build_workload(sc.model)) {}

  const Scenario& s;
  Workload w;
  const Collective* coll = nullptr;        // the point's (PointSetup), or fluid_coll standing for it
  std::unique_ptr<Collective> fluid_coll;  // the named collective computed without flows (fluid_collective)
  std::unique_ptr<Group> group;
  // Patch (sequence) parallelism, DeepSpeed-Ulysses style: groups of `sp` consecutive ranks split each
  // image's tokens; before each attention layer an all-to-all turns the token split into a head split
  // (Q, K, V: 3 tensors), after it one all-to-all turns the output back (the same again in backward).
  int sp = 1;
  std::vector<std::unique_ptr<Group>> sp_groups;  // group r / sp holds rank r as member r % sp
  double a2a_bytes = 0;                           // bytes one rank holds of one [b, T/sp, d] tensor
  std::map<std::string, Device> devices;          // by GPU model
  std::vector<RankState> ranks;
  double h2d_bytes = 0;
  // With a named collective (not "auto"): the data-parallel calls rank 0 made, for the note on what NCCL
  // would run there (simulate.cpp); left empty under auto, which says what ran itself.
  bool record_calls = false;
  std::set<std::pair<CollOp, double>> calls;
  StepHorizon horizon;
  TraceRecorder trace;

  // With overlap off and no ZeRO, the compute stream waits for every collective anyway: it runs them
  // itself, without a communication actor.
  bool inline_comm() const { return !s.parallel.overlap && s.parallel.zero == 0; }
};

}  // namespace vitsim::sim
