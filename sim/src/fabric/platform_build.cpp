#include "vitsim/sim/fabric/platform_build.hpp"

#include <fmt/format.h>

#include <map>
#include <vector>

#include "vitsim/core/base/error.hpp"

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {
namespace {

using Dir = sg4::LinkInRoute::Direction;

// The links a flat build split a node's backbone into ("<node>_backbone" -> its per-GPU pieces), for
// apply_link_transports (a transport's effect goes to every piece).
std::map<std::string, std::vector<sg4::Link*>>& aliases() {
  static std::map<std::string, std::vector<sg4::Link*>> a;
  return a;
}

// One node's links as they are built: its NICs, and per GPU its host, its lane and its backbone piece up.
struct NodeParts {
  std::vector<sg4::Link*> nics;
  std::vector<sg4::Host*> hosts;
  std::vector<sg4::Link*> lanes, bb_up;
  std::vector<sg4::Link*>* bb_all = nullptr;  // aliases()["<node>_backbone"]
};

// GPU k of node n: its host, lane, backbone pieces and loopback, and its routes to and from the star's
// centre.
void build_gpu(sg4::NetZone* zone, const FlatNode& n, size_t k, NodeParts& parts, BuildCounts& c) {
  const bool rails = parts.nics.size() > 1;
  sg4::Host* h = zone->create_host(n.hosts[k], n.speed)->seal();
  ++c.hosts;
  const std::string link = fmt::format("{}_link_{}", n.id, n.radicals[k]);
  sg4::Link* lane = zone->create_split_duplex_link(link, n.lane_bw)->set_latency(n.lane_lat)->seal();
  ++c.links;
  parts.hosts.push_back(h);
  parts.lanes.push_back(lane);
  sg4::Link* up_bb = nullptr;
  sg4::Link* down_bb = nullptr;
  if (n.bb_bw > 0) {
    for (sg4::Link** l : {&up_bb, &down_bb}) {
      *l =
          zone->create_link(
                  fmt::format("{}_backbone_{}_{}", n.id, n.radicals[k], l == &up_bb ? "UP" : "DOWN"), n.bb_bw)
              ->set_latency(n.bb_lat)
              ->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE)
              ->seal();
      parts.bb_all->push_back(*l);
      ++c.links;
    }
  }
  parts.bb_up.push_back(up_bb);
  if (n.loopback_bw > 0) {
    sg4::Link* lo = zone->create_link(link + "_loopback", n.loopback_bw)
                        ->set_latency(n.loopback_lat)
                        ->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE)
                        ->seal();
    ++c.links;
    zone->add_route(h->get_netpoint(), h->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(lo)}, false);
    ++c.routes;
  }
  // Up to the centre and down from it: lane, backbone piece, NIC (a rail: lane, the rail's NIC).
  std::vector<sg4::LinkInRoute> up{sg4::LinkInRoute(lane, Dir::UP)};
  std::vector<sg4::LinkInRoute> down;
  const int rail = n.rail_of(static_cast<int>(k));
  if (rail >= 0) down.emplace_back(parts.nics[static_cast<size_t>(rail)], Dir::DOWN);
  if (up_bb && !rails) {
    up.emplace_back(up_bb);
    down.emplace_back(down_bb);
  }
  if (rail >= 0) up.emplace_back(parts.nics[static_cast<size_t>(rail)], Dir::UP);
  down.emplace_back(lane, Dir::DOWN);
  zone->add_route(h->get_netpoint(), nullptr, nullptr, nullptr, up, false);
  zone->add_route(nullptr, h->get_netpoint(), nullptr, nullptr, down, false);
  c.routes += 2;
}

// Inside the node: lane, backbone, lane; the NIC is not crossed. Without a NIC the star's own routes are
// lane, backbone (out), backbone (in), lane: the bypass keeps the one backbone latency of SimGrid's cluster.
void build_bypass_routes(sg4::NetZone* zone, const NodeParts& parts, BuildCounts& c) {
  for (size_t a = 0; a < parts.hosts.size(); ++a)
    for (size_t b = 0; b < parts.hosts.size(); ++b) {
      if (a == b) continue;
      std::vector<sg4::LinkInRoute> links{sg4::LinkInRoute(parts.lanes[a], Dir::UP)};
      if (parts.bb_up[a]) links.emplace_back(parts.bb_up[a]);
      links.emplace_back(parts.lanes[b], Dir::DOWN);
      zone->add_bypass_route(parts.hosts[a]->get_netpoint(), parts.hosts[b]->get_netpoint(), nullptr, nullptr,
                             links);
      ++c.bypass_routes;
    }
}

// The nodes of one star zone: hosts, links, routes to and from the centre, bypass routes inside each node.
//
// The node's backbone is FATPIPE: a cap on each transfer, not a shared capacity. It is built as one FATPIPE
// link per GPU and direction ("<node>_backbone_<r>_UP" on the GPU's way out, "_DOWN" on its way in): each
// transfer meets the same cap and latency as on one backbone, but transfers of different GPUs share no
// constraint, so SimGrid's solver does not walk every flow of a ring (through the backbones, all of them were
// one connected system: solving grew with GPUs squared).
void build_group(sg4::NetZone* zone, const FlatPod& g, BuildCounts& c) {
  for (const FlatNode& n : g.nodes) {
    NodeParts parts;
    for (const FlatLink& l : n.nics) {
      parts.nics.push_back(zone->create_split_duplex_link(l.id, l.bw)->set_latency(l.lat)->seal());
      ++c.links;
    }
    parts.bb_all = &aliases()[n.id + "_backbone"];
    for (size_t k = 0; k < n.hosts.size(); ++k) build_gpu(zone, n, k, parts, c);
    build_bypass_routes(zone, parts, c);
  }
}

// A star zone of `g`'s nodes under `parent`, sealed, with its gateway: a router whose route to the zone's
// centre is empty (without one SimGrid drops the NICs from paths that leave the zone).
std::pair<sg4::NetZone*, simgrid::kernel::routing::NetPoint*> build_gated_zone(const sg4::NetZone* parent,
                                                                               const std::string& id,
                                                                               const std::string& router_id,
                                                                               const FlatPod& g,
                                                                               BuildCounts& c) {
  sg4::NetZone* zone = sg4::create_star_zone(id)->set_parent(parent);
  ++c.zones;
  build_group(zone, g, c);
  simgrid::kernel::routing::NetPoint* router = zone->create_router(router_id);
  ++c.routers;
  zone->add_route(router, nullptr, nullptr, nullptr, {}, false);
  zone->add_route(nullptr, router, nullptr, nullptr, {}, false);
  c.routes += 2;
  zone->seal();
  return {zone, router};
}

// A torus (SimGrid's TorusZone: dimension-order routing, each way round the shorter way) whose leaves are the
// nodes, each a gated star zone of its GPUs; leaf `id` is node `id` of the file (the first dimension
// fastest).
sg4::NetZone* build_torus(const FlatPlatform& p, BuildCounts& c) {
  const std::vector<FlatNode>& nodes = p.groups.front().nodes;
  auto leaf = [&nodes, &c](sg4::NetZone* zone, const std::vector<unsigned long>&, unsigned long id) {
    const FlatNode& n = nodes.at(id);
    FlatPod one;
    one.nodes.push_back(n);
    auto [node_zone, router] = build_gated_zone(zone, n.id, n.router, one, c);
    return std::make_pair(node_zone->get_netpoint(), router);
  };
  sg4::NetZone* top =
      sg4::create_torus_zone(p.zone_id, nullptr, p.torus_dims, sg4::ClusterCallbacks(leaf), p.fabric.bw,
                             p.fabric.lat, sg4::Link::SharingPolicy::SPLITDUPLEX);
  ++c.zones;
  c.links += p.torus_dims.size() * nodes.size();  // one split-duplex link per node and dimension
  return top;
}

// A dragonfly: group zones (gated stars, non-blocking inside) in a full zone, each pair of groups joined by
// one global link "<groupA>-<groupB>-global" (minimal routing: one global hop).
sg4::NetZone* build_dragonfly(const FlatPlatform& p, BuildCounts& c) {
  sg4::NetZone* top = sg4::create_full_zone(p.zone_id);
  ++c.zones;
  std::vector<std::pair<sg4::NetZone*, simgrid::kernel::routing::NetPoint*>> groups;
  for (const FlatPod& g : p.groups) groups.push_back(build_gated_zone(top, g.id, g.id + "-router", g, c));
  for (size_t a = 0; a < groups.size(); ++a)
    for (size_t b = a + 1; b < groups.size(); ++b) {
      sg4::Link* l = top->create_split_duplex_link(
                            fmt::format("{}-{}-global", p.groups[a].id, p.groups[b].id), p.fabric.bw)
                         ->set_latency(p.fabric.lat)
                         ->seal();
      ++c.links;
      top->add_route(groups[a].first->get_netpoint(), groups[b].first->get_netpoint(), groups[a].second,
                     groups[b].second, {sg4::LinkInRoute(l, Dir::UP)}, true);
      ++c.routes;
    }
  return top;
}

}  // namespace

BuildCounts build_flat_platform(sg4::Engine& e, const FlatPlatform& p) {
  if (e.get_netzone_root() != nullptr)
    throw Error(fmt::format("{}: a flat-star platform is built into an engine without a platform", p.path));
  BuildCounts c;
  aliases().clear();
  sg4::NetZone* top = nullptr;
  if (p.topology == FlatTopology::Torus) {
    top = build_torus(p, c);
  } else if (p.topology == FlatTopology::Dragonfly) {
    top = build_dragonfly(p, c);
  } else if (!p.pods) {
    top = sg4::create_star_zone(p.zone_id);
    ++c.zones;
    build_group(top, p.groups.front(), c);
  } else {
    top = sg4::create_star_zone(p.zone_id);
    ++c.zones;
    for (const FlatPod& g : p.groups) {
      auto [pod, router] = build_gated_zone(top, g.id, g.id + "-router", g, c);
      sg4::Link* up =
          top->create_split_duplex_link(g.uplink.id, g.uplink.bw)->set_latency(g.uplink.lat)->seal();
      ++c.links;
      top->add_route(pod->get_netpoint(), nullptr, router, nullptr, {sg4::LinkInRoute(up, Dir::UP)}, true);
      ++c.routes;
    }
  }
  top->seal();
  return c;
}

const std::vector<sg4::Link*>* flat_link_pieces(const std::string& name) {
  auto it = aliases().find(name);
  return it == aliases().end() ? nullptr : &it->second;
}

BuildCounts load_platform_file(sg4::Engine& e, const std::string& path) {
  if (!is_flat_layout_file(path)) {
    e.load_platform(path);
    return {};
  }
  return build_flat_platform(e, read_flat_platform_file(path));
}

BuildCounts load_platform(sg4::Engine& e, const std::string& path, const PlatformFacts& facts,
                          const FlatPlatform* flat) {
  if (!facts.flat_layout) {
    e.load_platform(path);
    return {};
  }
  if (flat) return build_flat_platform(e, *flat);
  return build_flat_platform(e, read_flat_platform_file(path));
}

}  // namespace vitsim::sim
