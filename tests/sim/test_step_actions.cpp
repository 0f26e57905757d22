// step_actions (sim/step_actions.hpp): one rank's step as the list of actions the simulator's compute actor
// executes, checked without SimGrid over every combination of overlap, ZeRO stage, accumulation, patch
// parallelism and group size.
#include <catch2/catch.hpp>

#include <numeric>

#include "vitsim/sim/step_actions.hpp"

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
