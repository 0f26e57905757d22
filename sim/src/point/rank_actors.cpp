#include "point/rank_actors.hpp"

#include <fmt/format.h>
#include <malloc.h>

#include <climits>
#include <utility>

#include "collectives/transfers.hpp"

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {
namespace {

// Runs a collective on a rank's stream. With `d` (the compute stream running it inline), the stream's pending
// time rides into the collective (Deferred, sim/collectives/collective.hpp) and what the rank still owes
// after it comes back in d->lead + d->tail; the collective's span is from the end of the lead to the end of
// the tail.
void run_job(PointRun& run, RankState& r, const StepJob& job, Deferred* d = nullptr) {
  const double t0 = sg4::Engine::get_clock() + (d ? d->lead : 0.0);
  if (run.record_calls && r.rank == 0) run.calls.emplace(job.op, job.bytes);
  if (d)
    run.coll->run_deferred(*run.group, r.rank, job.bytes, job.op, *d);
  else
    run.coll->run(*run.group, r.rank, job.bytes, job.op);
  const double t1 = sg4::Engine::get_clock() + (d ? d->lead + d->tail : 0.0);
  r.add_comm(t1 - t0);
  if (!run.trace.tracing(r.rank)) return;
  if (job.bucket >= 0 && job.op == CollOp::AllReduce)
    run.trace.span(r.rank, TraceTrack::Comm, trace_allreduce(job.bucket), t0, t1,
                   allreduce_args(job.bytes, t1 - t0, run.group->size()));
  else
    run.trace.span(
        r.rank, TraceTrack::Comm,
        job.bucket >= 0 ? fmt::format("{} bucket {}", coll_op_name(job.op), job.bucket) : job.label, t0, t1);
}

// The communication stream of a rank: the collectives submitted to it, in order, until a null job.
class CommActor {
 public:
  CommActor(PointRun& run, RankState& r) : run_(run), r_(r) {}
  void operator()() const {
    for (;;) {
      r_.comm->job_sem->acquire();
      const StepJob* job = r_.comm->jobs.front();
      r_.comm->jobs.pop_front();
      if (!job) return;
      run_job(run_, r_, *job);
      r_.comm->done_sem->release();
    }
  }

 private:
  PointRun& run_;
  RankState& r_;
};

// The compute stream of a rank: its device's step actions (sim/compute/step_actions.hpp), step after step,
// until the set steps (and any the steady-state search adds) are done.
class ComputeActor {
 public:
  ComputeActor(PointRun& run, RankState& r) : run_(run), r_(r) {}
  void operator()() {
    StepHorizon& h = run_.horizon;
    for (int step = 0; step < h.steps || (step == h.steps && h.extend(step, run_.ranks)); ++step) {
      r_.measuring = step >= h.warmup;
      r_.measured_index = step - h.warmup;
      const double t_step = clk_.now();
      Breakdown b;
      run_step(b);
      if (r_.measuring) record_step(clk_.now() - t_step, b);
    }
    clk_.flush();
    if (r_.comm) submit(nullptr);
  }

 private:
  PointRun& run_;
  RankState& r_;
  LazyClock clk_;

  bool tracing() const { return run_.trace.tracing(r_.rank); }
  void span(TraceTrack track, std::string name, double start, double end) {
    run_.trace.span(r_.rank, track, std::move(name), start, end);
  }

  void record_step(double dt, const Breakdown& b) {
    r_.step_times.push_back(dt);
    r_.step_b.push_back(b);
    add_step(r_.totals, b);
  }

  // Executes one step's actions; `b` gets the step's breakdown.
  void run_step(Breakdown& b) {
    using Kind = StepAction::Kind;
    const StepActions& step = r_.device->step;
    double mark = 0, wait_from = 0;
    for (const StepAction& a : step.actions) {
      switch (a.kind) {
        case Kind::DataWait:
          data_wait(b);
          break;
        case Kind::HostToDevice:
          host_to_device(b);
          break;
        case Kind::Flush:
          clk_.flush();
          break;
        case Kind::LayerStart:
          mark = clk_.now();
          break;
        case Kind::Compute:
          if (a.layer < 0 && a.pass == Pass::Forward && tracing()) forward_spans(clk_.now());
          clk_.advance(a.seconds);
          break;
        case Kind::LayerEnd:
          if (tracing()) layer_span(a, mark, clk_.now());
          break;
        case Kind::Book:
          book(b, a.pass, a.seconds);
          break;
        case Kind::SyncWait: {  // waiting for the slowest rank: the collective is in flight, unfinished
          const double t0 = clk_.now();
          clk_.advance(a.seconds);
          b.comm_exposed += a.seconds;
          r_.add_comm(a.seconds);
          span(TraceTrack::Compute, kTraceCommWait, t0, clk_.now());
          break;
        }
        case Kind::StragglerWait: {
          const double t0 = clk_.now();
          clk_.advance(a.seconds);
          b.straggler_wait += a.seconds;
          span(TraceTrack::Compute, kTraceStragglerWait, t0, clk_.now());
          break;
        }
        case Kind::Submit:
          if (r_.comm) clk_.flush();
          submit(&step.jobs[static_cast<size_t>(a.job)]);
          break;
        case Kind::WaitOne: {
          clk_.flush();
          const double tw = sg4::Engine::get_clock();
          wait_one();
          b.comm_exposed += sg4::Engine::get_clock() - tw;
          break;
        }
        case Kind::AllToAll:
          clk_.flush();
          b.comm_exposed += ulysses_all_to_all(a.tensors, a.label);
          break;
        case Kind::CommWaitStart:
          if (r_.comm) clk_.flush();  // inline, the pending compute rides into the first collective (submit)
          wait_from = clk_.now();
          break;
        case Kind::CommWaitEnd:
          b.comm_exposed += drain() + (r_.comm ? 0 : clk_.now() - wait_from);
          span(TraceTrack::Compute, kTraceCommWait, wait_from, clk_.now());
          break;
        case Kind::CommWaitNone:
          span(TraceTrack::Compute, kTraceCommWait, clk_.now(), clk_.now());
          break;
        case Kind::Drain:
          b.comm_exposed += drain();
          break;
      }
    }
  }

  // Hands a job to the communication stream (nullptr: stop it); inline, runs it now, carrying the compute
  // stream's pending time through it.
  void submit(const StepJob* job) {
    if (!r_.comm) {
      if (!job) return;
      Deferred d;
      d.lead = std::exchange(clk_.pending, 0.0);
      run_job(run_, r_, *job, &d);
      clk_.pending = d.lead + d.tail;
      return;
    }
    r_.comm->jobs.push_back(job);
    r_.outstanding++;
    r_.comm->job_sem->release();
  }
  // Waits for the oldest submitted collective.
  void wait_one() {
    r_.comm->done_sem->acquire();
    r_.outstanding--;
  }
  // Waits for every submitted collective; returns the time spent waiting (exposed communication).
  double drain() {
    double t0 = sg4::Engine::get_clock();
    while (r_.outstanding > 0) wait_one();
    return sg4::Engine::get_clock() - t0;
  }

  // One Ulysses all-to-all of `tensors` tensors of a2a_bytes each on this rank's compute stream (the
  // attention cannot start without it). Returns its duration.
  double ulysses_all_to_all(int tensors, const char* label) {
    const double t0 = sg4::Engine::get_clock();
    all_to_all(*run_.sp_groups[r_.rank / run_.sp], r_.rank % run_.sp, tensors * run_.a2a_bytes);
    const double t1 = sg4::Engine::get_clock();
    r_.add_comm(t1 - t0);
    span(TraceTrack::Comm, label, t0, t1);
    return t1 - t0;
  }

  // Data: wait for the loader's next batch.
  void data_wait(Breakdown& b) {
    const double t0 = clk_.now();
    const double wait = r_.loader.next(t0);
    clk_.advance(wait);
    b.data += wait;
    span(TraceTrack::Data, kTraceDataWait, t0, clk_.now());
  }

  // Host -> device copy over the GPU's host link. A CPU device copies nothing and records no event (the
  // trainer's CPU path: real/src/trainer/trainer.cpp micro_batch).
  void host_to_device(Breakdown& b) {
    if (!r_.device->async) return;
    const double t0 = clk_.now();
    if (run_.h2d_bytes > 0) {
      if (r_.h2d_sleep_bw > 0) {
        clk_.advance(run_.h2d_bytes / r_.h2d_sleep_bw);
      } else if (r_.h2d_private_s >= 0) {
        clk_.advance(r_.h2d_private_s);
      } else {
        clk_.advance(r_.h2d_latency_s);
        clk_.flush();
        sg4::Comm::sendto(r_.host, r_.host, static_cast<uint64_t>(run_.h2d_bytes));
      }
    }
    b.h2d += clk_.now() - t0;
    span(TraceTrack::Data, kTraceH2D, t0, clk_.now());
  }

  // The whole forward as one compute action: each layer's span at its share of it.
  void forward_spans(double at) {
    const std::vector<LayerTimes>& t = r_.device->layers;
    for (size_t l = 0; l < t.size(); ++l) {
      span(TraceTrack::Compute, trace_fwd(run_.w.layers[l].name), at, at + t[l].fwd_s);
      at += t[l].fwd_s;
    }
  }

  void layer_span(const StepAction& a, double start, double end) {
    if (a.pass == Pass::Optimizer)
      span(TraceTrack::Compute, kTraceOptimizer, start, end);
    else
      span(TraceTrack::Compute,
           (a.pass == Pass::Forward ? trace_fwd : trace_bwd)(run_.w.layers[a.layer].name), start, end);
  }

  static void book(Breakdown& b, Pass pass, double seconds) {
    switch (pass) {
      case Pass::Forward:
        b.compute_fwd += seconds;
        break;
      case Pass::Backward:
        b.compute_bwd += seconds;
        break;
      case Pass::Optimizer:
        b.optimizer += seconds;
        break;
    }
  }
};

// SimGrid takes an actor's stack from calloc (with contexts/guard-size:0, which many actors need: a guard
// page per stack splits the mappings, and Linux allows 65,530 per process). Where glibc serves the block from
// its heap it clears all of it, so every stack is resident whole whatever the actor uses (measured: 250 of
// the 390 MB of a 4,096-GPU point). A block from mmap comes zeroed from the kernel, and only the pages the
// actor touches become resident. Fixing glibc's mmap threshold at the stack size (it otherwise grows after
// the first large free) and lifting the cap on mmap'd blocks (65,536) makes each stack such a block; adjacent
// anonymous mappings merge, so the map count stays small. One more way into the heap: glibc carves a block
// from the heap's top chunk before it considers mmap, and each growth of the heap leaves M_TOP_PAD (128 KiB)
// spare at the top, often room for one stack, which calloc then clears whole. Measured on one ViT-B/16 point
// on 16,384 GPUs (2,048 nodes x 8, `auto`): 2,412 of the 16,384 stacks came from the top; with no pad none
// of them (32 remain from freed blocks), minor page faults 229.7k -> 163.2k, CPU 2.29 -> 1.85 s (median of
// 5, docs/benchmarks.md). The heap then grows by what each allocation needs (one brk call each time).
void allocate_actor_stacks_lazily() {
  mallopt(M_MMAP_THRESHOLD, kActorStackKiB * 1024);
  mallopt(M_MMAP_MAX, INT_MAX);
  mallopt(M_TOP_PAD, 0);
}

}  // namespace

void create_actors(PointRun& run) {
  allocate_actor_stacks_lazily();
  for (RankState& r : run.ranks) {
    sg4::Actor::create(fmt::format("rank{}", r.rank), r.host, ComputeActor(run, r));
    if (r.comm) sg4::Actor::create(fmt::format("comm{}", r.rank), r.host, CommActor(run, r));
  }
}

}  // namespace vitsim::sim
