#include "vitsim/core/platform.hpp"
#include "vitsim/core/platform_flat.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <pugixml.hpp>
#include <set>
#include <sstream>

#include "vitsim/core/energy.hpp"
#include "vitsim/core/io.hpp"
#include "vitsim/core/units.hpp"

namespace vitsim {

double GpuFacts::peak_flops(Precision p) const {
  switch (p) {
    case Precision::FP32: return flops_fp32;
    case Precision::FP16: return flops_fp16;
    case Precision::BF16: return flops_bf16;
  }
  return flops_fp32;
}

const NodeFacts& PlatformFacts::node(const std::string& name) const {
  for (const auto& n : nodes)
    if (n.name == name) return n;
  std::string valid;
  for (const auto& n : nodes) valid += (valid.empty() ? "" : ", ") + n.name;
  throw Error(fmt::format("{}: no node '{}'; nodes: {}", path, name, valid));
}

namespace {

using Props = std::map<std::string, std::pair<std::string, Origin>>;

struct Ctx {
  std::string path;
  std::string text;
  std::vector<size_t> newlines;  // offsets of '\n', for line numbers in O(log n)
  void index() {
    for (size_t i = 0; i < text.size(); ++i)
      if (text[i] == '\n') newlines.push_back(i);
  }
  int line_of(ptrdiff_t off) const {
    if (off < 0) return 0;
    return 1 + static_cast<int>(std::lower_bound(newlines.begin(), newlines.end(), static_cast<size_t>(off)) - newlines.begin());
  }
  Origin at(const pugi::xml_node& n) const { return Origin{path, line_of(n.offset_debug())}; }
};

Props own_props(const Ctx& c, const pugi::xml_node& n) {
  Props p;
  for (auto prop : n.children("prop")) p[prop.attribute("id").value()] = {prop.attribute("value").value(), c.at(prop)};
  return p;
}

std::vector<long> parse_radical(const std::string& r, const Origin& o) {
  std::vector<long> out;
  std::istringstream in(r);
  std::string part;
  while (std::getline(in, part, ',')) {
    try {  // whole numbers through core's one strict reader: "3x", "+3", " 3" and "0x3" are refused
      auto dash = part.find('-', 1);
      constexpr long long kMax = 1'000'000'000'000LL;
      if (dash == std::string::npos) {
        out.push_back(static_cast<long>(units::parse_integer(part, 0, kMax)));
      } else {
        const long long a = units::parse_integer(part.substr(0, dash), 0, kMax),
                        b = units::parse_integer(part.substr(dash + 1), 0, kMax);
        if (b < a || b - a >= 10'000'000) throw std::invalid_argument("range");
        for (long long i = a; i <= b; ++i) out.push_back(static_cast<long>(i));
      }
    } catch (const std::exception&) {
      throw Error(o, fmt::format("bad cluster radical '{}'; expected e.g. 0-7 or 0-3,8 (at most 10,000,000 hosts)", echo(r)));
    }
  }
  return out;
}

struct PropReader {
  const Props& props;
  const Origin& where;
  const std::string* get(const std::string& key) const {
    auto it = props.find(key);
    return it == props.end() ? nullptr : &it->second.first;
  }
  Origin origin(const std::string& key) const {
    auto it = props.find(key);
    return it == props.end() ? where : it->second.second;
  }
  // A figure with its unit, range-checked where it is read: `r` is what a present value must satisfy
  // (bandwidths > 0: 0 would mean "unlimited" to SimGrid and "absent" to vitsim, so it is neither).
  double quantity(const std::string& key, units::Kind kind, bool required, double def = 0,
                  const units::Range& r = units::non_negative()) const {
    const auto* v = get(key);
    if (!v) {
      if (required) throw Error(where, fmt::format("GPU host lacks property '{}' ({})", key, units::kind_name(kind)));
      return def;
    }
    try {
      return units::parse(*v, kind, r);
    } catch (const Error& e) {
      throw Error(origin(key), fmt::format("property {}: {}", key, e.what()));
    }
  }
  double number(const std::string& key, bool required, double def, const units::Range& r) const {
    const auto* v = get(key);
    if (!v) {
      if (required) throw Error(where, fmt::format("GPU host lacks property '{}' (a number {})", key, r.str()));
      return def;
    }
    try {
      return units::parse_number(*v, r);
    } catch (const Error&) {
      const std::string range = r.str();
      throw Error(origin(key), fmt::format("property {}: '{}' is not a number {}{}", key, echo(*v),
                                           range.find("..") != std::string::npos ? "in " : "", range));
    }
  }
  int integer(const std::string& key, int def, int lo, int hi) const {
    const auto* v = get(key);
    if (!v) return def;
    try {
      return static_cast<int>(units::parse_integer(*v, lo, hi));
    } catch (const Error&) {
      throw Error(origin(key), fmt::format("property {}: '{}' is not an integer in {} .. {}", key, echo(*v), lo, hi));
    }
  }
};

GpuFacts gpu_facts(const Props& p, const Origin& where) {
  PropReader r{p, where};
  GpuFacts g;
  const auto* model = r.get("gpu_model");
  g.model = model ? *model : "";
  const units::Range pos = units::positive();
  g.flops_fp32 = r.quantity("gpu_flops_fp32", units::Kind::Flops, true, 0, pos);
  g.flops_fp16 = r.quantity("gpu_flops_fp16", units::Kind::Flops, false, g.flops_fp32, pos);
  g.flops_bf16 = r.quantity("gpu_flops_bf16", units::Kind::Flops, false, g.flops_fp16, pos);
  g.mem_bw = r.quantity("gpu_mem_bw", units::Kind::Bandwidth, true, 0, pos);
  g.mem_bytes = r.quantity("gpu_mem", units::Kind::Bytes, true, 0, pos);
  // One of gpu_gemm_efficiency (the compute model's) and gpu_efficiency (legacy, one figure per step) is required;
  // each defaults to the other.
  const bool has_gemm = r.get("gpu_gemm_efficiency") != nullptr;
  const bool has_legacy = r.get("gpu_efficiency") != nullptr;
  if (!has_gemm && !has_legacy)
    throw Error(where, "GPU host lacks property 'gpu_gemm_efficiency' (or the legacy 'gpu_efficiency'), a number "
                       "in (0, 1]: the fraction of peak a large GEMM reaches");
  if (has_gemm) g.gemm_efficiency = r.number("gpu_gemm_efficiency", true, 0, units::fraction());
  if (has_legacy) g.efficiency = r.number("gpu_efficiency", true, 0, units::fraction());
  if (!has_gemm) g.gemm_efficiency = g.efficiency;
  if (!has_legacy) g.efficiency = g.gemm_efficiency;
  g.attn_efficiency = r.number("gpu_attn_efficiency", false, g.gemm_efficiency, units::fraction());
  g.mem_efficiency = r.number("gpu_mem_efficiency", false, 1.0, units::fraction());
  g.gemm_k_half = r.number("gpu_gemm_k_half", false, 0, units::closed(0, 1e12));
  g.sm_count = r.integer("gpu_sm_count", 1, 1, 1 << 20);
  if (const auto* tile = r.get("gpu_gemm_tile")) {
    // "MxN": two positive integers.
    const auto x = tile->find('x');
    auto whole = [](const std::string& t, int& out) {
      if (t.find_first_not_of("0123456789") != std::string::npos) return false;  // no sign, no spaces
      try {
        out = static_cast<int>(units::parse_integer(t, 1, 999999));  // core's one strict reader
      } catch (const Error&) {
        return false;
      }
      return true;
    };
    if (x == std::string::npos || !whole(tile->substr(0, x), g.tile_m) || !whole(tile->substr(x + 1), g.tile_n))
      throw Error(r.origin("gpu_gemm_tile"),
                  fmt::format("property gpu_gemm_tile: '{}' is not MxN with two positive integers, e.g. 128x128", echo(*tile)));
  }
  g.kernel_overhead = r.quantity("gpu_kernel_overhead", units::Kind::Time, false, 0);
  g.sync_overhead = r.quantity("gpu_sync_overhead", units::Kind::Time, false, 0);
  g.host_op_overhead = r.quantity("host_op_overhead", units::Kind::Time, false, 0);
  g.reserved_bytes = r.quantity("gpu_reserved", units::Kind::Bytes, false, 0);
  {
    // Power (core/energy.hpp): both figures or neither; idle not above busy.
    const auto* busy = r.get("gpu_power_busy");
    const auto* idle = r.get("gpu_power_idle");
    auto power = [&](const char* key, const std::string& v) {
      try {
        return parse_power(v);
      } catch (const Error& e) {
        throw Error(r.origin(key), fmt::format("property {}: {}", key, e.what()));
      }
    };
    if (busy) g.power_busy_w = power("gpu_power_busy", *busy);
    if (idle) g.power_idle_w = power("gpu_power_idle", *idle);
    if (busy && !idle)
      throw Error(r.origin("gpu_power_busy"), "property gpu_power_busy without gpu_power_idle: state both (watts) or neither");
    if (idle && !busy)
      throw Error(r.origin("gpu_power_idle"), "property gpu_power_idle without gpu_power_busy: state both (watts) or neither");
    if (busy && g.power_idle_w > g.power_busy_w)
      throw Error(r.origin("gpu_power_idle"), fmt::format("property gpu_power_idle: {} is above gpu_power_busy {}",
                                                          echo(*idle), echo(*busy)));
  }
  if (const auto* kind = r.get("device_kind")) {
    if (*kind == "gpu") g.async = true;
    else if (*kind == "cpu") g.async = false;
    else throw Error(r.origin("device_kind"), fmt::format("property device_kind: '{}' is not one of: gpu, cpu", echo(*kind)));
  }
  return g;
}

// The transport settings of one link (its own props over its zones'); `line` and `lat` as written.
LinkFacts link_facts(const Props& p, const Origin& where, std::string id, std::string what, Transport t, double line,
                     double lat, bool split_duplex) {
  PropReader r{p, where};
  LinkFacts l;
  l.id = std::move(id);
  l.what = std::move(what);
  l.split_duplex = split_duplex;
  l.transport = t;
  l.bandwidth = line;
  l.latency = lat;
  l.origin = where;
  // Settings are named per transport (tcp_mtu, ib_mtu, ...), so a zone can state both and a what-if that
  // switches the transport picks the matching ones.
  if (t == Transport::Tcp) l.mtu = r.integer("tcp_mtu", transport_defaults::tcp_mtu, 576, 65535);
  if (t == Transport::Ib) l.mtu = r.integer("ib_mtu", transport_defaults::ib_mtu, 256, 4096);
  l.socket_nthreads = r.integer("nccl_socket_nthreads", transport_defaults::socket_nthreads, 1, 16);
  l.nsocks_perthread = r.integer("nccl_nsocks_perthread", transport_defaults::nsocks_perthread, 1, 64);
  if (l.socket_nthreads * l.nsocks_perthread > 64)
    throw Error(r.origin("nccl_nsocks_perthread"),
                fmt::format("nccl_socket_nthreads x nccl_nsocks_perthread = {} x {} exceeds NCCL's 64 sockets",
                            l.socket_nthreads, l.nsocks_perthread));
  l.socket_bw = r.quantity("socket_bw", units::Kind::Bandwidth, false, transport_defaults::socket_bw, units::positive());
  l.staging_bw = r.quantity("staging_bw", units::Kind::Bandwidth, false, transport_defaults::staging_bw, units::positive());
  const std::string lat_key = t == Transport::Ib ? "ib_stack_latency" : "tcp_stack_latency";
  if ((t == Transport::Tcp || t == Transport::Ib) && r.get(lat_key))
    l.stack_latency = r.quantity(lat_key, units::Kind::Time, false, 0);
  if (!(line > 0)) throw Error(where, fmt::format("link '{}' with a transport needs a positive bandwidth", l.id));
  return l;
}

// A written link figure ("1.25GBps", "50us"), with file:line on error: bandwidths > 0, times >= 0.
double link_attr(const pugi::xml_node& n, const char* attr, units::Kind kind, const Origin& o) {
  const char* v = n.attribute(attr).value();
  try {
    return units::parse(v, kind, kind == units::Kind::Time ? units::non_negative() : units::positive());
  } catch (const Error& e) {
    throw Error(o, fmt::format("<{}> {}: {}", n.name(), attr, e.what()));
  }
}

void node_facts(NodeFacts& n, const Props& p) {
  PropReader r{p, n.origin};
  n.cpu_cores = r.integer("cpu_cores", 1, 1, 1 << 20);
  // Absent = not modelled; a stated bandwidth must be > 0 (0 is not "absent", it is a loader that never delivers).
  n.loader_bw = r.quantity("loader_bw", units::Kind::Bandwidth, false, 0, units::positive());
  n.loader_image_overhead = r.quantity("loader_image_overhead", units::Kind::Time, false, 0);
  n.h2d_pageable_bw = r.quantity("h2d_pageable_bw", units::Kind::Bandwidth, false, 0, units::positive());
}

Props merged(const Props& outer, const Props& inner) {
  Props out = outer;
  for (const auto& [k, v] : inner) out[k] = v;
  return out;
}

struct Walker {
  const Ctx& c;
  PlatformFacts& facts;
  std::set<std::string> names;

  void add_gpu(NodeFacts& node, const std::string& host, const Props& props, const Origin& o) {
    if (!names.insert(host).second) throw Error(o, fmt::format("host '{}' is declared twice", host));
    node.gpus.push_back(host);
    facts.gpu[host] = gpu_facts(props, o);
    if (facts.gpu[host].model.empty()) facts.gpu[host].model = host;
  }

  // Returns the names of the netpoints directly inside `zone` that hold GPUs (for route checks).
  void walk_zone(const pugi::xml_node& zone, const Props& inherited) {
    Props props = merged(inherited, own_props(c, zone));
    std::vector<std::pair<std::string, Origin>> gpu_children;
    for (auto el : zone.children()) {
      std::string tag = el.name();
      if (tag == "cluster") {
        NodeFacts n;
        n.name = el.attribute("id").value();
        n.origin = c.at(el);
        Props cp = merged(props, own_props(c, el));
        if (!cp.count("gpu_model") && !cp.count("gpu_flops_fp32")) continue;  // a CPU-only cluster
        node_facts(n, cp);
        cluster_transport(el, cp, n.origin);
        for (long i : parse_radical(el.attribute("radical").value(), n.origin))
          add_gpu(n, fmt::format("{}{}{}", el.attribute("prefix").value(), i, el.attribute("suffix").value()), cp,
                  n.origin);
        gpu_children.push_back({n.name, n.origin});
        facts.nodes.push_back(std::move(n));
      } else if (tag == "host") {
        Props hp = merged(props, own_props(c, el));
        if (!hp.count("gpu_model") && !hp.count("gpu_flops_fp32")) continue;
        NodeFacts n;
        n.name = el.attribute("id").value();
        n.origin = c.at(el);
        node_facts(n, hp);
        add_gpu(n, n.name, hp, n.origin);
        gpu_children.push_back({n.name, n.origin});
        facts.nodes.push_back(std::move(n));
      } else if (tag == "link") {
        Props lp = merged(props, own_props(c, el));
        auto t = lp.find("transport");
        if (t == lp.end()) continue;
        const Origin o = c.at(el);
        const Transport tr = parse_transport(t->second.first, t->second.second, "transport");
        facts.links.push_back(link_facts(lp, o, el.attribute("id").value(), "NIC", tr,
                                         link_attr(el, "bandwidth", units::Kind::Bandwidth, o),
                                         el.attribute("latency") ? link_attr(el, "latency", units::Kind::Time, o) : 0,
                                         std::string(el.attribute("sharing_policy").value()) == "SPLITDUPLEX"));
      } else if (tag == "zone") {
        size_t before = facts.nodes.size();
        walk_zone(el, props);
        if (facts.nodes.size() > before) gpu_children.push_back({el.attribute("id").value(), c.at(el)});
      }
    }
    check_routes(zone, gpu_children);
  }

  // A cluster's intranode_transport is the transport of its backbone, SimGrid's "<id>_backbone" link.
  void cluster_transport(const pugi::xml_node& el, const Props& cp, const Origin& o) {
    auto t = cp.find("intranode_transport");
    if (t == cp.end()) return;
    const Transport tr = parse_transport(t->second.first, t->second.second, "intranode_transport",
                                         {Transport::NvLink, Transport::PcieHost, Transport::PcieP2p});
    if (!el.attribute("bb_bw"))
      throw Error(t->second.second, "property intranode_transport: the cluster has no backbone (bb_bw) to carry it");
    const std::string id = std::string(el.attribute("id").value()) + "_backbone";
    facts.links.push_back(link_facts(cp, o, id, "GPU-GPU in node", tr, link_attr(el, "bb_bw", units::Kind::Bandwidth, o),
                                     el.attribute("bb_lat") ? link_attr(el, "bb_lat", units::Kind::Time, o) : 0,
                                     std::string(el.attribute("bb_sharing_policy").value()) == "SPLITDUPLEX"));
    facts.links.back().lane_bw = link_attr(el, "bw", units::Kind::Bandwidth, o);
  }

  // SimGrid 3.32 crashes on a missing route in a Full zone instead of erroring: check every pair here.
  void check_routes(const pugi::xml_node& zone, const std::vector<std::pair<std::string, Origin>>& members) {
    if (std::string(zone.attribute("routing").value()) != "Full" || members.size() < 2) return;
    std::set<std::pair<std::string, std::string>> routes;
    for (auto r : zone.children()) {
      std::string tag = r.name();
      if (tag != "zoneRoute" && tag != "route") continue;
      std::string src = r.attribute("src").value(), dst = r.attribute("dst").value();
      routes.insert({src, dst});
      if (std::string(r.attribute("symmetrical").value()) != "NO") routes.insert({dst, src});
    }
    for (size_t i = 0; i < members.size(); ++i)
      for (size_t j = 0; j < members.size(); ++j)
        if (i != j && !routes.count({members[i].first, members[j].first}))
          throw Error(c.at(zone), fmt::format("zone '{}' (routing Full) has no route from '{}' to '{}'",
                                              zone.attribute("id").value(), members[i].first, members[j].first));
  }
};

// --- Structure: what SimGrid 3.32's own parser aborts on (xbt_assert + backtrace, or a segfault) instead
// of reporting, checked here first so that the user gets one line with file:line. Found by trying: zones
// nested hundreds deep (its parser recurses per level: segfault), a route declared twice (also the two
// directions of a symmetrical one), a link or netpoint declared twice, an unknown routing, zero/negative
// bandwidths and negative latencies (its solver asserts, or treats them as unlimited).
constexpr int kMaxZoneDepth = 32;      // SimGrid's own examples nest 3-4; 300 segfaults its parser
constexpr int kMaxElementDepth = 48;   // zones plus the elements inside one
constexpr size_t kMaxNetpoints = size_t{1} << 21;  // 2,097,152 hosts and routers: 16x the 131,072 GPUs vitsim aims at

const std::set<std::string>& routings() {
  static const std::set<std::string> r{"Cluster", "ClusterDragonfly", "ClusterFatTree", "ClusterTorus", "Dijkstra",
                                       "DijkstraCache", "Floyd", "Full", "None", "Star", "Vivaldi", "Wifi"};
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
  std::set<std::string> cluster_ids_;        // their generated links are named "<id>_..."

  void name_once(std::map<std::string, Origin>& names, const std::string& id, const Origin& o, const char* what) {
    if (id.empty()) throw Error(o, fmt::format("<{}> without an id", what));
    auto [it, fresh] = names.emplace(id, o);
    if (!fresh)
      throw Error(o, fmt::format("{} '{}' is declared twice (first at line {}); SimGrid needs unique names", what,
                                 echo(id), it->second.line));
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
        units::parse(std::string_view(v).substr(start, comma == std::string::npos ? std::string::npos : comma - start),
                     kind, kind == units::Kind::Time ? units::non_negative() : units::positive());
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
          throw Error(o, fmt::format("zones nested {} deep (limit {}; SimGrid's parser recurses once per level)", zd,
                                     kMaxZoneDepth));
        name_once(netpoints_, n.attribute("id").value(), o, tag == "cluster" ? "cluster" : "zone");
      }
      if (tag == "zone" || tag == "AS") {
        const std::string routing = n.attribute("routing").value();
        if (!routings().count(routing))
          throw Error(o, fmt::format("zone '{}': unknown routing '{}'; valid: {}", echo(n.attribute("id").value()),
                                     echo(routing), join_set(routings())));
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
          throw Error(o, fmt::format("more than {} hosts and routers (limit of the platform reader)", kMaxNetpoints));
        for (long i : radical)
          name_once(netpoints_, fmt::format("{}{}{}", n.attribute("prefix").value(), i, n.attribute("suffix").value()), o,
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
      const bool generated = std::any_of(cluster_ids_.begin(), cluster_ids_.end(), [&](const std::string& cl) {
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
    std::map<std::pair<std::string, std::string>, std::pair<int, bool>> seen;  // (src, dst) -> line, as the way back
    for (auto r : zone.children()) {
      const std::string tag = r.name();
      if (tag != "route" && tag != "zoneRoute" && tag != "ASroute" && tag != "bypassRoute" && tag != "bypassZoneRoute")
        continue;
      const Origin o = c_.at(r);
      const std::string src = r.attribute("src").value(), dst = r.attribute("dst").value();
      for (const char* attr : {"src", "dst", "gw_src", "gw_dst"}) {
        const auto a = r.attribute(attr);
        if (!a && (std::string(attr) == "src" || std::string(attr) == "dst"))
          throw Error(o, fmt::format("<{}> lacks its {} attribute", tag, attr));
        if (a && !netpoints_.count(a.value()))
          throw Error(o, fmt::format("<{}> {}='{}' names no host, router, zone or cluster of this platform", tag, attr,
                                     echo(a.value())));
      }
      const std::string sym = r.attribute("symmetrical").value();
      if (!sym.empty() && sym != "YES" && sym != "NO" && sym != "yes" && sym != "no")
        throw Error(o, fmt::format("<{}> symmetrical='{}'; valid: YES, NO", tag, echo(sym)));
      if (tag.rfind("bypass", 0) == 0) continue;
      const bool symmetrical = sym != "NO" && sym != "no";
      auto add = [&](const std::string& a, const std::string& b, bool reverse) {
        auto [it, fresh] = seen.emplace(std::make_pair(a, b), std::make_pair(o.line, reverse));
        if (!fresh)
          throw Error(o, fmt::format("the route from '{}' to '{}' is already declared at line {}{}", echo(a), echo(b),
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

PlatformFacts read_platform_facts(const std::string& path) {
  // Before pugixml or SimGrid sees it: regular, size-limited.
  return read_platform_text(path, read_input_file(path, "platform file"));
}

PlatformFacts read_platform_text(const std::string& path, const std::string& text) {
  Ctx c;
  c.path = path;
  c.text = text;
  c.index();
  pugi::xml_document doc;
  auto res = doc.load_buffer(c.text.data(), c.text.size());
  if (!res) throw Error(Origin{path, c.line_of(res.offset)}, fmt::format("malformed XML: {}", res.description()));
  auto root = doc.document_element();
  if (std::string(root.name()) != "platform")
    throw Error(c.at(root), fmt::format("root element is <{}>, expected <platform>", root.name()));
  StructureCheck(c).run(root);
  PlatformFacts facts;
  facts.path = path;
  facts.flat_layout = is_flat_layout_text(text.size() > (1u << 20) ? text.substr(0, 1u << 20) : text);
  Walker w{c, facts, {}};
  for (auto zone : root.children("zone")) {
    facts.props.clear();
    for (const auto& [k, v] : own_props(c, zone)) facts.props[k] = v.first;
    w.walk_zone(zone, {});
  }
  // Links whose figures change during a run (SimGrid profiles): a transfer's time is then the profile's.
  facts.link_profiles = !root.select_nodes("//link[@bandwidth_file or @latency_file or @state_file] | "
                                           "//backbone[@bandwidth_file or @latency_file or @state_file] | //trace | "
                                           "//trace_connect").empty();
  if (facts.nodes.empty())
    throw Error(c.at(root), "no GPU hosts: give hosts or clusters a gpu_model property (README, Platform files)");
  return facts;
}

}  // namespace vitsim
