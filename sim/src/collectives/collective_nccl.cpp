// "auto" (the default collective): what NCCL would run (issue 25). Per group (a communicator), an
// NcclPlatform from the platform's facts and the group's placement (nccl_platform.cpp; a GPU it cannot rate
// is refused at configure()), NCCL's topology and tuning for the
// scenario's nccl.version, nccl.algo and nccl.proto (core/model/nccl_tuning.hpp), once; per call,
// nccl_choose() for the call's function and size, and the closest simulated algorithm runs it with the
// protocol's wire bytes:
//   Ring and PAT -> the fused ring (collective_ring.cpp);  Tree -> the node-aware double binary tree
//   ("tree"); NVLS (one node, NVSwitch multicast): the NVSwitch reduces, so each GPU sends and receives about
//   S of an
//     all-reduce of S (its share out for the switch's load-reduce, the reduced share back by multicast
//     store), not the ring's 2(n-1)/n S: the ring over the NVSwitch with n / (2(n-1)) of the bytes (a
//     reduce-scatter or all-gather moves the ring's bytes one way: as the ring);
//   NVLSTree, CollNetDirect, CollNetChain (reduction in the NVSwitch or the network's switches across nodes):
//     the node-aware tree: every GPU, and every node's NICs, move about S each way, as those do; the phases
//     overlap as NCCL pipelines them (the tree's chunks flow through), not one after another.
// The protocol: a transfer of S data bytes under LL, LL128 or Simple moves S / nccl_payload_fraction(proto)
// on the wire (LL: 2 S, LL128: 16/15 S, Simple: S).
// NCCL's rating bounds what the links do not carry (nccl_rated): under LL and LL128 the GPU's threads poll a
// flag per line, and NCCL rates each channel's rate (llMaxBw, perChMax{Ring,Tree}LL128Bw, the LL128 x .92
// and Tree x .92 factors); with NVLS, NVLSTree and CollNet the switches' reduction runs at the rate NCCL
// rates (NVLS channels x their bandwidth, x 5/6; CollNet's factors). There a member ends no earlier than its
// entry plus NCCL's own estimate of the call (NcclChoice::time_us); the links and the other traffic may
// make it later. Ring and Tree under Simple are what the links make them (NVLink at NCCL's rating of a
// link: sim/src/fabric/link_transports.cpp).
// Latency: a call costs NCCL's own latency term for the chosen algorithm and protocol (base latency plus
// per-step hardware latencies, NcclChoice::latency_us: NCCL's figures, not the platform's link latencies,
// which stand for the routes of the named algorithms), and its transfers then run over a shadow of the group
// whose routes have no latency (LatencyModel::none), so the bytes cost what the links and the other
// transfers make them and no latency is counted twice.
// ReduceScatter and AllGather are NCCL's ReduceScatter and AllGather on the whole buffer (nccl-tests' size).
// A group with a CPU device (device_kind cpu: vitsim's trainer runs them over MPI, not NCCL) runs the fused
// ring with its routes' latencies, as `ring` does.
// Without flows: where the group's calls are the simulation's only traffic (Group::only_traffic) and every
// stand-in NCCL may pick has a schedule the fluid model runs (Collective::schedule, FluidNet::admits) whose
// calls cannot overlap another's transfers on a link (cross_call_safe), every call is one meeting of the
// members: each hands over when it posts and puts, the last to arrive computes every member's exit from the
// schedule (FluidNet::run: the instants the flows would give) and each owes its exit as carried time.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "collectives/nccl_comm.hpp"
#include "collectives/rails.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/model/nccl_tuning.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/sim/fabric/latency_model.hpp"
#include "vitsim/sim/fluid/fluid.hpp"
#include "vitsim/sim/fluid/lone_ring.hpp"

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {
namespace {

// The simulated algorithm that stands for NCCL's (the file's head comment).
enum class Runs { Ring, Tree };
Runs runs_for(NcclAlgo a) {
  switch (a) {
    case NcclAlgo::Tree:
    case NcclAlgo::NvlsTree:
    case NcclAlgo::CollNetDirect:
    case NcclAlgo::CollNetChain:
      return Runs::Tree;
    default:
      return Runs::Ring;
  }
}
const char* runs_text(NcclAlgo a) {
  switch (a) {
    case NcclAlgo::Ring:
      return "";
    case NcclAlgo::Tree:
      return ", simulated as the node-aware double binary tree";
    case NcclAlgo::Nvls:
      return ", simulated as the NVSwitch reducing (S through each GPU's NVLink each way)";
    case NcclAlgo::Pat:
      return ", simulated as a ring";
    case NcclAlgo::NvlsTree:
      return ", simulated as the NVSwitch reducing in nodes and a tree across them (the node-aware tree's "
             "bytes)";
    default:
      return ", simulated as the network's switches reducing (the node-aware tree's bytes)";
  }
}

// The channels spread over the nodes' NIC rails (rails.hpp), where they are.
std::string rails_text(int rings, Runs runs, CollOp op) {
  if (rings < 2) return "";
  return fmt::format(", over {} NIC rails ({} per rail)", rings,
                     runs == Runs::Tree && op == CollOp::AllReduce ? "a pair of trees" : "a ring");
}

// The bytes the stand-in moves for `wire` bytes on the wire: NVLS's all-reduce n / (2(n-1)) of the ring's
// (each GPU about S each way).
double stand_in_bytes(NcclAlgo a, CollOp op, double wire, int n) {
  if (a == NcclAlgo::Nvls && op == CollOp::AllReduce && n > 1) return wire * n / (2.0 * (n - 1));
  return wire;
}

class Nccl : public Collective {
 public:
  std::string name() const override { return "auto"; }

  void configure(const CollectiveContext& c) override {
    version_ = c.nccl_version.empty() ? &nccl_newest_version() : &nccl_version(c.nccl_version);
    overrides_ = c.nccl_overrides();
    (void)nccl_enable(overrides_, *version_);  // an unknown name is an Error now, not at the first call
    NcclTopo bounds;
    nccl_limit_channels(bounds, *version_, overrides_);  // so is a channel bound beyond MAXCHANNELS
    if (c.facts) {
      platform_ = platform_nccl(*c.facts);
      check_nccl_rated(platform_, c.hosts);  // a GPU the tuner cannot rate: refused before any run
    }
  }

  void run(const Group& g, int me, double bytes, CollOp op) const override {
    Deferred d;
    run_deferred(g, me, bytes, op, d);
    if (const double owed = d.lead + d.tail; owed > 0) sg4::this_actor::sleep_for(owed);
  }

  // The member's lead and NCCL's latency ride into the ring as its lead (the fused ring's Deferred); the
  // other algorithms sleep them first.
  void run_deferred(const Group& g, int me, double bytes, CollOp op, Deferred& d) const override {
    if (g.size() < 2) return;
    Comm& c = comm(g);
    if (c.mpi) {
      ring_collective(g, me, bytes, op, true, &d);
      return;
    }
    Call& call = call_of(c, g, op, bytes);
    const Group& shadow = *c.shadow;
    const double entry = sg4::Engine::get_clock() + d.lead;
    const double wire =
        stand_in_bytes(call.choice.algo, op, bytes / nccl_payload_fraction(call.choice.proto), g.size());
    const double latency = call.choice.latency_us * 1e-6;
    const Runs runs = runs_for(call.choice.algo);
    const int rings = call.rings;  // NCCL's channels over the nodes' rails (rails.hpp)
    if (c.fluid) {
      // The ring posts its receive before its lead (fused_ring_steps); the others sleep lead and latency
      // first.
      const double now = sg4::Engine::get_clock();
      const double start = now + std::exchange(d.lead, 0.0) + latency;
      const double exit =
          c.fluid->meet(*c.shadow, me, {static_cast<int>(op), wire, static_cast<int>(runs) + 2 * (rings - 1)},
                        runs == Runs::Ring ? now : start, start, [&] {
                          FluidSchedule s;
                          schedule_of(c, runs, op, wire, rings, s);
                          return s;
                        });
      d.tail += std::max(0.0, exit - sg4::Engine::get_clock());
      bound(call, entry, d);
      record(c, me, call, entry, sg4::Engine::get_clock() + d.lead + d.tail);
      return;
    }
    if (runs == Runs::Ring) {
      d.lead += latency;
      if (rings > 1)
        rail_rings_run(shadow, me, wire, op, c.rails, rings, &d);
      else
        ring_collective(shadow, me, wire, op, true, &d);
    } else {
      if (const double wait = std::exchange(d.lead, 0.0) + latency; wait > 0)
        sg4::this_actor::sleep_for(wait);
      if (rings > 1 && op == CollOp::AllReduce)
        tree_all_reduce(shadow, me, wire, rail_trees(c, rings));
      else if (rings > 1)
        rail_rings_run(shadow, me, wire, op, c.rails, rings, nullptr);
      else
        tree_->run(shadow, me, wire, op);
    }
    bound(call, entry, d);
    record(c, me, call, entry, sg4::Engine::get_clock() + d.lead + d.tail);
  }

  // Every call over g is NCCL's ring (nccl.algo leaves it nothing else, or the topology) and the nodes have
  // no rails (one ring, not one per rail): the fused ring's transfers, one per member and edge, may then run
  // as a lone ring (Group::set_lone_ring), on the shadow.
  bool fused_ring(const Group& g) const override {
    if (g.size() < 2) return false;
    if (comm(g).mpi) return true;
    if (comm(g).rails.count > 1) return false;
    const NcclTuning& t = comm(g).tuning;
    for (NcclFunc f : {NcclFunc::AllReduce, NcclFunc::ReduceScatter, NcclFunc::AllGather})
      for (int a = 0; a < kNcclAlgos; ++a)
        for (int p = 0; p < kNcclProtos; ++p)
          if (a != static_cast<int>(NcclAlgo::Ring) && t.bandwidth[static_cast<int>(f)][a][p] > 0)
            return false;
    return true;
  }

  // One line per distinct call (function, size, ranks) and NCCL's choice for it, groups of the same shape
  // merged, by function and size.
  std::vector<std::string> run_notes() const override {
    struct Seen {
      const NcclChoice* choice = nullptr;
      long runs = 0;
      double sim_s = 0;
      bool bound = false;
    };
    std::map<std::tuple<CollOp, double, int, NcclAlgo, NcclProto, int, int>, Seen> seen;
    for (const auto& [name, comm] : comms_)
      for (const auto& [key, call] : comm.calls) {
        if (call.runs == 0) continue;
        const NcclChoice& c = call.choice;
        Seen& s = seen[{key.first, key.second, call.ranks, c.algo, c.proto, c.n_channels, call.rings}];
        s.choice = &c;
        s.runs += call.runs;
        s.sim_s += call.sim_s;
        s.bound = s.bound || call.bound > 0;
      }
    std::vector<std::string> out;
    for (const auto& [name, c] : comms_)
      if (c.fluid) {
        out.push_back(
            "auto: nothing but its calls sends, so each call's transfers (NCCL's algorithm as its stand-in "
            "runs "
            "it) are computed without SimGrid flows: max-min shares over the links, re-solved whenever a "
            "transfer starts or ends (the flows' instants; simulation.flows=always makes them flows)");
        break;
      }
    for (const auto& [name, c] : comms_)
      if (c.mpi) {
        out.push_back(
            "CPU ranks (device_kind cpu) communicate over MPI, not NCCL: the collective auto runs the fused "
            "ring there, with the routes' latencies");
        break;
      }
    std::set<std::string> nics;  // one line per distinct view of the NICs, of the communicators that ran
    for (const auto& [name, c] : comms_)
      for (const auto& [key, call] : c.calls)
        if (call.runs > 0 && !c.nics.empty() && nics.insert(c.nics).second) out.push_back(c.nics);
    for (const auto& [k, s] : seen) {
      const NcclChoice& c = *s.choice;
      out.push_back(fmt::format(
          "{} {} on {} ranks: NCCL {} {}/{}, {} channel{}{}{}; NCCL's estimate {} (latency {}), simulated "
          "{}{}{}",
          size_text(std::get<1>(k)), op_text(std::get<0>(k)), std::get<2>(k), version_->name,
          nccl_algo_name(c.algo), nccl_proto_name(c.proto), c.n_channels, c.n_channels == 1 ? "" : "s",
          runs_text(c.algo), rails_text(std::get<6>(k), runs_for(c.algo), std::get<0>(k)),
          units::format_time(c.time_us * 1e-6), units::format_time(c.latency_us * 1e-6),
          units::format_time(s.sim_s / s.runs), s.runs > 1 ? fmt::format(" (mean of {} calls)", s.runs) : "",
          s.bound
              ? fmt::format(", bound by NCCL's rated {} bandwidth",
                            c.proto == NcclProto::Simple ? nccl_algo_name(c.algo) : nccl_proto_name(c.proto))
              : ""));
    }
    return out;
  }

 private:
  struct Open {
    double entry = 0, exit = 0;
    int seen = 0;
  };
  struct Call {
    NcclChoice choice;
    int ranks = 0;
    long runs = 0;     // calls every member finished
    double sim_s = 0;  // their simulated times summed (the last member's end after the last member's start)
    long bound = 0;    // member calls NCCL's rating made later than the links (nccl_rated)
    int rings = 1;     // its channels over the nodes' rails: min(channels, rails) rings or tree pairs
  };
  struct Comm {
    NcclTopo topo;
    NcclTuning tuning;
    bool mpi = false;                   // a member is a CPU device (MPI, not NCCL): the fused ring, as `ring`
    std::unique_ptr<Group> shadow;      // the group's members over routes without latency
    std::vector<long> started;          // per member: the calls it started
    std::unique_ptr<FluidCalls> fluid;  // set where its calls are computed without flows (the head comment)
    Rails rails;                        // the nodes' rails over the shadow (rails.hpp)
    std::string nics;                   // the NICs NCCL's model saw (nccl_nics_note), "" on one node
    std::map<int, TreeLayout> trees;    // by rings: the node-aware trees, a pair per rail
    std::map<std::pair<CollOp, double>, Call> calls;  // by operation and bytes
    std::map<long, Open> open;                        // calls some member has not finished, by sequence
  };
  // The group's communicator (by group name), made on first use; the last one looked up is kept at hand.
  Comm& comm(const Group& g) const {
    if (&g == last_group_) return *last_comm_;  // every call of a point after its first: kept small
    return comm_of(g);
  }
  // The lookup, and the communicator's making on first use: out of line, so that the calls above do not
  // carry its frame (kilobytes of each rank's stack).
  [[gnu::noinline]] Comm& comm_of(const Group& g) const {
    last_group_ = &g;
    auto it = comms_.find(g.name());
    if (it != comms_.end()) return *(last_comm_ = &it->second);
    Comm& c = *(last_comm_ = &comms_[g.name()]);
    for (int i = 0; i < g.size() && !c.mpi; ++i) {
      auto cpu = platform_.gpu.find(g.host(i)->get_name());
      c.mpi = cpu != platform_.gpu.end() && cpu->second.cpu;
    }
    if (c.mpi) return c;
    const NcclPlatform np = group_platform(g, platform_);
    c.topo = nccl_topo(np, *version_);
    nccl_limit_channels(c.topo, *version_, overrides_);
    c.nics = nccl_nics_note(np, platform_);
    c.tuning = nccl_tune(c.topo, *version_, overrides_);
    std::vector<sg4::Host*> hosts;
    std::vector<int> nodes;
    for (int i = 0; i < g.size(); ++i) {
      hosts.push_back(g.host(i));
      nodes.push_back(g.node_of(i));
    }
    c.shadow = std::make_unique<Group>(g.name() + "/auto", hosts, nodes, LatencyModel::none());
    c.rails = group_rails(*c.shadow);
    if (g.lone_ring()) c.shadow->set_lone_ring(lone_ring_bandwidths(hosts));
    c.started.assign(static_cast<size_t>(g.size()), 0);
    if (g.only_traffic() && !g.lone_ring()) set_fluid(c, hosts);
    return c;
  }

  // The node-aware trees over the rails' rings 0 .. rings-1 (a pair per rail: each pair's heads leave a node
  // through its rail), made once per count.
  static const TreeLayout& rail_trees(Comm& c, int rings) {
    auto it = c.trees.find(rings);
    if (it != c.trees.end()) return it->second;
    const std::vector<std::vector<int>> orders(c.rails.order.begin(), c.rails.order.begin() + rings);
    return c.trees.emplace(rings, tree_layout(*c.shadow, orders)).first->second;
  }

  // The schedule a stand-in runs for one call over the shadow, as `rings` rings or tree pairs; false where it
  // has none.
  bool schedule_of(Comm& c, Runs runs, CollOp op, double wire, int rings, FluidSchedule& out) const {
    if (rings > 1) {
      out = runs == Runs::Tree && op == CollOp::AllReduce
                ? tree_all_reduce_schedule(*c.shadow, wire, rail_trees(c, rings))
                : rail_rings_schedule(*c.shadow, wire, op, c.rails, rings);
      return true;
    }
    if (runs == Runs::Ring) {
      out = ring_schedule(*c.shadow, wire, op);
      return true;
    }
    return tree_->schedule(*c.shadow, wire, op, out);
  }

  // The fluid model for c where every stand-in its tuning may pick (an algorithm with a bandwidth for some
  // function and protocol) has an admitted schedule and no call can overlap the next on a link.
  void set_fluid(Comm& c, const std::vector<sg4::Host*>& hosts) const {
    auto calls = std::make_unique<FluidCalls>(hosts);
    std::vector<FluidSchedule> candidates;
    for (CollOp op : {CollOp::AllReduce, CollOp::ReduceScatter, CollOp::AllGather}) {
      std::set<Runs> runs;
      for (int a = 0; a < kNcclAlgos; ++a)
        for (int p = 0; p < kNcclProtos; ++p)
          if (c.tuning.bandwidth[static_cast<int>(nccl_func_of(op))][a][p] > 0)
            runs.insert(runs_for(static_cast<NcclAlgo>(a)));
      // With rails, one ring or pair of trees (a call of one channel) and one per rail: ring q's transfers
      // are the same whatever the count, so the most rings hold every route of fewer.
      for (Runs r : runs)
        for (int rings : std::set<int>{1, c.rails.count}) {
          FluidSchedule s;
          if (!schedule_of(c, r, op, 1 << 20, rings, s) || !calls->net().admits(s)) return;
          candidates.push_back(std::move(s));
        }
    }
    if (!fluid_cross_call_safe(calls->net(), candidates)) return;
    c.fluid = std::move(calls);
  }

  Call& call_of(Comm& c, const Group& g, CollOp op, double bytes) const {
    auto it = c.calls.find({op, bytes});
    if (it != c.calls.end()) return it->second;
    Call& call = c.calls[{op, bytes}];
    call.choice =
        nccl_choose(nccl_func_of(op), static_cast<std::uint64_t>(bytes), c.tuning, c.topo, *version_);
    call.ranks = g.size();
    call.rings = rail_rings(c.rails, call.choice.n_channels);
    return call;
  }

  // NCCL's rating bounds the call (nccl_rated): the member ends no earlier than its entry plus NCCL's
  // estimate.
  static void bound(Call& call, double entry, Deferred& d) {
    if (!nccl_rated(call.choice)) return;
    const double floor = entry + call.choice.time_us * 1e-6;
    const double end = sg4::Engine::get_clock() + d.lead + d.tail;
    if (floor <= end) return;
    d.tail += floor - end;
    ++call.bound;
  }

  // Every member's start and end of one call (the members call in the same order: SPMD); the call's time is
  // the last end after the last start, as `vitsim collective` times a size.
  void record(Comm& c, int me, Call& call, double entry, double exit) const {
    const long seq = c.started[static_cast<size_t>(me)]++;
    Open& o = c.open[seq];
    o.entry = std::max(o.entry, entry);
    o.exit = std::max(o.exit, exit);
    if (++o.seen < call.ranks) return;
    ++call.runs;
    call.sim_s += o.exit - o.entry;
    c.open.erase(seq);
  }

  const NcclVersion* version_ = &nccl_newest_version();
  NcclOverrides overrides_;
  PlatformNccl platform_;
  std::unique_ptr<Collective> tree_ = make_collective("tree");
  mutable std::map<std::string, Comm> comms_;
  mutable const Group* last_group_ = nullptr;
  mutable Comm* last_comm_ = nullptr;
};

}  // namespace

VITSIM_REGISTER_COLLECTIVE(
    "auto", Nccl, std::nullopt,
    "NCCL's tuner picks per call: algorithm, protocol and channels (nccl.version, nccl.algo, nccl.proto)",
    "per call NCCL's choice, run by the closest simulated algorithm with the protocol's wire "
    "bytes and NCCL's own latency (Ring, PAT: `ring`; Tree: `tree`; NVLS: the switch reducing, S per GPU "
    "each way; NVLSTree, CollNet: `tree`'s bytes), no faster than NCCL rates LL, LL128 and in-switch "
    "reduction");
}  // namespace vitsim::sim
