#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/platform/platform_flat.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <optional>
#include <pugixml.hpp>
#include <set>
#include <sstream>

#include "platform/platform_read.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/platform/platform_props.hpp"

namespace vitsim {

double GpuFacts::peak_flops(Precision p) const {
  switch (p) {
    case Precision::FP32:
      return flops_fp32;
    case Precision::FP16:
      return flops_fp16;
    case Precision::BF16:
      return flops_bf16;
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

namespace platform_read {

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
      throw Error(
          o, fmt::format("bad cluster radical '{}'; expected e.g. 0-7 or 0-3,8 (at most 10,000,000 hosts)",
                         echo(r)));
    }
  }
  return out;
}

}  // namespace platform_read

using namespace platform_read;

namespace {

// An element's own <prop>s; one id given twice is refused with both lines (the last silently won: issue 27).
Props own_props(const Ctx& c, const pugi::xml_node& n) {
  Props p;
  for (auto prop : n.children("prop")) {
    const std::string id = prop.attribute("id").value();
    auto [it, fresh] = p.try_emplace(id, prop.attribute("value").value(), c.at(prop));
    if (!fresh)
      throw Error(c.at(prop),
                  fmt::format("<prop id=\"{}\"> given twice in <{}> (also at line {}): which one holds is "
                              "ambiguous; keep one",
                              echo(id), n.name(), it->second.second.line));
  }
  if (c.values)
    for (const FigureValue& v : *c.values) {
      const auto range = p.find(v.key + std::string(kRangeSuffix));
      if (range == p.end() || range->second.first != v.range) continue;
      auto [it, fresh] = p.try_emplace(v.key, v.value, range->second.second);
      if (!fresh) it->second.first = v.value;
    }
  return p;
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

Props merged(const Props& outer, const Props& inner) {
  Props out = outer;
  for (const auto& [k, v] : inner) out[k] = v;
  return out;
}

struct Walker {
  const Ctx& c;
  PlatformFacts& facts;
  std::set<std::string> names;
  bool check = true;  // the routes checked (false: a file read and checked before, PlatformDocument)

  // `g`: the GPU's facts from its props, read at the first GPU of a cluster and copied to the others (its
  // hosts share one set of props: a cluster of 8 GPUs read once, not 8 times; docs/benchmarks.md "Prediction
  // intervals (issue 26)").
  void add_gpu(NodeFacts& node, const std::string& host, std::optional<GpuFacts>& g, const Props& props,
               const Origin& o) {
    if (!names.insert(host).second) throw Error(o, fmt::format("host '{}' is declared twice", host));
    node.gpus.push_back(host);
    if (!g) g = gpu_facts(props, o);
    GpuFacts& facts_of_host = facts.gpu[host] = *g;
    if (facts_of_host.model.empty()) facts_of_host.model = host;
  }

  // Returns the names of the netpoints directly inside `zone` that hold GPUs (for route checks).
  void walk_zone(const pugi::xml_node& zone, const Props& inherited) {
    Props props = merged(inherited, own_props(c, zone));
    figure_ranges(own_props(c, zone), props, c.at(zone), fmt::format("zone {}", zone.attribute("id").value()),
                  facts.ranges);
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
        figure_ranges(own_props(c, el), cp, n.origin, "cluster " + n.name, facts.ranges);
        cluster_transport(el, cp, n.origin);
        std::optional<GpuFacts> g;
        for (long i : parse_radical(el.attribute("radical").value(), n.origin))
          add_gpu(n, fmt::format("{}{}{}", el.attribute("prefix").value(), i, el.attribute("suffix").value()),
                  g, cp, n.origin);
        gpu_children.push_back({n.name, n.origin});
        facts.nodes.push_back(std::move(n));
      } else if (tag == "host") {
        Props hp = merged(props, own_props(c, el));
        if (!hp.count("gpu_model") && !hp.count("gpu_flops_fp32")) continue;
        NodeFacts n;
        n.name = el.attribute("id").value();
        n.origin = c.at(el);
        node_facts(n, hp);
        figure_ranges(own_props(c, el), hp, n.origin, "host " + n.name, facts.ranges);
        std::optional<GpuFacts> g;
        add_gpu(n, n.name, g, hp, n.origin);
        gpu_children.push_back({n.name, n.origin});
        facts.nodes.push_back(std::move(n));
      } else if (tag == "link") {
        Props lp = merged(props, own_props(c, el));
        auto t = lp.find("transport");
        if (t == lp.end()) continue;
        const Origin o = c.at(el);
        const Transport tr = parse_transport(t->second.first, t->second.second, "transport");
        facts.links.push_back(
            link_facts(lp, o, el.attribute("id").value(), "NIC", tr,
                       link_attr(el, "bandwidth", units::Kind::Bandwidth, o),
                       el.attribute("latency") ? link_attr(el, "latency", units::Kind::Time, o) : 0,
                       std::string(el.attribute("sharing_policy").value()) == "SPLITDUPLEX"));
        figure_ranges(own_props(c, el), lp, o, fmt::format("link {}", el.attribute("id").value()),
                      facts.ranges);
      } else if (tag == "zone") {
        size_t before = facts.nodes.size();
        walk_zone(el, props);
        if (facts.nodes.size() > before) gpu_children.push_back({el.attribute("id").value(), c.at(el)});
      }
    }
    if (check) check_routes(zone, gpu_children);
  }

  // A cluster's intranode_transport is the transport of its backbone, SimGrid's "<id>_backbone" link.
  void cluster_transport(const pugi::xml_node& el, const Props& cp, const Origin& o) {
    auto t = cp.find("intranode_transport");
    if (t == cp.end()) return;
    const Transport tr = parse_transport(t->second.first, t->second.second, "intranode_transport",
                                         {Transport::NvLink, Transport::PcieHost, Transport::PcieP2p});
    if (!el.attribute("bb_bw"))
      throw Error(t->second.second,
                  "property intranode_transport: the cluster has no backbone (bb_bw) to carry it");
    const std::string id = std::string(el.attribute("id").value()) + "_backbone";
    facts.links.push_back(
        link_facts(cp, o, id, "GPU-GPU in node", tr, link_attr(el, "bb_bw", units::Kind::Bandwidth, o),
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
          throw Error(c.at(zone),
                      fmt::format("zone '{}' (routing Full) has no route from '{}' to '{}'",
                                  zone.attribute("id").value(), members[i].first, members[j].first));
  }
};

// ib_sharp (the top zone's): yes or no; yes only where a NIC link runs InfiniBand (SHARP reduces in IB
// switches; NCCL's CollNet runs over the verbs transport).
void check_sharp(const Props& zone_props, const PlatformFacts& facts) {
  const auto it = zone_props.find("ib_sharp");
  if (it == zone_props.end()) return;
  const auto& [value, where] = it->second;
  if (value != "yes" && value != "no")
    throw Error(where, fmt::format("property ib_sharp: '{}' is not one of: {}", echo(value),
                                   platform_prop("ib_sharp").choices));
  if (value == "no") return;
  for (const LinkFacts& l : facts.links)
    if (l.what == "NIC" && l.transport == Transport::Ib) return;
  throw Error(where,
              "property ib_sharp: yes needs InfiniBand NICs (a NIC link with transport ib): SHARP reduces "
              "in InfiniBand switches");
}

}  // namespace

PlatformFacts read_platform_facts(const std::string& path) {
  // Before pugixml or SimGrid sees it: regular, size-limited.
  return read_platform_text(path, read_input_file(path, "platform file"));
}

namespace {

// Parses `c.text` (its lines indexed) into `doc`; returns the root <platform>.
pugi::xml_node parse(Ctx& c, pugi::xml_document& doc) {
  c.index();
  auto res = doc.load_buffer(c.text.data(), c.text.size());
  if (!res)
    throw Error(Origin{c.path, c.line_of(res.offset)}, fmt::format("malformed XML: {}", res.description()));
  auto root = doc.document_element();
  if (std::string(root.name()) != "platform")
    throw Error(c.at(root), fmt::format("root element is <{}>, expected <platform>", root.name()));
  return root;
}

// The facts of a parsed file; `check`: also what SimGrid would abort on (structure, routes).
PlatformFacts read_parsed(const Ctx& c, const pugi::xml_node& root, bool check) {
  if (check) check_structure(c, root);
  PlatformFacts facts;
  facts.path = c.path;
  facts.flat_layout = is_flat_layout_text(c.text.size() > (1u << 20) ? c.text.substr(0, 1u << 20) : c.text);
  Walker w{c, facts, {}, check};
  for (auto zone : root.children("zone")) {
    facts.props.clear();
    for (const auto& [k, v] : own_props(c, zone)) facts.props[k] = v.first;
    w.walk_zone(zone, {});
    check_sharp(own_props(c, zone), facts);
  }
  // Links whose figures change during a run (SimGrid profiles): a transfer's time is then the profile's.
  facts.link_profiles = !root.select_nodes(
                                 "//link[@bandwidth_file or @latency_file or @state_file] | "
                                 "//backbone[@bandwidth_file or @latency_file or @state_file] | //trace | "
                                 "//trace_connect")
                             .empty();
  if (facts.nodes.empty())
    throw Error(c.at(root),
                "no GPU hosts: give hosts or clusters a gpu_model property (docs/platform-properties.md "
                "\"GPU properties\")");
  return facts;
}

}  // namespace

PlatformFacts read_platform_text(const std::string& path, const std::string& text) {
  Ctx c;
  c.path = path;
  c.text = text;
  pugi::xml_document doc;
  const pugi::xml_node root = parse(c, doc);
  return read_parsed(c, root, true);
}

struct PlatformDocument::Parsed {
  Ctx c;
  pugi::xml_document doc;
  pugi::xml_node root;
};

PlatformDocument::PlatformDocument(const std::string& path, const std::string& text)
    : parsed_(std::make_unique<Parsed>()) {
  parsed_->c.path = path;
  parsed_->c.text = text;
  parsed_->root = parse(parsed_->c, parsed_->doc);
}

PlatformDocument::~PlatformDocument() = default;

PlatformFacts PlatformDocument::with(const std::vector<FigureValue>& values) {
  parsed_->c.values = &values;
  struct Reset {
    Ctx& c;
    ~Reset() { c.values = nullptr; }
  } reset{parsed_->c};
  return read_parsed(parsed_->c, parsed_->root, false);
}

// What a platform does not state (the narrow-output and per-family figures, fitted by vitsim calibrate) keeps
// DeviceFigures' neutral value.
DeviceFigures device_figures(const GpuFacts& g, Precision p) {
  const double gemm = g.gemm_efficiency > 0 ? g.gemm_efficiency : g.efficiency;
  return DeviceFigures{.device_type = g.model,
                       .peak_flops = g.peak_flops(p),
                       .mem_bw = g.mem_bw,
                       .sm_count = g.sm_count,
                       .tile_m = g.tile_m,
                       .tile_n = g.tile_n,
                       .gemm_efficiency = gemm,
                       .gemm_k_half = g.gemm_k_half,
                       .attn_efficiency = g.attn_efficiency > 0 ? g.attn_efficiency : gemm,
                       .mem_efficiency = g.mem_efficiency,
                       .kernel_s = g.kernel_overhead,
                       .host_op_s = g.host_op_overhead,
                       .sync_s = g.sync_overhead,
                       .async = g.async};
}

}  // namespace vitsim
