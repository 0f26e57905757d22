// step_actions (sim/compute/step_actions.hpp): one rank's step as the list of actions the simulator's compute
// actor executes, checked without SimGrid over every combination of overlap, ZeRO stage, accumulation, patch
// parallelism and group size.
#include <catch2/catch.hpp>

#include <map>
#include <numeric>
#include <string>

#include "vitsim/sim/compute/step_actions.hpp"
#include "vitsim/sim/point/simulate.hpp"

using namespace vitsim::sim;
using Kind = StepAction::Kind;

namespace {

// Six layers (patch embedding, two blocks of attention + MLP, head) with distinct whole-number times (sums
// are exact), three gradient buckets closing after layers 4, 2 and 0, two ZeRO-3 gather buckets each way, two
// ZeRO-1/2 parameter gathers; ZeRO as the paper counts it (reduce-scatters at ZeRO >= 1).
StepShape shape(bool overlap, int zero, int accum, int sp, int ranks) {
  StepShape s;
  for (int l = 0; l < 6; ++l) s.layers.push_back({1.0 + l, 2.0 * (1 + l)});
  s.attention = {0, 1, 0, 1, 0, 0};
  s.optimizer_s = 5;
  s.grad_buckets = {{4, 100}, {2, 200}, {0, 300}};
  s.z3_fwd_gathers = {{0, 10}, {3, 20}};
  s.z3_bwd_gathers = {{5, 30}, {2, 40}};
  if (zero == 1 || zero == 2) s.param_gathers = {50, 60};
  s.grad_reduce_op = zero == 0 ? CollOp::AllReduce : CollOp::ReduceScatter;
  s.grad_accum = accum;
  s.ranks = ranks;
  s.zero = zero;
  s.sp = sp;
  s.overlap = overlap;
  return s;
}

template <typename F>
void for_all_shapes(F f) {
  for (bool overlap : {false, true})
    for (int zero = 0; zero <= 3; ++zero)
      for (int accum : {1, 3})
        for (int sp : {1, 2})
          for (int ranks : {1, 4}) {
            INFO("overlap " << overlap << ", ZeRO " << zero << ", accum " << accum << ", sp " << sp
                            << ", ranks " << ranks);
            f(shape(overlap, zero, accum, sp, ranks));
          }
}

int count(const StepActions& p, Kind k) {
  return static_cast<int>(
      std::count_if(p.actions.begin(), p.actions.end(), [&](const StepAction& a) { return a.kind == k; }));
}

bool is_reduction(const StepActions& p, const StepAction& a) {
  return a.kind == Kind::Submit && p.jobs[a.job].bucket >= 0;
}

}  // namespace

TEST_CASE("a step's compute and its breakdown add up to the layers' times", "[step_actions]") {
  for_all_shapes([](const StepShape& s) {
    const StepActions p = step_actions(s);
    double fwd = 0, bwd = 0;
    for (const LayerTimes& t : s.layers) fwd += t.fwd_s, bwd += t.bwd_s;  // 21 and 42
    double computed = 0, booked[3] = {0, 0, 0};
    for (const StepAction& a : p.actions) {
      if (a.kind == Kind::Compute) computed += a.seconds;
      if (a.kind == Kind::Book) booked[static_cast<int>(a.pass)] += a.seconds;
    }
    CHECK(computed == s.grad_accum * (fwd + bwd) + s.optimizer_s);
    CHECK(booked[0] == s.grad_accum * fwd);
    CHECK(booked[1] == s.grad_accum * bwd);
    CHECK(booked[2] == s.optimizer_s);
    // Every micro-batch waits for its batch and copies it first.
    CHECK(count(p, Kind::DataWait) == s.grad_accum);
    CHECK(count(p, Kind::HostToDevice) == s.grad_accum);
    CHECK(p.actions.front().kind == Kind::DataWait);
  });
}

TEST_CASE("every collective a step submits is waited for within the step, never one too many",
          "[step_actions]") {
  for_all_shapes([](const StepShape& s) {
    const StepActions p = step_actions(s);
    int outstanding = 0;
    bool waited_for_nothing = false;
    for (const StepAction& a : p.actions) {
      if (a.kind == Kind::Submit && !s.inline_comm()) ++outstanding;
      if (a.kind == Kind::WaitOne) waited_for_nothing |= outstanding-- == 0;
      if (a.kind == Kind::CommWaitEnd || a.kind == Kind::Drain) outstanding = 0;
    }
    CHECK_FALSE(waited_for_nothing);
    CHECK(outstanding == 0);
    // Starts and ends of the backward's wait pair up; inline collectives leave nothing to wait for one by
    // one.
    CHECK(count(p, Kind::CommWaitStart) == count(p, Kind::CommWaitEnd));
    if (s.inline_comm()) CHECK(count(p, Kind::WaitOne) == 0);
  });
}

TEST_CASE("gradients are reduced once per step, or every micro-batch under ZeRO-2/3, never in a group of one",
          "[step_actions]") {
  for_all_shapes([](const StepShape& s) {
    const StepActions p = step_actions(s);
    const int reductions = static_cast<int>(std::count_if(
        p.actions.begin(), p.actions.end(), [&](const StepAction& a) { return is_reduction(p, a); }));
    const int per_step = s.ranks == 1 ? 0 : s.zero >= 2 ? s.grad_accum : 1;
    CHECK(reductions == per_step * static_cast<int>(s.grad_buckets.size()));
    for (const StepJob& j : p.jobs)
      if (j.bucket >= 0) CHECK(j.op == (s.zero == 0 ? CollOp::AllReduce : CollOp::ReduceScatter));
    // A micro-batch that reduces ends its backward with a wait (zero-length when every reduction was done).
    if (per_step == 0 && s.zero < 3) CHECK(count(p, Kind::CommWaitStart) + count(p, Kind::CommWaitNone) == 0);
    if (per_step > 0) CHECK(count(p, Kind::CommWaitStart) + count(p, Kind::CommWaitNone) >= per_step);
  });
}

TEST_CASE("with overlap a bucket is submitted as soon as its last layer's backward is done",
          "[step_actions]") {
  for (int zero : {0, 1}) {
    const StepShape s = shape(true, zero, 1, 1, 4);
    const StepActions p = step_actions(s);
    for (size_t k = 0; k < s.grad_buckets.size(); ++k) {
      auto sub = std::find_if(p.actions.begin(), p.actions.end(), [&](const StepAction& a) {
        return is_reduction(p, a) && p.jobs[a.job].bucket == static_cast<int>(k);
      });
      REQUIRE(sub != p.actions.end());
      // The action before it closes the bucket's last layer's backward.
      const StepAction& before = *(sub - 1);
      CHECK(before.kind == Kind::LayerEnd);
      CHECK(before.pass == Pass::Backward);
      CHECK(before.layer == s.grad_buckets[k].last_layer);
    }
    CHECK(count(p, Kind::CommWaitStart) == 1);  // the end of backward waits for what is still running
  }
}

TEST_CASE("without overlap the reductions start when backward is done", "[step_actions]") {
  for (int zero : {0, 1}) {
    const StepActions p = step_actions(shape(false, zero, 1, 1, 4));
    auto start = std::find_if(p.actions.begin(), p.actions.end(),
                              [](const StepAction& a) { return a.kind == Kind::CommWaitStart; });
    auto end = std::find_if(p.actions.begin(), p.actions.end(),
                            [](const StepAction& a) { return a.kind == Kind::CommWaitEnd; });
    REQUIRE(start < end);
    CHECK(std::count_if(start, end, [&](const StepAction& a) { return is_reduction(p, a); }) == 3);
    CHECK(std::none_of(p.actions.begin(), start, [&](const StepAction& a) { return is_reduction(p, a); }));
    // Nothing of the backward after it.
    CHECK(std::none_of(end, p.actions.end(), [](const StepAction& a) { return a.pass == Pass::Backward; }));
  }
}

TEST_CASE("ZeRO-3 waits for each gathered bucket before the first layer it holds", "[step_actions]") {
  const StepShape s = shape(true, 3, 1, 1, 4);
  const StepActions p = step_actions(s);
  std::vector<int> fwd_waits, bwd_waits;  // the layer whose span follows each wait
  for (size_t i = 0; i < p.actions.size(); ++i) {
    if (p.actions[i].kind != Kind::WaitOne) continue;
    size_t j = i + 1;
    while (p.actions[j].kind != Kind::Compute) ++j;
    (p.actions[j].pass == Pass::Forward ? fwd_waits : bwd_waits).push_back(p.actions[j].layer);
  }
  CHECK(fwd_waits == std::vector<int>{0, 3});
  CHECK(bwd_waits == std::vector<int>{5, 2});
  // The gathers go out first: forward's before any layer, backward's before its first layer.
  int gathers = 0;
  for (const StepJob& j : p.jobs) gathers += j.op == CollOp::AllGather;
  CHECK(gathers == 4);
}

TEST_CASE("Ulysses wraps each attention layer in all-to-alls: 3 then 1 tensors forward, 1 then 3 backward",
          "[step_actions]") {
  const StepShape s = shape(false, 0, 2, 2, 4);
  const StepActions p = step_actions(s);
  std::vector<std::pair<int, int>> seen;  // (layer, tensors) in order
  int layer = -1;
  for (const StepAction& a : p.actions) {
    if (a.kind == Kind::LayerStart) layer = a.layer;
    if (a.kind == Kind::AllToAll) seen.push_back({layer, a.tensors});
  }
  const std::vector<std::pair<int, int>> one_batch{{1, 3}, {1, 1}, {3, 3}, {3, 1},
                                                   {3, 1}, {3, 3}, {1, 1}, {1, 3}};
  std::vector<std::pair<int, int>> want = one_batch;
  want.insert(want.end(), one_batch.begin(), one_batch.end());  // two micro-batches
  CHECK(seen == want);
  // Without patch parallelism the forward is one compute action.
  const StepActions flat = step_actions(shape(false, 0, 1, 1, 4));
  CHECK(count(flat, Kind::AllToAll) == 0);
  CHECK(std::count_if(flat.actions.begin(), flat.actions.end(), [](const StepAction& a) {
          return a.kind == Kind::Compute && a.pass == Pass::Forward;
        }) == 1);
}

TEST_CASE("ZeRO-1/2 gather the parameters after the optimizer and wait for them", "[step_actions]") {
  for (int zero : {1, 2}) {
    const StepActions p = step_actions(shape(false, zero, 1, 1, 4));
    auto opt = std::find_if(p.actions.begin(), p.actions.end(), [](const StepAction& a) {
      return a.kind == Kind::Compute && a.pass == Pass::Optimizer;
    });
    REQUIRE(opt != p.actions.end());
    std::vector<double> after;
    for (auto it = opt; it != p.actions.end(); ++it)
      if (it->kind == Kind::Submit) after.push_back(p.jobs[it->job].bytes);
    CHECK(after == std::vector<double>{50, 60});
    CHECK(p.actions.back().kind == Kind::Drain);
  }
  // ZeRO-0 and ZeRO-3 end with the optimizer's span.
  for (int zero : {0, 3})
    CHECK(step_actions(shape(false, zero, 1, 1, 4)).actions.back().kind == Kind::LayerEnd);
}

namespace {

// The collectives one rank's step submits, from the scenario (sim::step_shape): per operation, how many and
// how many bytes in all.
struct Issued {
  int count = 0;
  double bytes = 0;
};
std::map<CollOp, Issued> issued(const vitsim::Scenario& s) {
  const vitsim::Workload w = vitsim::build_workload(s.model);
  StepShape sh = step_shape(s, w);
  sh.layers.assign(w.layers.size(), LayerTimes{1, 1});
  sh.optimizer_s = 1;
  const StepActions p = step_actions(sh);
  std::map<CollOp, Issued> out;
  for (const StepAction& a : p.actions)
    if (a.kind == Kind::Submit) {
      out[p.jobs[a.job].op].count++;
      out[p.jobs[a.job].op].bytes += p.jobs[a.job].bytes;
    }
  return out;
}

// One node of 8 ranks training a ViT preset with DeepSpeed, 50 MB gradient buckets.
vitsim::Scenario deepspeed_scenario(const std::string& preset, vitsim::Precision p, int zero, int accum) {
  vitsim::Scenario s;
  s.model = vitsim::vit_preset(preset);
  s.cluster.nodes = 1;
  s.cluster.gpus_per_node = 8;
  s.training.framework = vitsim::Framework::DeepSpeed;
  s.training.precision = p;
  s.training.grad_accum = accum;
  s.parallel.zero = zero;
  s.parallel.bucket_bytes = 50e6;
  return s;
}

}  // namespace

TEST_CASE("DeepSpeed v0.14.4's collectives per configuration: kind, count, bytes",
          "[step_actions][deepspeed]") {
  using vitsim::Precision;
  for (const char* preset : {"vit_b_16", "vit_l_16"}) {
    INFO(preset);
    const vitsim::ViTConfig m = vitsim::vit_preset(preset);
    const double P = vitsim::build_workload(m).total_params();
    // bf16 at ZeRO-0 (BF16_Optimizer): engine.allreduce_gradients -> buffered_allreduce_fallback reduces the
    // one flat fp32 gradient buffer as bf16 (communication_data_type): one all-reduce of 2P bytes whatever
    // the bucket size; update_lp_params -> all_gather_dp_groups -> one all_gather_into_tensor of the flat
    // bf16 parameters: 2P.
    auto c = issued(deepspeed_scenario(preset, Precision::BF16, 0, 1));
    CHECK(c[CollOp::AllReduce].count == 1);
    CHECK(c[CollOp::AllReduce].bytes == 2 * P);
    CHECK(c[CollOp::AllGather].count == 1);
    CHECK(c[CollOp::AllGather].bytes == 2 * P);
    CHECK(c[CollOp::ReduceScatter].count == 0);
    // fp16 at ZeRO-0 (v0.12.6, unchanged): one all-reduce per allreduce_no_retain bucket, 2P in all.
    vitsim::Scenario s = deepspeed_scenario(preset, Precision::FP16, 0, 1);
    c = issued(s);
    CHECK(c[CollOp::AllReduce].count == static_cast<int>(vitsim::gradient_buckets(s).size()));
    CHECK(c[CollOp::AllReduce].bytes == 2 * P);
    CHECK(c[CollOp::AllGather].count == 0);
    // bf16 ZeRO-1 over 4 micro-batches: reduce_gradients at the boundary, average_tensor all-reducing each
    // IPG bucket whole (use_multi_rank_bucket_allreduce), K buckets of 2P in all; get_grad_norm_direct's
    // all_reduce of a float (4 bytes); one all_gather_into_tensor of 2P (allgather_bucket_size unused).
    s = deepspeed_scenario(preset, Precision::BF16, 1, 4);
    const int K = static_cast<int>(vitsim::gradient_buckets(s).size());
    REQUIRE(K > 1);
    c = issued(s);
    CHECK(c[CollOp::AllReduce].count == K + 1);
    CHECK(c[CollOp::AllReduce].bytes == 2 * P + 4);
    CHECK(c[CollOp::AllGather].count == 1);
    CHECK(c[CollOp::AllGather].bytes == 2 * P);
    CHECK(c[CollOp::ReduceScatter].count == 0);
    // fp16 ZeRO-2: the IPG hooks reduce at every micro-batch (4 K all-reduces of 2P each round), plus
    // has_overflow's all_reduce(MAX) of a byte and the norm's 4 bytes.
    s.training.precision = Precision::FP16;
    s.parallel.zero = 2;
    c = issued(s);
    CHECK(c[CollOp::AllReduce].count == 4 * K + 2);
    CHECK(c[CollOp::AllReduce].bytes == 4 * 2 * P + 1 + 4);
    CHECK(c[CollOp::AllGather].count == 1);
    // bf16 ZeRO-3 over 2 micro-batches: __avg_scatter_grads -> reduce_scatter_coalesced per IPG bucket every
    // micro-batch (2 x 2P); the norm all-reduced as a double (8 bytes); the non-persistent parameters
    // gathered in forward and again in backward every micro-batch (4 x 2 (P - p) bytes) and the persistent
    // ones (at most 1e5 elements: per block both LayerNorms, the qkv, out, fc1 and fc2 biases, 13 d; the
    // convolution bias, class token, final LayerNorm, 4 d; the head bias, 1000) all-gathered once after the
    // step (_post_step): 2 p.
    s = deepspeed_scenario(preset, Precision::BF16, 3, 2);
    const double d = m.width, persistent = m.depth * 13 * d + 4 * d + m.classes;
    c = issued(s);
    CHECK(c[CollOp::ReduceScatter].count == 2 * K);
    CHECK(c[CollOp::ReduceScatter].bytes == 2 * 2 * P);
    CHECK(c[CollOp::AllReduce].count == 1);
    CHECK(c[CollOp::AllReduce].bytes == 8);
    CHECK(c[CollOp::AllGather].bytes == Approx(4 * 2 * (P - persistent) + 2 * persistent).epsilon(1e-12));
    // Each gather but a pass's last holds at least stage3_prefetch_bucket_size = 5e7 elements.
    const StepShape sh = step_shape(s, vitsim::build_workload(m));
    for (const auto* g : {&sh.z3_fwd_gathers, &sh.z3_bwd_gathers})
      for (size_t k = 0; k + 1 < g->size(); ++k) CHECK((*g)[k].second >= 5e7 * 2);
    CHECK(sh.param_gathers == std::vector<double>{2 * persistent});
  }
}

TEST_CASE("DeepSpeed ZeRO-1/2 with overlap: a bucket's reduction waits for the previous one's",
          "[step_actions][deepspeed]") {
  // stage_1_and_2.py average_tensor under overlap_comm: reduction_stream.wait_stream(current) and
  // current_stream().wait_stream(reduction_stream): the compute stream goes on only once the reductions
  // issued before are done, so at most one is in flight.
  vitsim::Scenario s = deepspeed_scenario("vit_b_16", vitsim::Precision::BF16, 2, 1);
  s.parallel.overlap = true;
  const vitsim::Workload w = vitsim::build_workload(s.model);
  StepShape sh = step_shape(s, w);
  sh.layers.assign(w.layers.size(), LayerTimes{1, 1});
  const StepActions p = step_actions(sh);
  int reductions = 0;
  for (size_t i = 0; i < p.actions.size(); ++i)
    if (is_reduction(p, p.actions[i])) {
      if (reductions++ > 0) CHECK(p.actions[i - 1].kind == Kind::WaitOne);
    }
  CHECK(reductions == static_cast<int>(sh.grad_buckets.size()));
}
