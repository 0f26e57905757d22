#include "vitsim/sim/platform_build.hpp"

#include <fmt/format.h>

#include <vector>

#include "vitsim/core/error.hpp"

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {
namespace {

using Dir = sg4::LinkInRoute::Direction;

// The nodes of one star zone: hosts, links, routes to the centre, bypass routes inside each node.
void build_group(sg4::NetZone* zone, const FlatPod& g, BuildCounts& c) {
  for (const FlatNode& n : g.nodes) {
    sg4::Link* bb = nullptr;
    if (n.bb_bw > 0) {
      bb = zone->create_link(n.id + "_backbone", n.bb_bw)->set_latency(n.bb_lat)->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE)->seal();
      ++c.links;
    }
    std::vector<sg4::Link*> nics;
    for (const FlatLink& l : n.nics) {
      nics.push_back(zone->create_split_duplex_link(l.id, l.bw)->set_latency(l.lat)->seal());
      ++c.links;
    }
    std::vector<sg4::Host*> hosts;
    std::vector<sg4::Link*> lanes;
    for (size_t k = 0; k < n.hosts.size(); ++k) {
      sg4::Host* h = zone->create_host(n.hosts[k], n.speed)->seal();
      ++c.hosts;
      const std::string link = fmt::format("{}_link_{}", n.id, n.radicals[k]);
      sg4::Link* lane = zone->create_split_duplex_link(link, n.lane_bw)->set_latency(n.lane_lat)->seal();
      ++c.links;
      hosts.push_back(h);
      lanes.push_back(lane);
      if (n.loopback_bw > 0) {
        sg4::Link* lo = zone->create_link(link + "_loopback", n.loopback_bw)
                            ->set_latency(n.loopback_lat)
                            ->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE)
                            ->seal();
        ++c.links;
        zone->add_route(h->get_netpoint(), h->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(lo)}, false);
        ++c.routes;
      }
      // Up to the centre (and, symmetrically, down from it in reverse).
      std::vector<sg4::LinkInRoute> up{sg4::LinkInRoute(lane, Dir::UP)};
      const int rail = n.rail_of(static_cast<int>(k));
      const bool rails = nics.size() > 1;
      if (bb && !rails) up.emplace_back(bb);
      if (rail >= 0) up.emplace_back(nics[static_cast<size_t>(rail)], Dir::UP);
      zone->add_route(h->get_netpoint(), nullptr, nullptr, nullptr, up, true);
      ++c.routes;
    }
    // Inside the node: lane, backbone, lane; the NIC is not crossed. Without a NIC the star's own route is that.
    if (!nics.empty())
      for (size_t a = 0; a < hosts.size(); ++a)
        for (size_t b = 0; b < hosts.size(); ++b) {
          if (a == b) continue;
          std::vector<sg4::LinkInRoute> links{sg4::LinkInRoute(lanes[a], Dir::UP)};
          if (bb) links.emplace_back(bb);
          links.emplace_back(lanes[b], Dir::DOWN);
          zone->add_bypass_route(hosts[a]->get_netpoint(), hosts[b]->get_netpoint(), nullptr, nullptr, links);
          ++c.bypass_routes;
        }
  }
}

}  // namespace

BuildCounts build_flat_platform(sg4::Engine& e, const FlatPlatform& p) {
  if (e.get_netzone_root() != nullptr)
    throw Error(fmt::format("{}: a flat-star platform is built into an engine without a platform", p.path));
  BuildCounts c;
  sg4::NetZone* top = sg4::create_star_zone(p.zone_id);
  ++c.zones;
  if (!p.pods) {
    build_group(top, p.groups.front(), c);
  } else {
    for (const FlatPod& g : p.groups) {
      sg4::NetZone* pod = sg4::create_star_zone(g.id)->set_parent(top);
      ++c.zones;
      build_group(pod, g, c);
      // The pod's gateway: a router whose route to the pod's centre is empty (without one SimGrid drops the
      // NICs from paths that leave the pod).
      simgrid::kernel::routing::NetPoint* router = pod->create_router(g.id + "-router");
      ++c.routers;
      pod->add_route(router, nullptr, nullptr, nullptr, {}, true);
      ++c.routes;
      pod->seal();
      sg4::Link* up = top->create_split_duplex_link(g.uplink.id, g.uplink.bw)->set_latency(g.uplink.lat)->seal();
      ++c.links;
      top->add_route(pod->get_netpoint(), nullptr, router, nullptr, {sg4::LinkInRoute(up, Dir::UP)}, true);
      ++c.routes;
    }
  }
  top->seal();
  return c;
}

BuildCounts load_platform_file(sg4::Engine& e, const std::string& path) {
  if (!is_flat_layout_file(path)) {
    e.load_platform(path);
    return {};
  }
  return build_flat_platform(e, read_flat_platform_file(path));
}

}  // namespace vitsim::sim
