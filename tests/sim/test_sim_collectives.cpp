// Collectives against their closed formulas (docs/sources.md "Collectives"), each simulation in its own
// process.
#include <catch2/catch.hpp>

#include <simgrid/s4u.hpp>

#include "test_util.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/sim/collectives/collective.hpp"
#include "vitsim/sim/point/simulate.hpp"

namespace sg4 = simgrid::s4u;
using namespace vitsim::sim;

namespace {

// Simulates one collective of `bytes` over every host of the platform (in name order); returns its time.
double simulate_collective(const std::string& platform, const std::string& algo, double bytes, CollOp op,
                           const std::string& bb_policy_note = "") {
  (void)bb_policy_note;
  return vt::in_child([&] {
    int argc = 2;
    char a0[] = "t", a1[] = "--log=root.thres:critical";
    char* argv[] = {a0, a1, nullptr};
    sg4::Engine e(&argc, argv);
    vitsim::sim::configure_engine(e);  // the simulator's own network model: figures exactly as written
    e.load_platform(platform);
    auto hosts = e.get_all_hosts();
    std::sort(hosts.begin(), hosts.end(), [](auto* x, auto* y) {
      auto idx = [](const std::string& n) {
        return std::stoi(n.substr(1, n.find('-') - 1)) * 100000 + std::stoi(n.substr(n.rfind('u') + 1));
      };
      return idx(x->get_name()) < idx(y->get_name());
    });
    std::vector<int> node;
    for (auto* h : hosts) node.push_back(std::stoi(h->get_name().substr(1, h->get_name().find('-') - 1)));
    LatencyModel lat(e);
    Group g("g", hosts, node, lat);
    auto coll = make_collective(algo);
    const vitsim::PlatformFacts facts = vitsim::read_platform_facts(platform);
    coll->configure({&facts});  // auto reads each GPU's NCCL figures from the platform
    double end = 0;
    for (int i = 0; i < g.size(); ++i)
      sg4::Actor::create("r" + std::to_string(i), hosts[i], [&, i] {
        coll->run(g, i, bytes, op);
        end = std::max(end, sg4::Engine::get_clock());
      });
    e.run();
    return end;
  });
}

// Runs f(engine, hosts) on an engine with the simulator's network model (configure_engine) on `platform`, its
// hosts sorted by name.
template <class F>
auto on_engine(const std::string& platform, F&& f) {
  int argc = 2;
  char a0[] = "t", a1[] = "--log=root.thres:critical";
  char* argv[] = {a0, a1, nullptr};
  sg4::Engine e(&argc, argv);
  vitsim::sim::configure_engine(e);
  e.load_platform(platform);
  auto hosts = e.get_all_hosts();
  std::sort(hosts.begin(), hosts.end(), [](auto* x, auto* y) { return x->get_name() < y->get_name(); });
  return f(e, hosts);
}

// Every rank i first has leads[i] seconds of its own work, then one collective. Slept: the rank sleeps them
// and calls run(); deferred: it hands them to run_deferred() (Deferred, sim/collectives/collective.hpp) and
// owes d.lead + d.tail after it. Returns each rank's end (the instant its clock reaches after all it owes).
// With `lone`, the group is a lone ring (Group::set_lone_ring: no flows) when lone_ring_bandwidths allows it,
// and the result is empty when it does not.
std::vector<double> rank_ends(const std::string& platform, const std::string& algo, double bytes, CollOp op,
                              const std::vector<double>& leads, bool deferred, bool lone = false) {
  return vt::in_child_vector([&] {
    return on_engine(platform, [&](sg4::Engine& e, std::vector<sg4::Host*> hosts) {
      std::vector<int> node(hosts.size(), 0);
      LatencyModel lat(e);
      Group g("g", hosts, node, lat);
      if (lone) {
        std::vector<double> bw = lone_ring_bandwidths(hosts);
        if (bw.empty()) return std::vector<double>{};
        g.set_lone_ring(std::move(bw));
      }
      auto coll = make_collective(algo);
      const vitsim::PlatformFacts facts = vitsim::read_platform_facts(platform);
      coll->configure({&facts});  // auto reads each GPU's NCCL figures from the platform
      std::vector<double> end(hosts.size(), 0.0);
      for (int i = 0; i < g.size(); ++i)
        sg4::Actor::create("r" + std::to_string(i), hosts[i], [&, i] {
          if (deferred) {
            Deferred d;
            d.lead = leads[i];
            coll->run_deferred(g, i, bytes, op, d);
            end[i] = sg4::Engine::get_clock() + d.lead + d.tail;
          } else {
            if (leads[i] > 0) sg4::this_actor::sleep_for(leads[i]);
            coll->run(g, i, bytes, op);
            end[i] = sg4::Engine::get_clock();
          }
        });
      e.run();
      return end;
    });
  });
}

}  // namespace

TEST_CASE("a collective carrying its ranks' pending time ends where sleeping it first would",
          "[collective][deferred]") {
  // The compute stream runs an inline collective with its unslept compute time as the lead and takes the
  // ring's trailing latencies back as time it owes (sim/src/point/rank_actors.cpp): the same instants, fewer
  // SimGrid events.
  const double B = 10e9, a = 2e-6, S = 100e6;
  vt::TempDir d;
  for (int n : {1, 2, 3, 5, 8}) {
    const std::string p =
        d.file("p" + std::to_string(n) + ".xml", vt::platform_xml(1, n, "10GBps", "1us", {}, {"1Tf"}));
    std::vector<double> same(n, 5e-3), staggered(n);
    for (int i = 0; i < n; ++i)
      staggered[i] = 1e-3 * (i % 3) + 7e-6 * i;  // ranks arrive at different instants
    for (const char* algo : {"ring", "ring_msg", "tree", "hierarchical", "topology", "auto"})
      for (CollOp op : {CollOp::AllReduce, CollOp::ReduceScatter, CollOp::AllGather})
        for (const auto* leads : {&same, &staggered}) {
          INFO("n = " << n << ", " << algo << ", op " << coll_op_name(op)
                      << (leads == &same ? ", equal leads" : ", staggered leads"));
          const std::vector<double> slept = rank_ends(p, algo, S, op, *leads, false);
          const std::vector<double> carried = rank_ends(p, algo, S, op, *leads, true);
          REQUIRE(carried.size() == slept.size());
          for (size_t i = 0; i < slept.size(); ++i) CHECK(carried[i] == Approx(slept[i]).epsilon(1e-12));
        }
    // Equal leads L: the ring's closed form shifted by L (n = 1: nothing to reduce, the rank owes its lead).
    const double formula = n > 1 ? 2 * (n - 1) * a + 2.0 * (n - 1) / n * S / B : 0.0;
    for (double end : rank_ends(p, "ring", S, CollOp::AllReduce, same, true))
      CHECK(end ==
            Approx(5e-3 + formula).epsilon(1e-6));  // SimGrid solves shares to ~1e-7 (the ring tests above)
  }
}

TEST_CASE("ring all-reduce equals 2(n-1)a + 2(n-1)/n S/B on identical links", "[collective][ring]") {
  // One node of n GPUs: each GPU's private link has B = 10 GB/s and 1 us latency, the backbone adds
  // 0 s and never limits (FATPIPE 1000 GB/s). Route latency a = 2 us (up + down link).
  const double B = 10e9, a = 2e-6, S = 100e6;
  vt::TempDir d;
  for (int n : {2, 3, 4, 7, 8, 16, 33, 64}) {
    const std::string p =
        d.file("p" + std::to_string(n) + ".xml", vt::platform_xml(1, n, "10GBps", "1us", {}, {"1Tf"}));
    const double formula = 2 * (n - 1) * a + 2.0 * (n - 1) / n * S / B;
    INFO("n = " << n);
    CHECK(simulate_collective(p, "ring", S, CollOp::AllReduce) == Approx(formula).epsilon(1e-6));
    CHECK(simulate_collective(p, "ring_msg", S, CollOp::AllReduce) == Approx(formula).epsilon(1e-6));
    // Reduce-scatter and all-gather are each one half: (n-1) a + (n-1)/n S/B.
    CHECK(simulate_collective(p, "ring", S, CollOp::ReduceScatter) == Approx(formula / 2).epsilon(1e-6));
  }
}

TEST_CASE("fused and message-level rings agree on a shared bottleneck", "[collective][ring]") {
  // The node backbone is SHARED at 8 GB/s: all n flows cross it, so each gets 8/n GB/s < 10 GB/s.
  vt::TempDir d;
  for (int n : {4, 8}) {
    const std::string p =
        d.file("p.xml", vt::platform_xml(1, n, "10GBps", "1us", {}, {"1Tf"}, "8GBps", "SHARED"));
    const double fused = simulate_collective(p, "ring", 64e6, CollOp::AllReduce);
    const double msg = simulate_collective(p, "ring_msg", 64e6, CollOp::AllReduce);
    INFO("n = " << n);
    CHECK(fused == Approx(msg).epsilon(1e-6));
    // And both run at the shared share: bandwidth term 2(n-1)/n S / (8 GB/s / n).
    CHECK(fused > 2.0 * (n - 1) / n * 64e6 / (8e9 / n));
  }
}

TEST_CASE("fused and message-level rings agree on a ring with one slow edge", "[collective][ring]") {
  // Three nodes of two GPUs, 1 us links; node 2's NIC is 0.5 GB/s, the others 10 GB/s. The inter-node
  // edges have the largest latency (GPU lane + NIC + NIC + GPU lane = 4 us) and the edge through node
  // 2's NIC the smallest bandwidth: the ring advances at that edge, in both forms.
  vt::TempDir d;
  const std::string p =
      d.file("p.xml",
             vt::platform_xml(3, 2, "10GBps", "1us", {"10GBps", "10GBps", "0.5GBps"}, {"1Tf", "1Tf", "1Tf"}));
  const double fused = simulate_collective(p, "ring", 60e6, CollOp::AllReduce);
  const double msg = simulate_collective(p, "ring_msg", 60e6, CollOp::AllReduce);
  CHECK(fused == Approx(msg).epsilon(1e-6));
  CHECK(fused == Approx(2 * 5 * (4e-6 + 10e6 / 0.5e9)).epsilon(1e-6));
}

namespace {
// lone_ring_bandwidths over the platform's hosts in name order, or in `order` (indices into that order).
std::vector<double> ring_bandwidths(const std::string& platform, const std::vector<int>& order = {}) {
  return vt::in_child_vector([&] {
    return on_engine(platform, [&](sg4::Engine&, std::vector<sg4::Host*> hosts) {
      std::vector<sg4::Host*> ring = hosts;
      if (!order.empty()) {
        ring.clear();
        for (int i : order) ring.push_back(hosts[i]);
      }
      return lone_ring_bandwidths(ring);
    });
  });
}
}  // namespace

TEST_CASE("a lone ring's narrowest links, and none where two of its transfers share a link",
          "[collective][ring][lone]") {
  vt::TempDir d;
  // One node of 4 GPUs, 10 GB/s lanes, FATPIPE backbone (a cap per transfer, shared by none): each edge is
  // lane up, backbone, lane down, the narrowest 10 GB/s.
  const std::string one = d.file("one.xml", vt::platform_xml(1, 4, "10GBps", "1us", {}, {"1Tf"}));
  CHECK(ring_bandwidths(one) == std::vector<double>(4, 10e9));
  // Three nodes of 2 GPUs, node 2's NIC 0.5 GB/s (SPLITDUPLEX: its up and down directions are two links): the
  // edge into node 2 crosses its NIC down, the edge out of it its NIC up, each at 0.5 GB/s.
  const std::string three =
      d.file("three.xml",
             vt::platform_xml(3, 2, "10GBps", "1us", {"10GBps", "10GBps", "0.5GBps"}, {"1Tf", "1Tf", "1Tf"}));
  CHECK(ring_bandwidths(three) == std::vector<double>{10e9, 10e9, 10e9, 0.5e9, 10e9, 0.5e9});
  // The ring n0-gpu0, n1-gpu0, n0-gpu1, n1-gpu1 leaves node 0 twice: node 0's NIC up carries two transfers.
  const std::string two =
      d.file("two.xml", vt::platform_xml(2, 2, "10GBps", "1us", {"10GBps", "10GBps"}, {"1Tf", "1Tf"}));
  CHECK(ring_bandwidths(two, {0, 1, 2, 3}).size() == 4);
  CHECK(ring_bandwidths(two, {0, 2, 1, 3}).empty());
  // A SHARED backbone carries every edge of the node's ring.
  const std::string shared =
      d.file("shared.xml", vt::platform_xml(1, 4, "10GBps", "1us", {}, {"1Tf"}, "8GBps", "SHARED"));
  CHECK(ring_bandwidths(shared).empty());
}

TEST_CASE("a lone ring ends where its flows would, for every rank, lead and operation",
          "[collective][ring][lone]") {
  // The lone ring computes max(put_i, post_{i+1}) + bytes / narrowest bandwidth per edge instead of making
  // the flows (Group::set_lone_ring). Against the flows: ranks arriving together and staggered (a transfer
  // then waits for its receiver, or the receiver for it), slept and carried (Deferred), over identical links
  // and over a ring with one slow NIC. 99,999,999 bytes: the fused ring's chunk x steps is not a whole number
  // of bytes, and both forms send its integer part.
  vt::TempDir d;
  std::vector<std::string> platforms;
  for (int n : {2, 3, 5, 8})
    platforms.push_back(
        d.file("p" + std::to_string(n) + ".xml", vt::platform_xml(1, n, "10GBps", "1us", {}, {"1Tf"})));
  platforms.push_back(d.file(
      "slow.xml",
      vt::platform_xml(3, 2, "10GBps", "1us", {"10GBps", "10GBps", "0.5GBps"}, {"1Tf", "1Tf", "1Tf"})));
  for (const std::string& p : platforms) {
    const int n = static_cast<int>(ring_bandwidths(p).size());
    REQUIRE(n >= 2);
    std::vector<double> same(n, 5e-3), staggered(n), late_receiver(n, 0.0);
    for (int i = 0; i < n; ++i) staggered[i] = 1e-3 * (i % 3) + 7e-6 * i;
    // Rank n-2 posts its receive 0.2 s after its predecessor's send (slept: it enters the collective late).
    // On the slow platform its receive crosses node 2's 0.5 GB/s NIC: the ring's last transfer is the one
    // that waited for its receiver.
    late_receiver[n - 2] = 0.2;
    for (CollOp op : {CollOp::AllReduce, CollOp::ReduceScatter, CollOp::AllGather})
      for (const auto* leads : {&same, &staggered, &late_receiver})
        for (bool deferred : {false, true}) {
          INFO(p << ", op " << coll_op_name(op) << ", leads "
                 << (leads == &same        ? "equal"
                     : leads == &staggered ? "staggered"
                                           : "a late receiver")
                 << (deferred ? ", carried" : ", slept"));
          const std::vector<double> flows = rank_ends(p, "ring", 99'999'999, op, *leads, deferred);
          const std::vector<double> lone = rank_ends(p, "ring", 99'999'999, op, *leads, deferred, true);
          REQUIRE(lone.size() == flows.size());
          for (size_t i = 0; i < flows.size(); ++i) CHECK(lone[i] == Approx(flows[i]).epsilon(1e-12));
        }
  }
}

TEST_CASE("a ring through one slow link runs at that link's speed", "[collective][ring]") {
  // Two nodes of two GPUs; node 1's NIC is 1 GB/s, everything else 10+ GB/s, zero latency. The ring
  // 0-1-2-3-0 crosses node 1's NIC in both directions, so B = 1 GB/s for the whole ring.
  vt::TempDir d;
  const std::string p =
      d.file("p.xml", vt::platform_xml(2, 2, "10GBps", "0us", {"100GBps", "1GBps"}, {"1Tf", "1Tf"}));
  const double S = 100e6;
  CHECK(simulate_collective(p, "ring", S, CollOp::AllReduce) == Approx(2.0 * 3 / 4 * S / 1e9).epsilon(1e-6));
}

namespace {
int tree_depth(
    int n) {  // edges from the root to the deepest leaf of a heap-ordered binary tree of n positions
  int depth = 0;
  while ((1 << (depth + 1)) - 1 < n) ++depth;
  return depth;
}
}  // namespace

TEST_CASE("double binary tree over one GPU per node: 2 S/B + 2 depth a", "[collective][tree]") {
  // docs/sources.md "Collectives", double binary tree: latency term ~ 2 log2(n) a, bandwidth term
  // ~ 2 S / B for large S. In vitsim's pipelined form each phase costs S/B + depth * a (every node is inner
  // in at most one tree, so it receives two halves). n nodes of one GPU: lanes and NICs 10 GB/s, 1 us each;
  // the route between nodes is lane + NIC + NIC + lane = 4 us.
  const double B = 10e9, a = 4e-6, S = 100e6;
  vt::TempDir d;
  for (int n : {3, 4, 7, 8, 16}) {
    const std::string p =
        d.file("t.xml", vt::platform_xml(n, 1, "10GBps", "1us", std::vector<std::string>(n, "10GBps"),
                                         std::vector<std::string>(n, "1Tf")));
    INFO("n = " << n);
    CHECK(simulate_collective(p, "tree", S, CollOp::AllReduce) ==
          Approx(2 * S / B + 2 * tree_depth(n) * a).epsilon(1e-6));
  }
}

TEST_CASE("double binary tree inside one node is a chain: 2 S/B + 2 (G-1) a", "[collective][tree]") {
  // One node of G GPUs (NCCL's tree inside a node is a chain): lanes 10 GB/s, 1 us; GPU to GPU lane + lane =
  // 2 us. A middle GPU sends its half up each chain (one towards each end): S on its lane each phase.
  const double B = 10e9, a = 2e-6, S = 100e6;
  vt::TempDir d;
  for (int g : {3, 4, 8}) {
    const std::string p = d.file("c.xml", vt::platform_xml(1, g, "10GBps", "1us", {}, {"1Tf"}));
    INFO("G = " << g);
    CHECK(simulate_collective(p, "tree", S, CollOp::AllReduce) ==
          Approx(2 * S / B + 2 * (g - 1) * a).epsilon(1e-6));
  }
}

TEST_CASE("node-aware double binary tree on N nodes x G GPUs: chains in the nodes and a tree over the nodes",
          "[collective][tree]") {
  // Lanes 100 GB/s (never limiting), NICs 1 GB/s, every link 1 us: GPU to GPU in a node a_node = 2 us, node
  // to node a_net = 4 us. Per phase: the pipeline's fill, (G-1) a_node + depth(N) a_net (a chain's tail to
  // its head, then the heads up the node tree), plus the NICs' flows: a node of an N >= 3 tree receives (or
  // sends) at most two halves, S / B_net; with N = 2 one half each way, S / (2 B_net).
  const double b_net = 1e9, a_node = 2e-6, a_net = 4e-6, S = 100e6;
  vt::TempDir d;
  for (const auto& [nodes, g] : std::vector<std::pair<int, int>>{{2, 2}, {2, 4}, {3, 2}, {4, 2}, {5, 3}}) {
    const std::string p =
        d.file("n.xml", vt::platform_xml(nodes, g, "100GBps", "1us", std::vector<std::string>(nodes, "1GBps"),
                                         std::vector<std::string>(nodes, "1Tf")));
    const double flows = nodes == 2 ? S / 2 / b_net : S / b_net;
    const double fill = (g - 1) * a_node + tree_depth(nodes) * a_net;
    INFO(nodes << " nodes x " << g << " GPUs");
    CHECK(simulate_collective(p, "tree", S, CollOp::AllReduce) == Approx(2 * (flows + fill)).epsilon(1e-6));
  }
}

TEST_CASE("hierarchical all-reduce: the inter-node ring carries S only between leaders",
          "[collective][hierarchical]") {
  // 4 nodes x 4 GPUs, zero latency, GPU lanes 100 GB/s (never limiting), NICs 1 GB/s. Inter-node stage:
  // a ring of 4 leaders over the NICs, 2 (4-1)/4 S / 1 GB/s. Intra-node stages run at 100 GB/s.
  vt::TempDir d;
  const std::string p =
      d.file("h.xml", vt::platform_xml(4, 4, "100GBps", "0us", {"1GBps", "1GBps", "1GBps", "1GBps"},
                                       {"1Tf", "1Tf", "1Tf", "1Tf"}));
  const double S = 100e6;
  const double inter = 2.0 * 3 / 4 * S / 1e9;
  // reduce-scatter + gather + scatter + all-gather inside a node: 4 transfers of 3/4 S at 100 GB/s.
  const double intra = 4 * 0.75 * S / 100e9;
  CHECK(simulate_collective(p, "hierarchical", S, CollOp::AllReduce) == Approx(inter + intra).epsilon(1e-3));
  // The flat ring over all 16 ranks crosses each NIC with 2 (16-1)/16 S: slower than hierarchical.
  CHECK(simulate_collective(p, "ring", S, CollOp::AllReduce) > inter);
}

TEST_CASE("unknown collective names list the valid ones", "[collective][negative]") {
  // The registry's names (tests/cli/test_descriptors.cpp checks the manual against them), sorted.
  const std::vector<std::string> names = collective_names();
  CHECK(std::is_sorted(names.begin(), names.end()));
  CHECK_THROWS_WITH(make_collective("butterfly"),
                    "unknown collective 'butterfly'; valid: " + vt::join(names));
}
