// The fluid model of a collective's transfers (sim/include/vitsim/sim/fluid/fluid.hpp; issue 25 item 4): its
// max-min shares against closed forms, every algorithm's schedule against the same algorithm run as SimGrid
// flows, and the `auto` collective computed without flows against its flows in whole predictions.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <simgrid/s4u.hpp>

#include <algorithm>

#include "sim_test_util.hpp"
#include "test_util.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/sim/collectives/collective.hpp"
#include "vitsim/sim/fluid/fluid.hpp"
#include "vitsim/sim/point/simulate.hpp"

namespace sg4 = simgrid::s4u;
using namespace vitsim::sim;

namespace {

// Runs f(hosts, node_of) on an engine with the simulator's network model (configure_engine) on `platform`,
// its hosts in (node, GPU) order as vt::platform_xml names them (n<node>-gpu<k>).
template <class F>
std::vector<double> on_platform(const std::string& platform, F&& f) {
  return vt::in_child_vector([&] {
    int argc = 2;
    char a0[] = "t", a1[] = "--log=root.thres:critical";
    char* argv[] = {a0, a1, nullptr};
    sg4::Engine e(&argc, argv);
    configure_engine(e);
    e.load_platform(platform);
    auto hosts = e.get_all_hosts();
    auto node_of = [](const sg4::Host* h) {
      return std::stoi(h->get_name().substr(1, h->get_name().find('-') - 1));
    };
    auto gpu_of = [](const sg4::Host* h) {
      return std::stoi(h->get_name().substr(h->get_name().rfind('u') + 1));
    };
    std::sort(hosts.begin(), hosts.end(), [&](auto* x, auto* y) {
      return std::pair(node_of(x), gpu_of(x)) < std::pair(node_of(y), gpu_of(y));
    });
    std::vector<int> node;
    for (auto* h : hosts) node.push_back(node_of(h));
    return f(e, hosts, node);
  });
}

// Every rank i first sleeps leads[i], then runs `algo` once over every host: each rank's end. As SimGrid
// flows (the algorithm's run()), or from its schedule (FluidNet; empty when it has none or the model
// refuses).
std::vector<double> rank_ends(const std::string& platform, const std::string& algo, double bytes, CollOp op,
                              const std::vector<double>& leads, bool fluid) {
  return on_platform(platform,
                     [&](sg4::Engine& e, const std::vector<sg4::Host*>& hosts, const std::vector<int>& node) {
                       LatencyModel lat(e);
                       Group g("g", hosts, node, lat);
                       auto coll = make_collective(algo);
                       const vitsim::PlatformFacts facts = vitsim::read_platform_facts(platform);
                       coll->configure({&facts});  // auto reads each GPU's NCCL figures from the platform
                       if (fluid) {
                         FluidSchedule s;
                         FluidNet net(hosts);
                         if (!coll->schedule(g, bytes, op, s) || !net.admits(s)) return std::vector<double>{};
                         return net.run(s, leads, leads);
                       }
                       std::vector<double> end(hosts.size(), 0.0);
                       for (int i = 0; i < g.size(); ++i)
                         sg4::Actor::create("r" + std::to_string(i), hosts[i], [&, i] {
                           if (leads[i] > 0) sg4::this_actor::sleep_for(leads[i]);
                           coll->run(g, i, bytes, op);
                           end[i] = sg4::Engine::get_clock();
                         });
                       e.run();
                       return end;
                     });
}

// The fluid model's exits for one stage of `edges` over every host, every member beginning it at starts[i].
std::vector<double> stage_exits(const std::string& platform, const std::vector<FluidEdge>& edges,
                                const std::vector<double>& starts) {
  return on_platform(platform,
                     [&](sg4::Engine&, const std::vector<sg4::Host*>& hosts, const std::vector<int>&) {
                       FluidSchedule s;
                       s.stages.push_back(one_set_stage(static_cast<int>(hosts.size()), 0.0));
                       s.stages[0].edges = edges;
                       FluidNet net(hosts);
                       if (!net.admits(s)) return std::vector<double>{};
                       return net.run(s, starts, starts);
                     });
}

}  // namespace

TEST_CASE("fluid model: max-min shares and their changes against closed forms", "[fluid]") {
  vt::TempDir d;
  // Two nodes of two GPUs, lanes 100 GB/s, NICs 10 GB/s (SPLITDUPLEX: up and down are two links), no
  // latency. Node 0's two GPUs send to node 1's two GPUs: both transfers cross node 0's NIC up and node 1's
  // NIC down, each 10 GB/s, so each runs at 5 GB/s: S each ends at 2 S / B.
  const std::string p =
      d.file("p.xml", vt::platform_xml(2, 2, "100GBps", "0us", {"10GBps", "10GBps"}, {"1Tf", "1Tf"}));
  const double B = 10e9, S = 100e6;
  std::vector<double> exits = stage_exits(p, {{0, 2, S, 0}, {1, 3, S, 0}}, {0, 0, 0, 0});
  REQUIRE(exits.size() == 4);
  for (double x : exits) CHECK(x == Approx(2 * S / B).epsilon(1e-12));
  // Unequal sizes S and 3S: both at B/2 until the small one ends at 2S/B, then the large one alone at B for
  // its remaining 2S: it ends at 4S/B (one barrier: every member leaves then).
  exits = stage_exits(p, {{0, 2, S, 0}, {1, 3, 3 * S, 0}}, {0, 0, 0, 0});
  REQUIRE(exits.size() == 4);
  for (double x : exits) CHECK(x == Approx(4 * S / B).epsilon(1e-12));
  // Staggered: the second transfer's ends are there only at t1 = S/B: the first runs alone at B until then
  // (S/B x B = S: it is done exactly when the second starts), the second then alone: ends at 2 S / B.
  exits = stage_exits(p, {{0, 2, S, 0}, {1, 3, S, 0}}, {0, S / B, 0, S / B});
  REQUIRE(exits.size() == 4);
  for (double x : exits) CHECK(x == Approx(2 * S / B).epsilon(1e-12));
  // Staggered by half: the first alone for S/(2B) moves S/2, then both at B/2: the first's remaining S/2
  // ends at S/(2B) + S/B, and the second, having moved S/2 by then, ends S/(2B) later alone: 2 S/B.
  exits = stage_exits(p, {{0, 2, S, 0}, {1, 3, S, 0}}, {0, S / (2 * B), 0, S / (2 * B)});
  REQUIRE(exits.size() == 4);
  for (double x : exits) CHECK(x == Approx(2 * S / B).epsilon(1e-12));
  // A delay (route latency) postpones the send: a transfer delayed by 1 ms after the other ends at
  // 1 ms + ... : with the first alone for 1 ms (moving B x 1 ms = 10 MB of 100 MB), then both at B/2, the
  // first's remaining 90 MB ends at 1 ms + 18 ms, the second has then 10 MB left alone: 19 + 1 = 20 ms.
  exits = stage_exits(p, {{0, 2, S, 0}, {1, 3, S, 1e-3}}, {0, 0, 0, 0});
  REQUIRE(exits.size() == 4);
  for (double x : exits) CHECK(x == Approx(20e-3).epsilon(1e-12));
  // A FATPIPE backbone caps each transfer, shared by none: one node of 4 GPUs with 10 GB/s lanes
  // (SPLITDUPLEX) and a 4 GB/s FATPIPE backbone: two transfers 0->1 and 2->3 each run at 4 GB/s.
  const std::string fat = d.file("fat.xml", vt::platform_xml(1, 4, "10GBps", "0us", {}, {"1Tf"}, "4GBps"));
  exits = stage_exits(fat, {{0, 1, S, 0}, {2, 3, S, 0}}, {0, 0, 0, 0});
  REQUIRE(exits.size() == 4);
  for (double x : exits) CHECK(x == Approx(S / 4e9).epsilon(1e-12));
  // The same backbone SHARED: the two share its 4 GB/s, 2 GB/s each.
  const std::string shared =
      d.file("shared.xml", vt::platform_xml(1, 4, "10GBps", "0us", {}, {"1Tf"}, "4GBps", "SHARED"));
  exits = stage_exits(shared, {{0, 1, S, 0}, {2, 3, S, 0}}, {0, 0, 0, 0});
  REQUIRE(exits.size() == 4);
  for (double x : exits) CHECK(x == Approx(S / 2e9).epsilon(1e-12));
}

TEST_CASE("fluid model: every algorithm's schedule ends where its flows do", "[fluid]") {
  // Each collective's schedule (Collective::schedule) computed by the fluid model against the same
  // collective run as SimGrid flows: every rank's end within 1e-9 (SimGrid ends flows within its own
  // precision). Ranks arriving together and staggered; identical links, a slow NIC (transfers at different
  // rates), a SHARED backbone inside nodes (a node's transfers share it) and a SHARED NIC carrying two rails.
  vt::TempDir d;
  std::vector<std::string> platforms = {
      d.file("one.xml", vt::platform_xml(1, 4, "10GBps", "1us", {}, {"1Tf"})),
      d.file("slow.xml",
             vt::platform_xml(3, 2, "10GBps", "1us", {"10GBps", "10GBps", "0.5GBps"}, {"1Tf", "1Tf", "1Tf"})),
      d.file("shared.xml",
             vt::platform_xml(2, 3, "10GBps", "2us", {"4GBps", "4GBps"}, {"1Tf", "1Tf"}, "8GBps", "SHARED")),
      d.file("four.xml", vt::platform_xml(4, 2, "20GBps", "0us", {"6GBps", "6GBps", "3GBps", "6GBps"},
                                          {"1Tf", "1Tf", "1Tf", "1Tf"})),
      d.file("seven.xml", vt::platform_xml(7, 1, "10GBps", "1us", std::vector<std::string>(7, "10GBps"),
                                           std::vector<std::string>(7, "1Tf")))};
  for (const std::string& p : platforms) {
    const int n = static_cast<int>(
        rank_ends(p, "ring", 1e6, CollOp::AllReduce, std::vector<double>(64, 0), false).size());
    REQUIRE(n >= 4);
    std::vector<double> same(n, 5e-3), staggered(n);
    for (int i = 0; i < n; ++i) staggered[i] = 1e-3 * (i % 3) + 7e-6 * i;
    for (const char* algo : {"ring", "tree", "rail", "hierarchical", "topology"})
      for (CollOp op : {CollOp::AllReduce, CollOp::ReduceScatter, CollOp::AllGather})
        for (const auto* leads : {&same, &staggered}) {
          INFO(p << ", " << algo << ", op " << coll_op_name(op)
                 << (leads == &same ? ", equal" : ", staggered"));
          const std::vector<double> flows = rank_ends(p, algo, 99'999'999, op, *leads, false);
          const std::vector<double> fluid = rank_ends(p, algo, 99'999'999, op, *leads, true);
          REQUIRE(fluid.size() == flows.size());
          for (size_t i = 0; i < flows.size(); ++i) CHECK(fluid[i] == Approx(flows[i]).epsilon(1e-9));
        }
  }
}

TEST_CASE("fluid model: collectives without a schedule, and routes it cannot run, refused", "[fluid]") {
  vt::TempDir d;
  const std::string p =
      d.file("p.xml", vt::platform_xml(2, 2, "10GBps", "1us", {"10GBps", "10GBps"}, {"1Tf", "1Tf"}));
  // The message-level ring (2(n-1) transfers per member, each waiting for the one before) has none.
  CHECK(rank_ends(p, "ring_msg", 1e6, CollOp::AllReduce, {0, 0, 0, 0}, true).empty());
  // A member sending to itself has no route the model runs.
  CHECK(stage_exits(p, {{0, 0, 1e6, 0}}, {0, 0, 0, 0}).empty());
}

TEST_CASE("fluid model: `auto` and the named collectives computed without flows predict what their flows do",
          "[fluid][model]") {
  // Named collectives (tree, rail, hierarchical, topology, with their routes' latencies) too.
  // Whole predictions with `auto` (NCCL's choice per call) computed by the fluid model
  // (simulation.flows=auto) and as SimGrid flows (always): every figure within 1e-9, and the note says which
  // ran. H100 nodes with NVSwitch and per-GPU NDR NICs (issue 25's realistic node), where NCCL runs NVLSTree
  // (the rail stand-in), Tree and Ring by size; each forced too (nccl.algo); ZeRO-1 (reduce-scatter and
  // all-gather) and the communication stream (overlap on, buckets); the same nodes rail-optimised; the
  // shipped study scenarios (Tesla's mixed GPUs arrive apart).
  const std::string note = ": nothing but its calls sends";
  vt::TempDir d;
  const auto w = vt::vitsim(
      "platform --nodes 3 --gpus-per-node 4 --gpu h100-sxm --nics 4 --nic-speed ndr "
      "--layout flat-star --out " +
      (d / "h100.xml"));
  INFO(w.out);
  REQUIRE(w.status == 0);
  // The same nodes rail-optimised (a link per NIC): `auto` runs its channels as a ring (a pair of trees) per
  // rail (rails.hpp), whose transfers share the GPUs' lanes.
  const auto wr = vt::vitsim(
      "platform --nodes 3 --gpus-per-node 4 --gpu h100-sxm --nics 4 --nic-speed ndr --rail-optimised --out " +
      (d / "h100r.xml"));
  INFO(wr.out);
  REQUIRE(wr.status == 0);
  const std::string rails = " --set cluster.platform=" + (d / "h100r.xml");
  const std::string sc = d.file("s.xml",
                                R"(<scenario name="fluid">
  <cluster platform="h100.xml" nodes="3" gpus_per_node="4"/>
  <model preset="vit_b_16"/>
  <dataset name="synthetic" train_samples="100000" image_size="224" channels="3"/>
  <training micro_batch="32" precision="bf16"/>
  <simulation steps="4" warmup="1"/>
</scenario>
)");
  const std::vector<std::string> cases = {
      sc,
      sc + " --set nccl.algo=tree",
      sc + " --set nccl.algo=nvlstree",
      sc + " --set nccl.algo=ring --set parallelism.overlap=true --set parallelism.bucket_size=8MB",
      sc + " --set parallelism.zero=1 --set parallelism.overlap=true --set parallelism.bucket_size=2MB",
      sc + rails,
      sc + rails + " --set nccl.algo=tree",
      sc + rails +
          " --set nccl.algo=ring --set parallelism.zero=1 --set parallelism.overlap=true "
          "--set parallelism.bucket_size=2MB",
      sc + " --set parallelism.collective=tree",
      sc + " --set parallelism.collective=rail --set parallelism.zero=1 --set parallelism.overlap=true",
      sc + " --set parallelism.collective=hierarchical",
      sc + " --set parallelism.collective=topology --set cluster.gpus_per_node=2",
      vt::source("scenarios/study/tesla-strong-b16.xml"),
      vt::source("scenarios/study/tesla-strong-b16.xml") + " --set parallelism.collective=tree",
      vt::source("scenarios/study/nebula-batch.xml") +
          " --set cluster.gpus_per_node=2 --set training.micro_batch=16"};
  for (const std::string& c : cases) {
    INFO(c);
    const std::string args = "predict " + c + " -q -j1 ";
    const auto fluid = vt::vitsim(args + "--format json"),
               flows = vt::vitsim(args + "--format json --set simulation.flows=always");
    INFO(fluid.out << flows.out);
    REQUIRE(fluid.status == 0);
    REQUIRE(flows.status == 0);
    vt::check_same_numbers(nlohmann::json::parse(fluid.out), nlohmann::json::parse(flows.out), 1e-9);
    CHECK(vt::vitsim(args + "--set simulation.flows=always").out.find(note) == std::string::npos);
  }
  CHECK(vt::vitsim("predict " + sc + " -q -j1").out.find(note) != std::string::npos);
}
