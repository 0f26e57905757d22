// The `nodes:` what-if: remove nodes, add copies of one, or either to reach a count. It edits the layout
// `vitsim platform` writes (docs/platforms.md): clusters in a Full zone, one NIC <link> per node, a
// <zoneRoute> per pair: src's NIC UP, then dst's NIC DOWN.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <set>
#include <sstream>

#include "platform/whatif_edit.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim::whatif_detail {

namespace {

std::vector<pugi::xml_node> routes_of(const pugi::xml_node& zone) {
  std::vector<pugi::xml_node> out;
  for (auto r : zone.children("zoneRoute")) out.push_back(r);
  return out;
}

// The link ids a node puts on its routes (its NIC): UP links where it is the source.
std::vector<std::string> nic_links(const PlatformEdit& e, const pugi::xml_node& zone,
                                   const std::string& node) {
  for (auto r : zone.children("zoneRoute")) {
    const bool src = node == r.attribute("src").value();
    const bool dst = node == r.attribute("dst").value();
    if (!src && !dst) continue;
    std::vector<std::string> out;
    for (auto l : r.children("link_ctn"))
      if (std::string(l.attribute("direction").value()) == (src ? "UP" : "DOWN"))
        out.push_back(l.attribute("id").value());
    if (!out.empty()) return out;
  }
  e.fail(
      fmt::format("node '{}' has no zoneRoute with UP/DOWN NIC links to copy (a one-node platform, or not "
                  "the layout vitsim platform writes)",
                  node));
}

void remove_nodes(PlatformEdit& e, const std::vector<std::string>& names) {
  std::set<std::string> gone(names.begin(), names.end());
  std::set<std::string> maybe_unused;
  pugi::xml_node zone = e.top_zone();
  for (auto r : routes_of(zone)) {
    if (!gone.count(r.attribute("src").value()) && !gone.count(r.attribute("dst").value())) continue;
    for (auto l : r.children("link_ctn")) maybe_unused.insert(l.attribute("id").value());
    zone.remove_child(r);
  }
  for (const auto& n : names) {
    pugi::xml_node c = e.cluster(n);
    c.parent().remove_child(c);
    e.note(fmt::format("node {} removed", n));
  }
  std::set<std::string> used;
  for (auto x : e.doc().select_nodes("//link_ctn")) used.insert(x.node().attribute("id").value());
  for (const auto& id : maybe_unused) {
    if (used.count(id)) continue;
    pugi::xml_node l = zone.find_child_by_attribute("link", "id", id.c_str());
    if (!l) continue;
    zone.remove_child(l);
    e.note(fmt::format("link {} removed", id));
  }
  if (e.clusters().empty()) e.fail("no node left");
}

// The next free name after `like`: its trailing number counted on at the same width (vec54 -> vec55), or
// "_1", "_2", ... after a name without one.
std::string fresh_name(const std::string& like, std::set<std::string>& taken) {
  size_t d = like.size();
  while (d > 0 && std::isdigit(static_cast<unsigned char>(like[d - 1]))) --d;
  const std::string base = like.substr(0, d);
  const size_t width = like.size() - d;
  // The trailing number, read strictly (a 30-digit suffix is an error, not an escaped std::out_of_range).
  long long k = width ? units::parse_integer(like.substr(d), 0, (1LL << 62)) + 1 : 1;
  for (;; ++k) {
    std::string name = width ? fmt::format("{}{:0{}}", base, k, width) : fmt::format("{}_{}", base, k);
    if (taken.insert(name).second) return name;
  }
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

// The layout is a Full zone: a route per pair of nodes. Estimated before any is built.
void check_route_budget(const PlatformEdit& e, const pugi::xml_node& zone, int count) {
  const double have =
      static_cast<double>(std::distance(zone.children("cluster").begin(), zone.children("cluster").end()));
  const double total = have + count;
  const double routes = total * (total - 1) / 2;
  constexpr double kBytesPerRoute = 600;  // measured: ~330 B of XML + pugixml nodes, and SimGrid's copy
  if (routes > static_cast<double>(e.max_routes()))
    e.fail(fmt::format(
        "{} nodes in a Full zone need {:.3g} routes (one per pair, about {} to build and "
        "simulate); the limit is {} routes: raise it with --set simulation.max_routes=N",
        static_cast<long long>(total), routes, units::format_bytes(routes * kBytesPerRoute), e.max_routes()));
}

// A copy of node `like` named `name`, after the zone's last node, with its prefix and router renamed.
pugi::xml_node copy_cluster(PlatformEdit& e, pugi::xml_node zone, pugi::xml_node like,
                            const std::string& like_name, const std::string& name) {
  pugi::xml_node last_cluster;
  for (auto c : zone.children("cluster")) last_cluster = c;
  pugi::xml_node c = zone.insert_copy_after(like, last_cluster);
  c.attribute("id").set_value(name.c_str());
  for (const char* a : {"prefix", "router_id"}) {
    std::string v = c.attribute(a).value();
    if (v.find(like_name) == std::string::npos)
      e.fail(fmt::format("node '{}': its {} '{}' does not contain its name, so a copy cannot be renamed",
                         like_name, a, v));
    c.attribute(a).set_value(replace_all(v, like_name, name).c_str());
  }
  return c;
}

// Copies of `like_name`'s NIC links for `name`, after the zone's last link; returns their ids.
std::vector<std::string> copy_nics(PlatformEdit& e, pugi::xml_node zone, const std::string& like_name,
                                   const std::vector<std::string>& like_nics, const std::string& name) {
  std::vector<std::string> nics;
  pugi::xml_node last_link;
  for (auto l : zone.children("link")) last_link = l;
  for (const auto& id : like_nics) {
    if (id.find(like_name) == std::string::npos)
      e.fail(
          fmt::format("node '{}': its NIC link '{}' does not contain its name, so a copy cannot be renamed",
                      like_name, id));
    pugi::xml_node src = zone.find_child_by_attribute("link", "id", id.c_str());
    if (!src) e.fail(fmt::format("no <link id=\"{}\"> in the top zone", id));
    pugi::xml_node l = last_link ? zone.insert_copy_after(src, last_link) : zone.append_copy(src);
    last_link = l;
    nics.push_back(replace_all(id, like_name, name));
    l.attribute("id").set_value(nics.back().c_str());
  }
  return nics;
}

using NodeNics = std::vector<std::pair<std::string, std::vector<std::string>>>;  // node -> its NIC links

// A route from every peer to the new node: the peer's NIC up, the new node's NIC down.
void route_to_peers(const PlatformEdit& e, pugi::xml_node zone, const NodeNics& peers,
                    const std::string& name, const std::string& router,
                    const std::vector<std::string>& nics) {
  for (const auto& [peer, peer_nics] : peers) {
    pugi::xml_node r = zone.append_child("zoneRoute");
    pugi::xml_node pc = e.cluster(peer);
    r.append_attribute("src") = peer.c_str();
    r.append_attribute("dst") = name.c_str();
    r.append_attribute("gw_src") = pc.attribute("router_id").value();
    r.append_attribute("gw_dst") = router.c_str();
    for (const auto& id : peer_nics) {
      auto l = r.append_child("link_ctn");
      l.append_attribute("id") = id.c_str();
      l.append_attribute("direction") = "UP";
    }
    for (const auto& id : nics) {
      auto l = r.append_child("link_ctn");
      l.append_attribute("id") = id.c_str();
      l.append_attribute("direction") = "DOWN";
    }
  }
}

void add_nodes(PlatformEdit& e, int count, const std::string& like_name) {
  pugi::xml_node zone = e.top_zone();
  check_route_budget(e, zone, count);
  pugi::xml_node like = e.cluster(like_name);
  if (like.parent() != zone) e.fail(fmt::format("node '{}' is not in the top zone", like_name));
  const auto like_nics = nic_links(e, zone, like_name);
  std::set<std::string> taken;
  for (const auto& n : e.cluster_names()) taken.insert(n);
  for (int i = 0; i < count; ++i) {
    // Existing nodes of the top zone and their NICs, before this one is added.
    NodeNics peers;
    for (auto c : zone.children("cluster")) {
      std::string n = c.attribute("id").value();
      peers.push_back({n, nic_links(e, zone, n)});
    }
    const std::string name = fresh_name(like_name, taken);
    pugi::xml_node c = copy_cluster(e, zone, like, like_name, name);
    const std::vector<std::string> nics = copy_nics(e, zone, like_name, like_nics, name);
    route_to_peers(e, zone, peers, name, c.attribute("router_id").value(), nics);
    e.note(fmt::format("node {} added (a copy of {}, {} routes)", name, like_name, peers.size()));
  }
}

void remove_matching(PlatformEdit& e, const std::string& globs) {
  std::istringstream in(globs);
  std::vector<std::string> names;
  std::string g;
  while (in >> g)
    for (auto c : e.match_clusters(g)) names.push_back(c.attribute("id").value());
  if (names.empty()) e.fail("expected nodes:remove=NAME[ NAME...]");
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  remove_nodes(e, names);
}

int node_count(const PlatformEdit& e, const std::string& v) {
  try {
    return static_cast<int>(units::parse_integer(v, 0, 100000));
  } catch (const Error&) {
    e.fail(fmt::format("'{}' is not a node count (0 .. 100000)", echo(v)));
  }
}

}  // namespace

void edit_nodes(PlatformEdit& e, const std::string& rest) {
  if (rest.rfind("remove=", 0) == 0) return remove_matching(e, rest.substr(7));
  auto names = e.cluster_names();
  if (rest.rfind("add=", 0) == 0) {
    std::string v = rest.substr(4);
    std::string like = names.back();
    if (auto p = v.find(":like="); p != std::string::npos) {
      like = v.substr(p + 6);
      v = v.substr(0, p);
    }
    return add_nodes(e, node_count(e, v), like);
  }
  if (rest.rfind("count=", 0) == 0) {
    const int want = node_count(e, rest.substr(6));
    if (want < 1) e.fail("a platform needs at least one node");
    const int have = static_cast<int>(names.size());
    if (want > have) add_nodes(e, want - have, names.back());
    if (want < have) remove_nodes(e, {names.begin() + want, names.end()});
    if (want == have) e.note(fmt::format("already {} nodes", have));
    return;
  }
  e.fail("expected nodes:remove=NAMES, nodes:add=K[:like=NODE] or nodes:count=N");
}

}  // namespace vitsim::whatif_detail
