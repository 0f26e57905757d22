// The SimGrid S4U model of synchronous data-parallel ViT training.
//
// Per rank, two actors on the rank's GPU host: the compute stream (data wait, host->device copy, forward,
// backward, optimizer) and the communication stream (collectives, one at a time, in submission order,
// like an NCCL stream). Backward fills gradient buckets (core's gradient_buckets(): the trainer's own layout)
// in gradient-ready order; each bucket goes to the communication stream after the layer holding its last
// tensor at once when overlap is on, after backward when it is off.
#include "vitsim/sim/simulate.hpp"
#include "vitsim/sim/platform_build.hpp"

#include <fmt/format.h>

#include <simgrid/s4u.hpp>

#include <sys/resource.h>
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <deque>
#include <fstream>
#include <map>
#include <set>
#include <memory>
#include <numeric>
#include <regex>
#include <sstream>
#include <utility>
#include <cstring>
#include <cerrno>

#include "vitsim/core/buckets.hpp"
#include "vitsim/core/energy.hpp"
#include "vitsim/core/epoch.hpp"
#include "vitsim/core/memory.hpp"
#include "vitsim/core/identity.hpp"
#include "vitsim/core/io.hpp"
#include "vitsim/core/units.hpp"
#include "vitsim/sim/collective.hpp"
#include "vitsim/sim/compute_model.hpp"
#include "vitsim/sim/step_plan.hpp"

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {

void check_point(const Scenario& s, const PlatformFacts& facts) {
  place_ranks(s, facts);
  try {
    make_collective(s.parallel.collective);
  } catch (const Error& e) {
    throw Error(s.origin_of("parallelism.collective"), fmt::format("parallelism.collective: {}", e.what()));
  }
  try {
    check_compute_model(s.compute.model);
  } catch (const Error& e) {
    throw Error(s.origin_of("compute.model"), fmt::format("compute.model: {}", e.what()));
  }
}

namespace {

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
  StepPlan plan;
  // A GPU; false: a CPU device (LibTorch on host threads), which copies no batch. The calibration's fitted
  // figures say which where they exist, else the platform's device_kind.
  bool async = true;
};

// The communication stream of a rank (with overlap or ZeRO): collectives in submission order.
struct CommStream {
  std::deque<const PlannedJob*> jobs;  // nullptr: stop
  sg4::SemaphorePtr job_sem = sg4::Semaphore::create(0), done_sem = sg4::Semaphore::create(0);
};

struct RankState {
  int rank = 0;
  sg4::Host* host = nullptr;
  const Device* device = nullptr;
  double h2d_sleep_bw = 0;  // >0: copy time from a measured or pageable bandwidth instead of a transfer
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

// Adds one step's compute-stream breakdown to a sum (comm_total, the communication stream's, is kept apart).
void add_step(Breakdown& sum, const Breakdown& step) {
  sum.data += step.data;
  sum.h2d += step.h2d;
  sum.compute_fwd += step.compute_fwd;
  sum.compute_bwd += step.compute_bwd;
  sum.optimizer += step.optimizer;
  sum.comm_exposed += step.comm_exposed;
}

// Compute-stream time is accumulated and slept only when the rank must meet another actor (a
// submission, a wait, a transfer): the same simulated times with a fraction of the events.
struct LazyClock {
  double pending = 0;
  double now() const { return sg4::Engine::get_clock() + pending; }
  void advance(double dt) { pending += dt; }
  void flush() {
    if (pending > 0) sg4::this_actor::sleep_for(pending);
    pending = 0;
  }
};

struct Model {
  const Scenario& s;
  Workload w;
  std::unique_ptr<Collective> coll;
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
  int steps = 0, warmup = 0;
  // Steady-state search: at the planned last step, the first rank to arrive judges the steps every rank
  // has finished (steady_state()); when they are not steady it raises `steps` for every rank (ranks meet
  // in each step's collectives, so none has started the next step on the old plan), up to `bound`.
  int bound = 0;
  int decided_at = -1;
  int period = 1;             // steps after which the loader's delivery pattern repeats
  double loader_step_s = 0;   // the slowest rank's loader-sustained step time (0: not modelled)
  bool extended = false;
  bool want_trace = false;
  std::vector<char> traced;            // per rank: recorded in the trace (core/trace.hpp)
  std::vector<size_t> trace_count;     // events recorded per rank
  bool trace_truncated = false;
  std::vector<TraceEvent> trace;

  explicit Model(const Scenario& sc) : s(sc), w(build_workload(sc.model)) {}

  bool extend(int k) {
    if (decided_at == k) return steps > k;  // another rank decided at this boundary
    decided_at = k;
    if (k >= bound) return false;
    size_t known = SIZE_MAX;
    for (const auto& r : ranks) known = std::min(known, r.step_times.size());
    std::vector<double> step_max(known, 0.0);
    for (const auto& r : ranks)
      for (size_t i = 0; i < known; ++i) step_max[i] = std::max(step_max[i], r.step_times[i]);
    if (steady_state(step_max, period, loader_step_s).steady) return false;
    steps = static_cast<int>(std::min<long long>(bound, std::max<long long>(2LL * k, warmup + 4LL * period + 2)));
    extended = true;
    return steps > k;
  }

  bool tracing(int rank) const { return want_trace && traced[rank]; }
  // Callers on hot paths test tracing(rank) first: the event's name is not even built otherwise. A wait
  // that took no time is kept (length 0), so that a step has the same events as the trainer's trace.
  void span(int rank, TraceTrack track, std::string name, double start, double end, TraceArgs args = {}) {
    if (!tracing(rank) || end < start) return;
    if (trace_count[rank] >= kTraceEventsPerRank) {
      trace_truncated = true;
      return;
    }
    ++trace_count[rank];
    trace.push_back({rank, track, std::move(name), start, end - start, std::move(args)});
  }

  // With overlap off and no ZeRO, the compute stream waits for every collective anyway: it runs them
  // itself, without a communication actor.
  bool inline_comm() const { return !s.parallel.overlap && s.parallel.zero == 0; }

  // Runs a collective on this rank's stream. With `d` (the compute stream running it inline), the stream's
  // pending time rides into the collective (Deferred, sim/collective.hpp) and what the rank still owes after it
  // comes back in d->lead + d->tail; the collective's span is from the end of the lead to the end of the tail.
  void run_job(RankState& r, const PlannedJob& job, Deferred* d = nullptr) {
    const double t0 = sg4::Engine::get_clock() + (d ? d->lead : 0.0);
    if (d)
      coll->run_deferred(*group, r.rank, job.bytes, job.op, *d);
    else
      coll->run(*group, r.rank, job.bytes, job.op);
    const double t1 = sg4::Engine::get_clock() + (d ? d->lead + d->tail : 0.0);
    r.add_comm(t1 - t0);
    if (!tracing(r.rank)) return;
    if (job.bucket >= 0 && job.op == CollOp::AllReduce)
      span(r.rank, TraceTrack::Comm, trace_allreduce(job.bucket), t0, t1, allreduce_args(job.bytes, t1 - t0, group->size()));
    else
      span(r.rank, TraceTrack::Comm, job.bucket >= 0 ? fmt::format("{} bucket {}", coll_op_name(job.op), job.bucket) : job.label,
           t0, t1);
  }

  // Hands a job to the communication stream (nullptr: stop it); inline, runs it now, carrying the compute
  // stream's pending time through it (`clk`).
  void submit(RankState& r, const PlannedJob* job, LazyClock* clk = nullptr) {
    if (!r.comm) {
      if (!job) return;
      Deferred d;
      if (clk) d.lead = std::exchange(clk->pending, 0.0);
      run_job(r, *job, clk ? &d : nullptr);
      if (clk) clk->pending = d.lead + d.tail;
      return;
    }
    r.comm->jobs.push_back(job);
    r.outstanding++;
    r.comm->job_sem->release();
  }
  // Waits for the oldest submitted collective.
  void wait_one(RankState& r) {
    r.comm->done_sem->acquire();
    r.outstanding--;
  }
  // Waits for every submitted collective; returns the time spent waiting (exposed communication).
  double drain(RankState& r) {
    double t0 = sg4::Engine::get_clock();
    while (r.outstanding > 0) wait_one(r);
    return sg4::Engine::get_clock() - t0;
  }

  // One Ulysses all-to-all of `tensors` tensors of a2a_bytes each on this rank's compute stream (the
  // attention cannot start without it). Returns its duration.
  double ulysses_all_to_all(RankState& r, int tensors, const char* label) {
    const double t0 = sg4::Engine::get_clock();
    all_to_all(*sp_groups[r.rank / sp], r.rank % sp, tensors * a2a_bytes);
    const double t1 = sg4::Engine::get_clock();
    r.add_comm(t1 - t0);
    span(r.rank, TraceTrack::Comm, label, t0, t1);
    return t1 - t0;
  }

  void comm_actor(RankState& r) {
    for (;;) {
      r.comm->job_sem->acquire();
      const PlannedJob* job = r.comm->jobs.front();
      r.comm->jobs.pop_front();
      if (!job) return;
      run_job(r, *job);
      r.comm->done_sem->release();
    }
  }

  // The compute stream: its device's step plan (sim/step_plan.hpp), step after step, until the planned
  // steps (and any the steady-state search adds) are done.
  void compute_actor(RankState& r) {
    LazyClock clk;
    for (int step = 0; step < steps || (step == steps && extend(step)); ++step) {
      r.measuring = step >= warmup;
      r.measured_index = step - warmup;
      const double t_step = clk.now();
      Breakdown b;
      run_step(r, clk, b);
      if (r.measuring) record_step(r, clk.now() - t_step, b);
    }
    clk.flush();
    if (r.comm) submit(r, nullptr);
  }

  void record_step(RankState& r, double dt, const Breakdown& b) {
    r.step_times.push_back(dt);
    r.step_b.push_back(b);
    add_step(r.totals, b);
  }

  // Executes one step's actions; `b` gets the step's breakdown.
  void run_step(RankState& r, LazyClock& clk, Breakdown& b) {
    using Kind = StepAction::Kind;
    const StepPlan& plan = r.device->plan;
    double mark = 0, wait_from = 0;
    for (const StepAction& a : plan.actions) {
      switch (a.kind) {
        case Kind::DataWait: data_wait(r, clk, b); break;
        case Kind::HostToDevice: host_to_device(r, clk, b); break;
        case Kind::Flush: clk.flush(); break;
        case Kind::LayerStart: mark = clk.now(); break;
        case Kind::Compute:
          if (a.layer < 0 && a.pass == Pass::Forward && tracing(r.rank)) forward_spans(r, clk.now());
          clk.advance(a.seconds);
          break;
        case Kind::LayerEnd:
          if (tracing(r.rank)) layer_span(r, a, mark, clk.now());
          break;
        case Kind::Book: book(b, a.pass, a.seconds); break;
        case Kind::Submit:
          if (r.comm) clk.flush();
          submit(r, &plan.jobs[static_cast<size_t>(a.job)], &clk);
          break;
        case Kind::WaitOne: {
          clk.flush();
          const double tw = sg4::Engine::get_clock();
          wait_one(r);
          b.comm_exposed += sg4::Engine::get_clock() - tw;
          break;
        }
        case Kind::AllToAll:
          clk.flush();
          b.comm_exposed += ulysses_all_to_all(r, a.tensors, a.label);
          break;
        case Kind::CommWaitStart:
          if (r.comm) clk.flush();  // inline, the pending compute rides into the first collective (submit)
          wait_from = clk.now();
          break;
        case Kind::CommWaitEnd:
          b.comm_exposed += drain(r) + (r.comm ? 0 : clk.now() - wait_from);
          span(r.rank, TraceTrack::Compute, kTraceCommWait, wait_from, clk.now());
          break;
        case Kind::CommWaitNone: span(r.rank, TraceTrack::Compute, kTraceCommWait, clk.now(), clk.now()); break;
        case Kind::Drain: b.comm_exposed += drain(r); break;
      }
    }
  }

  // Data: wait for the loader's next batch.
  void data_wait(RankState& r, LazyClock& clk, Breakdown& b) {
    const double t0 = clk.now();
    const double wait = r.loader.next(t0);
    clk.advance(wait);
    b.data += wait;
    span(r.rank, TraceTrack::Data, kTraceDataWait, t0, clk.now());
  }

  // Host -> device copy over the GPU's host link. A CPU device copies nothing and records no event (the
  // trainer's CPU path: real/src/trainer.cpp micro_batch).
  void host_to_device(RankState& r, LazyClock& clk, Breakdown& b) {
    if (!r.device->async) return;
    const double t0 = clk.now();
    if (h2d_bytes > 0) {
      if (r.h2d_sleep_bw > 0) {
        clk.advance(h2d_bytes / r.h2d_sleep_bw);
      } else if (r.h2d_private_s >= 0) {
        clk.advance(r.h2d_private_s);
      } else {
        clk.advance(r.h2d_latency_s);
        clk.flush();
        sg4::Comm::sendto(r.host, r.host, static_cast<uint64_t>(h2d_bytes));
      }
    }
    b.h2d += clk.now() - t0;
    span(r.rank, TraceTrack::Data, kTraceH2D, t0, clk.now());
  }

  // The whole forward as one compute action: each layer's span at its share of it.
  void forward_spans(RankState& r, double at) {
    const std::vector<LayerTimes>& t = r.device->layers;
    for (size_t l = 0; l < t.size(); ++l) {
      span(r.rank, TraceTrack::Compute, trace_fwd(w.layers[l].name), at, at + t[l].fwd_s);
      at += t[l].fwd_s;
    }
  }

  void layer_span(RankState& r, const StepAction& a, double start, double end) {
    if (a.pass == Pass::Optimizer)
      span(r.rank, TraceTrack::Compute, kTraceOptimizer, start, end);
    else
      span(r.rank, TraceTrack::Compute, (a.pass == Pass::Forward ? trace_fwd : trace_bwd)(w.layers[a.layer].name), start, end);
  }

  static void book(Breakdown& b, Pass pass, double seconds) {
    switch (pass) {
      case Pass::Forward: b.compute_fwd += seconds; break;
      case Pass::Backward: b.compute_bwd += seconds; break;
      case Pass::Optimizer: b.optimizer += seconds; break;
    }
  }
};

// Each actor's stack (SimGrid contexts/stack-size, KiB). Measured: every shipped scenario runs in 8 KiB stacks
// with a guard page (where an overflow faults); 128 KiB leaves a margin of 16.
constexpr int kActorStackKiB = 128;

// SimGrid takes an actor's stack from calloc (with contexts/guard-size:0, which many actors need: a guard page
// per stack splits the mappings, and Linux allows 65,530 per process). Where glibc serves the block from its
// heap it clears all of it, so every stack is resident whole whatever the actor uses (measured: 250 of the
// 390 MB of a 4,096-GPU point). A block from mmap comes zeroed from the kernel, and only the pages the actor
// touches become resident. Fixing glibc's mmap threshold at the stack size (it otherwise grows after the first
// large free) and lifting the cap on mmap'd blocks (65,536) makes each stack such a block; adjacent anonymous
// mappings merge, so the map count stays small.
void allocate_actor_stacks_lazily() {
  mallopt(M_MMAP_THRESHOLD, kActorStackKiB * 1024);
  mallopt(M_MMAP_MAX, INT_MAX);
}

}  // namespace

void configure_engine(sg4::Engine& e) {
  // The exact alpha-beta recipe (docs/sources.md "Software and machine facts", SimGrid network model):
  // CM02 with unit factors, no cross-traffic, no TCP window cap, plain max-min sharing.
  e.set_config("network/model:CM02");
  e.set_config("network/crosstraffic:0");
  e.set_config("network/TCP-gamma:0");
  e.set_config("network/latency-factor:1");
  e.set_config("network/bandwidth-factor:1");
  e.set_config("network/weight-S:0");
  e.set_config(fmt::format("contexts/stack-size:{}", kActorStackKiB));
  e.set_config("contexts/guard-size:0");
}

std::vector<BackwardBucket> backward_buckets(const Scenario& s) {
  const int tensors = static_cast<int>(parameter_tensors(s.model).size());
  std::vector<BackwardBucket> out;
  // A bucket's last gradient-ready tensor, ready index end-1, is forward tensor tensors - end; the
  // simulator's backward advances a layer at a time, so the bucket is ready after that tensor's layer.
  for (const GradBucket& g : gradient_buckets(s)) out.push_back({tensor_layer(s.model, tensors - g.end), g.bytes});
  return out;
}

SteadyState steady_state(const std::vector<double>& step_s, int period, double loader_step_s, double tolerance) {
  SteadyState v;
  // A loader that sustains twice the pace of the steps keeps its queue full: its bursts do not show in
  // the steps, so they need not be averaged over whole periods.
  const double overall = step_s.empty() ? 0 : std::accumulate(step_s.begin(), step_s.end(), 0.0) / step_s.size();
  const bool loader_binds = loader_step_s > 0 && loader_step_s >= 0.5 * overall;
  const size_t q = static_cast<size_t>(loader_binds ? std::max(1, period) : 1);
  const size_t m = step_s.size() / (2 * q);
  if (m == 0) {
    v.why = fmt::format("{} measured steps are fewer than two loader periods ({} steps each)", step_s.size(), q);
    return v;
  }
  const size_t half = m * q;
  const auto first = step_s.end() - static_cast<ptrdiff_t>(2 * half), mid = first + static_cast<ptrdiff_t>(half);
  const double a = std::accumulate(first, mid, 0.0) / half, b = std::accumulate(mid, step_s.end(), 0.0) / half;
  const double mean = (a + b) / 2;
  v.window = static_cast<int>(2 * half);
  if (std::fabs(b - a) > tolerance * std::max(a, b)) {
    v.why = fmt::format("the step time still trends ({} then {} over two halves of {} steps)", units::format_time(a),
                        units::format_time(b), half);
    return v;
  }
  if (loader_step_s > 0 && mean < loader_step_s * (1 - tolerance)) {
    v.why = fmt::format("steps of {} are faster than the loader can sustain ({} a step): its prefetched queue is "
                        "draining", units::format_time(mean), units::format_time(loader_step_s));
    return v;
  }
  v.steady = true;
  return v;
}

MemoryInputs memory_inputs(const Scenario& s, double reserved_bytes) {
  MemoryInputs mi;
  mi.micro_batch = s.training.micro_batch;
  mi.precision = s.training.precision;
  mi.zero_stage = s.parallel.zero;
  mi.dp_ranks = s.ranks();
  mi.bucket_bytes = s.parallel.bucket_bytes;
  mi.reserved_bytes = reserved_bytes;
  mi.optimizer = s.training.optimizer;
  mi.sequence_parallel = s.parallel.sequence_parallel;
  mi.activation_checkpointing = s.training.activation_checkpointing;
  return mi;
}

double estimated_sim_memory(const Scenario& s, const PlatformFacts& facts, long long steps) {
  const double hosts = static_cast<double>(facts.gpu.size());
  const double ranks = s.ranks();
  return ranks * kSimBytesPerRank + hosts * kSimBytesPerHost +
         ranks * static_cast<double>(steps) * s.training.grad_accum * kSimBytesPerRankStep;
}

namespace {
// SimGrid's last words as one line: "[0.000000] ./src/x.cpp:69: [root/CRITICAL] The route ... exists." ->
// "The route ... exists."; backtrace lines are skipped.
std::string simgrid_reason(const std::string& out) {
  std::istringstream in(out);
  std::string line;
  static const std::regex prefix(R"(^(\[[^\]]*\] )?(\S+:\d+: )?(\[[^\]]*\] )?)");
  while (std::getline(in, line)) {
    if (line.empty() || line.rfind("Backtrace", 0) == 0 || line.rfind("  ->", 0) == 0) continue;
    line = std::regex_replace(line, prefix, "", std::regex_constants::format_first_only);
    if (!line.empty()) return line;
  }
  return "";
}
}  // namespace

Origin platform_origin(const Scenario& s, const PlatformFacts& facts) {
  return s.what_ifs.empty() ? Origin{facts.path, 0}
                            : Origin{s.origin_of("whatif.edits").str() + ": the platform as edited by the what-ifs", 0};
}

namespace {
// A SimGrid engine's command line: quiet logs; under AddressSanitizer, which cannot follow SimGrid's raw
// context switches (false reports), thread contexts (the factory is chosen when the engine starts).
std::vector<std::string> engine_args() {
  std::vector<std::string> args{"vitsim", "--log=root.thres:critical"};
#if defined(__SANITIZE_ADDRESS__)
  args.push_back("--cfg=contexts/factory:thread");
#endif
  return args;
}
// argv over `args` (which must outlive it), null-terminated.
std::vector<char*> argv_of(std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return argv;
}
}  // namespace

void check_platform_loads(const std::string& path, const Origin& where) {
  static std::set<std::string> loaded;  // paths checked by this process (or its parent before the fork)
  if (loaded.count(path)) return;
  // A flat-star file is checked by its reader (core/platform_flat.hpp) and built by vitsim's own code.
  if (is_flat_layout_file(path)) {
    read_flat_platform_file(path);
    loaded.insert(path);
    return;
  }
  int fds[2];
  if (pipe(fds) != 0) throw Error("pipe failed");
  std::fflush(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw Error("fork failed");
  if (pid == 0) {
    child_after_fork(parent);  // ends with vitsim (core/io.hpp)
    close(fds[0]);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    std::signal(SIGPIPE, SIG_DFL);
    try {
      std::vector<std::string> args = engine_args();
      std::vector<char*> argv = argv_of(args);
      int argc = static_cast<int>(args.size());
      sg4::Engine e(&argc, argv.data());
      load_platform_file(e, path);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "%s\n", ex.what());
      std::fflush(stderr);
      std::_Exit(2);
    }
    std::fflush(nullptr);
    std::_Exit(0);
  }
  register_child(pid);  // ended by an interruption (core/io.hpp)
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t got;
  while ((got = read(fds[0], buf, sizeof buf)) > 0)
    if (out.size() < (1 << 16)) out.append(buf, static_cast<size_t>(got));
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  unregister_child(pid);
  stop_if_interrupted();
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    loaded.insert(path);
    return;
  }
  std::string reason = simgrid_reason(out);
  if (WIFSIGNALED(status))
    reason = fmt::format("it crashed ({}){}{}", strsignal(WTERMSIG(status)), reason.empty() ? "" : ": ", reason);
  if (reason.empty()) reason = fmt::format("its loader exited with status {}", WEXITSTATUS(status));
  throw Error(where, fmt::format("SimGrid cannot load the platform: {}", echo(reason, 200)));
}

double ulysses_tensor_bytes(const ViTConfig& model, int micro_batch, int sp, int elem_bytes) {
  return static_cast<double>(micro_batch) * model.tokens() / sp * model.width * elem_bytes;
}

namespace {

void select_traced_ranks(Model& m, const Scenario& s, bool want_trace, const std::vector<int>& trace_ranks) {
  m.want_trace = want_trace;
  if (!want_trace) return;
  const std::vector<int> keep = trace_ranks.empty() ? traced_ranks(nullptr, s.ranks()) : trace_ranks;
  m.traced.assign(s.ranks(), 0);
  m.trace_count.assign(s.ranks(), 0);
  for (int r : keep)
    if (r >= 0 && r < s.ranks()) m.traced[r] = 1;
}

// The collectives' sizes every rank's step uses: gradient buckets, ZeRO-1/2 parameter gathers after the
// step, ZeRO-3's forward gathers in layer order and backward gathers in reverse, one bucket at a time.
StepShape collective_shape(const Scenario& s, const Workload& w) {
  StepShape sh;
  const double param_elem = precision_bytes(s.training.precision);
  const double cap = s.parallel.allgather_bucket_bytes;
  sh.grad_buckets = backward_buckets(s);
  const double total = w.total_params() * param_elem;
  const int k = static_cast<int>(std::ceil(total / cap));
  for (int i = 0; i < k; ++i) sh.param_gathers.push_back(total / k);
  const int layers = static_cast<int>(w.layers.size());
  double acc = 0;
  int first = 0;
  for (int l = 0; l < layers; ++l) {
    if (acc == 0) first = l;
    acc += w.layers[l].params * param_elem;
    if (acc >= cap || l + 1 == layers) {
      sh.z3_fwd_gathers.push_back({first, acc});
      acc = 0;
    }
  }
  acc = 0;
  for (int l = layers - 1; l >= 0; --l) {
    if (acc == 0) sh.z3_bwd_gathers.push_back({l, 0});
    acc += w.layers[l].params * param_elem;
    sh.z3_bwd_gathers.back().second = acc;
    if (acc >= cap) acc = 0;
  }
  sh.grad_accum = s.training.grad_accum;
  sh.ranks = s.ranks();
  sh.zero = s.parallel.zero;
  sh.sp = s.parallel.sequence_parallel;
  sh.overlap = s.parallel.overlap;
  for (const LayerCost& l : w.layers) sh.attention.push_back(l.kind == LayerKind::Attention);
  return sh;
}

// How many steps to simulate: the planned window (or the whole epoch), and the bound of the steady-state
// search, within the memory limit. Throws Error when the planned steps do not fit.
struct StepBudget {
  EpochShape epoch;
  bool full = false;
};
StepBudget plan_steps(Model& m, const Scenario& s, const PlatformFacts& facts) {
  // A sequence-parallel group shares its micro-batch: the sampler shards over data-parallel replicas.
  const int dp = s.dp_ranks();
  // The epoch's steps by the trainer's rule (core/epoch.hpp: padded shards, the last partial micro-batch
  // and step kept, as PyTorch's and DeepSpeed's defaults).
  StepBudget out{epoch_shape(s.dataset.effective_train_samples(dp), dp, s.training.micro_batch, s.training.grad_accum,
                             "dataset.train_samples")};
  const long long steps_per_epoch = out.epoch.steps;
  out.full = s.simulation.full_epoch || steps_per_epoch <= s.simulation.steps;
  m.steps = out.full ? static_cast<int>(steps_per_epoch) : s.simulation.steps;
  m.warmup = m.steps > s.simulation.warmup ? s.simulation.warmup : 0;
  // Sizes: estimate the memory before building anything (a 100k-GPU point ran into std::bad_alloc).
  const int n = s.ranks();
  const double phys = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  double limit = s.simulation.max_memory > 0 ? s.simulation.max_memory : phys / 2;
  double need = estimated_sim_memory(s, facts, m.steps);
  // Under an address-space limit (ulimit -v) every actor's stack counts whole.
  if (rlimit as{}; getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY && s.simulation.max_memory <= 0) {
    limit = std::min(limit, 0.9 * static_cast<double>(as.rlim_cur));
    need += 2.0 * n * kActorStackKiB * 1024;
  }
  if (need > limit)
    throw Error(s.origin_of("cluster.nodes"),
                fmt::format("simulating {} GPUs for {} steps needs about {} of memory (~{} KiB per rank, {} KiB per "
                            "platform host, {} B per rank and micro-batch step), above the limit of {}{}; raise it "
                            "with --set simulation.max_memory=SIZE",
                            n, m.steps, units::format_bytes(need), kSimBytesPerRank / 1024, kSimBytesPerHost / 1024,
                            kSimBytesPerRankStep, units::format_bytes(limit),
                            s.simulation.max_memory > 0 ? "" : " (half of this machine's memory, or 90% of ulimit -v)"));
  // The steady-state search may go on to the epoch or simulation.max_steps, within the same memory.
  const double per_step = estimated_sim_memory(s, facts, 1) - estimated_sim_memory(s, facts, 0);
  const long long fit = per_step > 0 ? static_cast<long long>((limit - estimated_sim_memory(s, facts, 0)) / per_step)
                                     : steps_per_epoch;
  m.bound = out.full ? m.steps
                     : static_cast<int>(std::max<long long>(
                           m.steps, std::min({steps_per_epoch, static_cast<long long>(s.simulation.max_steps), fit})));
  return out;
}

// The data-parallel group and, with patch parallelism, the Ulysses groups of sp consecutive ranks.
void make_groups(Model& m, const Scenario& s, const std::vector<sg4::Host*>& hosts, const RankPlacement& place,
                 const LatencyModel& latency, std::vector<std::string>& notes) {
  m.group = std::make_unique<Group>("dp", hosts, place.node, latency);
  m.sp = s.parallel.sequence_parallel;
  if (m.sp <= 1) return;
  for (int g = 0; g < s.ranks() / m.sp; ++g)
    m.sp_groups.push_back(std::make_unique<Group>(
        fmt::format("sp{}", g), std::vector<sg4::Host*>(hosts.begin() + g * m.sp, hosts.begin() + (g + 1) * m.sp),
        std::vector<int>(place.node.begin() + g * m.sp, place.node.begin() + (g + 1) * m.sp), latency));
  m.a2a_bytes = ulysses_tensor_bytes(s.model, s.training.micro_batch, m.sp, precision_bytes(s.training.precision));
  notes.push_back(fmt::format("patch parallelism over {} GPUs (Ulysses): {} all-to-alls of {} per rank per "
                              "micro-batch around the attention layers",
                              m.sp, 8 * s.model.depth, units::format_bytes(m.a2a_bytes)));
}

// The compute model per device type; with patch parallelism a rank computes 1/sp of every token-wise
// layer (the head sees only the class token and runs whole).
ComputeInputs compute_inputs(const Scenario& s) {
  ComputeInputs in;
  in.precision = s.training.precision;
  // DeepSpeed's fp16/bf16 converts the model itself (module.half()); the others run torch.autocast.
  in.autocast = s.training.framework != Framework::DeepSpeed;
  in.step = StepInputs{s.training.framework, s.training.precision, s.training.optimizer, s.dp_ranks(), s.parallel.zero,
                       s.training.gradient_clipping, s.training.loss_scale};
  in.token_split = s.parallel.sequence_parallel;
  in.recompute = s.training.activation_checkpointing;
  in.model = s.compute.model;  // the registry entry that picks each device's model
  in.origin = s.origin_of("compute.model");
  return in;
}

// The device a GPU model's ranks share: its compute model's layer times and the step plan they make. The
// first rank of a device type builds it (and adds its notes), the others find it.
const Device& device_of(Model& m, const GpuFacts& g, const ComputeInputs& in, const Calibration* calib,
                        const StepShape& shape, std::vector<std::string>& notes) {
  auto [it, fresh] = m.devices.try_emplace(g.model);
  Device& d = it->second;
  if (!fresh) return d;
  const auto cm = make_compute_model(m.w, in, g, calib);
  notes.push_back(fmt::format("compute on {}: {}, {} framework step", g.model, cm->name(), framework_name(m.s.training.framework)));
  for (auto& line : cm->notes(m.s.training.micro_batch)) notes.push_back(std::move(line));
  d.name = g.model;
  d.layers = cm->layers(m.s.training.micro_batch);
  StepShape sh = shape;
  sh.layers = d.layers;
  sh.optimizer_s = cm->optimizer_s();
  d.plan = plan_step(sh);
  const OpModelCalibration* fitted = calib ? calib->op_model(g.model, in.precision) : nullptr;
  d.async = fitted ? fitted->figures.async : g.async;
  return d;
}

// The rank's DataLoader: measured images/s per worker, else the node's stated CPU figures.
void set_loader(Model& m, RankState& rs, const NodeFacts& node, const Calibration* calib, double image_bytes) {
  const Scenario& s = m.s;
  double per_image = 0;
  const LoaderCalibration* lc = calib ? calib->loader(s.dataset.name, s.model.image_size) : nullptr;
  if (lc)
    per_image = 1.0 / lc->images_per_s_per_worker;
  else if (node.loader_bw > 0 || node.loader_image_overhead > 0)
    per_image = node.loader_image_overhead + (node.loader_bw > 0 ? image_bytes / node.loader_bw : 0);
  const int workers_on_node = s.loader.workers * s.cluster.gpus_per_node;
  // One core per training process; loader workers share the rest.
  const int free_cores = std::max(1, node.cpu_cores - s.cluster.gpus_per_node);
  if (workers_on_node > free_cores) per_image *= static_cast<double>(workers_on_node) / free_cores;
  rs.loader = Loader(s.loader.workers, s.loader.prefetch, per_image * s.training.micro_batch);
  if (s.loader.workers > 0 && per_image > 0) {
    // W workers deliver W batches per batch time: a step of `accum` batches needs accum x batch / W at
    // least, and the delivery pattern repeats every W batches (W / gcd(W, accum) steps).
    const int accum = s.training.grad_accum;
    m.loader_step_s = std::max(m.loader_step_s, accum * per_image * s.training.micro_batch / s.loader.workers);
    m.period = s.loader.workers / std::gcd(s.loader.workers, accum);
  }
}

// The rank's host->device copy: a measured or pageable bandwidth, a link of its own, or a shared path.
void set_host_to_device(Model& m, RankState& rs, const NodeFacts& node, const Calibration* calib, const LatencyModel& latency) {
  const Scenario& s = m.s;
  if (calib && calib->h2d_pinned_bw > 0 && s.loader.pinned) rs.h2d_sleep_bw = calib->h2d_pinned_bw;
  if (!s.loader.pinned) {
    double pageable = calib && calib->h2d_pageable_bw > 0 ? calib->h2d_pageable_bw : node.h2d_pageable_bw;
    rs.h2d_sleep_bw = pageable;  // 0: no pageable figure, the copy runs at the link's speed
  }
  // A host->device path that is a single link of this GPU's own (the cluster loopback) shares with
  // nothing, so a transfer over it lasts exactly latency + bytes / bandwidth: skip the flow.
  std::vector<sg4::Link*> links;
  double ignored = 0;
  rs.host->route_to(rs.host, links, &ignored);
  const double lat = latency.route_latency(rs.host, rs.host);
  if (links.size() == 1 && links[0]->get_sharing_policy() == sg4::Link::SharingPolicy::FATPIPE)
    rs.h2d_private_s = lat + m.h2d_bytes / links[0]->get_bandwidth();
  else
    rs.h2d_latency_s = lat;
}

// Memory per GPU (the largest over ranks) and whether every rank's fits its GPU.
struct MemoryVerdict {
  MemoryBreakdown max;
  bool fits = true;
};

// Every rank's state: its device, loader, copy path and communication stream; the memory each GPU needs.
MemoryVerdict setup_ranks(Model& m, const PlatformFacts& facts, const Calibration* calib, const RankPlacement& place,
                          const std::vector<sg4::Host*>& hosts, const LatencyModel& latency, std::vector<std::string>& notes) {
  const Scenario& s = m.s;
  const int n = s.ranks();
  const ComputeInputs compute_in = compute_inputs(s);
  const StepShape shape = collective_shape(s, m.w);
  // The batch as the loader hands it over: float32 tensors at the model's input size.
  const double image_bytes = 4.0 * s.model.image_size * s.model.image_size * s.model.channels;
  m.h2d_bytes = s.training.micro_batch * image_bytes;
  std::map<double, MemoryBreakdown> memory;  // by the GPU's reserved bytes, the one per-GPU input
  MemoryVerdict v;
  m.ranks.resize(n);
  for (int r = 0; r < n; ++r) {
    RankState& rs = m.ranks[r];
    rs.rank = r;
    rs.host = hosts[r];
    const GpuFacts& g = facts.gpu.at(place.hosts[r]);
    const NodeFacts& node = facts.nodes[place.node[r]];
    rs.device = &device_of(m, g, compute_in, calib, shape, notes);
    set_loader(m, rs, node, calib, image_bytes);
    if (rs.device->async) set_host_to_device(m, rs, node, calib, latency);
    if (!m.inline_comm()) rs.comm = std::make_unique<CommStream>();
    auto [it, fresh] = memory.try_emplace(g.reserved_bytes);
    if (fresh) it->second = memory_per_gpu(m.w, memory_inputs(s, g.reserved_bytes));
    const MemoryBreakdown& mb = it->second;
    if (mb.total() > g.mem_bytes) v.fits = false;
    if (mb.total() > v.max.total()) v.max = mb;
  }
  const NodeFacts& node0 = facts.nodes[place.node[0]];
  if (!(calib && calib->loader(s.dataset.name, s.model.image_size)) && node0.loader_bw <= 0 && node0.loader_image_overhead <= 0)
    notes.push_back("data loading not modelled: no loader calibration and no loader_bw/loader_image_overhead in the platform");
  return v;
}

// The data-parallel ring without flows (Group::set_lone_ring) where that gives the flows' own instants: the
// collective is the fused ring (`ring`, or `auto` where it picks the ring) and makes the simulation's only transfers (no Ulysses all-to-all; every
// host->device copy timed without a flow), no link changes its figures during the run (no profiles), and no
// link but FATPIPE ones carries two of the ring's transfers (lone_ring_bandwidths). simulation.flows=always
// keeps the flows.
void choose_lone_ring(Model& m, const PlatformFacts& facts, const std::vector<sg4::Host*>& hosts, std::vector<std::string>& notes) {
  const Scenario& s = m.s;
  if (s.simulation.flows != "auto" || m.sp > 1 || facts.link_profiles || hosts.size() < 2 || !m.coll->fused_ring(*m.group))
    return;
  for (const RankState& r : m.ranks)
    if (m.h2d_bytes > 0 && r.device->async && r.h2d_sleep_bw <= 0 && r.h2d_private_s < 0) return;
  std::vector<double> bw = lone_ring_bandwidths(hosts);
  if (bw.empty()) return;
  m.group->set_lone_ring(std::move(bw));
  notes.push_back("ring: no link carries two of its transfers and nothing else makes any, so each transfer ends at its "
                  "bytes over its route's narrowest link from when both ends are there: computed without SimGrid flows "
                  "(the same instants; simulation.flows=always makes them flows)");
}

// One actor per rank for its compute stream, one more for its communication stream when it has one.
// Their stacks come from mmap (allocate_actor_stacks_lazily): only the pages an actor touches are resident.
void create_actors(Model& m) {
  allocate_actor_stacks_lazily();
  for (RankState& rs : m.ranks) {
    RankState* r = &rs;
    sg4::Actor::create(fmt::format("rank{}", r->rank), r->host, [&m, r] { m.compute_actor(*r); });
    if (r->comm) sg4::Actor::create(fmt::format("comm{}", r->rank), r->host, [&m, r] { m.comm_actor(*r); });
  }
}

// What the statistics cover: after a steady-state search, the steady window (the steps before it were the
// transient the search ran past); without one, every measured step.
struct Window {
  std::vector<double> step_max;  // the slowest rank's time per counted step
  SteadyState verdict;
  int first = 0, counted = 0, measured = 0;
};
Window statistics_window(const Model& m, bool full) {
  Window win;
  win.measured = m.steps - m.warmup;
  std::vector<double> all_max(win.measured, 0.0);
  for (const auto& rs : m.ranks)
    for (int i = 0; i < win.measured; ++i) all_max[i] = std::max(all_max[i], rs.step_times[i]);
  if (!full) win.verdict = steady_state(all_max, m.period, m.loader_step_s);
  win.first = m.extended && win.verdict.steady ? win.measured - win.verdict.window : 0;
  win.counted = win.measured - win.first;
  win.step_max.assign(all_max.begin() + win.first, all_max.end());
  return win;
}

// A rank's breakdown per step over the window.
Breakdown rank_breakdown(const RankState& rs, const Window& win) {
  Breakdown b = rs.totals;
  b.comm_total = rs.comm_busy;
  if (win.first > 0) {
    b = Breakdown{};
    for (int i = win.first; i < win.measured; ++i) {
      add_step(b, rs.step_b[i]);
      if (static_cast<size_t>(i) < rs.step_comm.size()) b.comm_total += rs.step_comm[i];
    }
  }
  for (double* v : {&b.data, &b.h2d, &b.compute_fwd, &b.compute_bwd, &b.optimizer, &b.comm_total, &b.comm_exposed})
    *v /= win.counted;
  return b;
}

// Per-rank reports and their mean breakdown.
void rank_reports(const Model& m, const Window& win, ReportPoint& p) {
  const int n = static_cast<int>(m.ranks.size());
  Breakdown mean;
  p.per_rank.reserve(m.ranks.size());
  for (const auto& rs : m.ranks) {
    RankReport rr;
    rr.rank = rs.rank;
    rr.host = rs.host->get_name();
    rr.device = rs.device->name;
    rr.step_time_s = step_stats(std::vector<double>(rs.step_times.begin() + win.first, rs.step_times.end()));
    const Breakdown b = rank_breakdown(rs, win);
    rr.breakdown_s = b;
    mean.data += b.data / n;
    mean.h2d += b.h2d / n;
    mean.compute_fwd += b.compute_fwd / n;
    mean.compute_bwd += b.compute_bwd / n;
    mean.optimizer += b.optimizer / n;
    mean.comm_total += b.comm_total / n;
    mean.comm_exposed += b.comm_exposed / n;
    p.per_rank.push_back(std::move(rr));
  }
  p.breakdown_s = mean;
}

// Energy per epoch (core/energy.hpp): each rank's GPU power and busy time per step; the platform's
// price_per_kwh (a zone property; predict/plan --price-per-kwh override it) gives its cost.
void point_energy_of(ReportPoint& p, const PlatformFacts& facts, const RankPlacement& place, std::vector<std::string>& notes) {
  std::vector<GpuPower> power;
  std::vector<double> busy;
  for (size_t r = 0; r < place.hosts.size(); ++r) {
    const GpuFacts& g = facts.gpu.at(place.hosts[r]);
    power.push_back({g.power_busy_w, g.power_idle_w});
    busy.push_back(gpu_busy_s(p.per_rank[r].breakdown_s));
  }
  const auto price = facts.props.find("price_per_kwh");
  p.energy = point_energy(power, busy, p.step_time_s.mean, p.epoch_time_s,
                          price == facts.props.end() ? 0 : parse_price_per_kwh(price->second, facts.path + ": zone property price_per_kwh"));
  if (p.energy.known())
    notes.push_back(fmt::format("energy: GPUs busy {:.0f}% of the epoch (compute and collectives at gpu_power_busy, loader "
                                "waits and host-to-device copies at gpu_power_idle); GPU power only, no hosts, network or cooling",
                                100 * p.energy.busy_fraction));
}

// How the epoch time was reached (simulated, extrapolated, unsafe).
std::string window_note(const Model& m, const Window& win, bool full, long long steps_per_epoch) {
  const Scenario& s = m.s;
  if (full)
    return m.extended ? fmt::format("epoch simulated step by step: the first {} steps were not steady, so the "
                                    "steady-state search ran the whole epoch",
                                    s.simulation.steps)
                      : "epoch simulated step by step";
  if (win.verdict.steady && m.extended)
    return fmt::format("epoch time extrapolated from the last {} steps of {} simulated (the first {} were not "
                       "steady: the steady-state search ran more) to the epoch's steps_per_epoch",
                       win.counted, m.steps, s.simulation.steps);
  if (win.verdict.steady)
    return fmt::format("epoch time extrapolated from {} steady-state steps ({} warm-up steps excluded) to "
                       "the epoch's steps_per_epoch",
                       win.measured, m.warmup);
  return fmt::format("extrapolation unsafe: after {} simulated steps (the bound: simulation.max_steps {}, "
                     "the epoch {}, memory) {}; the epoch time extrapolated from them may be far off: "
                     "simulate the epoch with --set simulation.full_epoch=true",
                     m.steps, s.simulation.max_steps, steps_per_epoch, win.verdict.why);
}

// The report point of a finished simulation.
ReportPoint point_report(const Model& m, const PlatformFacts& facts, const RankPlacement& place, StepBudget budget,
                         const MemoryVerdict& mem, double end_time, std::vector<std::string> notes) {
  const Scenario& s = m.s;
  ReportPoint p;
  p.params = s.params;
  p.scenario_id = scenario_id(s);  // the identity a report fed back in is checked against
  p.nodes = s.cluster.nodes;
  p.gpus = s.ranks();
  p.micro_batch = s.training.micro_batch;
  p.grad_accum = s.training.grad_accum;
  p.params["nodes"] = std::to_string(p.nodes);
  p.params["gpus"] = std::to_string(p.gpus);
  p.params["micro_batch"] = std::to_string(p.micro_batch);
  p.params["grad_accum"] = std::to_string(p.grad_accum);
  p.global_batch = s.global_batch();
  p.steps_per_epoch = budget.epoch.steps;
  // The steady-state search may have simulated to the end of the epoch: then nothing is extrapolated.
  if (!budget.full && m.steps >= budget.epoch.steps) budget.full = true;
  const Window win = statistics_window(m, budget.full);
  rank_reports(m, win, p);
  p.step_time_s = step_stats(win.step_max);
  p.bound = bound_of(p.breakdown_s);
  p.simulated_steps = m.steps;
  p.extrapolated = !budget.full;
  p.epoch_time_s = budget.full ? end_time : p.step_time_s.mean * budget.epoch.exact_steps();
  p.throughput_img_s = p.step_time_s.mean > 0 ? p.global_batch / p.step_time_s.mean : 0;
  p.memory = mem.max;
  p.memory_per_gpu_bytes = mem.max.total();
  p.fits_in_memory = mem.fits;
  // MFU: the op model's FLOPs per rank and step over the GPUs' dense peak in this precision.
  const StepFlops fl = step_flops(m.w, s.training.micro_batch, s.training.grad_accum, compute_inputs(s));
  p.model_flops = fl.model;
  p.recompute_flops = fl.recompute;
  p.peak_flops = mean_peak_flops(place, facts, s.training.precision);  // core/placement.hpp, the trainer's too
  point_energy_of(p, facts, place, notes);
  notes.push_back(window_note(m, win, budget.full, budget.epoch.steps));
  if (!mem.fits) notes.push_back("does not fit in GPU memory: predicted time is for a run that would fail");
  for (const auto& wi : s.what_ifs) notes.push_back("what-if: " + wi);
  p.notes = std::move(notes);
  return p;
}

}  // namespace

PreparedEngine::PreparedEngine() = default;
PreparedEngine::~PreparedEngine() = default;

std::unique_ptr<PreparedEngine> prepare_engine(const Scenario& s, const PlatformFacts& facts) {
  auto pe = std::make_unique<PreparedEngine>();
  pe->platform = s.cluster.platform;
  pe->args = engine_args();
  pe->argv = argv_of(pe->args);
  int argc = static_cast<int>(pe->args.size());
  try {
    // What SimGrid would abort on is checked in core (read_platform_facts); anything left is contained here.
    check_platform_loads(s.cluster.platform, platform_origin(s, facts));
    pe->engine = std::make_unique<sg4::Engine>(&argc, pe->argv.data());
    configure_engine(*pe->engine);
    load_platform_file(*pe->engine, s.cluster.platform);  // flat-star files built in code (platform_build.hpp)
    pe->notes = apply_link_transports(*pe->engine, facts);  // before LatencyModel
  } catch (...) {
    pe->error = std::current_exception();
  }
  return pe;
}

namespace {

// simulate_point and simulate_prepared: the point's own checks and state first (placement, collective,
// traced ranks, the steps and the memory they need), then the engine (`pe`, prepared here when null) and
// its platform's error if it failed to load, then the actors and the run.
SimResult simulate_on(PreparedEngine* pe, const Scenario& s, const PlatformFacts& facts, const Calibration* calib,
                      bool want_trace, const std::vector<int>& trace_ranks) {
  const RankPlacement place = place_ranks(s, facts);
  Model m(s);
  try {
    m.coll = make_collective(s.parallel.collective);
  } catch (const Error& e) {
    throw Error(s.origin_of("parallelism.collective"), fmt::format("parallelism.collective: {}", e.what()));
  }
  select_traced_ranks(m, s, want_trace, trace_ranks);
  const StepBudget budget = plan_steps(m, s, facts);

  // Engine, platform, actors.
  std::unique_ptr<PreparedEngine> own;
  if (!pe) {
    own = prepare_engine(s, facts);
    pe = own.get();
  }
  if (pe->platform != s.cluster.platform || pe->used)
    throw Error(fmt::format("{}: internal error: a prepared engine of '{}'{} cannot simulate this point",
                            s.cluster.platform, pe->platform, pe->used ? " that ran a point already" : ""));
  pe->used = true;
  if (pe->error) std::rethrow_exception(pe->error);
  sg4::Engine& e = *pe->engine;
  std::vector<std::string> notes = pe->notes;

  std::vector<sg4::Host*> hosts;
  for (const auto& name : place.hosts) {
    sg4::Host* h = e.host_by_name_or_null(name);
    if (!h) throw Error(fmt::format("{}: SimGrid has no host '{}' that the platform facts name", facts.path, name));
    hosts.push_back(h);
  }
  LatencyModel latency(e);
  make_groups(m, s, hosts, place, latency, notes);
  const MemoryVerdict mem = setup_ranks(m, facts, calib, place, hosts, latency, notes);
  choose_lone_ring(m, facts, hosts, notes);
  create_actors(m);
  e.run();

  SimResult out;
  out.point = point_report(m, facts, place, budget, mem, sg4::Engine::get_clock(), std::move(notes));
  out.trace = std::move(m.trace);
  out.trace_truncated = m.trace_truncated;
  return out;
}

}  // namespace

SimResult simulate_prepared(PreparedEngine& pe, const Scenario& s, const PlatformFacts& facts, const Calibration* calib,
                            bool want_trace, const std::vector<int>& trace_ranks) {
  return simulate_on(&pe, s, facts, calib, want_trace, trace_ranks);
}

SimResult simulate_point(const Scenario& s, const PlatformFacts& facts, const Calibration* calib, bool want_trace,
                         const std::vector<int>& trace_ranks) {
  return simulate_on(nullptr, s, facts, calib, want_trace, trace_ranks);
}

}  // namespace vitsim::sim
