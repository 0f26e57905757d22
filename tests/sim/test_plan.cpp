// Capacity planning without simulating: ranking, Pareto front, JSON round trip, what-if edits of the
// platform XML, the ZeRO and patch-parallel memory model.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <pugixml.hpp>

#include <set>

#include "test_util.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/formats/whatif.hpp"
#include "vitsim/core/model/memory.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/results/plan.hpp"
#include "vitsim/plot/plan_plot.hpp"

using namespace vitsim;

namespace {

// A simulated point with a given epoch time; cost follows from the GPUs and the plan's price.
PlanPoint point(int index, int gpus, double epoch_s, bool fits = true) {
  PlanPoint p;
  p.index = index;
  p.gpus = p.gpus_per_node = gpus;
  p.nodes = 1;
  p.micro_batch = 32;
  p.grad_accum = 1;
  p.precision = "fp32";
  p.collective = "ring";
  p.params = {{"cluster.gpus_per_node", std::to_string(gpus)}, {"gpus", std::to_string(gpus)}};
  p.simulated = true;
  // A result the report reader accepts: 100 steps of epoch/100 s, 32 images a step.
  p.global_batch = 32;
  p.result.nodes = 1;
  p.result.gpus = gpus;
  p.result.micro_batch = 32;
  p.result.grad_accum = 1;
  p.result.global_batch = 32;
  p.result.steps_per_epoch = 100;
  p.result.epoch_time_s = epoch_s;
  p.result.step_time_s = {epoch_s / 100, epoch_s / 100, epoch_s / 100};
  p.result.breakdown_s.compute_fwd = epoch_s / 100;
  p.result.throughput_img_s = 3200 / epoch_s;
  p.result.fits_in_memory = fits;
  p.result.bound = "compute";
  p.result.scenario_id = "sha256:" + std::string(63, '0') + std::to_string(index);
  p.memory_per_gpu_bytes = p.result.memory_per_gpu_bytes = fits ? 1e9 : 3e9;
  p.gpu_memory_bytes = 2e9;
  return p;
}

// Every (element path, attribute, value) of an XML document, to diff two platform files.
std::set<std::string> flatten(const std::string& text) {
  pugi::xml_document doc;
  REQUIRE(doc.load_string(text.c_str()));
  std::set<std::string> out;
  std::function<void(pugi::xml_node, std::string)> rec = [&](pugi::xml_node n, std::string path) {
    for (auto c : n.children()) {
      if (c.type() != pugi::node_element) continue;
      std::string id = c.attribute("id") ? c.attribute("id").value() : "";
      if (std::string(c.name()) == "zoneRoute")
        id = std::string(c.attribute("src").value()) + ">" + c.attribute("dst").value();
      std::string p = path + "/" + c.name() + "[" + id + "]";
      out.insert(p);
      for (auto a : c.attributes()) out.insert(p + "@" + a.name() + "=" + a.value());
      int k = 0;
      for (auto l : c.children("link_ctn"))
        out.insert(p + "/link_ctn#" + std::to_string(k++) + "=" + l.attribute("id").value() + ":" +
                   l.attribute("direction").value());
      rec(c, p);
    }
  };
  rec(doc, "");
  return out;
}

std::vector<std::string> minus(const std::set<std::string>& a, const std::set<std::string>& b) {
  std::vector<std::string> out;
  for (const auto& x : a)
    if (!b.count(x)) out.push_back(x);
  return out;
}

}  // namespace

TEST_CASE("plan ranking by time then cost and a Pareto front without dominated points", "[plan]") {
  PlanResult plan;
  plan.price_per_gpu_hour = 2.0;
  plan.epochs = 3;
  plan.space_size = 5;
  // Points built so that the answer is known: 4 GPUs fastest and dearest; 2 GPUs slower and cheaper;
  // 1 GPU slowest and cheapest; the 3-GPU point is slower AND dearer than the 4-GPU one (dominated);
  // the 8-GPU point is fastest but does not fit (excluded).
  plan.points = {point(0, 1, 1000), point(1, 2, 520), point(2, 3, 700), point(3, 4, 300),
                 point(4, 8, 100, false)};
  rank_plan(plan);
  std::vector<int> order;
  for (const auto& p : plan.points) order.push_back(p.index);
  CHECK(order == std::vector<int>{3, 1, 2, 0, 4});
  CHECK(plan.points[0].rank == 1);
  CHECK(plan.points[4].rank == 0);
  CHECK(plan.points[4].excluded.rfind("memory", 0) == 0);
  // time to train = epoch x epochs; cost = GPU-hours x price.
  CHECK(plan.points[0].time_to_train_s == Approx(900));
  CHECK(plan.points[0].cost == Approx(900.0 * 4 / 3600 * 2.0));
  // Costs: 1 GPU 3000 s x1 = 0.833 h; 2 GPUs 1560 s x2 = 0.867 h; 3 GPUs 2100 x3 = 1.75 h; 4 GPUs 900 x4 = 1
  // h. The 3-GPU point costs more than the faster 4-GPU point: dominated.
  std::set<int> front;
  for (const auto* p : pareto_front(plan)) front.insert(p->index);
  CHECK(front == std::set<int>{3, 1, 0});
  for (const auto& p : plan.points) CHECK(p.pareto == (front.count(p.index) > 0));
  REQUIRE(!plan.explanation.empty());
  CHECK(plan.explanation[0].find("Top pick") == 0);
  CHECK(plan.explanation[0].find("4 GPUs") != std::string::npos);

  SECTION("ranked by cost") {
    plan.objective = "cost";
    rank_plan(plan);
    CHECK(plan.points[0].index == 0);
  }
  SECTION("a budget excludes what costs more") {
    plan.constraints.budget =
        1.8;  // $: 0.9 GPU-h; the 1-GPU point (0.833 GPU-h = $1.67) and the 2-GPU ($1.73) pass
    rank_plan(plan);
    std::set<int> ok;
    for (const auto& p : plan.points)
      if (p.rank > 0) ok.insert(p.index);
    CHECK(ok == std::set<int>{0, 1});
  }
  SECTION("JSON round trip") {
    plan.plan_id = "sha256:" + std::string(64, 'a');
    const std::string j = plan_to_json(plan);
    CHECK(plan_to_json(plan_from_json(j, "x.json")) == j);
  }
}

TEST_CASE("merging shards ranks the union and a missing point is an error", "[plan]") {
  PlanResult a, b;
  for (auto* s : {&a, &b}) {
    s->space_size = 4;
    s->shard_count = 2;
  }
  a.origin = "a.json";
  b.origin = "b.json";
  b.shard_index = 1;
  a.points = {point(0, 1, 1000), point(2, 4, 300)};
  b.points = {point(1, 2, 520)};
  CHECK_THROWS_WITH(merge_plans({a, b}), "merge: the shards hold 3 of the plan's 4 points");
  b.points.push_back(point(3, 8, 200));
  PlanResult m = merge_plans({a, b});
  CHECK(m.ranked);
  CHECK(m.points[0].index == 3);
  a.points.push_back(point(2, 4, 300));
  CHECK_THROWS_WITH(merge_plans({a, b}), "a.json: /points/2/index: point 2 appears twice (also in a.json)");
}

TEST_CASE("ZeRO-3 memory per GPU falls as 1/N for parameters and gradients and optimizer state",
          "[plan][zero]") {
  const Workload w = build_workload(vit_preset("vit_b_16"));
  const double params = static_cast<double>(w.total_params());
  for (Precision prec : {Precision::FP32, Precision::FP16}) {
    // Bytes per parameter (ZeRO paper, section 3): fp32 4 weights + 4 gradients + 8 Adam moments; mixed
    // precision 2 + 2 + 12 (fp32 master copy + moments).
    const double wb = prec == Precision::FP32 ? 4 : 2, gb = wb, ob = prec == Precision::FP32 ? 8 : 12;
    for (int n : {1, 2, 4, 8, 16, 432}) {
      MemoryInputs in;
      in.precision = prec;
      in.dp_ranks = n;
      in.zero_stage = 3;
      MemoryBreakdown m = memory_per_gpu(w, in);
      CHECK(m.params == Approx(params * wb / n).epsilon(1e-12));
      CHECK(m.grads == Approx(params * gb / n).epsilon(1e-12));
      CHECK(m.optimizer == Approx(params * ob / n).epsilon(1e-12));
      // Stages 1 and 2 partition less: 1 only the optimizer state, 2 also the gradients.
      in.zero_stage = 1;
      MemoryBreakdown z1 = memory_per_gpu(w, in);
      CHECK(z1.params == Approx(params * wb));
      CHECK(z1.grads == Approx(params * gb));
      CHECK(z1.optimizer == Approx(params * ob / n));
      in.zero_stage = 2;
      MemoryBreakdown z2 = memory_per_gpu(w, in);
      CHECK(z2.params == Approx(params * wb));
      CHECK(z2.grads == Approx(params * gb / n));
      // Activations do not depend on the stage.
      CHECK(z2.activations == Approx(m.activations));
    }
  }
}

TEST_CASE("patch parallelism keeps 1/S of the encoder activations per GPU", "[plan][ulysses]") {
  ViTConfig cfg = vit_preset("vit_l_16");
  cfg.image_size = 1024;
  const Workload w = build_workload(cfg);
  MemoryInputs in;
  in.micro_batch = 2;
  in.precision = Precision::FP16;
  double blocks = 0, rest = 0;
  for (const auto& l : w.layers)
    (l.kind == LayerKind::Attention || l.kind == LayerKind::Mlp ? blocks : rest) +=
        w.saved_activation_bytes(l, in.precision);
  for (int s : {1, 2, 4, 8}) {
    in.sequence_parallel = s;
    CHECK(memory_per_gpu(w, in).activations == Approx(2 * (blocks / s + rest)).epsilon(1e-12));
  }
}

TEST_CASE("each what-if changes exactly what it names", "[plan][whatif]") {
  const std::string tesla = vt::source("platforms/tesla.xml");
  const std::string vector = vt::source("platforms/vector.xml");
  const auto tesla_flat = flatten(read_file(tesla));
  auto edit = [&](const std::string& path, const std::vector<std::string>& edits) {
    std::vector<WhatIfEffect> eff;
    std::string text = apply_what_ifs(path, edits, &eff, vt::source("."));
    return std::make_pair(text, eff);
  };

  SECTION("a link's bandwidth") {
    auto [text, eff] = edit(tesla, {"link:tesla3-nic:bandwidth=1.25GBps"});
    const auto after = flatten(text);
    CHECK(minus(after, tesla_flat) ==
          std::vector<std::string>{"/platform[]/zone[tesla]/link[tesla3-nic]@bandwidth=1.25GBps"});
    CHECK(minus(tesla_flat, after) ==
          std::vector<std::string>{"/platform[]/zone[tesla]/link[tesla3-nic]@bandwidth=0.125GBps"});
    REQUIRE(eff.size() == 1);
    CHECK(eff[0].changes == std::vector<std::string>{"link tesla3-nic bandwidth: 0.125GBps -> 1.25GBps"});
  }
  SECTION("a node's PCIe latency") {
    auto [text, eff] = edit(tesla, {"link:tesla0.pcie:latency=3us"});
    CHECK(minus(flatten(text), tesla_flat) ==
          std::vector<std::string>{"/platform[]/zone[tesla]/cluster[tesla0]@lat=3us"});
    CHECK(minus(tesla_flat, flatten(text)).size() == 1);
  }
  SECTION("a GPU model replaced by another node's") {
    vt::TempDir d;
    auto [text, eff] = edit(tesla, {"gpu:tesla3=tesla1"});
    const std::string p = d.file("t.xml", text);
    PlatformFacts before = read_platform_facts(tesla), after = read_platform_facts(p);
    const GpuFacts& g = after.gpu.at("tesla3-gpu0");
    const GpuFacts& ref = before.gpu.at("tesla1-gpu0");
    CHECK(g.model == ref.model);
    CHECK(g.flops_fp32 == ref.flops_fp32);
    CHECK(g.mem_bw == ref.mem_bw);
    CHECK(g.mem_bytes == ref.mem_bytes);
    // Nothing else: other GPUs, the node's CPU/loader figures and every link stay as they were.
    for (const auto& [host, gf] : before.gpu)
      if (host != "tesla3-gpu0") CHECK(after.gpu.at(host).flops_fp32 == gf.flops_fp32);
    CHECK(after.node("tesla3").cpu_cores == before.node("tesla3").cpu_cores);
    for (const auto& x : minus(flatten(text), tesla_flat))
      CHECK(x.find("cluster[tesla3]") != std::string::npos);
    for (const auto& x : minus(tesla_flat, flatten(text)))
      CHECK(x.find("cluster[tesla3]") != std::string::npos);
  }
  SECTION("a GPU model from a platform spec") {
    vt::TempDir d;
    auto [text, eff] = edit(vector, {"gpu:vec0[0-3]=platforms/specs/nebula.json:A4500"});
    PlatformFacts after = read_platform_facts(d.file("v.xml", text));
    CHECK(after.gpu.at("vec03-gpu7").model == "A4500");
    CHECK(after.gpu.at("vec04-gpu0").model == "T4");
  }
  SECTION("nodes removed, with their routes and NIC links") {
    vt::TempDir d;
    auto [text, eff] = edit(tesla, {"nodes:remove=tesla0 tesla3"});
    PlatformFacts after = read_platform_facts(d.file("t.xml", text));  // checks every pair has a route
    std::vector<std::string> names;
    for (const auto& n : after.nodes) names.push_back(n.name);
    CHECK(names == std::vector<std::string>{"tesla1", "tesla2", "tesla4"});
    CHECK(text.find("tesla0-nic") == std::string::npos);
    CHECK(text.find("tesla3-nic") == std::string::npos);
    // Everything left is as it was.
    CHECK(minus(flatten(text), tesla_flat).empty());
  }
  SECTION("nodes added as copies, with NICs and a route to every node") {
    vt::TempDir d;
    auto [text, eff] = edit(vector, {"nodes:count=57"});
    PlatformFacts after = read_platform_facts(d.file("v.xml", text));
    REQUIRE(after.nodes.size() == 57);
    CHECK(after.nodes.back().name == "vec56");
    CHECK(after.gpu.at("vec56-gpu7").model == "T4");
    // 57 nodes: 57 x 56 / 2 routes, one NIC link each.
    pugi::xml_document doc;
    doc.load_string(text.c_str());
    CHECK(doc.select_nodes("//zoneRoute").size() == 57u * 56 / 2);
    CHECK(doc.select_nodes("//link").size() == 57u);
    // The original elements are all still there, unchanged.
    CHECK(minus(flatten(read_file(vector)), flatten(text)).empty());
  }
  SECTION("a zone property (the price)") {
    auto [text, eff] = edit(vector, {"zone:price_per_gpu_hour=0.5"});
    CHECK(eff[0].changes == std::vector<std::string>{"zone vector prop price_per_gpu_hour: 0.35 -> 0.5"});
  }
  SECTION("bad edits name what is wrong and the valid choices") {
    CHECK_THROWS_WITH(
        edit(tesla, {"link:tesla9-nic:bandwidth=1GBps"}),
        Catch::StartsWith("what-if 'link:tesla9-nic:bandwidth=1GBps': no link matches 'tesla9-nic'; links: "
                          "tesla0-nic, tesla1-nic"));
    CHECK_THROWS_WITH(
        edit(tesla, {"link:tesla3-nic:bandwidth=1.25"}),
        Catch::StartsWith("what-if 'link:tesla3-nic:bandwidth=1.25': bad bandwidth '1.25': missing unit"));
    CHECK_THROWS_WITH(
        edit(tesla, {"gpu:tesla3=tesla7"}),
        "what-if 'gpu:tesla3=tesla7': no node 'tesla7'; nodes: tesla0, tesla1, tesla2, tesla3, tesla4");
    CHECK_THROWS_WITH(
        edit(tesla, {"cpu:tesla3=1"}),
        "what-if 'cpu:tesla3=1': unknown kind 'cpu'; valid: gpu, link, loader, nodes, prop, zone");
  }
}

TEST_CASE("a loader what-if sets the scenario loader workers and --set wins", "[plan][whatif]") {
  vt::TempDir d;
  d.file("p.xml", vt::platform_xml(1, 1, "10GBps", "0us", {}, {"1Tf"}));
  const std::string s =
      d.file("s.xml", R"(<scenario><cluster platform="p.xml"/><model preset="vit_cifar_tiny"/>
  <dataset name="cifar10"/><loader workers="2"/><whatif edits="loader:workers=6"/></scenario>)");
  ScenarioFile f = read_scenario_file(s);
  CHECK(expand(f).at(0).loader.workers == 6);
  CHECK(expand(f).at(0).what_ifs == std::vector<std::string>{"loader:workers=6"});
  apply_override(f, "loader.workers=3");
  CHECK(expand(f).at(0).loader.workers == 3);
}

TEST_CASE("plan plots: best time per node count and micro-batch and the Pareto front", "[plan][plot]") {
  PlanResult plan;
  plan.scenario = "p";
  plan.epochs = 1;
  plan.space_size = 4;
  // Two micro-batches on 1 and 2 nodes; at 2 nodes and micro-batch 32 two settings, the faster one counts.
  std::vector<PlanPoint> pts{point(0, 1, 3600), point(1, 1, 1800), point(2, 1, 900), point(3, 1, 700)};
  pts[0].nodes = 1;
  pts[1].nodes = 2;
  pts[2].nodes = 2;
  pts[3].nodes = 2;
  pts[3].micro_batch = 64;
  pts[2].params["parallelism.overlap"] = "true";
  for (auto& p : pts) p.params["nodes"] = std::to_string(p.nodes);
  plan.points = pts;
  rank_plan(plan);
  CHECK(plot::resolve_plan_kind(plan, plot::PlanKind::Auto) == plot::PlanKind::Nodes);
  plot::Script s = plot::make_plan_script(plan, plot::PlanKind::Nodes, "x.svg");
  // Curves in micro-batch order: 32 (1 node: 1 h; 2 nodes: the better of 0.5 h and 0.25 h), then 64.
  CHECK(s.data.at("nodes0.dat") == "1 1\n2 0.25\n");
  CHECK(s.data.at("nodes1.dat") == "2 0.194444444\n");
  plot::Script f = plot::make_plan_script(plan, plot::PlanKind::Pareto, "x.svg");
  // One GPU each: cost = time in GPU-hours, so the fastest point is also the cheapest: the front is it alone.
  CHECK(f.data.at("front.dat") == "0.194444444 0.194444444\n");
  CHECK_THROWS_WITH(plot::make_plan_script(plan, plot::PlanKind::Memory, "x.svg"),
                    "plan plot 'memory' needs a plan that sweeps model.image_size");
  CHECK(s.text.find("baseline") == std::string::npos);  // none without --baseline

  // With its baseline (plan --what-if ... --baseline): the same space without the what-if, every time
  // doubled here, drawn dashed beside the plan's curves in the same colour, each side labelled.
  PlanResult without = plan;
  for (auto& p : without.points) p.result.epoch_time_s *= 2;
  rank_plan(without);
  plan.what_ifs = {"link:x:bandwidth=1GBps"};
  plan.baseline = std::make_shared<PlanResult>(without);
  s = plot::make_plan_script(plan, plot::PlanKind::Nodes, "x.svg");
  CHECK(s.data.at("nodes0.dat") == "1 1\n2 0.25\n");
  CHECK(s.data.at("baseline_nodes0.dat") == "1 2\n2 0.5\n");
  CHECK(s.data.at("baseline_nodes1.dat") == "2 0.388888889\n");
  CHECK(s.text.find("\"nodes0.dat\" using 1:2 with linespoints linetype 1 linewidth 2 title \"what-ifs: "
                    "micro-batch    32\"") != std::string::npos);
  CHECK(s.text.find("\"baseline_nodes0.dat\" using 1:2 with linespoints linetype 1 linewidth 2 dashtype 2 "
                    "title \"baseline: micro-batch    32\"") != std::string::npos);
  CHECK(s.text.find("\\nwhat-if link:x:bandwidth=1GBps (solid), baseline without it (dashed)\"") !=
        std::string::npos);
  f = plot::make_plan_script(plan, plot::PlanKind::Pareto, "x.svg");
  CHECK(f.data.at("baseline_front.dat") == "0.388888889 0.388888889\n");
  CHECK(f.text.find("title \"baseline: Pareto front\"") != std::string::npos);
  CHECK(f.text.find("title \"what-ifs: Pareto front\"") != std::string::npos);
}
