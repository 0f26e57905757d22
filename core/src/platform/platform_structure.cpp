// The structure of a platform file: what SimGrid 3.32's own parser aborts on (xbt_assert + backtrace, or a
// segfault) instead of reporting, checked here first so that the user gets one line with file:line.
#include <fmt/format.h>

#include <set>

#include "platform/platform_read.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim::platform_read {

namespace {

// --- Structure: what SimGrid 3.32's own parser aborts on (xbt_assert + backtrace, or a segfault) instead
// of reporting, checked here first so that the user gets one line with file:line. Found by trying: zones
// nested hundreds deep (its parser recurses per level: segfault), a route declared twice (also the two
// directions of a symmetrical one), a link or netpoint declared twice, an unknown routing, zero/negative
// bandwidths and negative latencies (its solver asserts, or treats them as unlimited).
constexpr int kMaxZoneDepth = 32;     // SimGrid's own examples nest 3-4; 300 segfaults its parser
constexpr int kMaxElementDepth = 48;  // zones plus the elements inside one

const std::set<std::string>& routings() {
  static const std::set<std::string> r{"Cluster",        "ClusterDragonfly",
                                       "ClusterFatTree", "ClusterTorus",
                                       "Dijkstra",       "DijkstraCache",
                                       "Floyd",          "Full",
                                       "None",           "Star",
                                       "Vivaldi",        "Wifi"};
  return r;
}

std::string join_set(const std::set<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
  return out;
}

class StructureCheck {
 public:
  explicit StructureCheck(const Ctx& c) : c_(c) {}

  void run(const pugi::xml_node& root) {
    // Pass 1: every declared name (netpoints and links) with where it was declared, depth and figures.
    declare(root, 0, 0);
    // Pass 2: references (routes, link_ctn) against the names of pass 1.
    references(root);
  }

 private:
  const Ctx& c_;
  std::map<std::string, Origin> netpoints_;  // hosts, routers, zones and clusters (one namespace in SimGrid)
  std::map<std::string, Origin> links_;
  std::set<std::string> cluster_ids_;  // their generated links are named "<id>_..."

  void name_once(std::map<std::string, Origin>& names, const std::string& id, const Origin& o,
                 const char* what) {
    if (id.empty()) throw Error(o, fmt::format("<{}> without an id", what));
    auto [it, fresh] = names.emplace(id, o);
    if (!fresh)
      throw Error(o, fmt::format("{} '{}' is declared twice (first at line {}); SimGrid needs unique names",
                                 what, echo(id), it->second.line));
  }

  void figure(const pugi::xml_node& n, const char* attr, units::Kind kind, bool required) {
    const auto a = n.attribute(attr);
    if (!a) {
      if (required) throw Error(c_.at(n), fmt::format("<{}> lacks its {} attribute", n.name(), attr));
      return;
    }
    try {
      // A host's speed may list one speed per power state: "1Gf,500Mf".
      std::string v = a.value();
      size_t start = 0;
      do {
        const size_t comma = kind == units::Kind::Flops ? v.find(',', start) : std::string::npos;
        units::check_plausible(
            units::parse(std::string_view(v).substr(
                             start, comma == std::string::npos ? std::string::npos : comma - start),
                         kind, kind == units::Kind::Time ? units::non_negative() : units::positive()),
            kind);
        start = comma == std::string::npos ? v.size() : comma + 1;
      } while (start < v.size());
    } catch (const Error& e) {
      throw Error(c_.at(n), fmt::format("<{}> {}: {}", n.name(), attr, e.what()));
    }
  }

  void declare(const pugi::xml_node& root, int zone_depth, int depth) {
    // Iterative: the depth limit is what protects a recursive walker, so this pass must not recurse.
    struct Item {
      pugi::xml_node n;
      int zone_depth, depth;
    };
    std::vector<Item> todo{{root, zone_depth, depth}};
    while (!todo.empty()) {
      Item it = todo.back();
      todo.pop_back();
      const pugi::xml_node n = it.n;
      const std::string tag = n.name();
      const Origin o = c_.at(n);
      int zd = it.zone_depth;
      if (it.depth > kMaxElementDepth)
        throw Error(o, fmt::format("elements nested {} deep (limit {})", it.depth, kMaxElementDepth));
      if (tag == "zone" || tag == "AS" || tag == "cluster") {
        if (++zd > kMaxZoneDepth)
          throw Error(
              o, fmt::format("zones nested {} deep (limit {}; SimGrid's parser recurses once per level)", zd,
                             kMaxZoneDepth));
        name_once(netpoints_, n.attribute("id").value(), o, tag == "cluster" ? "cluster" : "zone");
      }
      if (tag == "zone" || tag == "AS") {
        const std::string routing = n.attribute("routing").value();
        if (!routings().count(routing))
          throw Error(o, fmt::format("zone '{}': unknown routing '{}'; valid: {}",
                                     echo(n.attribute("id").value()), echo(routing), join_set(routings())));
      } else if (tag == "host") {
        name_once(netpoints_, n.attribute("id").value(), o, "host");
        figure(n, "speed", units::Kind::Flops, true);
        if (n.attribute("core")) {
          try {
            units::parse_integer(n.attribute("core").value(), 1, 1 << 20);
          } catch (const Error& e) {
            throw Error(o, fmt::format("<host> core: {}", e.what()));
          }
        }
      } else if (tag == "router") {
        name_once(netpoints_, n.attribute("id").value(), o, "router");
      } else if (tag == "link" || tag == "backbone") {
        name_once(links_, n.attribute("id").value(), o, "link");
        figure(n, "bandwidth", units::Kind::Bandwidth, true);
        figure(n, "latency", units::Kind::Time, false);
      } else if (tag == "cluster") {
        const std::string id = n.attribute("id").value();
        cluster_ids_.insert(id);
        figure(n, "speed", units::Kind::Flops, true);
        figure(n, "bw", units::Kind::Bandwidth, true);
        figure(n, "lat", units::Kind::Time, false);
        figure(n, "bb_bw", units::Kind::Bandwidth, false);
        figure(n, "bb_lat", units::Kind::Time, false);
        figure(n, "loopback_bw", units::Kind::Bandwidth, false);
        figure(n, "loopback_lat", units::Kind::Time, false);
        figure(n, "limiter_link", units::Kind::Bandwidth, false);
        const auto radical = parse_radical(n.attribute("radical").value(), o);
        if (netpoints_.size() + radical.size() > kMaxNetpoints)
          throw Error(
              o, fmt::format("more than {} hosts and routers (limit of the platform reader)", kMaxNetpoints));
        for (long i : radical)
          name_once(netpoints_,
                    fmt::format("{}{}{}", n.attribute("prefix").value(), i, n.attribute("suffix").value()), o,
                    "host");
        if (n.attribute("router_id")) name_once(netpoints_, n.attribute("router_id").value(), o, "router");
      }
      for (auto child = n.last_child(); child; child = child.previous_sibling())
        if (child.type() == pugi::node_element) todo.push_back({child, zd, it.depth + 1});
    }
  }

  void references(const pugi::xml_node& root) {
    for (auto x : root.select_nodes("//zone | //AS")) routes_of(x.node());
    for (auto x : root.select_nodes("//link_ctn")) {
      const pugi::xml_node l = x.node();
      const std::string id = l.attribute("id").value();
      const bool generated =
          std::any_of(cluster_ids_.begin(), cluster_ids_.end(), [&](const std::string& cl) {
            return id.size() > cl.size() && id.compare(0, cl.size(), cl) == 0 && id[cl.size()] == '_';
          });
      if (!links_.count(id) && !generated)
        throw Error(c_.at(l), fmt::format("<link_ctn> names link '{}', which is not declared", echo(id)));
      const std::string dir = l.attribute("direction").value();
      if (!dir.empty() && dir != "UP" && dir != "DOWN" && dir != "NONE")
        throw Error(c_.at(l), fmt::format("<link_ctn> direction '{}'; valid: UP, DOWN, NONE", echo(dir)));
    }
  }

  // Routes of one zone: endpoints that exist, and each (src, dst) pair once, the reverse of a symmetrical
  // route included ("The route between b and a already exists" is an abort in SimGrid 3.32).
  void routes_of(const pugi::xml_node& zone) {
    std::map<std::pair<std::string, std::string>, std::pair<int, bool>>
        seen;  // (src, dst) -> line, as the way back
    for (auto r : zone.children()) {
      const std::string tag = r.name();
      if (tag != "route" && tag != "zoneRoute" && tag != "ASroute" && tag != "bypassRoute" &&
          tag != "bypassZoneRoute")
        continue;
      const Origin o = c_.at(r);
      const std::string src = r.attribute("src").value(), dst = r.attribute("dst").value();
      for (const char* attr : {"src", "dst", "gw_src", "gw_dst"}) {
        const auto a = r.attribute(attr);
        if (!a && (std::string(attr) == "src" || std::string(attr) == "dst"))
          throw Error(o, fmt::format("<{}> lacks its {} attribute", tag, attr));
        if (a && !netpoints_.count(a.value()))
          throw Error(o, fmt::format("<{}> {}='{}' names no host, router, zone or cluster of this platform",
                                     tag, attr, echo(a.value())));
      }
      const std::string sym = r.attribute("symmetrical").value();
      if (!sym.empty() && sym != "YES" && sym != "NO" && sym != "yes" && sym != "no")
        throw Error(o, fmt::format("<{}> symmetrical='{}'; valid: YES, NO", tag, echo(sym)));
      if (tag.rfind("bypass", 0) == 0) continue;
      const bool symmetrical = sym != "NO" && sym != "no";
      auto add = [&](const std::string& a, const std::string& b, bool reverse) {
        auto [it, fresh] = seen.emplace(std::make_pair(a, b), std::make_pair(o.line, reverse));
        if (!fresh)
          throw Error(
              o, fmt::format(
                     "the route from '{}' to '{}' is already declared at line {}{}", echo(a), echo(b),
                     it->second.first,
                     reverse || it->second.second
                         ? " (a route is symmetrical unless symmetrical=\"NO\": it declares the way back too)"
                         : ""));
      };
      add(src, dst, false);
      if (symmetrical && src != dst) add(dst, src, true);
    }
  }
};

}  // namespace

void check_structure(const Ctx& c, const pugi::xml_node& root) {
  StructureCheck(c).run(root);
}

}  // namespace vitsim::platform_read
