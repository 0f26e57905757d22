#include "vitsim/core/platform.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <pugixml.hpp>
#include <set>
#include <sstream>

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
    try {
      auto dash = part.find('-');
      if (dash == std::string::npos) {
        out.push_back(std::stol(part));
      } else {
        long a = std::stol(part.substr(0, dash)), b = std::stol(part.substr(dash + 1));
        if (b < a || b - a > 10'000'000) throw std::invalid_argument("range");
        for (long i = a; i <= b; ++i) out.push_back(i);
      }
    } catch (const std::logic_error&) {
      throw Error(o, fmt::format("bad cluster radical '{}'; expected e.g. 0-7 or 0-3,8", r));
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
  double quantity(const std::string& key, units::Kind kind, bool required, double def = 0) const {
    const auto* v = get(key);
    if (!v) {
      if (required) throw Error(where, fmt::format("GPU host lacks property '{}' ({})", key, units::kind_name(kind)));
      return def;
    }
    try {
      double x = units::parse(*v, kind);
      if (x < 0) throw Error(fmt::format("must not be negative, got '{}'", *v));
      return x;
    } catch (const Error& e) {
      throw Error(origin(key), fmt::format("property {}: {}", key, e.what()));
    }
  }
  double number(const std::string& key, bool required, double def, double lo, double hi) const {
    const auto* v = get(key);
    if (!v) {
      if (required) throw Error(where, fmt::format("GPU host lacks property '{}' (a number in {} .. {})", key, lo, hi));
      return def;
    }
    size_t used = 0;
    double x = 0;
    try {
      x = std::stod(*v, &used);
    } catch (const std::logic_error&) {
      used = 0;
    }
    if (used != v->size() || x < lo || x > hi)
      throw Error(origin(key), fmt::format("property {}: '{}' is not a number in {} .. {}", key, *v, lo, hi));
    return x;
  }
  int integer(const std::string& key, int def, int lo, int hi) const {
    const auto* v = get(key);
    if (!v) return def;
    const bool digits = !v->empty() && v->size() <= 9 && v->find_first_not_of("0123456789") == std::string::npos;
    const long x = digits ? std::stol(*v) : -1;
    if (!digits || x < lo || x > hi)
      throw Error(origin(key), fmt::format("property {}: '{}' is not an integer in {} .. {}", key, *v, lo, hi));
    return static_cast<int>(x);
  }
};

GpuFacts gpu_facts(const Props& p, const Origin& where) {
  PropReader r{p, where};
  GpuFacts g;
  const auto* model = r.get("gpu_model");
  g.model = model ? *model : "";
  g.flops_fp32 = r.quantity("gpu_flops_fp32", units::Kind::Flops, true);
  if (!(g.flops_fp32 > 0)) throw Error(r.origin("gpu_flops_fp32"), "property gpu_flops_fp32 must be positive");
  g.flops_fp16 = r.quantity("gpu_flops_fp16", units::Kind::Flops, false, g.flops_fp32);
  g.flops_bf16 = r.quantity("gpu_flops_bf16", units::Kind::Flops, false, g.flops_fp16);
  g.mem_bw = r.quantity("gpu_mem_bw", units::Kind::Bandwidth, true);
  if (!(g.mem_bw > 0)) throw Error(r.origin("gpu_mem_bw"), "property gpu_mem_bw must be positive");
  g.mem_bytes = r.quantity("gpu_mem", units::Kind::Bytes, true);
  // One of gpu_gemm_efficiency (the compute model's) and gpu_efficiency (legacy, one figure per step) is required;
  // each defaults to the other.
  const bool has_gemm = r.get("gpu_gemm_efficiency") != nullptr;
  const bool has_legacy = r.get("gpu_efficiency") != nullptr;
  if (!has_gemm && !has_legacy)
    throw Error(where, "GPU host lacks property 'gpu_gemm_efficiency' (or the legacy 'gpu_efficiency'), a number "
                       "in (0, 1]: the fraction of peak a large GEMM reaches");
  if (has_gemm) g.gemm_efficiency = r.number("gpu_gemm_efficiency", true, 0, 1e-6, 1.0);
  if (has_legacy) g.efficiency = r.number("gpu_efficiency", true, 0, 1e-6, 1.0);
  if (!has_gemm) g.gemm_efficiency = g.efficiency;
  if (!has_legacy) g.efficiency = g.gemm_efficiency;
  g.attn_efficiency = r.number("gpu_attn_efficiency", false, g.gemm_efficiency, 1e-6, 1.0);
  g.mem_efficiency = r.number("gpu_mem_efficiency", false, 1.0, 1e-6, 1.0);
  g.gemm_k_half = r.number("gpu_gemm_k_half", false, 0, 0, 1e12);
  g.sm_count = r.integer("gpu_sm_count", 1, 1, 1 << 20);
  if (const auto* tile = r.get("gpu_gemm_tile")) {
    // "MxN": two positive integers.
    const auto x = tile->find('x');
    auto whole = [](const std::string& t, int& out) {
      if (t.empty() || t.size() > 6 || t.find_first_not_of("0123456789") != std::string::npos) return false;
      out = std::stoi(t);
      return out >= 1;
    };
    if (x == std::string::npos || !whole(tile->substr(0, x), g.tile_m) || !whole(tile->substr(x + 1), g.tile_n))
      throw Error(r.origin("gpu_gemm_tile"),
                  fmt::format("property gpu_gemm_tile: '{}' is not MxN with two positive integers, e.g. 128x128", *tile));
  }
  g.kernel_overhead = r.quantity("gpu_kernel_overhead", units::Kind::Time, false, 0);
  g.sync_overhead = r.quantity("gpu_sync_overhead", units::Kind::Time, false, 0);
  g.host_op_overhead = r.quantity("host_op_overhead", units::Kind::Time, false, 0);
  g.reserved_bytes = r.quantity("gpu_reserved", units::Kind::Bytes, false, 0);
  if (const auto* kind = r.get("device_kind")) {
    if (*kind == "gpu") g.async = true;
    else if (*kind == "cpu") g.async = false;
    else throw Error(r.origin("device_kind"), fmt::format("property device_kind: '{}' is not one of: gpu, cpu", *kind));
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
  l.socket_bw = r.quantity("socket_bw", units::Kind::Bandwidth, false, transport_defaults::socket_bw);
  l.staging_bw = r.quantity("staging_bw", units::Kind::Bandwidth, false, transport_defaults::staging_bw);
  const std::string lat_key = t == Transport::Ib ? "ib_stack_latency" : "tcp_stack_latency";
  if ((t == Transport::Tcp || t == Transport::Ib) && r.get(lat_key))
    l.stack_latency = r.quantity(lat_key, units::Kind::Time, false, 0);
  for (const char* key : {"socket_bw", "staging_bw"})
    if (r.get(key) && !(r.quantity(key, units::Kind::Bandwidth, false) > 0))
      throw Error(r.origin(key), fmt::format("property {} must be positive", key));
  if (!(line > 0)) throw Error(where, fmt::format("link '{}' with a transport needs a positive bandwidth", l.id));
  return l;
}

// A written link figure ("1.25GBps", "50us"), with file:line on error.
double link_attr(const pugi::xml_node& n, const char* attr, units::Kind kind, const Origin& o) {
  const char* v = n.attribute(attr).value();
  try {
    return units::parse(v, kind);
  } catch (const Error& e) {
    throw Error(o, fmt::format("{}=\"{}\": {}", attr, v, e.what()));
  }
}

void node_facts(NodeFacts& n, const Props& p) {
  PropReader r{p, n.origin};
  n.cpu_cores = static_cast<int>(r.number("cpu_cores", false, 1, 1, 1 << 20));
  n.loader_bw = r.quantity("loader_bw", units::Kind::Bandwidth, false, 0);
  n.loader_image_overhead = r.quantity("loader_image_overhead", units::Kind::Time, false, 0);
  n.h2d_pageable_bw = r.quantity("h2d_pageable_bw", units::Kind::Bandwidth, false, 0);
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

}  // namespace

PlatformFacts read_platform_facts(const std::string& path) {
  Ctx c;
  c.path = path;
  std::ifstream in(path);
  if (!in) throw Error(Origin{path, 0}, "cannot open platform file");
  c.text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  c.index();
  pugi::xml_document doc;
  auto res = doc.load_buffer(c.text.data(), c.text.size());
  if (!res) throw Error(Origin{path, c.line_of(res.offset)}, fmt::format("malformed XML: {}", res.description()));
  auto root = doc.document_element();
  if (std::string(root.name()) != "platform")
    throw Error(c.at(root), fmt::format("root element is <{}>, expected <platform>", root.name()));
  PlatformFacts facts;
  facts.path = path;
  Walker w{c, facts, {}};
  for (auto zone : root.children("zone")) {
    facts.props.clear();
    for (const auto& [k, v] : own_props(c, zone)) facts.props[k] = v.first;
    w.walk_zone(zone, {});
  }
  if (facts.nodes.empty())
    throw Error(c.at(root), "no GPU hosts: give hosts or clusters a gpu_model property (README, Platform files)");
  return facts;
}

}  // namespace vitsim
