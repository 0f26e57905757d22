#pragma once
// NCCL's channels over a node's NICs (issue 36), for the `auto` collective's stand-ins
// (collective_nccl.cpp). NCCL's topology search (src/graph/search.cc, "NET n -> GPU a -> .. -> GPU x -> NET
// n"; the search starts channel c at NIC c of the node's list, ncclTopoSearchRecNet) gives every channel's
// ring and tree a NIC of its own, the same NIC index on every node, so its channels together use every rail.
// Where a node's NICs are links of their own (a rail-optimised platform: one link per NIC, GPU k of G on rail
// k x R / G), one ring over the group would cross every node through one NIC; here the call's bytes are
// spread over k = min(channels, R) rings (or pairs of trees), ring r leaving each node at the first GPU of
// rail r. Where a node's NICs are one link (every other platform) a group has one rail and nothing here runs.
#include <vector>

#include "collectives/transfers.hpp"

namespace vitsim::sim {

// A group's rails, from its routes: a member's rail is the links its route to another node crosses that
// neither its route inside its node nor every other member's route to that node crosses (its NIC).
struct Rails {
  int count = 1;  // R: rails on every node of the group; 1: none (a node's NICs are one link, one GPU a node)
  // Per rail r: the members in the order of ring r, node by node in the group's order, each node's members
  // turned so that the ring enters the node just after the first GPU of rail r and leaves it at that GPU
  // (both on rail r where the rail has two GPUs or more; with one GPU a rail it enters at rail r + 1's).
  std::vector<std::vector<int>> order;
  std::vector<std::vector<int>> position;  // per rail: member -> its index in order[r]
  std::vector<double> max_latency;         // [k]: the largest route latency between neighbours of rings < k
};

// The group's rails: count 1 unless the group spans two nodes or more, each node's members are contiguous in
// the group's order, and every node's members reach another node through two or more NIC links, each rail's
// members side by side (the first node without rails ends the search: the cost of a platform without them is
// two routes per GPU of one node).
Rails group_rails(const Group& g);
// The rings (or tree pairs) a call of `channels` channels runs as: min(channels, R), at least 1.
int rail_rings(const Rails& r, int channels);

// k >= 2 rings, ring q over r.order[q] (rails 0 .. k-1), each the fused ring (ring_collective's) on bytes /
// k, all at once: a member puts one transfer per ring, each after its route latency, then the rings meet at
// one barrier and the trailing latencies of the slowest ring are owed (with `d`, as fused_ring_steps does).
void rail_rings_run(const Group& g, int me, double bytes, CollOp op, const Rails& r, int k, Deferred* d);
// rail_rings_run as a FluidSchedule: one stage, every ring's transfers, one set.
FluidSchedule rail_rings_schedule(const Group& g, double bytes, CollOp op, const Rails& r, int k);

// The node-aware double binary trees (collective_tree.cpp) over several orders: per order the tree over it
// and the tree over it reversed (its mirror), each tree carrying bytes / trees; the pipeline's fill is the
// deepest leaf-to-root latency over every tree.
struct NodeTree {
  std::vector<int> parent;  // -1 at the root
  std::vector<std::vector<int>> children;
};
struct TreeLayout {
  std::vector<NodeTree> trees;
  double fill_s = 0;
};
TreeLayout tree_layout(const Group& g, const std::vector<std::vector<int>>& orders);
// The trees' all-reduce: reduce up, a barrier and the fill, broadcast down, a barrier and the fill.
void tree_all_reduce(const Group& g, int me, double bytes, const TreeLayout& L);
FluidSchedule tree_all_reduce_schedule(const Group& g, double bytes, const TreeLayout& L);

}  // namespace vitsim::sim
