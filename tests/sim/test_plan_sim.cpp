// Capacity planning through the simulator (forking APIs and the vitsim binary): ZeRO communication,
// Ulysses all-to-alls against their closed formula, what-ifs in the model, plan constraints, and a plan
// run in shards equal to the plan run in one piece.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "test_util.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/results/plan.hpp"
#include "vitsim/core/results/report.hpp"
#include "vitsim/plot/plan_plot.hpp"
#include "vitsim/sim/point/simulate.hpp"
#include "vitsim/sim/predict/predict.hpp"

using namespace vitsim;
using json = nlohmann::json;

namespace {

Report predict_text(const vt::TempDir& d, const std::string& text,
                    const std::vector<std::string>& sets = {}) {
  auto f = read_scenario_file(d.file("s.xml", text));
  for (const auto& s : sets) apply_override(f, s);
  sim::PredictOptions o;
  o.progress = false;
  o.jobs = 2;
  return sim::predict(f, o);
}

const ReportPoint& find(const Report& r, const std::string& key, const std::string& value) {
  for (const auto& p : r.points)
    if (p.params.count(key) && p.params.at(key) == value) return p;
  throw std::runtime_error("no point with " + key + "=" + value);
}

}  // namespace

TEST_CASE("ZeRO-1 and 2 move the all-reduce volume and ZeRO-3 1.5 times it", "[plan][zero]") {
  // One node of 4 compute-bound GPUs, PCIe lanes of 10 GB/s, no latency: every collective is pure
  // bandwidth, so its time is proportional to its volume. A ring all-reduce moves 2(n-1)/n S per rank,
  // a reduce-scatter or an all-gather (n-1)/n S (docs/sources.md "Collectives"). ZeRO-1/2:
  // reduce-scatter of the
  // gradients + all-gather of the updated parameters = one all-reduce's volume; ZeRO-3: reduce-scatter
  // + all-gathers of the parameters in forward and in backward = 1.5 times it (the ZeRO paper's 1.5x).
  vt::TempDir d;
  d.file("p.xml", vt::platform_xml(1, 4, "10GBps", "0us", {}, {"10Tf"}));
  Report r = predict_text(d, R"(<scenario name="z">
  <cluster platform="p.xml" nodes="1" gpus_per_node="4"/>
  <model preset="vit_cifar_tiny"/>
  <dataset name="synthetic" train_samples="6400" image_size="32" channels="3"/>
  <training micro_batch="32" precision="fp32"/>
  <parallelism collective="ring" overlap="false" bucket_size="1MB" allgather_bucket_size="1MB"/>
  <simulation steps="4" warmup="1"/>
  <sweep param="parallelism.zero" values="0,1,2,3"/>
</scenario>)");
  const double z0 = find(r, "parallelism.zero", "0").breakdown_s.comm_total;
  REQUIRE(z0 > 0);
  CHECK(find(r, "parallelism.zero", "1").breakdown_s.comm_total == Approx(z0).epsilon(1e-6));
  CHECK(find(r, "parallelism.zero", "2").breakdown_s.comm_total == Approx(z0).epsilon(1e-6));
  CHECK(find(r, "parallelism.zero", "3").breakdown_s.comm_total == Approx(1.5 * z0).epsilon(1e-6));
  // And the memory they save, as the simulation reports it.
  CHECK(find(r, "parallelism.zero", "3").memory.params ==
        Approx(find(r, "parallelism.zero", "0").memory.params / 4));
}

TEST_CASE("Ulysses all-to-all volume matches its closed formula", "[plan][ulysses]") {
  // S GPUs of one node, each on a private PCIe lane of B = 10 GB/s (split-duplex), a backbone that never
  // limits, no latency. An all-to-all of V bytes per rank sends (S-1)/S V through each rank's lane, so it
  // lasts (S-1)/S V / B. Per micro-batch each of the `depth` attention layers runs 4 all-to-alls of one
  // [b, T/S, d] tensor each way in forward (Q, K, V before; the output after) and 4 in backward:
  // per step 8 depth (S-1)/S b (T/S) d e / B (DeepSpeed-Ulysses, Jacobs et al. 2023: 4Nh/P per link
  // for forward). The same ranks without patch parallelism run the same gradient all-reduce, so the
  // difference of communication time is the all-to-alls alone.
  const double B = 10e9;
  const int depth = 2, width = 256, image = 64, patch = 8, micro = 4;
  const double T = (image / patch) * (image / patch) + 1;  // 65 tokens
  for (int S : {2, 4}) {
    INFO("S = " << S);
    vt::TempDir d;
    d.file("p.xml", vt::platform_xml(1, S, "10GBps", "0us", {}, {"10Tf"}));
    Report r = predict_text(d, fmt::format(R"(<scenario name="u">
  <cluster platform="p.xml" nodes="1" gpus_per_node="{}"/>
  <model image_size="{}" patch="{}" channels="3" width="{}" depth="{}" heads="4" mlp_ratio="4" classes="10"/>
  <dataset name="synthetic" train_samples="4096"/>
  <training micro_batch="{}" precision="fp32"/>
  <parallelism collective="ring"/>
  <simulation steps="4" warmup="1"/>
  <sweep param="parallelism.sequence_parallel" values="1,{}"/>
</scenario>)",
                                           S, image, patch, width, depth, micro, S));
    const auto& dp = find(r, "parallelism.sequence_parallel", "1");
    const auto& sp = find(r, "parallelism.sequence_parallel", std::to_string(S));
    const double tensor = micro * (T / S) * width * 4.0;  // fp32 activations
    CHECK(sim::ulysses_tensor_bytes(ViTConfig{"", image, patch, 3, width, depth, 4, 4.0, 10}, micro, S, 4) ==
          Approx(tensor));
    const double formula = 8.0 * depth * (S - 1.0) / S * tensor / B;
    CHECK(sp.breakdown_s.comm_total - dp.breakdown_s.comm_total == Approx(formula).epsilon(1e-6));
    // The all-to-alls sit on the critical path: all of their time is exposed.
    CHECK(sp.breakdown_s.comm_exposed - dp.breakdown_s.comm_exposed == Approx(formula).epsilon(1e-6));
    // A group of S shares one micro-batch: S times fewer images per step.
    CHECK(sp.global_batch * S == dp.global_batch);
  }
}

TEST_CASE("a what-if on one NIC changes only the runs that cross it", "[plan][whatif]") {
  // Tesla (platforms/tesla.xml) in the study's order tesla1, tesla2, tesla4, tesla0, tesla3: only the
  // 5-node run uses tesla3, the node on 1 GbE.
  vt::TempDir d;
  const std::string text = fmt::format(R"(<scenario name="t">
  <cluster platform="{}" nodes="1" gpus_per_node="1" hosts="tesla1 tesla2 tesla4 tesla0 tesla3"/>
  <model preset="vit_b_16"/>
  <dataset name="cifar10" resize="224"/>
  <training micro_batch="16" precision="fp32"/>
  <simulation steps="4" warmup="1"/>
  <sweep param="cluster.nodes" values="4,5"/>
</scenario>)",
                                       vt::source("platforms/tesla.xml"));
  Report base = predict_text(d, text);
  Report edited = predict_text(d, text, {"whatif.edits=link:tesla3-nic:bandwidth=1.25GBps"});
  CHECK(find(edited, "cluster.nodes", "4").step_time_s.mean ==
        find(base, "cluster.nodes", "4").step_time_s.mean);
  CHECK(find(edited, "cluster.nodes", "5").step_time_s.mean <
        0.5 * find(base, "cluster.nodes", "5").step_time_s.mean);
  const auto& notes = find(edited, "cluster.nodes", "5").notes;
  CHECK(std::find(notes.begin(), notes.end(), "what-if: link:tesla3-nic:bandwidth=1.25GBps") != notes.end());
  CHECK(edited.provenance.at("what_ifs") == "link:tesla3-nic:bandwidth=1.25GBps");
}

TEST_CASE("vitsim plan ranks no point over memory or global batch or deadline or budget", "[plan][cli]") {
  vt::TempDir d;
  const std::string scen = vt::source("scenarios/whatif/vector-zero.xml");
  auto all = vt::vitsim(fmt::format("plan {} --format json -q -j 2 --out {}", scen, d / "all.json"));
  REQUIRE(all.status == 0);
  PlanResult unconstrained = plan_from_json(read_file(d / "all.json"), "all.json");
  // Deadline and budget at the medians of the unconstrained plan's feasible points, so both bind.
  std::vector<double> times, costs;
  for (const auto& p : unconstrained.points)
    if (p.rank > 0) {
      times.push_back(p.time_to_train_s);
      costs.push_back(p.cost);
    }
  REQUIRE(times.size() >= 4);
  std::sort(times.begin(), times.end());
  std::sort(costs.begin(), costs.end());
  const double deadline = times[times.size() / 2], budget = costs[costs.size() / 2 + 1];
  auto r = vt::vitsim(
      fmt::format("plan {} --format json -q -j 2 --global-batch-max 256 --deadline {}s --budget {} --out {}",
                  scen, deadline, budget, d / "c.json"));
  REQUIRE(r.status == 0);
  PlanResult plan = plan_from_json(read_file(d / "c.json"), "c.json");
  CHECK(plan.space_size == 28);  // 7 micro-batches x 4 ZeRO stages in the scenario
  std::map<std::string, int> reasons;
  int ranked = 0;
  for (const auto& p : plan.points) {
    if (p.rank == 0) {
      reasons[p.excluded.substr(0, p.excluded.find(':'))]++;
      continue;
    }
    ++ranked;
    CHECK(p.memory_per_gpu_bytes <= p.gpu_memory_bytes);
    CHECK(p.result.fits_in_memory);
    CHECK(p.global_batch <= 256);
    CHECK(p.time_to_train_s <= deadline);
    CHECK(p.cost <= budget);
  }
  CHECK(ranked > 0);
  // Every constraint excluded something, so the checks above were not vacuous.
  CHECK(reasons["memory"] > 0);
  CHECK(reasons["global batch"] > 0);
  CHECK(reasons["deadline"] + reasons["budget"] > 0);
  // ZeRO unlocks micro-batches: some micro-batch fits only with a higher stage.
  int z0_max = 0, z3_max = 0;
  for (const auto& p : unconstrained.points) {
    if (p.memory_per_gpu_bytes > p.gpu_memory_bytes) continue;
    if (p.zero == 0) z0_max = std::max(z0_max, p.micro_batch);
    if (p.zero == 3) z3_max = std::max(z3_max, p.micro_batch);
  }
  CHECK(z3_max > z0_max);
}

TEST_CASE("vitsim plan in two shards, merged, equals the plan run in one piece", "[plan][cli]") {
  vt::TempDir d;
  const std::string scen = vt::source("scenarios/whatif/tesla-nic-10gbe.xml");
  const std::string common =
      fmt::format("plan {} -q -j 2 --set training.micro_batch=8,16,32 --deadline 10h", scen);
  REQUIRE(vt::vitsim(common + " --format json --out " + d / "one.json").status == 0);
  REQUIRE(vt::vitsim(common + " --format json --shard 0/2 --out " + d / "s0.json").status == 0);
  REQUIRE(vt::vitsim(common + " --format json --shard 1/2 --out " + d / "s1.json").status == 0);
  auto m = vt::vitsim("plan --merge " + d / "s0.json" + " " + d / "s1.json" + " --format json --out " +
                      d / "merged.json");
  REQUIRE(m.status == 0);
  CHECK(read_file(d / "merged.json") == read_file(d / "one.json"));
  // The plan plots draw from it (gnuplot, as vitsim plot needs).
  for (const char* kind : {"nodes", "pareto"}) {
    auto p = vt::vitsim(fmt::format("plot {} --kind {} --out {}", d / "one.json", kind, d / "p.svg"));
    INFO(p.out);
    CHECK(p.status == 0);
    CHECK(read_file(d / "p.svg").find("<svg") != std::string::npos);
  }
  // A shard alone holds half the points, unranked.
  PlanResult s0 = plan_from_json(read_file(d / "s0.json"), "s0.json");
  CHECK_FALSE(s0.ranked);
  CHECK(s0.points.size() == 8u);  // indices 0, 2, ..., 14 of the 15 points
  auto t = vt::vitsim(common + " --shard 0/2");
  CHECK(t.status == 1);
  CHECK(t.out.find("a shard's points are unranked") != std::string::npos);
}

TEST_CASE("a plan is byte-identical whatever --jobs and however its points are scheduled",
          "[plan][determinism]") {
  // With -j 1 the points run in order; with -j 2 two processes finish them in whatever order the
  // scheduler gives; a third run repeats -j 2. Ranking, ties and the JSON itself must not change.
  vt::TempDir d;
  const std::string common =
      fmt::format("plan {} -q --set training.micro_batch=8,16,32 --deadline 10h --format json",
                  vt::source("scenarios/whatif/tesla-nic-10gbe.xml"));
  std::vector<std::string> outs;
  for (const char* jobs : {"1", "2", "2"}) {
    auto r = vt::vitsim(common + " -j " + jobs);
    INFO(r.out);
    REQUIRE(r.status == 0);
    outs.push_back(r.out);
  }
  CHECK(outs[0] == outs[1]);
  CHECK(outs[1] == outs[2]);
}

TEST_CASE("vitsim plan bad input gets one clear line", "[plan][cli]") {
  const std::string scen = vt::source("scenarios/whatif/tesla-nic-10gbe.xml");
  auto r = vt::vitsim("plan " + scen + " -q --shard 2/2");
  CHECK(r.status == 2);  // the command line (docs/errors.md)
  CHECK(r.out == "vitsim: error: --shard '2/2': expected I/K with 0 <= I < K, e.g. 0/2\n");
  r = vt::vitsim("plan " + scen + " -q --what-if link:nope:bandwidth=1GBps");
  CHECK(r.status == 1);
  CHECK(r.out.rfind(
            "vitsim: error: --what-if: what-if 'link:nope:bandwidth=1GBps': no link matches 'nope'; links: ",
            0) == 0);
  r = vt::vitsim("plan " + scen + " -q --deadline 10");
  CHECK(r.status == 2);
  CHECK(r.out.rfind("vitsim: error: --deadline: bad time '10': missing unit", 0) == 0);
  r = vt::vitsim("plan -q");
  CHECK(r.status == 2);
  CHECK(r.out ==
        "vitsim: error: vitsim plan needs a scenario: vitsim plan SCENARIO.xml (or --merge SHARD.json..., or "
        "--gpu GPU "
        "--model M --dataset D)\n");
}

TEST_CASE("vitsim plan --baseline compares the top picks with and without the what-ifs", "[plan][cli]") {
  vt::TempDir d;
  // Tesla in the study's order (tesla1, tesla2, tesla4, tesla0, tesla3): tesla3 comes last and its 1 GbE
  // NIC makes every run that includes it the slowest, so the best run without the what-if uses none of
  // it (which nodes it uses depends on the platform's figures), and the edit of tesla3's NIC leaves its
  // time exactly as it was.
  auto r = vt::vitsim(fmt::format(
      "plan {} -q -j 2 --baseline --what-if link:tesla3-nic:bandwidth=1.25GBps --format json --out {}",
      vt::source("scenarios/study/tesla-strong-b16.xml"), d / "b.json"));
  INFO(r.out);
  REQUIRE(r.status == 0);
  PlanResult p = plan_from_json(read_file(d / "b.json"), "b.json");
  auto has = [&](const std::string& text) {
    return std::any_of(p.explanation.begin(), p.explanation.end(),
                       [&](const std::string& l) { return l.find(text) != std::string::npos; });
  };
  CHECK(has("What the what-ifs change (link:tesla3-nic:bandwidth=1.25GBps):"));
  CHECK(has("top pick without: "));
  CHECK_FALSE(has("top pick without: 5 nodes"));
  CHECK(has("the same settings as the top pick without: "));
  CHECK(has("(0%)"));  // unchanged: no sign (core signed_percent)
  // The JSON carries the baseline itself (for vitsim plot): the same space, without the what-if, ranked;
  // its top pick the one the explanation names.
  REQUIRE(p.baseline);
  CHECK(p.baseline->what_ifs.empty());
  CHECK(p.baseline->ranked);
  CHECK(p.baseline->space_size == p.space_size);
  CHECK(p.baseline->points.size() == p.points.size());
  const PlanPoint* base_top = nullptr;
  for (const auto& q : p.baseline->points)
    if (q.rank == 1) base_top = &q;
  REQUIRE(base_top);
  CHECK(has(fmt::format("top pick without: {} node", base_top->nodes)));
  // Drawn beside the plan's curves.
  const plot::Script sc = plot::make_plan_script(p, plot::PlanKind::Nodes, "x.svg");
  CHECK(sc.data.count("baseline_nodes0.dat") == 1);
  CHECK(sc.text.find("title \"baseline: micro-batch") != std::string::npos);
  auto drawn = vt::vitsim(fmt::format("plot {} --kind nodes --out {}", d / "b.json", d / "b.svg"));
  INFO(drawn.out);
  CHECK(drawn.status == 0);
  // A baseline that is not one (what-ifs of its own) is refused where it stands.
  nlohmann::json j = nlohmann::json::parse(read_file(d / "b.json"));
  j["baseline"]["what_ifs"] = {"link:x:bandwidth=1GBps"};
  vt::TempDir e;
  const std::string bad_path = e.file("bad.json", j.dump());
  CHECK_THROWS_WITH(plan_from_json(read_file(bad_path), "bad.json"),
                    "bad.json: /baseline/what_ifs: a baseline is the plan without its what-ifs: expected []");
  auto bad =
      vt::vitsim(fmt::format("plan {} -q --baseline", vt::source("scenarios/study/tesla-strong-b16.xml")));
  CHECK(bad.status == 2);
  CHECK(bad.out == "vitsim: error: plan: --baseline compares against what-ifs: give --what-if EDIT\n");
}
