// core/formats/placement.hpp: which GPU each rank runs on, the one rule of the simulator and the trainer.
#include <catch2/catch.hpp>

#include "test_util.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/formats/placement.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/sim/predict/predict.hpp"

using namespace vitsim;

namespace {

GpuFacts gpu(const std::string& model, double fp32, double bf16) {
  GpuFacts g;
  g.model = model;
  g.flops_fp32 = fp32;
  g.flops_fp16 = bf16;
  g.flops_bf16 = bf16;
  return g;
}

// Three nodes of mixed GPU types, in file order: "a" (2 x type X), "b" (4 x type Y), "c" (1 x type X).
// The FLOP/s are round numbers chosen so that every mean below is exact in binary.
PlatformFacts mixed() {
  PlatformFacts f;
  f.path = "mixed.xml";
  const GpuFacts x = gpu("X", 1e12, 4e12), y = gpu("Y", 2e12, 8e12);
  auto node = [&](const std::string& name, int gpus, const GpuFacts& g) {
    NodeFacts n;
    n.name = name;
    for (int i = 0; i < gpus; ++i) {
      n.gpus.push_back(name + "-gpu" + std::to_string(i));
      f.gpu[n.gpus.back()] = g;
    }
    f.nodes.push_back(n);
  };
  node("a", 2, x);
  node("b", 4, y);
  node("c", 1, x);
  return f;
}

Scenario cluster(int nodes, int gpus_per_node, std::vector<std::string> hosts = {}) {
  Scenario s;
  s.file = "s.xml";
  s.cluster.nodes = nodes;
  s.cluster.gpus_per_node = gpus_per_node;
  s.cluster.hosts = std::move(hosts);
  return s;
}

}  // namespace

TEST_CASE("placement: ranks fill nodes in file order, node-major, the first gpus_per_node GPUs of each",
          "[placement]") {
  const PlatformFacts f = mixed();
  const RankPlacement p = place_ranks(cluster(2, 2), f);
  CHECK(p.hosts == std::vector<std::string>{"a-gpu0", "a-gpu1", "b-gpu0", "b-gpu1"});
  CHECK(p.node == std::vector<int>{0, 0, 1, 1});
  // Two X (1e12 fp32) and two Y (2e12): mean 1.5e12; in bf16 4e12 and 8e12: mean 6e12.
  CHECK(mean_peak_flops(p, f, Precision::FP32) == 1.5e12);
  CHECK(mean_peak_flops(p, f, Precision::BF16) == 6e12);
}

TEST_CASE("placement: cluster.hosts orders the nodes, the types follow the nodes chosen", "[placement]") {
  const PlatformFacts f = mixed();
  const RankPlacement p = place_ranks(cluster(2, 1, {"c", "b"}), f);
  CHECK(p.hosts == std::vector<std::string>{"c-gpu0", "b-gpu0"});
  CHECK(p.node == std::vector<int>{2, 1});
  CHECK(mean_peak_flops(p, f, Precision::FP32) == 1.5e12);  // one X, one Y
  const RankPlacement q = place_ranks(cluster(1, 4, {"b", "a"}), f);
  CHECK(q.hosts == std::vector<std::string>{"b-gpu0", "b-gpu1", "b-gpu2", "b-gpu3"});
  CHECK(mean_peak_flops(q, f, Precision::FP32) == 2e12);  // all Y
}

TEST_CASE("placement: another rank count (the trainer's job) follows the same rule", "[placement]") {
  const PlatformFacts f = mixed();
  const Scenario s = cluster(2, 2);
  // The scenario's count gives the scenario's placement.
  CHECK(place_ranks(s, f, 4).hosts == place_ranks(s, f).hosts);
  // Three ranks: node a's two GPUs, then the first of b's.
  const RankPlacement three = place_ranks(s, f, 3);
  CHECK(three.hosts == std::vector<std::string>{"a-gpu0", "a-gpu1", "b-gpu0"});
  CHECK(three.node == std::vector<int>{0, 0, 1});
  // (1 + 1 + 2) / 3 TFLOP/s fp32: not exact in binary, so compared with the same division.
  CHECK(mean_peak_flops(three, f, Precision::FP32) == (1e12 + 1e12 + 2e12) / 3);
  // One rank: a prefix of the placement.
  CHECK(place_ranks(s, f, 1).hosts == std::vector<std::string>{"a-gpu0"});
  // Six ranks at one GPU per node would need six nodes; three exist.
  CHECK_THROWS_WITH(place_ranks(cluster(1, 1), f, 6),
                    Catch::Contains("6 ranks at cluster.gpus_per_node 1 need 6 nodes but mixed.xml has 3"));
  CHECK(place_ranks(s, f, 0).hosts.empty());
  CHECK(mean_peak_flops(RankPlacement{}, f, Precision::FP32) == 0);
}

TEST_CASE("placement: what the platform cannot hold is refused, naming the scenario attribute",
          "[placement]") {
  const PlatformFacts f = mixed();
  CHECK_THROWS_WITH(place_ranks(cluster(4, 1), f),
                    Catch::Contains("cluster.nodes: 4 nodes requested but mixed.xml has 3"));
  // cluster.hosts limits the nodes to those it lists.
  CHECK_THROWS_WITH(place_ranks(cluster(3, 1, {"a", "b"}), f),
                    Catch::Contains("cluster.nodes: 3 nodes requested but mixed.xml has 2"));
  CHECK_THROWS_WITH(place_ranks(cluster(1, 1, {"d"}), f),
                    Catch::Contains("cluster.hosts: no node 'd' in mixed.xml; nodes: a, b, c"));
  // Node a holds 2 GPUs: 3 per node fails on the first node; node c (1 GPU) fails as the third.
  CHECK_THROWS_WITH(place_ranks(cluster(1, 3), f),
                    Catch::Contains("cluster.gpus_per_node: 3 GPUs per node requested but node 'a' has 2"));
  CHECK_THROWS_WITH(place_ranks(cluster(3, 2), f),
                    Catch::Contains("cluster.gpus_per_node: 2 GPUs per node requested but node 'c' has 1"));
  CHECK_NOTHROW(place_ranks(cluster(2, 2), f));
}

TEST_CASE("placement: the simulator's ranks and MFU peak are core's placement on a mixed platform",
          "[placement]") {
  vt::TempDir d;
  // Three nodes of two GPUs, 10, 20 and 40 TFLOP/s fp32; the scenario takes nodes n2 then n0.
  d.file("p.xml",
         vt::platform_xml(3, 2, "100GBps", "0us", {"10GBps", "10GBps", "10GBps"}, {"10Tf", "20Tf", "40Tf"}));
  auto f = read_scenario_file(d.file("s.xml", R"(<scenario name="m">
  <cluster platform="p.xml" nodes="2" gpus_per_node="2" hosts="n2 n0"/>
  <model preset="vit_cifar_tiny"/>
  <dataset name="synthetic" train_samples="640" image_size="32" channels="3"/>
  <training micro_batch="32" grad_accum="1" precision="fp32"/>
  <loader workers="0"/>
  <simulation steps="2" warmup="1"/>
</scenario>
)"));
  const Scenario s = expand(f).front();
  const PlatformFacts facts = read_platform_facts(s.cluster.platform);
  const RankPlacement place = place_ranks(s, facts);
  CHECK(place.hosts == std::vector<std::string>{"n2-gpu0", "n2-gpu1", "n0-gpu0", "n0-gpu1"});
  CHECK(mean_peak_flops(place, facts, Precision::FP32) == 25e12);  // (40 + 40 + 10 + 10) / 4 TFLOP/s
  sim::PredictOptions o;
  o.progress = false;
  const Report r = sim::predict(f, o);
  REQUIRE(r.points.size() == 1);
  CHECK(r.points.front().peak_flops == 25e12);
}
