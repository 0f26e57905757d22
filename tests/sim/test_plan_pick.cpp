// Issue 28 items 4 and 6: what a plan recommends. The largest micro-batch that fits comes from the memory
// model, not from the largest value swept; a global batch past the scenario's DeepSpeed config or the
// published ViT recipes is flagged; --emit-ds-config writes the top pick as a DeepSpeed config that
// DeepSpeed's rules and vitsim accept; a what-if that changes nothing says which limit holds and which
// edit would move it; the transport names `vitsim platform` takes are the platform reader's too.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <utility>

#include "test_util.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/deepspeed.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/formats/whatif.hpp"
#include "vitsim/core/model/memory.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/platform/platform_writer.hpp"
#include "vitsim/core/platform/transport.hpp"
#include "vitsim/core/results/plan.hpp"
#include "vitsim/sim/point/simulate.hpp"
#include "vitsim/sim/predict/plan.hpp"
#include "vitsim/sim/predict/predict.hpp"

using namespace vitsim;
using json = nlohmann::json;

namespace {

// Two nodes of 2 GPUs of 80 GiB (test_util's platform), ViT-tiny on 32 px images, a micro-batch sweep
// that stops far below what fits.
const char* kScenario = R"(<scenario name="pick">
  <cluster platform="p.xml" nodes="2" gpus_per_node="2"/>
  <model preset="vit_cifar_tiny"/>
  <dataset name="synthetic" train_samples="6400" image_size="32" channels="3"/>
  <training micro_batch="8" precision="fp32"/>
  <parallelism collective="ring"/>
  <simulation steps="4" warmup="1"/>
  <sweep param="training.micro_batch" values="8,16"/>
</scenario>
)";

PlanResult plan_of(const std::string& scenario_path, const std::vector<std::string>& sets = {}) {
  ScenarioFile f = read_scenario_file(scenario_path);
  for (const auto& s : sets) apply_override(f, s);
  sim::PlanOptions o;
  o.progress = false;
  o.jobs = 2;
  return sim::plan(f, o);
}

const PlanPoint& top_of(const PlanResult& p) {
  for (const auto& q : p.points)
    if (q.rank == 1) return q;
  throw std::runtime_error("no top pick");
}

std::string lines(const std::vector<std::string>& v) {
  return vt::join(v, "\n");
}

}  // namespace

TEST_CASE("plan: the largest micro-batch that fits is the memory model's, not the sweep's", "[plan][pick]") {
  vt::TempDir d;
  d.file("p.xml", vt::platform_xml(2, 2, "10GBps", "0us", {"10GBps", "10GBps"}, {"10Tf", "10Tf"}));
  const PlanResult plan = plan_of(d.file("s.xml", kScenario));
  const PlanPoint& top = top_of(plan);
  REQUIRE(top.largest_known);
  // The figure is the memory model's own boundary: micro-batch L fits on an 80 GiB GPU and L + 1 does not,
  // at each ZeRO stage, everything else as the top pick (the same inputs the simulation gives the model).
  const Scenario base = expand(read_scenario_file(d / "s.xml")).front();
  const Workload w = build_workload(base.model);
  const double gpu_mem = 80.0 * (1LL << 30);
  for (int z = 0; z < 4; ++z) {
    INFO("ZeRO-" << z);
    const long long L = top.largest_micro_batch[z];
    Scenario s = base;
    s.parallel.zero = z;
    s.training.micro_batch = static_cast<int>(L);
    CHECK(memory_per_gpu(w, sim::memory_inputs(s, 0)).total() <= gpu_mem);
    s.training.micro_batch = static_cast<int>(L + 1);
    CHECK(memory_per_gpu(w, sim::memory_inputs(s, 0)).total() > gpu_mem);
    CHECK(L > 16);  // the trap: the sweep's largest value is 16, and far more fits
  }
  // ZeRO partitions state, never adds it: a later stage fits at least as much.
  CHECK(top.largest_micro_batch[3] >= top.largest_micro_batch[0]);
  CHECK_THAT(
      lines(plan.explanation),
      Catch::Contains(fmt::format("Largest micro-batch that fits, by ZeRO stage (memory model, at the top "
                                  "pick's GPUs, precision and ranks): ZeRO-0 {};",
                                  top.largest_micro_batch[0])) &&
          Catch::Contains("(the space swept micro-batches up to 16)."));
  // The figures travel with the plan: written and read back (plan --merge, plot).
  const PlanResult back = plan_from_json(plan_to_json(plan), "plan.json");
  CHECK(top_of(back).largest_micro_batch == top.largest_micro_batch);
  CHECK(back.batch_reference == 4096);
}

TEST_CASE("plan: a global batch past the reference is flagged, with --global-batch suggested",
          "[plan][pick]") {
  // A ranked plan of one point, built by hand: explain_plan is pure arithmetic on it.
  PlanResult plan;
  plan.space_size = 1;
  PlanPoint p;
  p.simulated = true;
  p.nodes = 16, p.gpus_per_node = 8, p.gpus = 128, p.micro_batch = 256, p.grad_accum = 1;
  p.global_batch = 32768;  // 256 x 1 x 128
  p.precision = "bf16", p.collective = "ring";
  p.result.step_time_s.mean = 1;
  p.result.epoch_time_s = 40;
  p.result.breakdown_s.compute_fwd = 1;
  p.result.bound = "compute";
  p.result.throughput_img_s = 32768;
  plan.points.push_back(p);
  plan.batch_reference = 4096;
  plan.batch_reference_source = "the published recipes";
  rank_plan(plan);
  CHECK_THAT(lines(plan.explanation),
             Catch::Contains("Global batch: the top pick's 32768 images per step is past 4096 (the published "
                             "recipes)") &&
                 Catch::Contains("--global-batch N"));
  plan.batch_reference = 32768;  // at the reference: no flag
  rank_plan(plan);
  CHECK_THAT(lines(plan.explanation), !Catch::Contains("Global batch:"));
  plan.batch_reference = 4096;
  plan.constraints.global_batch = 32768;  // the user fixed it: no flag
  rank_plan(plan);
  CHECK_THAT(lines(plan.explanation), !Catch::Contains("Global batch:"));
}

TEST_CASE("plan: the memory line's total is the sum of the terms it prints (issue 39 item 27)",
          "[plan][pick]") {
  // A ranked plan of one point, built by hand, with every memory term set (GiB): 1 + 2 + 3 + 4 + 5 + 6 = 21.
  const double GiB = 1024.0 * 1024 * 1024;
  PlanResult plan;
  plan.space_size = 1;
  PlanPoint p;
  p.simulated = true;
  p.nodes = 1, p.gpus_per_node = 1, p.gpus = 1, p.micro_batch = 16, p.grad_accum = 1, p.global_batch = 16;
  p.precision = "fp32", p.collective = "ring";
  p.result.step_time_s.mean = 1;
  p.result.epoch_time_s = 10;
  p.result.breakdown_s.compute_fwd = 1;
  p.result.bound = "compute";
  p.result.throughput_img_s = 16;
  p.result.memory = {1 * GiB, 2 * GiB, 3 * GiB, 4 * GiB, 5 * GiB, 6 * GiB};
  p.memory_per_gpu_bytes = p.result.memory.total();
  p.gpu_memory_bytes = 80 * GiB;
  plan.points.push_back(p);
  rank_plan(plan);
  // Before: "Memory: 21.00 GiB of 80.00 GiB per GPU (activations 4.00 GiB, weights+gradients+optimizer 6.00
  // GiB)", buffers and the runtime's reserve left out of the terms.
  CHECK_THAT(
      lines(plan.explanation),
      Catch::Contains("Memory: 21.00 GiB of 80.00 GiB per GPU (activations 4.00 GiB, "
                      "weights+gradients+optimizer 6.00 GiB, communication buffers 5.00 GiB, reserved by "
                      "the runtime 6.00 GiB)."));
  // The plan's own figure for the rank that needs the most, where it differs from the breakdown's sum.
  plan.points[0].memory_per_gpu_bytes = 29.72 * GiB;
  rank_plan(plan);
  CHECK_THAT(lines(plan.explanation), Catch::Contains("; 29.72 GiB on the rank that needs the most."));
}

TEST_CASE("plan --emit-ds-config writes the top pick as a config DeepSpeed and vitsim accept",
          "[plan][pick]") {
  vt::TempDir d;
  d.file("p.xml", vt::platform_xml(2, 2, "10GBps", "0us", {"10GBps", "10GBps"}, {"10Tf", "10Tf"}));
  const std::string s = d.file("s.xml", kScenario);
  const auto r =
      vt::vitsim(fmt::format("plan {} --set parallelism.zero=0,2 --global-batch 64 --quiet "
                             "--format json --out {} --emit-ds-config {}",
                             s, d / "plan.json", d / "ds.json"));
  REQUIRE(r.status == 0);
  const PlanResult plan = plan_from_json(read_file(d / "plan.json"), "plan.json");
  const PlanPoint& top = top_of(plan);
  const json j = json::parse(read_file(d / "ds.json"));
  CHECK(j["train_batch_size"] == 64);  // --global-batch
  CHECK(j["train_micro_batch_size_per_gpu"] == top.micro_batch);
  CHECK(j["gradient_accumulation_steps"] == top.grad_accum);
  CHECK(j["zero_optimization"]["stage"] == top.zero);
  // DeepSpeed's batch rule holds over the 4 data-parallel ranks (it throws otherwise).
  CHECK_NOTHROW(derive_deepspeed_batch(64, top.micro_batch, top.grad_accum, 4));
  // vitsim reads it back to the same point: every key known, the settings equal.
  d.file("s2.xml", R"(<scenario name="back">
  <cluster platform="p.xml" nodes="2" gpus_per_node="2"/>
  <model preset="vit_cifar_tiny"/>
  <dataset name="synthetic" train_samples="6400" image_size="32" channels="3"/>
  <parallelism collective="ring"/>
  <deepspeed config="ds.json"/>
</scenario>
)");
  const Scenario back = expand(read_scenario_file(d / "s2.xml")).front();
  CHECK(back.training.micro_batch == top.micro_batch);
  CHECK(back.training.grad_accum == top.grad_accum);
  CHECK(back.parallel.zero == top.zero);
  CHECK(precision_name(back.training.precision) == top.precision);
  CHECK(back.global_batch() == 64);
}

TEST_CASE("what-ifs: a faster NIC behind NCCL sockets says it stays socket-limited", "[plan][whatif][noop]") {
  // 100 Gb/s = 12.5 GB/s x TCP framing (1500 - 52) / (1500 + 38) = 11.77 GB/s on the wire, above NCCL's
  // sockets: 2 GB/s a socket (transport_defaults::socket_bw), one socket a connection, one connection per
  // NCCL channel over the NIC (nccl_net_connections: NCCL runs 2 channels between these two GPUs): 4 GB/s,
  // socket-limited; at 400 Gb/s still 4 GB/s. (Core's EditedPlatforms alone weighs one connection: 2 GB/s.)
  vt::TempDir d;
  std::string x = vt::platform_xml(2, 1, "10GBps", "0us", {"100Gbps", "100Gbps"}, {"100Tf", "100Tf"});
  x.replace(x.find("<cluster"), 0, "<prop id=\"transport\" value=\"tcp\"/>\n");
  d.file("p.xml", x);
  Scenario s;
  s.file = d / "s.xml";
  s.cluster.platform = d / "p.xml";
  s.what_ifs = {"link:n0-nic:bandwidth=400Gbps"};
  std::vector<Scenario> points{s};
  EditedPlatforms edited;
  edited.apply(points);
  std::string notes;
  for (const auto& e : edited.effects()) notes += vt::join(e.changes, "\n") + "\n";
  CHECK_THAT(notes, Catch::Contains("link n0-nic: effective bandwidth unchanged at 2 GB/s (tcp:") &&
                        Catch::Contains("socket-limited") && Catch::Contains("zone:transport=roce"));
  // Through a plan with its baseline (what `vitsim plan --what-if ... --baseline` prints): the time does not
  // move, and the comparison says why.
  d.file("s.xml", R"(<scenario name="noop">
  <cluster platform="p.xml" nodes="2" gpus_per_node="1"/>
  <model preset="vit_cifar_tiny"/>
  <dataset name="synthetic" train_samples="6400" image_size="32" channels="3"/>
  <training micro_batch="32"/>
  <parallelism collective="ring"/>
  <simulation steps="6" warmup="1"/>
</scenario>
)");
  const PlanResult without = plan_of(d / "s.xml");
  const PlanResult with = plan_of(d / "s.xml", {"whatif.edits=link:n*-nic:bandwidth=400Gbps"});
  CHECK(top_of(with).time_to_train_s == top_of(without).time_to_train_s);
  CHECK_THAT(lines(compare_plans(without, with)),
             Catch::Contains("why nothing changed:") &&
                 Catch::Contains("n1-nic: effective bandwidth unchanged at 4 GB/s") &&
                 Catch::Contains("the top pick is communication-bound"));
  // Where the edit does move the link (10 Gb/s: framing-limited at 1.18 GB/s, below the sockets), no note.
  s.what_ifs = {"link:n0-nic:bandwidth=10Gbps"};
  std::vector<Scenario> slower{s};
  EditedPlatforms edited2;
  edited2.apply(slower);
  for (const auto& e : edited2.effects())
    CHECK_THAT(vt::join(e.changes, "\n"), !Catch::Contains("unchanged"));
}

TEST_CASE("what-ifs: +0% time names the bound and what would move it", "[plan][whatif][noop]") {
  auto one_point = [](double time) {
    PlanResult plan;
    plan.space_size = 1;
    PlanPoint p;
    p.simulated = true;
    p.nodes = 2, p.gpus_per_node = 1, p.gpus = 2, p.micro_batch = 8, p.grad_accum = 1, p.global_batch = 16;
    p.precision = "fp32", p.collective = "ring";
    p.result.step_time_s.mean = time;
    p.result.epoch_time_s = 100 * time;
    p.result.breakdown_s.compute_fwd = 0.97 * time;  // compute 97% of the step, exposed communication 3%
    p.result.breakdown_s.comm_exposed = 0.03 * time;
    p.result.breakdown_s.comm_total = 0.5 * time;
    p.result.bound = "compute";
    p.result.throughput_img_s = 16 / time;
    plan.points.push_back(p);
    rank_plan(plan);
    return plan;
  };
  PlanResult without = one_point(1.0), with = one_point(1.0);
  with.what_if_changes = {
      "[link:n0-nic:bandwidth=100Gbps] link n0-nic: effective bandwidth unchanged at 2 GB/s"};
  const std::string out = lines(compare_plans(without, with));
  CHECK_THAT(
      out, Catch::Contains("why nothing changed:") &&
               Catch::Contains("link n0-nic: effective bandwidth unchanged at 2 GB/s") &&
               Catch::Contains("the top pick is compute-bound: exposed communication is 3.0% of its step") &&
               Catch::Contains("To move it: compute (97%)"));
  // A what-if that does change the time has no such lines.
  CHECK_THAT(lines(compare_plans(without, one_point(0.9))), !Catch::Contains("why nothing changed"));
}

// The other way a what-if changes nothing: it edits nodes the point does not run on (a 2-node point on a
// 4-node platform, the GPUs of n2 and n3 slowed). predict's notes and plan's "why nothing changed" say so;
// an edit that reaches a used node gets no such note (and moves the time: 10x slower GPUs on n1).
TEST_CASE("what-ifs: an edit of nodes the point does not use says so", "[plan][whatif][noop]") {
  vt::TempDir d;
  d.file("p.xml", vt::platform_xml(4, 1, "10GBps", "0us", {"25GBps", "25GBps", "25GBps", "25GBps"},
                                   {"10Tf", "10Tf", "10Tf", "1Tf"}));
  d.file("s.xml", R"(<scenario name="unused">
  <cluster platform="p.xml" nodes="2" gpus_per_node="1"/>
  <model preset="vit_cifar_tiny"/>
  <dataset name="synthetic" train_samples="6400" image_size="32" channels="3"/>
  <training micro_batch="32"/>
  <parallelism collective="ring"/>
  <simulation steps="6" warmup="1"/>
</scenario>
)");
  const std::string unused = "gpu:n[23]=n3";  // n3's 1 TFLOP/s GPU onto n2 and n3: neither is used
  auto predicted = [&](const std::string& edits) {
    ScenarioFile f = read_scenario_file(d / "s.xml");
    apply_override(f, "whatif.edits=" + edits);
    sim::PredictOptions o;
    o.progress = false;
    return sim::predict(f, o);
  };
  const Report r = predicted(unused);
  const std::string expected = "what-if '" + unused +
                               "': edits nodes n2, n3, which this point does not use (it runs on n0, n1): it "
                               "changes nothing here";
  CHECK(std::count(r.points.at(0).notes.begin(), r.points.at(0).notes.end(), expected) == 1);
  const PlanResult without = plan_of(d / "s.xml");
  const PlanResult with = plan_of(d / "s.xml", {"whatif.edits=" + unused});
  CHECK(top_of(with).time_to_train_s == top_of(without).time_to_train_s);
  CHECK_THAT(lines(compare_plans(without, with)),
             Catch::Contains("why nothing changed:") && Catch::Contains("    " + expected));
  // n1 is used: no note, and the point is slower.
  const Report used = predicted("gpu:n1=n3");
  for (const auto& n : used.points.at(0).notes) CHECK_THAT(n, !Catch::Contains("does not use"));
  CHECK(used.points.at(0).step_time_s.mean > r.points.at(0).step_time_s.mean);
  // Kinds that name no node (zone, a link by id) get none either.
  CHECK(what_if_unused_notes({"zone:price_per_gpu_hour=2", "link:n3-nic:bandwidth=1GBps"},
                             read_platform_facts(d / "p.xml"), {"n0-gpu0", "n1-gpu0"})
            .empty());
}

TEST_CASE("transports: the names vitsim platform takes are the platform reader's",
          "[plan][whatif][transport]") {
  const Origin o{"p.xml", 3};
  // `vitsim platform --nic-transport` takes roce, rocev2, infiniband, sockets: so do a platform's <prop>
  // and a zone:transport what-if (it writes the same <prop>).
  CHECK(parse_transport("roce", o, "transport") == Transport::Ib);
  CHECK(parse_transport("RoCEv2", o, "transport") == Transport::Ib);
  CHECK(parse_transport("infiniband", o, "transport") == Transport::Ib);
  CHECK(parse_transport("sockets", o, "transport") == Transport::Tcp);
  CHECK(nic_transport_props("roce").front().second == transport_name(Transport::Ib));
  // An alias is still refused where its transport is: tcp is not a GPU-to-GPU path inside a node.
  CHECK_THROWS(parse_transport("sockets", o, "intranode_transport",
                               {Transport::NvLink, Transport::PcieHost, Transport::PcieP2p}));
  vt::TempDir d;
  d.file("p.xml", vt::platform_xml(2, 1, "10GBps", "0us", {"25Gbps", "25Gbps"}, {"10Tf", "10Tf"}));
  std::vector<WhatIfEffect> eff;
  const std::string text = apply_what_ifs(d / "p.xml", {"zone:transport=roce"}, &eff, d.path.string());
  const PlatformFacts facts = read_platform_text("p.xml (edited)", text);
  REQUIRE(facts.links.size() == 2);
  CHECK(facts.links[0].transport == Transport::Ib);
}

TEST_CASE("platform: a spec file and the flags share their defaults", "[plan][platform][defaults]") {
  // The same 2 x 8 H100 SXM nodes with NDR NICs, once by flags and once by a spec file that states only
  // the GPU and the NIC: the same GPU path (H100 SXM has NVLink 4: an NVSwitch board, default_fabric) and
  // the same CPU and loader figures (default_node_props: 14 cores a GPU, 600MBps, 100us).
  vt::TempDir d;
  d.file("s.json", R"({"id": "p", "gpu_types": {"H100": {"catalogue": "h100-sxm"}}, "nic": {"speed": "ndr"},
    "node_groups": [{"prefix": "node", "count": 2, "gpus": 8, "gpu": "H100"}]})");
  REQUIRE(vt::vitsim(fmt::format("platform {} --out {}", d / "s.json", d / "spec.xml")).status == 0);
  REQUIRE(
      vt::vitsim(fmt::format("platform --gpu h100-sxm --nodes 2 --gpus-per-node 8 --nic-speed ndr --out {}",
                             d / "flags.xml"))
          .status == 0);
  const PlatformFacts spec = read_platform_facts(d / "spec.xml"),
                      flags = read_platform_facts(d / "flags.xml");
  REQUIRE(spec.nodes.size() == 2);
  REQUIRE(flags.nodes.size() == 2);
  CHECK(spec.nodes[0].cpu_cores == 8 * 14);
  CHECK(spec.nodes[0].cpu_cores == flags.nodes[0].cpu_cores);
  CHECK(spec.nodes[0].loader_bw == flags.nodes[0].loader_bw);
  CHECK(spec.nodes[0].loader_image_overhead == flags.nodes[0].loader_image_overhead);
  // The GPU-to-GPU path: the backbone links' transport and rate, as the flags write them.
  auto backbone = [](const PlatformFacts& f) {
    for (const auto& l : f.links)
      if (l.what == "GPU-GPU in node") return std::make_pair(l.transport, l.bandwidth);
    return std::make_pair(Transport::Wire, 0.0);
  };
  CHECK(backbone(spec) == backbone(flags));
  CHECK(backbone(spec).first == Transport::NvLink);
}

TEST_CASE("plan's one-line form: platform and scenario made from flags, saved to edit", "[plan][oneline]") {
  // The common question in one command: 2 nodes x 2 H100 SXM, one NDR NIC each, ViT-tiny on CIFAR-10 under a
  // DeepSpeed config of train_batch_size 64 at ZeRO-1. The form searches (docs/plan.md "The one-line form"):
  // nodes 1 and 2, micro-batches 1, 2, 4, ... up to the largest that fits, ZeRO 0-3, the accumulation to
  // meet the config's 64 images a step.
  vt::TempDir d;
  d.file("ds.json", R"({"train_batch_size": 64, "zero_optimization": {"stage": 1}})");
  const std::string form =
      "plan --gpu h100-sxm --nodes 2 --gpus-per-node 2 --nic ndr:1 --model vit_cifar_tiny --dataset cifar10 "
      "--deepspeed " +
      (d / "ds.json");
  const auto r = vt::vitsim(
      fmt::format("{} --save-scenario {} --quiet --format json --out {}", form, d / "saved", d / "one.json"));
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("edit them and plan again with vitsim plan " + (d / "saved") +
                                    "/scenario.xml --global-batch 64"));
  const PlanResult one = plan_from_json(read_file(d / "one.json"), "one.json");
  REQUIRE(one.space_notes.size() >= 3);
  CHECK_THAT(one.space_notes[0], Catch::StartsWith("Searched (the one-line form"));
  CHECK_THAT(one.space_notes[2], Catch::Contains("zero_optimization.stage 1 searched over instead (pin with "
                                                 "--set parallelism.zero=1)"));
  // The space: 2 node counts x the micro-batches (powers of two from 1, each doubling, the largest at most
  // what fits at 2 nodes: the search's bound, which the memory model also gives the plan's points) x 4
  // stages.
  std::set<long long> micro, stages;
  for (const auto& p : one.points) {
    micro.insert(std::stoll(p.params.at("training.micro_batch")));
    stages.insert(std::stoll(p.params.at("parallelism.zero")));
  }
  CHECK(stages == std::set<long long>{0, 1, 2, 3});
  long long expect = 1;
  for (long long m : micro) CHECK(m == std::exchange(expect, expect * 2));
  CHECK(one.space_size == static_cast<int>(2 * micro.size() * 4));
  const PlanPoint& top = top_of(one);
  CHECK(*micro.rbegin() <= *std::max_element(top.largest_micro_batch.begin(), top.largest_micro_batch.end()));
  for (const auto& p : one.points)
    if (p.rank > 0) CHECK(p.global_batch == 64);  // the config's train_batch_size, met by the accumulation
  // The saved files plan the same space to the same answer: they are what the one line planned.
  const auto again = vt::vitsim(fmt::format("plan {} --global-batch 64 --quiet --format json --out {}",
                                            d / "saved/scenario.xml", d / "again.json"));
  REQUIRE(again.status == 0);
  const PlanResult two = plan_from_json(read_file(d / "again.json"), "again.json");
  CHECK(two.space_size == one.space_size);
  CHECK(top_of(two).time_to_train_s == top.time_to_train_s);
  // A --set pins its axis: one stage and one micro-batch leave the node counts.
  const auto pinned = vt::vitsim(
      fmt::format("{} --set parallelism.zero=1 --set training.micro_batch=16 --quiet --format json --out {}",
                  form, d / "pinned.json"));
  REQUIRE(pinned.status == 0);
  const PlanResult three = plan_from_json(read_file(d / "pinned.json"), "pinned.json");
  CHECK(three.space_size == 2);
  CHECK(top_of(three).zero == 1);
  CHECK(top_of(three).micro_batch == 16);
  // Messages name the user's flags, not the form's temporary scenario (issue 39 item 21).
  d.file("bad.json", R"({"train_micro_batch_size_per_gpu": "x"})");
  const auto bad = vt::vitsim(
      "plan --gpu h100-sxm --nodes 1 --gpus-per-node 2 --model vit_cifar_tiny --dataset cifar10 "
      "--deepspeed " +
      (d / "bad.json"));
  CHECK(bad.status == 1);
  CHECK_THAT(bad.out, Catch::StartsWith("vitsim: error: --deepspeed: " + (d / "bad.json")));
  CHECK_THAT(bad.out, !Catch::Contains("vitsim-plan-"));
  // The flags are the one-line form's: without --gpu they are a usage error, as is a scenario beside them.
  CHECK(vt::vitsim("plan --model vit_l_16 --dataset cifar10").status == 2);
  CHECK(vt::vitsim(fmt::format("plan {} --gpu h100-sxm --model vit_l_16 --dataset cifar10",
                               d / "saved/scenario.xml"))
            .status == 2);
}

TEST_CASE("plan: --global-batch replaces a DeepSpeed config's batch, and says so", "[plan][oneline]") {
  // issue 38 item 2: a config's gradient_accumulation_steps 1 beside --global-batch 64 excluded every point
  // but those where micro x ranks = 64 ("DeepSpeed requires equality"); the plan's global batch wins.
  vt::TempDir d;
  d.file("ds.json", R"({"train_batch_size": 16, "gradient_accumulation_steps": 1})");
  const auto r = vt::vitsim(fmt::format(
      "plan --gpu h100-sxm --nodes 1 --gpus-per-node 2 --model vit_cifar_tiny --dataset cifar10 --deepspeed "
      "{} "
      "--set parallelism.zero=0 --set training.micro_batch=8,16 --global-batch 64 --quiet --format json "
      "--out {}",
      d / "ds.json", d / "p.json"));
  REQUIRE(r.status == 0);
  const PlanResult p = plan_from_json(read_file(d / "p.json"), "p.json");
  REQUIRE(p.points.size() == 2);
  for (const auto& pt : p.points) {
    CHECK(pt.excluded.empty());
    CHECK(pt.global_batch == 64);  // 8 x 4 x 2 and 16 x 2 x 2
  }
  CHECK_THAT(p.space_notes.back(),
             Catch::Contains("--global-batch 64 replaces " + (d / "ds.json") +
                             "'s train_batch_size 16 and gradient_accumulation_steps 1"));
}
