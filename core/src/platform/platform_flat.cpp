#include "vitsim/core/platform/platform_flat.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <pugixml.hpp>
#include <set>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/platform/platform_props.hpp"
#include "vitsim/core/platform/platform_writer.hpp"

namespace vitsim {

size_t FlatPlatform::gpus() const {
  size_t n = 0;
  for (const auto& g : groups)
    for (const auto& node : g.nodes) n += node.hosts.size();
  return n;
}

size_t FlatPlatform::nodes() const {
  size_t n = 0;
  for (const auto& g : groups) n += g.nodes.size();
  return n;
}

bool is_flat_layout_text(const std::string& text) {
  // The first "<zone" tag and the first "<prop" after it, before any other element opens.
  size_t z = text.find("<zone");
  while (z != std::string::npos) {
    // Skip a "<zone" inside the header comment.
    const size_t c = text.rfind("<!--", z);
    if (c == std::string::npos || text.find("-->", c) < z) break;
    z = text.find("<zone", text.find("-->", c));
  }
  if (z == std::string::npos) return false;
  const size_t end = text.find('>', z);
  if (end == std::string::npos) return false;
  const size_t p = text.find('<', end);
  if (p == std::string::npos || text.compare(p, 5, "<prop") != 0) return false;
  const size_t pe = text.find('>', p);
  if (pe == std::string::npos) return false;
  const std::string tag = text.substr(p, pe - p);
  return (tag.find(std::string("\"") + kFlatStarProp + "\"") != std::string::npos ||
          tag.find(std::string("'") + kFlatStarProp + "'") != std::string::npos) &&
         tag.find(kFlatStarValue) != std::string::npos;
}

bool is_flat_layout_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::string head(1 << 20, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  return is_flat_layout_text(head);
}

namespace {

struct Reader {
  const std::string& path;
  const std::string& text;
  std::vector<size_t> line_starts;

  int line_of(ptrdiff_t offset) {
    if (line_starts.empty()) {
      line_starts.push_back(0);
      for (size_t i = 0; i < text.size(); ++i)
        if (text[i] == '\n') line_starts.push_back(i + 1);
    }
    return static_cast<int>(
        std::upper_bound(line_starts.begin(), line_starts.end(), static_cast<size_t>(offset)) -
        line_starts.begin());
  }
  Origin at(const pugi::xml_node& n) { return Origin{path, line_of(n.offset_debug())}; }

  std::string attr(const pugi::xml_node& n, const char* name, bool required = true) {
    const pugi::xml_attribute a = n.attribute(name);
    if (!a) {
      if (required) throw Error(at(n), fmt::format("<{}> needs the attribute {}", n.name(), name));
      return "";
    }
    return a.value();
  }
  double figure(const pugi::xml_node& n, const char* name, units::Kind kind, bool required, bool positive) {
    const std::string v = attr(n, name, required);
    if (v.empty()) return 0;
    try {
      const double x = units::parse(v, kind);
      if (positive ? !(x > 0) : !(x >= 0))
        throw Error(fmt::format("must be {}", positive ? "positive" : "non-negative"));
      units::check_plausible(x, kind);
      return x;
    } catch (const Error& e) {
      throw Error(at(n), fmt::format("<{}> {}=\"{}\": {}", n.name(), name, v, e.what()));
    }
  }

  std::vector<long> radicals(const pugi::xml_node& n) {
    const std::string r = attr(n, "radical");
    std::vector<long> out;
    size_t pos = 0;
    while (pos <= r.size()) {
      size_t comma = r.find(',', pos);
      if (comma == std::string::npos) comma = r.size();
      const std::string item = r.substr(pos, comma - pos);
      const size_t dash = item.find('-');
      try {
        const long a = static_cast<long>(units::parse_integer(item.substr(0, dash), 0, 1 << 24));
        const long b = dash == std::string::npos
                           ? a
                           : static_cast<long>(units::parse_integer(item.substr(dash + 1), 0, 1 << 24));
        if (b < a) throw Error("a range runs upwards");
        if (out.size() + static_cast<size_t>(b - a + 1) > (size_t{1} << 20))
          throw Error("more than 1,048,576 hosts");
        for (long x = a; x <= b; ++x) out.push_back(x);
      } catch (const Error& e) {
        throw Error(at(n), fmt::format("<cluster> radical=\"{}\": {}", r, e.what()));
      }
      pos = comma + 1;
    }
    return out;
  }

  FlatNode node(const pugi::xml_node& c) {
    FlatNode f;
    f.id = attr(c, "id");
    f.line = at(c).line;
    const std::string prefix = attr(c, "prefix", false), suffix = attr(c, "suffix", false);
    f.radicals = radicals(c);
    for (long r : f.radicals) f.hosts.push_back(prefix + std::to_string(r) + suffix);
    f.speed = figure(c, "speed", units::Kind::Flops, true, true);
    f.lane_bw = figure(c, "bw", units::Kind::Bandwidth, true, true);
    f.lane_lat = figure(c, "lat", units::Kind::Time, true, false);
    f.bb_bw = figure(c, "bb_bw", units::Kind::Bandwidth, false, true);
    f.bb_lat = figure(c, "bb_lat", units::Kind::Time, false, false);
    f.loopback_bw = figure(c, "loopback_bw", units::Kind::Bandwidth, false, true);
    f.loopback_lat = figure(c, "loopback_lat", units::Kind::Time, false, false);
    f.router = attr(c, "router_id", false);
    if (f.router.empty()) f.router = f.id + "-router";
    for (const char* a : {"sharing_policy", "bb_sharing_policy"}) {
      const std::string v = attr(c, a, false);
      const std::string want = std::string(a) == "sharing_policy" ? "SPLITDUPLEX" : "FATPIPE";
      if (!v.empty() && v != want)
        throw Error(at(c),
                    fmt::format("<cluster {}=\"{}\">: the flat-star layout builds {} links ({})", a, v, want,
                                "write the platform in the cluster-per-node layout for other policies"));
    }
    for (const char* a :
         {"topology", "topo_parameters", "limiter_link", "core", "availability_file", "state_file"})
      if (c.attribute(a))
        throw Error(at(c), fmt::format("<cluster {}=...> is not supported in the flat-star layout", a));
    return f;
  }

  FlatLink link(const pugi::xml_node& l) {
    FlatLink f;
    f.id = attr(l, "id");
    f.bw = figure(l, "bandwidth", units::Kind::Bandwidth, true, true);
    f.lat = figure(l, "latency", units::Kind::Time, false, false);
    const std::string sp = attr(l, "sharing_policy", false);
    if (sp != "SPLITDUPLEX")
      throw Error(
          at(l),
          fmt::format("<link id=\"{}\">: the flat-star layout's NIC and up-links are SPLITDUPLEX", f.id));
    return f;
  }

  // The clusters and links of one group (the top zone of a star, or a pod zone); links other than the nodes'
  // NICs are returned in `others`.
  void group(const pugi::xml_node& zone, FlatPod& g, std::vector<std::pair<FlatLink, pugi::xml_node>>& others,
             bool top) {
    std::vector<std::pair<FlatLink, pugi::xml_node>> links;
    for (const auto& ch : zone.children()) {
      const std::string name = ch.name();
      if (ch.type() != pugi::node_element || name == "prop") continue;
      if (name == "cluster") {
        g.nodes.push_back(node(ch));
      } else if (name == "link") {
        links.emplace_back(link(ch), ch);
      } else if (name == "zone" && top) {
        continue;  // pods: the caller
      } else {
        throw Error(
            at(ch),
            fmt::format("<{}> is not part of the flat-star layout (clusters, their NIC links{}; routes are "
                        "computed): write this platform in the cluster-per-node layout",
                        name, top ? ", pod zones and their up-links" : ""));
      }
    }
    std::map<std::string, FlatNode*> by_id;
    for (auto& n : g.nodes) by_id[n.id] = &n;
    // "<node>-nic" or "<node>-nic<r>": the node is the longest id the link's name starts with.
    std::map<FlatNode*, std::vector<std::pair<long, FlatLink>>> rails;
    for (auto& [l, x] : links) {
      FlatNode* owner = nullptr;
      long rail = -1;
      const size_t p = l.id.rfind("-nic");
      if (p != std::string::npos) {
        auto it = by_id.find(l.id.substr(0, p));
        const std::string tail = l.id.substr(p + 4);
        if (it != by_id.end() && (tail.empty() || std::all_of(tail.begin(), tail.end(), ::isdigit))) {
          owner = it->second;
          rail = tail.empty() ? -1 : static_cast<long>(units::parse_integer(tail.substr(0, 9), 0, 999999999));
        }
      }
      if (!owner) {
        others.emplace_back(l, x);
        continue;
      }
      rails[owner].emplace_back(rail, l);
    }
    for (auto& [n, list] : rails) {
      std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      const bool shared = list.size() == 1 && list.front().first < 0;
      for (size_t r = 0; r < list.size() && !shared; ++r)
        if (list[r].first != static_cast<long>(r))
          throw Error(Origin{path, n->line}, fmt::format("node '{}': its NIC links are '{}-nic' or '{}-nic0' "
                                                         "... '{}-nic{}' (one per rail), not a mix or gaps",
                                                         n->id, n->id, n->id, n->id, list.size() - 1));
      if (list.size() > n->hosts.size())
        throw Error(Origin{path, n->line},
                    fmt::format("node '{}': {} rails for {} GPUs (at most one rail per GPU)", n->id,
                                list.size(), n->hosts.size()));
      for (auto& [r, l] : list) n->nics.push_back(l);
    }
  }
};

// The top zone's topology props: vitsim_topology (star, the default, or fat-tree when pods carry up-links;
// torus; dragonfly), vitsim_torus_dims, vitsim_link_bw, vitsim_link_lat.
void read_topology(Reader& rd, const pugi::xml_node& zone, FlatPlatform& out) {
  std::map<std::string, std::pair<std::string, pugi::xml_node>> props;
  for (const auto& p : zone.children("prop"))
    if (auto [it, fresh] = props.try_emplace(p.attribute("id").value(), p.attribute("value").value(), p);
        !fresh)
      throw Error(rd.at(p), fmt::format("<prop id=\"{}\"> given twice in <zone> (also at line {}): which one "
                                        "holds is ambiguous; keep one",
                                        echo(it->first), rd.at(it->second.second).line));
  auto take = [&](const char* key) -> const std::pair<std::string, pugi::xml_node>* {
    auto it = props.find(key);
    return it == props.end() ? nullptr : &it->second;
  };
  const auto* kind = take("vitsim_topology");
  const std::string k = kind ? kind->first : "star";
  if (k == "torus")
    out.topology = FlatTopology::Torus;
  else if (k == "dragonfly")
    out.topology = FlatTopology::Dragonfly;
  else if (k != "star" && k != "fat-tree")
    throw Error(rd.at(kind->second), fmt::format("vitsim_topology \"{}\": valid: {}", k,
                                                 platform_prop("vitsim_topology").choices));
  const bool grid = out.topology == FlatTopology::Torus || out.topology == FlatTopology::Dragonfly;
  for (const char* key : {"vitsim_torus_dims", "vitsim_link_bw", "vitsim_link_lat"}) {
    const auto* v = take(key);
    const bool wanted = std::string(key) == "vitsim_torus_dims" ? out.topology == FlatTopology::Torus : grid;
    if (v && !wanted)
      throw Error(rd.at(v->second),
                  fmt::format("prop {} applies to a {} only", key,
                              std::string(key) == "vitsim_torus_dims" ? "torus" : "torus or dragonfly"));
    if (!v && wanted && std::string(key) != "vitsim_link_lat")
      throw Error(rd.at(zone), fmt::format("a {} platform's zone needs the prop {}", k, key));
  }
  if (out.topology == FlatTopology::Torus) {
    const auto* v = take("vitsim_torus_dims");
    try {
      out.torus_dims = parse_torus_dims(v->first);
    } catch (const Error& e) {
      throw Error(rd.at(v->second), fmt::format("vitsim_torus_dims \"{}\": {}", v->first, e.what()));
    }
  }
  if (grid) {
    // The unit and the range of the props' rows (core/platform/platform_props.hpp): bandwidths > 0, times >=
    // 0.
    auto figure = [&](const char* key) {
      const PlatformProp& p = platform_prop(key);
      const bool positive = p.range.lo_open;
      const auto* v = take(key);
      if (!v) return 0.0;
      try {
        const double x = units::parse(v->first, p.unit);
        if (positive ? !(x > 0) : !(x >= 0))
          throw Error(positive ? "must be positive" : "must be non-negative");
        check_prop_plausible(p, x);
        return x;
      } catch (const Error& e) {
        throw Error(rd.at(v->second), fmt::format("{} \"{}\": {}", key, v->first, e.what()));
      }
    };
    out.fabric.bw = figure("vitsim_link_bw");
    out.fabric.lat = figure("vitsim_link_lat");
  }
}

// A platform with pods: each pod zone's nodes, and (a fat-tree's) its up-link in the top zone.
void read_pod_zones(Reader& rd, const std::string& path, const std::vector<pugi::xml_node>& pods,
                    std::vector<std::pair<FlatLink, pugi::xml_node>>& others, bool grid, FlatPlatform& out) {
  out.pods = true;
  if (!grid) out.topology = FlatTopology::FatTree;
  std::map<std::string, FlatLink> uplinks;
  for (auto& [l, x] : others) {
    if (grid)
      throw Error(
          rd.at(x),
          fmt::format("link '{}': a dragonfly's groups have no up-links (its global links are computed "
                      "from vitsim_link_bw and vitsim_link_lat)",
                      l.id));
    const size_t p = l.id.rfind("-uplink");
    if (p == std::string::npos || p + 7 != l.id.size())
      throw Error(
          rd.at(x),
          fmt::format("link '{}' is neither a node's NIC nor a pod's up-link ('<pod>-uplink')", l.id));
    uplinks[l.id.substr(0, p)] = l;
  }
  for (const auto& z : pods) {
    if (std::string(z.attribute("routing").value()) != "None")
      throw Error(rd.at(z),
                  "a flat-star platform's pod zones have routing=\"None\" (vitsim computes their routes)");
    FlatPod pod;
    pod.id = rd.attr(z, "id");
    std::vector<std::pair<FlatLink, pugi::xml_node>> inner;
    rd.group(z, pod, inner, false);
    if (!inner.empty())
      throw Error(
          rd.at(inner.front().second),
          fmt::format("link '{}' in pod '{}' is not a node's NIC; a pod's up-link sits in the top zone",
                      inner.front().first.id, pod.id));
    if (grid) {
      out.groups.push_back(std::move(pod));
      continue;
    }
    auto it = uplinks.find(pod.id);
    if (it == uplinks.end())
      throw Error(rd.at(z),
                  fmt::format("pod '{}' has no up-link '{}-uplink' in the top zone", pod.id, pod.id));
    pod.uplink = it->second;
    uplinks.erase(it);
    out.groups.push_back(std::move(pod));
  }
  if (!uplinks.empty())
    throw Error(Origin{path, 0},
                fmt::format("up-link '{}-uplink' names no pod zone", uplinks.begin()->first));
}

// Every node of a multi-node platform has a NIC; names are unique.
void check_flat_nodes(const std::string& path, const FlatPlatform& out) {
  std::set<std::string> names;
  const size_t nodes = out.nodes();
  for (const auto& g : out.groups)
    for (const auto& n : g.nodes) {
      if (n.hosts.empty()) throw Error(Origin{path, n.line}, fmt::format("node '{}' has no GPU", n.id));
      if (nodes > 1 && n.nics.empty())
        throw Error(
            Origin{path, n.line},
            fmt::format("node '{}' has no NIC link '{}-nic' (every node of a multi-node platform has one)",
                        n.id, n.id));
      for (const auto* s : {&n.id, &n.router})
        if (!names.insert(*s).second)
          throw Error(Origin{path, n.line}, fmt::format("'{}' is named twice", *s));
      for (const auto& h : n.hosts)
        if (!names.insert(h).second)
          throw Error(Origin{path, n.line}, fmt::format("host '{}' is named twice", h));
    }
}

}  // namespace

std::vector<unsigned long> parse_torus_dims(const std::string& text) {
  std::vector<unsigned long> dims;
  size_t pos = 0;
  while (true) {
    const size_t sep = text.find_first_of(",x", pos);
    dims.push_back(static_cast<unsigned long>(units::parse_integer(
        text.substr(pos, sep == std::string::npos ? std::string::npos : sep - pos), 1, 1 << 20)));
    if (sep == std::string::npos) break;
    pos = sep + 1;
  }
  if (dims.size() > 6) throw Error("a torus of more than 6 dimensions");
  size_t cells = 1;
  for (unsigned long d : dims)
    if ((cells *= d) > (size_t{1} << 20)) throw Error("more than 1,048,576 nodes");
  return dims;
}

FlatPlatform read_flat_platform(const std::string& path, const std::string& text) {
  Reader rd{path, text, {}};
  pugi::xml_document doc;
  auto res = doc.load_buffer(text.data(), text.size());
  if (!res)
    throw Error(Origin{path, rd.line_of(res.offset)}, fmt::format("malformed XML: {}", res.description()));
  const pugi::xml_node root = doc.document_element();
  const pugi::xml_node zone = root.child("zone");
  if (std::string(root.name()) != "platform" || !zone)
    throw Error(Origin{path, 1}, "not a platform file (<platform><zone>)");
  bool marked = false;
  for (const auto& p : zone.children("prop"))
    if (std::string(p.attribute("id").value()) == kFlatStarProp)
      marked = std::string(p.attribute("value").value()) == kFlatStarValue;
  if (!marked)
    throw Error(rd.at(zone), fmt::format("not a flat-star platform (its zone has no prop {}={})",
                                         kFlatStarProp, kFlatStarValue));
  if (std::string(zone.attribute("routing").value()) != "None")
    throw Error(rd.at(zone), "a flat-star platform's zone has routing=\"None\" (vitsim computes its routes)");
  for (auto z = zone.next_sibling("zone"); z; z = z.next_sibling("zone"))
    throw Error(rd.at(z), "a flat-star platform has one top zone");
  FlatPlatform out;
  out.path = path;
  out.zone_id = rd.attr(zone, "id");
  read_topology(rd, zone, out);
  FlatPod top;
  std::vector<std::pair<FlatLink, pugi::xml_node>> others;
  rd.group(zone, top, others, true);
  std::vector<pugi::xml_node> pods;
  for (const auto& z : zone.children("zone")) pods.push_back(z);
  const bool grid = out.topology == FlatTopology::Torus || out.topology == FlatTopology::Dragonfly;
  if (out.topology == FlatTopology::Torus && !pods.empty())
    throw Error(rd.at(pods.front()),
                "a torus platform has its nodes in the top zone, in torus order (no pod zones)");
  if (out.topology == FlatTopology::Dragonfly && pods.size() < 2)
    throw Error(rd.at(zone),
                "a dragonfly platform has its nodes in two or more group zones (<zone routing=\"None\">)");
  if (pods.empty()) {
    if (!others.empty())
      throw Error(
          rd.at(others.front().second),
          fmt::format("link '{}' is neither a node's NIC ('<node>-nic', '<node>-nic<r>') nor a pod's up-link",
                      others.front().first.id));
    out.groups.push_back(std::move(top));
  } else {
    if (!top.nodes.empty())
      throw Error(Origin{path, top.nodes.front().line},
                  "a flat-star platform with pods has every node inside a pod zone");
    read_pod_zones(rd, path, pods, others, grid, out);
  }
  if (out.topology == FlatTopology::Torus) {
    size_t cells = 1;
    for (unsigned long d : out.torus_dims) cells *= d;
    if (cells != out.nodes())
      throw Error(rd.at(zone), fmt::format("vitsim_torus_dims {} hold {} nodes, the platform has {}",
                                           fmt::join(out.torus_dims, "x"), cells, out.nodes()));
  }
  check_flat_nodes(path, out);
  return out;
}

FlatPlatform read_flat_platform_file(const std::string& path) {
  return read_flat_platform(path, read_input_file(path, "platform file"));
}

}  // namespace vitsim
