// Gradient buckets (issue 13 item 1): one layout, core's bucket_layout(), cut by the frameworks' own rules
// (docs/model.md, docs/sources.md) and used by both the simulator and the real trainer.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <numeric>

#include "test_util.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/model/buckets.hpp"
#include "vitsim/sim/point/simulate.hpp"

using namespace vitsim;

namespace {

constexpr double MiB = 1024.0 * 1024.0;

struct Cut {
  int begin, end;
  double elements;
};

void check_cuts(const std::vector<GradBucket>& got, const std::vector<Cut>& want, double elem_bytes) {
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    INFO("bucket " << k);
    CHECK(got[k].begin == want[k].begin);
    CHECK(got[k].end == want[k].end);
    CHECK(got[k].elements == want[k].elements);
    CHECK(got[k].bytes == want[k].elements * elem_bytes);
  }
}

// What every layout must be, whatever the rule: every tensor in exactly one bucket, in order, no empty
// bucket, bytes = elements x element size.
void check_partition(const std::vector<GradBucket>& b, const std::vector<double>& tensors,
                     double elem_bytes) {
  REQUIRE_FALSE(b.empty());
  CHECK(b.front().begin == 0);
  CHECK(b.back().end == static_cast<int>(tensors.size()));
  for (size_t k = 0; k < b.size(); ++k) {
    CHECK(b[k].begin < b[k].end);
    if (k) CHECK(b[k].begin == b[k - 1].end);
    const double sum = std::accumulate(tensors.begin() + b[k].begin, tensors.begin() + b[k].end, 0.0);
    CHECK(b[k].elements == sum);
    CHECK(b[k].bytes == sum * elem_bytes);
  }
}

std::vector<Scenario> shipped_points() {
  std::vector<Scenario> out;
  for (const char* dir : {"scenarios/study", "scenarios/local"})
    for (const auto& e : std::filesystem::directory_iterator(vt::source(dir)))
      if (e.path().extension() == ".xml")
        for (auto& s : expand(read_scenario_file(e.path().string()))) out.push_back(std::move(s));
  return out;
}

}  // namespace

TEST_CASE("DDP rule: add, then close once the bucket reaches its cap, the first bucket at 1 MiB",
          "[buckets]") {
  // fp32 tensors given in MiB: 0.5 + 0.5 reaches the first bucket's 1 MiB exactly (>= closes it); 1 + 1
  // reaches the 2 MiB cap exactly; 3 MiB alone is over the cap; the last 0.5 MiB is what remains.
  const double e = MiB / 4;  // elements of 1 MiB in fp32
  const std::vector<double> t{0.5 * e, 0.5 * e, 1 * e, 1 * e, 3 * e, 0.5 * e};
  auto b = bucket_layout(t, 2 * MiB, 4, BucketRule::DdpReducer);
  check_cuts(b, {{0, 2, 1 * e}, {2, 4, 2 * e}, {4, 5, 3 * e}, {5, 6, 0.5 * e}}, 4);
  // One element less in the second tensor: the first bucket no longer reaches 1 MiB and takes the 1 MiB
  // tensor too (DDP passes the cap rather than splitting a tensor).
  auto c = bucket_layout({0.5 * e, 0.5 * e - 1, 1 * e, 1 * e}, 2 * MiB, 4, BucketRule::DdpReducer);
  check_cuts(c, {{0, 3, 2 * e - 1}, {3, 4, 1 * e}}, 4);
  // A cap below 1 MiB: the first bucket still closes at 1 MiB (limits {1 MiB, cap}), later ones at the cap.
  auto d =
      bucket_layout({0.25 * e, 0.25 * e, 0.5 * e, 0.25 * e, 0.25 * e}, 0.25 * MiB, 4, BucketRule::DdpReducer);
  check_cuts(d, {{0, 3, 1 * e}, {3, 4, 0.25 * e}, {4, 5, 0.25 * e}}, 4);
  // The element size counts: the same tensors in bf16 are half the bytes, so buckets hold twice as many.
  auto h = bucket_layout(t, 2 * MiB, 2, BucketRule::DdpReducer);
  check_cuts(h, {{0, 3, 2 * e}, {3, 5, 4 * e}, {5, 6, 0.5 * e}}, 2);
  // vitsim's trainer: the same rule with the one limit {cap}: the 0.25 MiB cap applies from the first bucket.
  auto v =
      bucket_layout({0.25 * e, 0.25 * e, 0.5 * e, 0.25 * e, 0.25 * e}, 0.25 * MiB, 4, BucketRule::Vitsim);
  check_cuts(v, {{0, 1, 0.25 * e}, {1, 2, 0.25 * e}, {2, 3, 0.5 * e}, {3, 4, 0.25 * e}, {4, 5, 0.25 * e}}, 4);
  // Without the 1 MiB first bucket, 0.5 + 0.5 + 1 reaches the 2 MiB cap; 1 + 3 passes it; 0.5 remains.
  check_cuts(bucket_layout(t, 2 * MiB, 4, BucketRule::Vitsim),
             {{0, 3, 2 * e}, {3, 5, 4 * e}, {5, 6, 0.5 * e}}, 4);
}

TEST_CASE("DeepSpeed IPG rule: close before a tensor would pass reduce_bucket_size elements", "[buckets]") {
  // Cap 4 elements (8 bytes of fp16): 2 + 2 is exactly the cap and stays open; 3 would pass it: closed
  // before it; 5 is bigger than the cap and gets a bucket of its own; then 1.
  const std::vector<double> t{2, 2, 3, 5, 1};
  check_cuts(bucket_layout(t, 8, 2, BucketRule::DeepSpeedIpg), {{0, 2, 4}, {2, 3, 3}, {3, 4, 5}, {4, 5, 1}},
             2);
  // No first-bucket cap: a first tensor at the cap stays alone only because the next would pass it.
  check_cuts(bucket_layout({4, 1, 1}, 16, 4, BucketRule::DeepSpeedIpg), {{0, 1, 4}, {1, 3, 2}}, 4);
  // A cap larger than the model: one bucket.
  check_cuts(bucket_layout(t, 1e9, 4, BucketRule::DeepSpeedIpg), {{0, 5, 13}}, 4);
}

TEST_CASE("DeepSpeed ZeRO-0 rule (allreduce_no_retain): add, then close once the elements pass the cap",
          "[buckets]") {
  const std::vector<double> t{2, 2, 3, 5, 1};
  // 2, 4 (= cap, not past it), 7 > 4: closed after the 3; 5 > 4 alone; 1 remains.
  check_cuts(bucket_layout(t, 16, 4, BucketRule::DeepSpeedAllreduce), {{0, 3, 7}, {3, 4, 5}, {4, 5, 1}}, 4);
  // DeepSpeed's default 5e8 elements holds any ViT here in one bucket.
  check_cuts(bucket_layout(t, 5e8 * 2, 2, BucketRule::DeepSpeedAllreduce), {{0, 5, 13}}, 2);
}

TEST_CASE("Every rule partitions the tensors and the IPG rule never passes the cap but for one big tensor",
          "[buckets]") {
  for (const char* name : {"vit_tiny_patch16_224", "vit_base_patch16_224"}) {
    ViTConfig m = vit_preset(name);
    const auto t = gradient_ready_tensors(m);
    for (double cap : {64.0 * 1024, 1 * MiB, 25 * MiB, 2e9})
      for (double elem : {2.0, 4.0})
        for (BucketRule r : {BucketRule::Vitsim, BucketRule::DdpReducer, BucketRule::DeepSpeedIpg,
                             BucketRule::DeepSpeedAllreduce}) {
          INFO(name << " cap " << cap << " elem " << elem << " rule " << bucket_rule_name(r));
          auto b = bucket_layout(t, cap, elem, r);
          check_partition(b, t, elem);
          for (size_t k = 0; k < b.size(); ++k) {
            if (r == BucketRule::DeepSpeedIpg && b[k].end - b[k].begin > 1) CHECK(b[k].bytes <= cap);
            if ((r == BucketRule::DdpReducer || r == BucketRule::Vitsim) && k + 1 < b.size()) {
              const double limit = k == 0 && r == BucketRule::DdpReducer ? kDdpFirstBucketBytes : cap;
              CHECK(b[k].bytes >= limit);                          // closed on reaching it
              CHECK(b[k].bytes - t[b[k].end - 1] * elem < limit);  // and not before
            }
          }
        }
  }
  CHECK_THROWS_AS(bucket_layout({1, 2}, 0, 4, BucketRule::DdpReducer), Error);
  CHECK_THROWS_AS(bucket_layout({1, 2}, -1, 4, BucketRule::DeepSpeedIpg), Error);
  CHECK_THROWS_AS(bucket_layout({1, 2}, 100, 0, BucketRule::DeepSpeedAllreduce), Error);
  CHECK(bucket_layout({}, 100, 4, BucketRule::DdpReducer).empty());
}

TEST_CASE("Tensors map to the Workload layers that own them", "[buckets]") {
  for (const char* name :
       {"vit_tiny_patch16_224", "vit_small_patch32_384", "vit_base_patch16_224", "vit_cifar_tiny"}) {
    ViTConfig m = vit_preset(name);
    const Workload w = build_workload(m);
    const auto t = parameter_tensors(m);
    std::vector<double> per_layer(w.layers.size(), 0.0);
    for (int i = 0; i < static_cast<int>(t.size()); ++i) {
      const int l = tensor_layer(m, i);
      REQUIRE(l >= 0);
      REQUIRE(l < static_cast<int>(w.layers.size()));
      if (i) CHECK(l >= tensor_layer(m, i - 1));  // forward order
      per_layer[l] += t[i];
    }
    for (size_t l = 0; l < w.layers.size(); ++l)
      CHECK(per_layer[l] == static_cast<double>(w.layers[l].params));
    // The trainer's order (gradient_ready_tensors reversed) differs only inside patch_embed: same layers.
    auto ready = gradient_ready_tensors(m);
    std::reverse(ready.begin(), ready.end());
    REQUIRE(ready.size() == t.size());
    std::vector<double> per_layer_ready(w.layers.size(), 0.0);
    for (int i = 0; i < static_cast<int>(ready.size()); ++i) per_layer_ready[tensor_layer(m, i)] += ready[i];
    CHECK(per_layer_ready == per_layer);
    CHECK(ready[0] == m.width);  // the class token first, as LibTorch's parameters() yields it
  }
}

TEST_CASE("The framework chooses the rule and the communication dtype", "[buckets]") {
  const Precision fp32 = Precision::FP32, bf16 = Precision::BF16;
  CHECK(bucket_rule(Framework::Vitsim, 0, fp32) == BucketRule::Vitsim);
  CHECK(bucket_rule(Framework::Ddp, 0, bf16) == BucketRule::DdpReducer);
  CHECK(bucket_rule(Framework::DeepSpeed, 0, fp32) == BucketRule::DeepSpeedAllreduce);
  CHECK(bucket_rule(Framework::DeepSpeed, 0, Precision::FP16) == BucketRule::DeepSpeedAllreduce);
  CHECK(bucket_rule(Framework::DeepSpeed, 1, fp32) == BucketRule::DeepSpeedIpg);
  CHECK(bucket_rule(Framework::DeepSpeed, 2, bf16) == BucketRule::DeepSpeedIpg);
  // bf16 at ZeRO-0 is BF16_Optimizer (DeepSpeed v0.14.4 engine.py _do_optimizer_sanity_check:
  // grad_accum_dtype defaults to fp32 without ZeRO): its gradients live in one flat fp32 buffer, and
  // buffered_allreduce_fallback reduces that one tensor (get_grads_for_reduction): one bucket whatever the
  // cap.
  CHECK(bucket_rule(Framework::DeepSpeed, 0, bf16) == BucketRule::DeepSpeedFlat);
  CHECK(bucket_layout({5, 7, 11}, 4.0, 2.0, BucketRule::DeepSpeedFlat) ==
        std::vector<GradBucket>{{0, 3, 23, 46}});
  Scenario s;
  s.training.precision = Precision::BF16;
  for (Framework f : {Framework::Vitsim, Framework::Ddp}) {
    s.training.framework = f;
    CHECK(gradient_comm_dtype(s) == Precision::FP32);  // autocast keeps fp32 gradients
  }
  s.training.framework = Framework::DeepSpeed;
  CHECK(gradient_comm_dtype(s) == Precision::BF16);  // DeepSpeed's gradients are in the training dtype
  s.parallel.comm_dtype = Precision::FP32;
  CHECK(gradient_comm_dtype(s) == Precision::FP32);  // communication_data_type wins
}

TEST_CASE("Shipped scenarios: the simulator's backward buckets are the shared layout", "[buckets][shipped]") {
  const auto points = shipped_points();
  REQUIRE(points.size() >= 13);  // 8 study + 5 local files, each at least one point
  int multi = 0;
  for (const Scenario& s : points) {
    INFO(s.file);
    const auto layout = gradient_buckets(s);
    const auto tensors = gradient_ready_tensors(s.model);
    const double elem = precision_bytes(gradient_comm_dtype(s));
    check_partition(layout, tensors, elem);
    const auto sim = sim::backward_buckets(s);
    REQUIRE(sim.size() == layout.size());
    const int n = static_cast<int>(tensors.size());
    for (size_t k = 0; k < sim.size(); ++k) {
      CHECK(sim[k].bytes == layout[k].bytes);
      CHECK(sim[k].last_layer == tensor_layer(s.model, n - layout[k].end));
      if (k) CHECK(sim[k].last_layer <= sim[k - 1].last_layer);  // reverse layer order
    }
    CHECK(sim.back().last_layer == 0);  // the last bucket ends with the patch embedding
    if (layout.size() > 1) ++multi;
  }
  CHECK(multi >= 2);  // fmnist-vit (256 KiB) and validate-netns (64 KiB) cut several buckets
}
