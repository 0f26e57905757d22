#pragma once
// One rank's optimizer step as a list of actions (step_actions): what the compute stream does, in order, for
// grad_accum micro-batches and the optimizer. Pure (no SimGrid): the simulator's compute actor executes the
// list (sim/src/point/rank_actors.cpp) and tests check its shape without an engine
// (tests/sim/test_step_actions.cpp).
//
// Compute is not an event: the executor adds a Compute action's seconds to a pending time and sleeps it in
// one piece only when the rank must meet another actor (a Flush, a Submit, a wait, an all-to-all), so a run
// of consecutive compute actions costs SimGrid one activity whatever its length.
#include <cstdint>
#include <vector>

#include "vitsim/core/model/vit.hpp"
#include "vitsim/sim/compute/compute_model.hpp"
#include "vitsim/sim/fluid/coll_op.hpp"

namespace vitsim::sim {

// A gradient bucket the simulated backward reduces: ready once the Workload layer holding its last tensor
// has run backward (backward_buckets() in simulate.hpp builds them from core's gradient_buckets()).
struct BackwardBucket {
  int last_layer;  // index into build_workload(s.model).layers
  double bytes;    // in the communication dtype (gradient_comm_dtype)
};

// A collective the step submits to the communication stream (or runs inline).
struct StepJob {
  double bytes = 0;
  CollOp op = CollOp::AllReduce;
  int bucket = -1;              // a gradient bucket's reduction (its trace name is "<op> bucket K"), else -1
  const char* label = nullptr;  // the trace name of any other collective
};

// What a rank's step needs to know, all fixed before the simulation starts.
struct StepShape {
  std::vector<LayerTimes> layers;  // per Workload layer, forward order
  std::vector<char> attention;  // per layer: an attention layer (Ulysses all-to-alls around it when sp > 1)
  double optimizer_s = 0;
  std::vector<BackwardBucket> grad_buckets;  // gradient-ready order
  std::vector<std::pair<int, double>>
      z3_fwd_gathers;  // ZeRO-3: (first layer, bytes) per forward gather bucket
  std::vector<std::pair<int, double>> z3_bwd_gathers;  // ZeRO-3: (first layer in reverse order, bytes)
  std::vector<double> param_gathers;  // parameter all-gathers after the optimizer (ZeRO-1/2, DeepSpeed bf16)
  CollOp grad_reduce_op = CollOp::AllReduce;  // the collective of each gradient bucket
  // Under overlap the compute stream waits for a bucket's reduction before it issues the next (DeepSpeed
  // ZeRO-1/2 average_tensor: current_stream().wait_stream(reduction_stream)).
  bool serial_reductions = false;
  // Small all-reduces inside the optimizer step (a gradient norm, an overflow flag), each waited for before
  // the optimizer runs.
  std::vector<StepJob> step_collectives;
  int grad_accum = 1;
  int ranks = 1;  // data-parallel group size: a group of one reduces nothing
  // Waiting at the step's gradient sync beyond the collective (calibrate's step phase, compute_model.hpp
  // sync_wait_s): exposed communication before the sync's collectives, once a step.
  double sync_wait_s = 0;
  // The expected lag of the slowest rank at the step's gradient sync (the platform's gpu_step_cv, where
  // calibrate's step phase did not measure the wait: rank_setup.cpp): the rank's last gradient bucket is
  // ready that much later, once a step.
  double straggler_wait_s = 0;
  int zero = 0;  // ZeRO stage
  int sp = 1;    // patch (sequence) parallelism degree
  bool overlap = false;
  // The compute stream runs its collectives itself (no communication stream): with overlap off and no ZeRO it
  // waits for every collective anyway.
  bool inline_comm() const { return !overlap && zero == 0; }
};

enum class Pass : std::uint8_t { Forward, Backward, Optimizer };

struct StepAction {
  enum class Kind : std::uint8_t {
    DataWait,      // wait for the loader's next batch (breakdown: data)
    HostToDevice,  // copy the batch to the GPU (breakdown: h2d)
    Flush,         // sleep the pending compute time now
    LayerStart,    // mark the start of `layer`'s trace span (or the optimizer's)
    Compute,   // `seconds` of kernels on the compute stream; layer -1 in Forward: the whole forward at once
    LayerEnd,  // close the span opened by LayerStart
    Book,      // add `seconds` to `pass`'s breakdown field
    SyncWait,  // `seconds` waiting at the gradient sync for the slowest rank (breakdown: exposed
               // communication)
    Submit,    // flush, hand jobs[job] to the communication stream (inline: run it now)
    WaitOne,   // flush, wait for the oldest submitted collective (breakdown: exposed communication)
    AllToAll,  // flush, a Ulysses all-to-all of `tensors` activation tensors (breakdown: exposed
               // communication)
    StragglerWait,  // `seconds` on the compute stream before the last bucket's reduction: the slowest rank's
                    // lag (breakdown: straggler_wait)
    CommWaitStart,  // flush, start the backward's wait for its collectives (trace: "comm wait")
    CommWaitEnd,    // wait for every submitted collective since CommWaitStart's time (breakdown: exposed)
    CommWaitNone,   // a zero-length "comm wait": every reduction was already done
    Drain,          // wait for every submitted collective (ZeRO-1/2 parameter gathers; breakdown: exposed)
  };
  Kind kind;
  Pass pass = Pass::Forward;
  int layer = -1;
  int job = -1;                 // Submit: index into StepActions::jobs
  int tensors = 0;              // AllToAll
  double seconds = 0;           // Compute, Book
  const char* label = nullptr;  // AllToAll: its trace name
};

struct StepActions {
  std::vector<StepAction> actions;
  std::vector<StepJob> jobs;
};

// One optimizer step of a rank: grad_accum x (data wait, host->device copy, forward, backward with its
// reductions), the optimizer, ZeRO-1/2's parameter gathers. Reductions: one per gradient bucket once its
// last layer ran backward, on the last micro-batch (every micro-batch under ZeRO-2/3), submitted at once
// with overlap, held until the end of backward without. The same every step.
StepActions step_actions(const StepShape& shape);

}  // namespace vitsim::sim
