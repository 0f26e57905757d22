#include "vitsim/sim/compute/step_actions.hpp"

namespace vitsim::sim {
namespace {

using Kind = StepAction::Kind;

// Builds one step's actions; `outstanding` follows the collectives submitted to the communication stream and
// not yet waited for, so that the builder knows (as the rank would at run time) whether the backward must
// wait.
class StepBuilder {
 public:
  explicit StepBuilder(const StepShape& s) : s_(s) {
    for (const LayerTimes& t : s.layers) fwd_total_ += t.fwd_s;
  }

  StepActions run() {
    for (int m = 0; m < s_.grad_accum; ++m) {
      add({Kind::DataWait});
      add({Kind::HostToDevice});
      forward();
      backward(m == s_.grad_accum - 1);
    }
    optimizer();
    return std::move(out_);
  }

 private:
  const StepShape& s_;
  StepActions out_;
  double fwd_total_ = 0;
  int outstanding_ = 0;

  int layers() const { return static_cast<int>(s_.layers.size()); }
  bool ulysses(int l) const { return s_.sp > 1 && s_.attention[l]; }
  void add(StepAction a) { out_.actions.push_back(a); }
  void compute(double seconds, Pass pass, int layer) {
    StepAction a{Kind::Compute, pass, layer};
    a.seconds = seconds;
    add(a);
  }
  void book(Pass pass, double seconds) {
    StepAction a{Kind::Book, pass};
    a.seconds = seconds;
    add(a);
  }
  void all_to_all(int tensors, const char* label) {
    StepAction a{Kind::AllToAll};
    a.tensors = tensors;
    a.label = label;
    add(a);
  }
  void submit(StepJob job) {
    StepAction a{Kind::Submit};
    a.job = static_cast<int>(out_.jobs.size());
    out_.jobs.push_back(job);
    add(a);
    if (!s_.inline_comm()) ++outstanding_;
  }
  void wait_one() {
    add({Kind::WaitOne});
    --outstanding_;
  }

  // Forward. ZeRO-3 gathers each bucket of parameters first (prefetched by the communication stream), waiting
  // for a bucket before its first layer; Ulysses wraps each attention layer in all-to-alls (Q, K, V before,
  // the output after). Otherwise the whole forward is one compute action (the trace gets each layer's share).
  void forward() {
    if (s_.zero < 3 && s_.sp == 1) {
      compute(fwd_total_, Pass::Forward, -1);
      book(Pass::Forward, fwd_total_);
      return;
    }
    if (s_.zero >= 3)
      for (const auto& [first, bytes] : s_.z3_fwd_gathers)
        submit({bytes, CollOp::AllGather, -1, "allgather(fwd)"});
    size_t gi = 0;
    for (int l = 0; l < layers(); ++l) {
      if (s_.zero >= 3 && gi < s_.z3_fwd_gathers.size() && s_.z3_fwd_gathers[gi].first == l) {
        wait_one();
        ++gi;
      }
      if (s_.zero >= 3 && ulysses(l)) add({Kind::Flush});  // the span starts after the pending compute
      add({Kind::LayerStart, Pass::Forward, l});
      if (ulysses(l)) all_to_all(3, "alltoall(qkv)");
      compute(s_.layers[l].fwd_s, Pass::Forward, l);
      if (ulysses(l)) all_to_all(1, "alltoall(out)");
      add({Kind::LayerEnd, Pass::Forward, l});
    }
    book(Pass::Forward, fwd_total_);
  }

  // Backward, bucket by bucket in reverse layer order; each bucket's reduction once its last layer is done.
  void backward(bool boundary) {
    const bool reduce_now = (boundary || s_.zero >= 2) && s_.ranks > 1;
    const CollOp op = s_.grad_reduce_op;
    std::vector<StepJob> held;
    if (s_.zero >= 3)
      for (const auto& [last, bytes] : s_.z3_bwd_gathers)
        submit({bytes, CollOp::AllGather, -1, "allgather(bwd)"});
    int layer = layers() - 1;
    size_t z3 = 0;
    for (size_t k = 0; k < s_.grad_buckets.size(); ++k) {
      const BackwardBucket& bk = s_.grad_buckets[k];
      for (; layer >= bk.last_layer; --layer) {
        add({Kind::LayerStart, Pass::Backward, layer});
        if (s_.zero >= 3 && z3 < s_.z3_bwd_gathers.size() && s_.z3_bwd_gathers[z3].first == layer) {
          // Gathers were submitted before any reduction of this pass: the oldest job is this one.
          wait_one();
          ++z3;
        }
        // Backward mirrors forward: the output gradient back to a head split, then Q, K, V's to the token
        // split.
        if (ulysses(layer)) all_to_all(1, "alltoall(dout)");
        compute(s_.layers[layer].bwd_s, Pass::Backward, layer);
        if (ulysses(layer)) all_to_all(3, "alltoall(dqkv)");
        book(Pass::Backward, s_.layers[layer].bwd_s);
        add({Kind::LayerEnd, Pass::Backward, layer});
      }
      if (!reduce_now) continue;
      // The slowest rank's lag: its last bucket (and the reductions after it) start that much later.
      if (boundary && k + 1 == s_.grad_buckets.size() && s_.straggler_wait_s > 0) {
        StepAction a{Kind::StragglerWait};
        a.seconds = s_.straggler_wait_s;
        add(a);
      }
      const StepJob job{bk.bytes, op, static_cast<int>(k), nullptr};
      if (!s_.overlap) {
        held.push_back(job);
        continue;
      }
      if (s_.serial_reductions && outstanding_ > 0) wait_one();
      submit(job);
    }
    if (boundary && reduce_now && s_.sync_wait_s > 0) {
      StepAction a{Kind::SyncWait};
      a.seconds = s_.sync_wait_s;
      add(a);
    }
    if (!held.empty() || outstanding_ > 0) {
      add({Kind::CommWaitStart});
      for (const StepJob& job : held) submit(job);
      add({Kind::CommWaitEnd});
      outstanding_ = 0;
    } else if (reduce_now) {
      add({Kind::CommWaitNone});
    }
  }

  // The step's small all-reduces (waited for), the optimizer (on a partition, the compute model's step counts
  // it), then the gathers of the other ranks' updated partitions.
  void optimizer() {
    if (s_.ranks > 1 && !s_.step_collectives.empty()) {
      add({Kind::CommWaitStart});
      for (const StepJob& job : s_.step_collectives) submit(job);
      add({Kind::CommWaitEnd});
      outstanding_ = 0;
    }
    add({Kind::LayerStart, Pass::Optimizer});
    compute(s_.optimizer_s, Pass::Optimizer, -1);
    book(Pass::Optimizer, s_.optimizer_s);
    add({Kind::LayerEnd, Pass::Optimizer});
    if (s_.ranks > 1 && !s_.param_gathers.empty()) {
      // Inline (no communication stream) the gathers run as they are submitted: a wait span books them.
      if (s_.inline_comm()) add({Kind::CommWaitStart});
      for (double bytes : s_.param_gathers) submit({bytes, CollOp::AllGather, -1, "allgather(params)"});
      add({s_.inline_comm() ? Kind::CommWaitEnd : Kind::Drain});
      outstanding_ = 0;
    }
  }
};

}  // namespace

StepActions step_actions(const StepShape& shape) {
  return StepBuilder(shape).run();
}

}  // namespace vitsim::sim
