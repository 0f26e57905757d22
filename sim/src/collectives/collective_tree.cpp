// Double binary tree all-reduce in the manner of NCCL, node-aware: inside each node the GPUs form a chain,
// and across nodes the chains' heads form a binary tree over the nodes (one GPU per node takes part in it).
// The message is split in two halves, each reduced up and broadcast down its own tree; the second tree is the
// first mirrored (nodes in reverse order, each node's chain reversed), so a leaf node of one is an inner node
// of the other, and the two trees leave a node through different GPUs.
//
// Pipelined: in each phase (reduce up, broadcast down) every edge carries its half at once; the phase then
// waits for the pipeline's fill, the largest sum of route latencies on a path from a leaf to the root of
// either tree. On N nodes of G GPUs with identical links: t = 2 [(G-1) a_node + depth(N) a_net] + 2 x the
// flows' time, where depth(N) is the binary tree's depth (floor log2 N) and the flows' time is S / B_net once
// a node receives two halves (N >= 3: an inner node's two children), S / (2 B_net) for N = 2. With one GPU
// per node this is the node-level double binary tree, 2 S/B + 2 depth a; on one node, a chain: 2 S/B + 2
// (G-1) a (G >= 3). Reduce-scatter and all-gather have no tree algorithm in NCCL; they run as fused rings.
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "collectives/rails.hpp"

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {
namespace {

int token = 0;

// The node-aware tree over `order` (members in node-major order, nodes in the order given): a chain per node
// (its first member is the node's head), and the heads in a heap-ordered binary tree over node positions.
NodeTree node_aware_tree(const Group& g, const std::vector<int>& order) {
  NodeTree t;
  t.parent.assign(g.size(), -1);
  t.children.assign(g.size(), {});
  std::vector<std::vector<int>> runs;  // members of each node, in order
  for (int m : order) {
    if (runs.empty() || g.node_of(runs.back().front()) != g.node_of(m)) runs.emplace_back();
    runs.back().push_back(m);
  }
  for (size_t j = 0; j < runs.size(); ++j) {
    const std::vector<int>& run = runs[j];
    if (j > 0) t.parent[run.front()] = runs[(j - 1) / 2].front();
    for (size_t k = 1; k < run.size(); ++k) t.parent[run[k]] = run[k - 1];
  }
  for (int m = 0; m < g.size(); ++m)
    if (t.parent[m] >= 0) t.children[t.parent[m]].push_back(m);
  return t;
}

class DoubleBinaryTree : public Collective {
 public:
  std::string name() const override { return "tree"; }
  void run(const Group& g, int me, double bytes, CollOp op) const override {
    const int n = g.size();
    if (n < 2) return;
    if (op != CollOp::AllReduce) {
      ring_collective(g, me, bytes, op, true);
      return;
    }
    tree_all_reduce(g, me, bytes, layout(g));
  }

  // run()'s two phases as stages: every edge of both trees up (its half), a barrier and the fill, then down.
  bool schedule(const Group& g, double bytes, CollOp op, FluidSchedule& out) const override {
    const int n = g.size();
    if (n < 2 || op != CollOp::AllReduce) {
      out = ring_schedule(g, bytes, op);
      return true;
    }
    out = tree_all_reduce_schedule(g, bytes, layout(g));
    return true;
  }

 private:
  const TreeLayout& layout(const Group& g) const {
    auto it = cache_.find(g.name());
    if (it != cache_.end()) return *it->second;
    // Node-major order: nodes in the order their first member appears, members in group order.
    std::map<int, std::vector<int>> members;
    std::vector<int> nodes;
    for (int i = 0; i < g.size(); ++i) {
      if (!members.count(g.node_of(i))) nodes.push_back(g.node_of(i));
      members[g.node_of(i)].push_back(i);
    }
    std::vector<int> order;
    for (int node : nodes) order.insert(order.end(), members[node].begin(), members[node].end());
    return *(cache_[g.name()] = std::make_unique<TreeLayout>(tree_layout(g, {order})));
  }

  mutable std::map<std::string, std::unique_ptr<TreeLayout>> cache_;
};

}  // namespace

TreeLayout tree_layout(const Group& g, const std::vector<std::vector<int>>& orders) {
  TreeLayout L;
  for (const std::vector<int>& order : orders) {
    L.trees.push_back(node_aware_tree(g, order));
    L.trees.push_back(node_aware_tree(g, std::vector<int>(order.rbegin(), order.rend())));
  }
  for (const NodeTree& t : L.trees) {
    std::vector<double> to_root(g.size(), -1);
    for (int m = 0; m < g.size(); ++m) {
      // Climb to the first member whose latency to the root is known, then fill the path back down.
      std::vector<int> path;
      int x = m;
      while (x >= 0 && to_root[x] < 0) path.push_back(x), x = t.parent[x];
      double acc = x >= 0 ? to_root[x] : 0;
      for (auto p = path.rbegin(); p != path.rend(); ++p) {
        if (t.parent[*p] >= 0) acc += g.latency(*p, t.parent[*p]);
        to_root[*p] = acc;
      }
      L.fill_s = std::max(L.fill_s, to_root[m]);
    }
  }
  return L;
}

// Pipelined: in each phase (reduce up, broadcast down) every edge of every tree carries its share at once;
// the phase then waits for the pipeline's fill.
void tree_all_reduce(const Group& g, int me, double bytes, const TreeLayout& L) {
  const double share = bytes / static_cast<double>(L.trees.size());
  for (int phase = 0; phase < 2; ++phase) {  // 0: reduce up, 1: broadcast down
    std::vector<int> from, to;
    for (const NodeTree& t : L.trees) {
      const int parent = t.parent[me];
      const std::vector<int>& children = t.children[me];
      if (phase == 0) {
        from.insert(from.end(), children.begin(), children.end());
        if (parent >= 0) to.push_back(parent);
      } else {
        if (parent >= 0) from.push_back(parent);
        to.insert(to.end(), children.begin(), children.end());
      }
    }
    std::vector<void*> sink(from.size(), nullptr);
    std::vector<sg4::CommPtr> comms;
    for (size_t k = 0; k < from.size(); ++k) comms.push_back(g.mailbox(from[k], me)->get_async(&sink[k]));
    for (int dst : to) comms.push_back(g.mailbox(me, dst)->put_async(&token, static_cast<uint64_t>(share)));
    for (auto& c : comms) c->wait();
    // Every edge's flow is done; the pipeline's fill is the deepest path's latency.
    g.barrier()->wait();
    if (L.fill_s > 0) sg4::this_actor::sleep_for(L.fill_s);
  }
}

FluidSchedule tree_all_reduce_schedule(const Group& g, double bytes, const TreeLayout& L) {
  const int n = g.size();
  // the bytes tree_all_reduce puts
  const double share =
      static_cast<double>(static_cast<uint64_t>(bytes / static_cast<double>(L.trees.size())));
  FluidSchedule out;
  out.stages = {one_set_stage(n, L.fill_s), one_set_stage(n, L.fill_s)};
  for (const NodeTree& t : L.trees)
    for (int m = 0; m < n; ++m)
      if (const int parent = t.parent[m]; parent >= 0) {
        out.stages[0].edges.push_back({m, parent, share, 0.0});
        out.stages[1].edges.push_back({parent, m, share, 0.0});
      }
  return out;
}

VITSIM_REGISTER_COLLECTIVE(
    "tree", DoubleBinaryTree, NcclAlgo::Tree,
    "NCCL Tree, Simple protocol (all-reduce; reduce-scatter and all-gather: NCCL Ring)",
    "double binary tree, node-aware: a chain of the GPUs inside each node, the chains' heads in a binary "
    "tree "
    "over the nodes, the second tree the first mirrored; pipelined, per phase the flows' time plus the "
    "deepest "
    "leaf-to-root latency: on N >= 3 nodes of G GPUs 2 [(G-1) a_node + depth(N) a_net] + 2 S/B_net");
}  // namespace vitsim::sim
