// The collectives of one rank's step: which, how many and how big (StepShape), from the scenario's framework,
// precision and ZeRO stage. DeepSpeed's as microsoft/DeepSpeed v0.14.4 issues them with its defaults
// (core/src/model/framework_deepspeed.cpp has the kernels and host syncs around them; docs/model.md
// "Framework step", docs/sources.md); another framework under ZeRO as the ZeRO paper counts it: a
// reduce-scatter of each gradient bucket, all-gathers of the parameters.
#include <cmath>

#include "vitsim/core/model/buckets.hpp"
#include "vitsim/sim/point/simulate.hpp"

namespace vitsim::sim {
namespace {

// Parameter bytes per Workload layer; without the persistent parameters (DeepSpeed ZeRO-3: at most
// kZero3PersistenceElements elements each, whole on every rank) when `skip_persistent`.
std::vector<double> layer_param_bytes(const Workload& w, double elem, bool skip_persistent) {
  std::vector<double> out(w.layers.size(), 0.0);
  if (!skip_persistent) {
    for (size_t l = 0; l < w.layers.size(); ++l) out[l] = w.layers[l].params * elem;
    return out;
  }
  const std::vector<double> t = parameter_tensors(w.model);
  for (int i = 0; i < static_cast<int>(t.size()); ++i)
    if (t[i] > kZero3PersistenceElements)
      out.at(static_cast<size_t>(tensor_layer(w.model, i))) += t[i] * elem;
  return out;
}

// ZeRO-3's gathers: forward in layer order, backward in reverse, a bucket closing once it holds `cap` bytes;
// a layer with nothing to gather starts none.
void zero3_gathers(StepShape& sh, const std::vector<double>& bytes, double cap) {
  const int layers = static_cast<int>(bytes.size());
  double acc = 0;
  int first = 0;
  for (int l = 0; l < layers; ++l) {
    if (bytes[l] <= 0) continue;
    if (acc == 0) first = l;
    acc += bytes[l];
    if (acc >= cap) {
      sh.z3_fwd_gathers.push_back({first, acc});
      acc = 0;
    }
  }
  if (acc > 0) sh.z3_fwd_gathers.push_back({first, acc});
  acc = 0;
  for (int l = layers - 1; l >= 0; --l) {
    if (bytes[l] <= 0) continue;
    if (acc == 0) sh.z3_bwd_gathers.push_back({l, 0});
    acc += bytes[l];
    sh.z3_bwd_gathers.back().second = acc;
    if (acc >= cap) acc = 0;
  }
}

// DeepSpeed v0.14.4. ZeRO-0 in fp32/fp16: one all-reduce per bucket (engine.py allreduce_no_retain), nothing
// else. bf16 at ZeRO-0 (BF16_Optimizer): the one flat gradient buffer all-reduced (its bucket rule), then
// update_lp_params -> all_gather_dp_groups -> all_gather_into_tensor of the whole flat bf16 group. ZeRO-1/2:
// average_tensor with use_multi_rank_bucket_allreduce all-reduces each IPG bucket whole (each rank keeps its
// slices), the compute stream waiting for the previous bucket's reduction (wait_stream); in the step the
// norm's all_reduce(SUM) of a float (get_grad_norm_direct) and in fp16 the overflow flag's all_reduce(MAX) of
// a byte (has_overflow), then one all_gather_into_tensor of the flat bit16 group (all_gather_dp_groups:
// allgather_bucket_size unused). ZeRO-3: reduce_scatter_coalesced per IPG bucket; the norm all-reduced as a
// double; the parameters gathered per module with stage3_prefetch_bucket_size elements prefetched, the
// persistent ones all-gathered once after the step (_post_step).
void deepspeed_collectives(StepShape& sh, const Scenario& s, const Workload& w) {
  const double elem = precision_bytes(s.training.precision);
  const DeepSpeedPath path = deepspeed_path(s.training.precision, s.parallel.zero);
  sh.grad_reduce_op = path == DeepSpeedPath::Zero3 ? CollOp::ReduceScatter : CollOp::AllReduce;
  if (path == DeepSpeedPath::Bf16Optimizer || path == DeepSpeedPath::Zero12)
    sh.param_gathers = {w.total_params() * elem};
  if (path == DeepSpeedPath::Zero12) sh.serial_reductions = true;
  if (path == DeepSpeedPath::Zero12 || path == DeepSpeedPath::Zero3) {
    if (s.training.precision == Precision::FP16)
      sh.step_collectives.push_back({1, CollOp::AllReduce, -1, "allreduce(overflow)"});
    sh.step_collectives.push_back(
        {path == DeepSpeedPath::Zero3 ? 8.0 : 4.0, CollOp::AllReduce, -1, "allreduce(grad_norm)"});
  }
  if (path != DeepSpeedPath::Zero3) return;
  zero3_gathers(sh, layer_param_bytes(w, elem, true), kZero3PrefetchElements * elem);
  double persistent = 0;
  for (double n : parameter_tensors(w.model))
    if (n <= kZero3PersistenceElements) persistent += n;
  if (persistent > 0) sh.param_gathers = {persistent * elem};
}

// Another framework under ZeRO (the ZeRO paper): reduce-scatters, the ZeRO-1/2 gathers after the step in
// allgather_bucket_size pieces, ZeRO-3's in forward and backward in such buckets.
void paper_zero_collectives(StepShape& sh, const Scenario& s, const Workload& w) {
  if (s.parallel.zero == 0) return;
  const double elem = precision_bytes(s.training.precision);
  const double cap = s.parallel.allgather_bucket_bytes;
  sh.grad_reduce_op = CollOp::ReduceScatter;
  if (s.parallel.zero <= 2) {
    const double total = w.total_params() * elem;
    const int k = static_cast<int>(std::ceil(total / cap));
    for (int i = 0; i < k; ++i) sh.param_gathers.push_back(total / k);
    return;
  }
  zero3_gathers(sh, layer_param_bytes(w, elem, false), cap);
}

}  // namespace

StepShape step_shape(const Scenario& s, const Workload& w) {
  StepShape sh;
  sh.grad_buckets = backward_buckets(s);
  if (s.training.framework == Framework::DeepSpeed)
    deepspeed_collectives(sh, s, w);
  else
    paper_zero_collectives(sh, s, w);
  sh.grad_accum = s.training.grad_accum;
  sh.ranks = s.ranks();
  sh.zero = s.parallel.zero;
  sh.sp = s.parallel.sequence_parallel;
  sh.overlap = s.parallel.overlap;
  for (const LayerCost& l : w.layers) sh.attention.push_back(l.kind == LayerKind::Attention);
  return sh;
}

}  // namespace vitsim::sim
