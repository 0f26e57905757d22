// Hierarchical all-reduce: intra-node reduce to a leader (ring reduce-scatter, then each GPU sends its
// reduced chunk to the leader), inter-node ring all-reduce between the leaders, intra-node broadcast
// (the leader scatters chunks, then a ring all-gather). Every stage is a fused ring or direct flows over
// the platform's links. Reduce-scatter and all-gather run as fused rings over the whole group.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>

#include "collectives/transfers.hpp"

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {
namespace {

// The group's members by node (node -> member indices in group order).
std::map<int, std::vector<int>> members_by_node(const Group& g) {
  std::map<int, std::vector<int>> members;
  for (int i = 0; i < g.size(); ++i) members[g.node_of(i)].push_back(i);
  return members;
}

// The members of `g` on one node, as a group of their own.
std::unique_ptr<Group> node_group(const Group& g, int node, const std::vector<sg4::Host*>& hosts) {
  return std::make_unique<Group>(fmt::format("{}/n{}", g.name(), node), hosts,
                                 std::vector<int>(hosts.size(), node), g.latency_model());
}

// A collective's layout of `g`, built from its members by node on first use and cached by group name.
template <typename Layout, typename Build>
const Layout& cached_layout(std::map<std::string, std::unique_ptr<Layout>>& cache, const Group& g,
                            Build build) {
  auto it = cache.find(g.name());
  if (it != cache.end()) return *it->second;
  return *(cache[g.name()] = build(members_by_node(g)));
}

class Hierarchical : public Collective {
 public:
  std::string name() const override { return "hierarchical"; }

  void run(const Group& g, int me, double bytes, CollOp op) const override {
    if (op != CollOp::AllReduce || g.size() < 2) {
      ring_collective(g, me, bytes, op, true);
      return;
    }
    const Layout& L = layout(g);
    const int node = g.node_of(me);
    const Group& local = *L.local.at(node);
    const int lme = L.local_index[me];
    const int g_local = local.size();
    const bool leader = lme == 0;
    const double chunk = bytes / g_local;

    // 1. intra-node reduce: reduce-scatter, then gather the chunks at the leader.
    ring_phase(local, lme, bytes, true);
    gather_or_scatter(local, lme, chunk, /*to_leader=*/true);
    // 2. inter-node ring all-reduce between leaders.
    if (leader && L.leaders->size() > 1)
      ring_collective(*L.leaders, L.leader_index.at(node), bytes, CollOp::AllReduce, true);
    // 3. intra-node broadcast: scatter from the leader, then all-gather.
    gather_or_scatter(local, lme, chunk, /*to_leader=*/false);
    ring_phase(local, lme, bytes, true);
  }

  // run()'s stages: the rings inside nodes, the gather at each node's leader (a barrier per node), the
  // leaders' ring (one barrier: its members' members wait with them, which moves no instant: a member's
  // receive of the scatter is posted before its leader's send either way), the scatter, the rings again.
  bool schedule(const Group& g, double bytes, CollOp op, FluidSchedule& out) const override {
    const int n = g.size();
    if (op != CollOp::AllReduce || n < 2) {
      out = ring_schedule(g, bytes, op);
      return true;
    }
    const Layout& L = layout(g);
    const int nodes = static_cast<int>(L.members.size());
    auto per_node = [&] {
      FluidStage st;
      st.set.assign(n, 0);
      st.after.assign(nodes, 0.0);
      return st;
    };
    FluidStage reduce = per_node(), gather = per_node(), scatter = per_node(), all_gather = per_node();
    int k = 0;
    for (const auto& [node, ms] : L.members) {
      const Group& local = *L.local.at(node);
      const int G = static_cast<int>(ms.size());
      const double chunk = static_cast<double>(static_cast<uint64_t>(bytes / G));  // the bytes put
      double scatter_lat = 0;  // the leader waits for its farthest member's latency, then sends to all
      for (int i = 1; i < G; ++i) scatter_lat = std::max(scatter_lat, local.latency(0, i));
      for (FluidStage* st : {&reduce, &gather, &scatter, &all_gather})
        for (int m : ms) st->set[m] = k;
      add_ring_edges(reduce, local, ms, bytes / G, G - 1, k);
      for (int i = 1; i < G; ++i) {
        gather.edges.push_back({ms[i], ms[0], chunk, local.latency(i, 0)});
        scatter.edges.push_back({ms[0], ms[i], chunk, scatter_lat});
      }
      add_ring_edges(all_gather, local, ms, bytes / G, G - 1, k);
      ++k;
    }
    FluidStage leaders = one_set_stage(n, 0.0);
    if (L.leaders->size() > 1) {
      std::vector<int> heads;
      for (const auto& [node, ms] : L.members) heads.push_back(ms.front());
      add_ring_edges(leaders, *L.leaders, heads, bytes / L.leaders->size(), 2 * (L.leaders->size() - 1), 0);
    }
    out.stages = {std::move(reduce), std::move(gather), std::move(leaders), std::move(scatter),
                  std::move(all_gather)};
    return true;
  }

 private:
  struct Layout {
    std::map<int, std::vector<int>> members;      // node -> its members (indices into the group)
    std::map<int, std::unique_ptr<Group>> local;  // node -> its members
    std::unique_ptr<Group> leaders;
    std::map<int, int> leader_index;  // node -> index in leaders
    std::vector<int> local_index;     // member -> index in its node's group
  };

  static void gather_or_scatter(const Group& local, int lme, double chunk, bool to_leader) {
    static int token = 0;
    const int n = local.size();
    if (n < 2) return;
    if (lme != 0) {
      if (to_leader) {
        if (double lat = local.latency(lme, 0); lat > 0) sg4::this_actor::sleep_for(lat);
        local.mailbox(lme, 0)->put(&token, static_cast<uint64_t>(chunk));
      } else {
        local.mailbox(0, lme)->get<int>();
      }
      return;
    }
    std::vector<sg4::CommPtr> comms;
    std::vector<void*> sink(n, nullptr);
    if (!to_leader) {
      double lat = 0;
      for (int i = 1; i < n; ++i) lat = std::max(lat, local.latency(0, i));
      if (lat > 0) sg4::this_actor::sleep_for(lat);
    }
    for (int i = 1; i < n; ++i)
      comms.push_back(to_leader ? local.mailbox(i, 0)->get_async(&sink[i])
                                : local.mailbox(0, i)->put_async(&token, static_cast<uint64_t>(chunk)));
    for (auto& c : comms) c->wait();
  }

  const Layout& layout(const Group& g) const {
    return cached_layout(cache_, g, [&](const auto& members) { return build(g, members); });
  }

  static std::unique_ptr<Layout> build(const Group& g, const std::map<int, std::vector<int>>& members) {
    auto L = std::make_unique<Layout>();
    L->members = members;
    L->local_index.assign(g.size(), 0);
    std::vector<sg4::Host*> leader_hosts;
    std::vector<int> leader_nodes;
    for (const auto& [node, ms] : members) {
      std::vector<sg4::Host*> hosts;
      for (size_t k = 0; k < ms.size(); ++k) {
        hosts.push_back(g.host(ms[k]));
        L->local_index[ms[k]] = static_cast<int>(k);
      }
      L->local[node] = node_group(g, node, hosts);
      L->leader_index[node] = static_cast<int>(leader_hosts.size());
      leader_hosts.push_back(hosts.front());
      leader_nodes.push_back(node);
    }
    L->leaders =
        std::make_unique<Group>(g.name() + "/leaders", leader_hosts, leader_nodes, g.latency_model());
    return L;
  }

  mutable std::map<std::string, std::unique_ptr<Layout>> cache_;
};

// "rail": NCCL's hierarchical shape on rail-optimised clusters. Inside each node a ring reduce-scatter leaves
// local rank k with 1/G of the sum; across nodes, local rank k of every node all-reduces that 1/G in a ring
// of its own (rail k: GPU k's NIC to GPU k's NIC, the rails run at once); inside the node a ring all-gather.
// On identical links: t = [(G-1) a_node + (G-1)/G S/B_node] x 2 + 2(N-1) a_rail + 2(N-1)/N (S/G)/B_rail.
// Reduce-scatter and all-gather run their half of each stage. Nodes with different GPU counts:
// "hierarchical".
class Rail : public Collective {
 public:
  std::string name() const override { return "rail"; }

  void run(const Group& g, int me, double bytes, CollOp op) const override {
    const Layout& L = layout(g);
    if (!L.even || L.nodes < 2) {
      if (L.nodes < 2)
        ring_collective(g, me, bytes, op, true);
      else
        fallback_.run(g, me, bytes, op);
      return;
    }
    const Group& local = *L.local.at(g.node_of(me));
    const Group& rail = *L.rails.at(L.local_index[me]);
    const int lme = L.local_index[me];
    const int rme = L.rail_index[me];
    const double part = bytes / local.size();
    if (op == CollOp::AllReduce || op == CollOp::ReduceScatter) ring_phase(local, lme, bytes, true);
    ring_collective(rail, rme, part, op, true);
    if (op == CollOp::AllReduce || op == CollOp::AllGather) ring_phase(local, lme, bytes, true);
  }

  // run()'s stages: the rings inside nodes (a barrier per node), the rings per rail (a barrier per rail), the
  // rings inside nodes again, as the operation has them; a single node: the ring; uneven nodes: none
  // (hierarchical runs them, as flows).
  bool schedule(const Group& g, double bytes, CollOp op, FluidSchedule& out) const override {
    const Layout& L = layout(g);
    if (L.nodes < 2) {
      out = ring_schedule(g, bytes, op);
      return true;
    }
    if (!L.even) return false;
    const int n = g.size();
    const int per = static_cast<int>(L.rails.size());
    auto local_stage = [&] {
      FluidStage st;
      st.set.assign(n, 0);
      st.after.assign(L.nodes, 0.0);
      int k = 0;
      for (const auto& [node, ms] : L.members) {
        for (int m : ms) st.set[m] = k;
        add_ring_edges(st, *L.local.at(node), ms, bytes / per, per - 1, k);
        ++k;
      }
      return st;
    };
    FluidStage rail;
    rail.set.assign(n, 0);
    rail.after.assign(per, 0.0);
    const int steps = op == CollOp::AllReduce ? 2 * (L.nodes - 1) : L.nodes - 1;
    for (int k = 0; k < per; ++k) {
      for (int m : L.rail_members[k]) rail.set[m] = k;
      add_ring_edges(rail, *L.rails[k], L.rail_members[k], bytes / per / L.nodes, steps, k);
    }
    out.stages.clear();
    if (op == CollOp::AllReduce || op == CollOp::ReduceScatter) out.stages.push_back(local_stage());
    out.stages.push_back(std::move(rail));
    if (op == CollOp::AllReduce || op == CollOp::AllGather) out.stages.push_back(local_stage());
    return true;
  }

 private:
  struct Layout {
    int nodes = 0;
    bool even = true;                             // every node holds the same number of the group's ranks
    std::map<int, std::unique_ptr<Group>> local;  // node -> its members in group order
    std::vector<std::unique_ptr<Group>> rails;    // local index k -> the k-th member of every node
    std::map<int, std::vector<int>> members;      // node -> its members (indices into the group)
    std::vector<std::vector<int>> rail_members;   // local index k -> its rail's members, in rail order
    std::vector<int> local_index, rail_index;
  };

  const Layout& layout(const Group& g) const {
    return cached_layout(cache_, g, [&](const auto& members) { return build(g, members); });
  }

  static std::unique_ptr<Layout> build(const Group& g, const std::map<int, std::vector<int>>& members) {
    auto L = std::make_unique<Layout>();
    L->nodes = static_cast<int>(members.size());
    L->local_index.assign(g.size(), 0);
    L->rail_index.assign(g.size(), 0);
    const size_t per = members.begin()->second.size();
    for (const auto& [node, ms] : members) L->even = L->even && ms.size() == per;
    L->members = members;
    if (L->even) {
      L->rail_members.assign(per, {});
      for (const auto& [node, ms] : members)
        for (size_t k = 0; k < ms.size(); ++k) L->rail_members[k].push_back(ms[k]);
      std::vector<std::vector<sg4::Host*>> rail_hosts(per);
      std::vector<std::vector<int>> rail_nodes(per);
      for (const auto& [node, ms] : members) {
        std::vector<sg4::Host*> hosts;
        for (size_t k = 0; k < ms.size(); ++k) {
          hosts.push_back(g.host(ms[k]));
          L->local_index[ms[k]] = static_cast<int>(k);
          L->rail_index[ms[k]] = static_cast<int>(rail_hosts[k].size());
          rail_hosts[k].push_back(g.host(ms[k]));
          rail_nodes[k].push_back(node);
        }
        L->local[node] = node_group(g, node, hosts);
      }
      for (size_t k = 0; k < per; ++k)
        L->rails.push_back(std::make_unique<Group>(fmt::format("{}/rail{}", g.name(), k), rail_hosts[k],
                                                   rail_nodes[k], g.latency_model()));
    }
    return L;
  }

  Hierarchical fallback_;
  mutable std::map<std::string, std::unique_ptr<Layout>> cache_;
};

// True when the group's nodes reach each other over rails (per-GPU NICs, a rail-optimised platform): the
// first and the last GPU of the first node reach the first and last GPU of the second node without sharing a
// link (a shared NIC, or the cluster layout's one NIC link per node, is on both routes).
bool on_rails(const Group& g, const std::map<int, std::vector<int>>& members) {
  if (members.size() < 2) return false;
  const std::vector<int>& a = members.begin()->second;
  const std::vector<int>& b = std::next(members.begin())->second;
  if (a.size() < 2 || b.size() < 2) return false;
  std::vector<sg4::Link*> first, last;
  double ignored = 0;
  g.host(a.front())->route_to(g.host(b.front()), first, &ignored);
  g.host(a.back())->route_to(g.host(b.back()), last, &ignored);
  for (const sg4::Link* l : first)
    if (std::find(last.begin(), last.end(), l) != last.end()) return false;
  return true;
}

// "topology": the rail collective when the group spans several nodes with the same number of GPUs on each,
// more than one, and the platform's NICs are rails (on_rails); hierarchical when it spans several nodes with
// more than one GPU on some node; else ring. A choice by topology alone, for bandwidth-bound messages (a ring
// per rail on rail-optimised clusters, a node-aware ring on PCIe nodes joined by a slower network): vitsim's
// default before it modelled NCCL's tuner ("auto", collective_nccl.cpp), which also weighs size and latency.
class ByTopology : public Collective {
 public:
  std::string name() const override { return "topology"; }
  void run(const Group& g, int me, double bytes, CollOp op) const override {
    switch (choice(g)) {
      case Choice::Rail:
        rail_.run(g, me, bytes, op);
        break;
      case Choice::Hierarchical:
        hier_.run(g, me, bytes, op);
        break;
      case Choice::Ring:
        ring_collective(g, me, bytes, op, true);
        break;
    }
  }
  void run_deferred(const Group& g, int me, double bytes, CollOp op, Deferred& d) const override {
    if (choice(g) == Choice::Ring)
      ring_collective(g, me, bytes, op, true, &d);
    else
      Collective::run_deferred(g, me, bytes, op, d);
  }
  bool fused_ring(const Group& g) const override { return choice(g) == Choice::Ring; }
  bool schedule(const Group& g, double bytes, CollOp op, FluidSchedule& out) const override {
    switch (choice(g)) {
      case Choice::Rail:
        return rail_.schedule(g, bytes, op, out);
      case Choice::Hierarchical:
        return hier_.schedule(g, bytes, op, out);
      case Choice::Ring:
        break;
    }
    out = ring_schedule(g, bytes, op);
    return true;
  }

 private:
  enum class Choice { Ring, Hierarchical, Rail };
  // Decided once per group (by its name).
  Choice choice(const Group& g) const {
    auto it = choice_.find(g.name());
    if (it == choice_.end()) {
      const std::map<int, std::vector<int>> members = members_by_node(g);
      bool multi = false, even = true;
      for (const auto& [n, ms] : members) {
        multi |= ms.size() > 1;
        even = even && ms.size() == members.begin()->second.size();
      }
      const Choice c = members.size() > 1 && multi && even && on_rails(g, members) ? Choice::Rail
                       : members.size() > 1 && multi                               ? Choice::Hierarchical
                                                                                   : Choice::Ring;
      it = choice_.emplace(g.name(), c).first;
    }
    return it->second;
  }
  Hierarchical hier_;
  Rail rail_;
  mutable std::map<std::string, Choice> choice_;
};

}  // namespace
VITSIM_REGISTER_COLLECTIVE("hierarchical", Hierarchical, std::nullopt,
                           "no NCCL algorithm: a leader per node, Simple protocol",
                           "intra-node reduce to a leader, a ring all-reduce between the node leaders, "
                           "intra-node broadcast; reduce-scatter and all-gather as the ring");
VITSIM_REGISTER_COLLECTIVE(
    "topology", ByTopology, std::nullopt, "no NCCL algorithm: rail, hierarchical or ring by topology alone",
    "`rail` when every node holds the same number G > 1 of the group's GPUs and the "
    "NICs are rails (a node's first and last GPU reach another node's without sharing "
    "a link); else `hierarchical` across multi-GPU nodes; else `ring`: vitsim's default "
    "before NCCL's tuner was modelled");
VITSIM_REGISTER_COLLECTIVE(
    "rail", Rail, std::nullopt,
    "NCCL's ring per rail on rail-optimised clusters, Simple protocol (auto's stand-in "
    "for NVLSTree and CollNet, without their in-network reduction)",
    "intra-node ring reduce-scatter, a ring per rail across nodes on 1/G of the data, "
    "intra-node ring all-gather; `hierarchical` where nodes hold different GPU counts");
}  // namespace vitsim::sim
