#include "vitsim/core/formats/placement.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "vitsim/core/base/error.hpp"

namespace vitsim {

namespace {

// Indices in facts.nodes of the nodes ranks fill, in order: cluster.hosts' order, else the file's.
std::vector<int> node_order(const Scenario& s, const PlatformFacts& facts) {
  std::vector<int> order;
  if (s.cluster.hosts.empty()) {
    for (size_t i = 0; i < facts.nodes.size(); ++i) order.push_back(static_cast<int>(i));
    return order;
  }
  for (const auto& name : s.cluster.hosts) {
    auto it = std::find_if(facts.nodes.begin(), facts.nodes.end(),
                           [&](const NodeFacts& n) { return n.name == name; });
    if (it == facts.nodes.end()) {
      std::string valid;
      for (const auto& n : facts.nodes) valid += (valid.empty() ? "" : ", ") + n.name;
      throw Error(s.origin_of("cluster.hosts"),
                  fmt::format("cluster.hosts: no node '{}' in {}; nodes: {}", name, facts.path, valid));
    }
    order.push_back(static_cast<int>(it - facts.nodes.begin()));
  }
  return order;
}

}  // namespace

RankPlacement place_ranks(const Scenario& s, const PlatformFacts& facts) {
  return place_ranks(s, facts, s.ranks());
}

RankPlacement place_ranks(const Scenario& s, const PlatformFacts& facts, int ranks) {
  const std::vector<int> order = node_order(s, facts);
  const int per_node = s.cluster.gpus_per_node;
  RankPlacement p;
  if (ranks <= 0 || per_node <= 0) return p;
  const int nodes = (ranks + per_node - 1) / per_node;
  if (nodes > static_cast<int>(order.size())) {
    if (ranks == s.ranks())
      throw Error(s.origin_of("cluster.nodes"), fmt::format("cluster.nodes: {} nodes requested but {} has {}",
                                                            nodes, facts.path, order.size()));
    throw Error(s.origin_of("cluster.gpus_per_node"),
                fmt::format("{} ranks at cluster.gpus_per_node {} need {} nodes but {} has {}", ranks,
                            per_node, nodes, facts.path, order.size()));
  }
  for (int k = 0; k < nodes; ++k) {
    const NodeFacts& n = facts.nodes[static_cast<size_t>(order[static_cast<size_t>(k)])];
    if (per_node > static_cast<int>(n.gpus.size()))
      throw Error(s.origin_of("cluster.gpus_per_node"),
                  fmt::format("cluster.gpus_per_node: {} GPUs per node requested but node '{}' has {}",
                              per_node, n.name, n.gpus.size()));
    for (int g = 0; g < per_node && static_cast<int>(p.hosts.size()) < ranks; ++g) {
      p.hosts.push_back(n.gpus[static_cast<size_t>(g)]);
      p.node.push_back(order[static_cast<size_t>(k)]);
    }
  }
  return p;
}

double mean_peak_flops(const RankPlacement& place, const PlatformFacts& facts, Precision precision) {
  double peak = 0;
  for (const auto& host : place.hosts) peak += facts.gpu.at(host).peak_flops(precision);
  return place.hosts.empty() ? 0.0 : peak / static_cast<double>(place.hosts.size());
}

}  // namespace vitsim
