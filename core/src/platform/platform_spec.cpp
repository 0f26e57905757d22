// `vitsim platform`'s JSON spec files (platforms/specs/*.json; docs/platforms.md): parsed into a
// PlatformSpec, one clear error per fault naming the key. The NIC transports' settings and the node figures
// come from the platform-property table (core/platform/platform_props.hpp).
#include <fmt/format.h>

#include <map>

#include "platform/platform_writer_detail.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/model/energy.hpp"
#include "vitsim/core/platform/platform_props.hpp"
#include "vitsim/core/platform/platform_writer.hpp"
#include "vitsim/core/platform/transport.hpp"

namespace vitsim {

using namespace platform_detail;

Props nic_transport_props(const std::string& transport) {
  const std::string t = normalise_name(transport);
  // The transport, then every setting that transport reads with its default, in the property table's order
  // (a default that is no constant, "(inferred: ...)", is not written: nic_count is the writer's own).
  auto with_settings = [](const char* name) {
    Props out{{"transport", name}};
    for (const auto& p : platform_props())
      if (p.owner == PropOwner::Link && prop_applies_to(p, name) && p.default_text.front() != '(')
        out.emplace_back(std::string(p.key), std::string(p.default_text));
    return out;
  };
  // One table of names with the platform reader (transport_by_name): what one accepts, the other does.
  const std::optional<Transport> tr = transport_by_name(t);
  if (tr == Transport::Tcp || tr == Transport::Ib || (tr && is_cloud_transport(*tr)))
    return with_settings(transport_name(*tr));
  throw Error(fmt::format("unknown NIC transport '{}'; valid: {}", transport, kNicTransportNames));
}

std::string parse_topology_kind(const std::string& name) {
  const std::string t = normalise_name(name);
  if (t == "star" || t == "nonblocking") return "star";
  if (t == "fattree") return "fat-tree";
  if (t == "dragonfly" || t == "torus") return t;
  throw Error(
      fmt::format("unknown topology '{}'; valid: star (non-blocking), fat-tree (--oversubscription, "
                  "--pod-nodes), torus (--torus-dims), dragonfly (--pod-nodes, --global-links)",
                  name));
}

const CatalogueLink* catalogue_nic(const std::string& speed, const Catalogue& cat) {
  try {
    units::parse(speed, units::Kind::Bandwidth);
    return nullptr;
  } catch (const Error&) {
  }
  const CatalogueLink* l = nullptr;
  try {
    l = &cat.link(speed);
  } catch (const Error& e) {
    throw Error(fmt::format("neither a rate with its unit (\"400Gbps\") nor a catalogue NIC: {}", e.what()));
  }
  if (l->kind != "nic")
    throw Error(fmt::format(
        "'{}' is {} link, not a NIC; NICs: 1gbe ... 400gbe, edr, hdr, ndr, xdr, or a rate (\"400Gbps\")",
        l->name, l->kind == "intranode" ? "an intranode" : "a " + l->kind));
  return l;
}

namespace {

void parse_pcie(const Json& js, const ojson& j, const std::string& where, PcieSpec& p) {
  js.keys(j, where, {"bw", "lat", "h2d_bw", "h2d_lat"});
  if (j.contains("bw")) p.bw = js.quantity(j["bw"], where + ".bw", units::Kind::Bandwidth);
  if (j.contains("lat")) p.lat = js.quantity(j["lat"], where + ".lat", units::Kind::Time);
  if (j.contains("h2d_bw")) p.h2d_bw = js.quantity(j["h2d_bw"], where + ".h2d_bw", units::Kind::Bandwidth);
  if (j.contains("h2d_lat")) p.h2d_lat = js.quantity(j["h2d_lat"], where + ".h2d_lat", units::Kind::Time);
}

void parse_fabric(const Json& js, const ojson& j, const std::string& where, FabricSpec& f) {
  js.keys(j, where, {"fabric", "bw", "lat", "staging_bw"});
  if (j.contains("fabric")) {
    f.kind = js.field(j, where).at("fabric").string();
    static const std::vector<std::string> kinds{"pcie_host", "pcie_p2p", "nvlink", "nvswitch",
                                                "nvlink_bridge"};
    if (std::find(kinds.begin(), kinds.end(), f.kind) == kinds.end())
      js.fail(where + ".fabric", fmt::format("unknown fabric '{}'; valid: {}", f.kind, join(kinds)));
  }
  if (j.contains("bw")) f.bw = js.quantity(j["bw"], where + ".bw", units::Kind::Bandwidth);
  if (j.contains("lat")) f.lat = js.quantity(j["lat"], where + ".lat", units::Kind::Time);
  if (j.contains("staging_bw"))
    f.staging_bw = js.quantity(j["staging_bw"], where + ".staging_bw", units::Kind::Bandwidth);
}

void parse_nic(const Json& js, const ojson& j, const std::string& where, NicSpec& n, const Catalogue& cat) {
  js.keys(j, where, {"count", "speed", "lat", "transport", "rail_optimised", "props"});
  if (j.contains("count")) n.count = js.integer(j["count"], where + ".count", 1, 64);
  if (j.contains("speed")) {
    const std::string s = js.text(j["speed"], where + ".speed");
    const CatalogueLink* l = nullptr;
    try {
      l = catalogue_nic(s, cat);
    } catch (const Error& e) {
      js.fail(where + ".speed", fmt::format("'{}': {}", s, e.what()));
    }
    if (!l) {
      n.speed = js.quantity(j["speed"], where + ".speed", units::Kind::Bandwidth);
    } else {
      n.speed = l->line_rate;
      n.transport = l->transport;  // a "transport" key in the same object wins (read below)
    }
  }
  if (j.contains("lat")) n.lat = js.quantity(j["lat"], where + ".lat", units::Kind::Time);
  if (j.contains("transport")) {
    n.transport = js.field(j, where).at("transport").string();
    try {
      nic_transport_props(n.transport);
    } catch (const Error& e) {
      js.fail(where + ".transport", e.what());
    }
  }
  if (j.contains("rail_optimised")) n.rail_optimised = js.field(j, where).at("rail_optimised").boolean();
  if (j.contains("props"))
    for (const auto& [k, v] : js.props(j["props"], where + ".props")) set_prop(n.props, k, v);
}

}  // namespace

namespace {
PlatformSpec parse_platform_spec_json(const std::string& json_text, const std::string& path,
                                      const Catalogue& cat);
}

PlatformSpec parse_platform_spec(const std::string& json_text, const std::string& path,
                                 const Catalogue& cat) {
  try {
    return parse_platform_spec_json(json_text, path, cat);
  } catch (const nlohmann::json::exception& e) {
    throw Error(Origin{path, 0}, e.what());
  }
}

namespace {

// price_per_gpu_hour and price_per_kwh, kept as written in the zone's properties.
void parse_prices(const Json& js, const ojson& j, PlatformSpec& spec) {
  if (j.contains("price_per_gpu_hour")) {
    const std::string p = js.text(j["price_per_gpu_hour"], "price_per_gpu_hour");
    try {
      (void)units::parse_number(p, platform_prop("price_per_gpu_hour").range);
    } catch (const Error&) {
      js.fail("price_per_gpu_hour",
              fmt::format("'{}' is not a non-negative number (currency units per GPU-hour)", p));
    }
    spec.zone_props.emplace_back("price_per_gpu_hour", p);
  }
  if (j.contains("price_per_kwh")) {
    const std::string p = js.text(j["price_per_kwh"], "price_per_kwh");
    try {
      parse_price_per_kwh(p, "price_per_kwh");
    } catch (const Error& e) {
      js.fail("", e.what());
    }
    spec.zone_props.emplace_back("price_per_kwh", p);
  }
}

// One entry of gpu_types: a catalogue GPU and/or its own props and PCIe figures.
GpuTypeSpec parse_gpu_type(const Json& js, const std::string& name, const ojson& e, const Catalogue& cat) {
  const std::string where = "gpu_types." + name;
  js.keys(e, where, {"catalogue", "efficiency_precision", "props", "pcie"});
  GpuTypeSpec t;
  t.name = name;
  const std::string precision =
      e.contains("efficiency_precision") ? js.field(e, where).at("efficiency_precision").string() : "bf16";
  if (precision != "fp32" && precision != "fp16" && precision != "bf16")
    js.fail(where + ".efficiency_precision", fmt::format("'{}': valid: fp32, fp16, bf16", precision));
  if (e.contains("catalogue")) {
    const std::string catalogue_name = js.field(e, where).at("catalogue").string();
    const CatalogueGpu* g = nullptr;
    try {
      g = &cat.gpu(catalogue_name);
    } catch (const Error& err) {
      js.fail(where + ".catalogue", err.what());
    }
    t = gpu_type_from_catalogue(cat, *g, precision);
    t.name = name;
  }
  if (e.contains("pcie")) parse_pcie(js, e["pcie"], where + ".pcie", t.pcie);
  if (e.contains("props"))
    for (const auto& [k, v] : js.props(e["props"], where + ".props")) set_prop(t.props, k, v);
  if (!find_prop(t.props, "gpu_flops_fp32"))
    js.fail(where,
            "names no catalogue GPU (\"catalogue\": \"h100-sxm\") and gives no gpu_flops_fp32 in props");
  if (t.pcie.bw.empty() || t.pcie.h2d_bw.empty())
    js.fail(where, "needs pcie.bw and pcie.h2d_bw (no catalogue GPU to take them from)");
  if (t.pcie.lat.empty()) t.pcie.lat = cat.default_value("pcie_lat");
  if (t.pcie.h2d_lat.empty()) t.pcie.h2d_lat = cat.default_value("h2d_lat");
  return t;
}

// What every node has unless it says otherwise: "node" props, "intranode" and "nic".
struct NodeDefaults {
  Props props;
  FabricSpec fabric;
  bool fabric_given = false;  // a top-level "intranode"
  NicSpec nic;
};

NodeDefaults parse_node_defaults(const Json& js, const ojson& j, const Catalogue& cat) {
  NodeDefaults d;
  if (j.contains("node")) {
    // The node properties a spec's "node" states: the node rows of the property table, in its order.
    std::vector<std::string> keys;
    for (const auto& p : platform_props())
      if (p.owner == PropOwner::Node && p.spec.rfind("node", 0) == 0) keys.emplace_back(p.key);
    js.keys(j["node"], "node", keys);
    for (auto it = j["node"].begin(); it != j["node"].end(); ++it) {
      const std::string where = "node." + it.key();
      const PlatformProp& p = platform_prop(it.key());
      if (p.type == PropType::Integer)
        d.props.emplace_back(it.key(),
                             std::to_string(js.integer(it.value(), where, static_cast<int>(p.int_low()),
                                                       static_cast<int>(p.int_high()))));
      else
        d.props.emplace_back(it.key(), js.quantity(it.value(), where, p.unit));
    }
  }
  if (j.contains("intranode")) parse_fabric(js, j["intranode"], "intranode", d.fabric);
  d.fabric_given = j.contains("intranode");
  if (j.contains("nic")) parse_nic(js, j["nic"], "nic", d.nic, cat);
  return d;
}

void parse_topology(const Json& js, const ojson& j, TopologySpec& topo) {
  if (!j.contains("topology")) return;
  const ojson& t = j["topology"];
  js.keys(t, "topology",
          {"kind", "oversubscription", "pod_nodes", "uplink_lat", "torus_dims", "global_links"});
  const OField f = js.field(t, "topology");
  const std::string kind = t.contains("kind") ? f.at("kind").string() : "star";
  try {
    topo.kind = parse_topology_kind(kind);
  } catch (const Error& e) {
    f.at("kind").fail(e.what());
  }
  if (t.contains("oversubscription")) topo.oversubscription = f.at("oversubscription").number();
  if (t.contains("pod_nodes")) topo.pod_nodes = js.integer(t["pod_nodes"], "topology.pod_nodes", 1, 1 << 20);
  if (t.contains("uplink_lat"))
    topo.uplink_lat = js.quantity(t["uplink_lat"], "topology.uplink_lat", units::Kind::Time);
  if (t.contains("torus_dims")) topo.torus_dims = js.text(t["torus_dims"], "topology.torus_dims");
  if (t.contains("global_links"))
    topo.global_links = js.integer(t["global_links"], "topology.global_links", 1, 1 << 10);
}

// One node (of "nodes", or one of a node group), the defaults overridden by what it gives.
NodeSpec parse_node(const Json& js, const ojson& n, const std::string& where, const std::string& id,
                    const PlatformSpec& spec, const NodeDefaults& d, const Catalogue& cat) {
  NodeSpec node;
  node.id = id;
  const OField f = js.field(n, where);
  node.gpus = static_cast<int>(f.at("gpus").integer(1, 1 << 16));
  node.gpu_type = f.at("gpu").string();
  auto t = spec.gpu_types.find(node.gpu_type);
  if (t == spec.gpu_types.end()) {
    std::vector<std::string> names;
    for (const auto& [k, v] : spec.gpu_types) names.push_back(k);
    js.fail(where + ".gpu",
            fmt::format("'{}' is not a gpu_types entry; entries: {}", node.gpu_type, join(names)));
  }
  node.pcie = t->second.pcie;
  if (n.contains("pcie")) parse_pcie(js, n["pcie"], where + ".pcie", node.pcie);
  node.fabric = d.fabric;
  if (n.contains("intranode")) parse_fabric(js, n["intranode"], where + ".intranode", node.fabric);
  // No "intranode" anywhere: the catalogue GPU's path, as `vitsim platform --gpu` takes it.
  if (!d.fabric_given && !n.contains("intranode")) node.fabric.kind = t->second.default_fabric;
  node.nic = d.nic;
  if (n.contains("nic")) parse_nic(js, n["nic"], where + ".nic", node.nic, cat);
  node.props = d.props;
  if (n.contains("props"))
    for (const auto& [k, v] : js.props(n["props"], where + ".props")) set_prop(node.props, k, v);
  // The CPU and loader figures no one stated: the flags' defaults (default_node_props).
  for (const auto& [k, v] : default_node_props(node.gpus))
    if (!find_prop(node.props, k) && !find_prop(t->second.props, k)) node.props.emplace_back(k, v);
  return node;
}

// "nodes" (each named) and "node_groups" (PREFIX0 .. PREFIX<count-1>, zero-padded).
void parse_nodes(const Json& js, const ojson& j, const NodeDefaults& d, const Catalogue& cat,
                 PlatformSpec& spec) {
  if (j.contains("nodes"))
    for (size_t i = 0; i < j["nodes"].size(); ++i) {
      const std::string where = fmt::format("nodes[{}]", i);
      js.keys(j["nodes"][i], where, {"id", "gpus", "gpu", "pcie", "intranode", "nic", "props"});
      spec.nodes.push_back(parse_node(js, j["nodes"][i], where,
                                      js.field(j["nodes"][i], where).at("id").string(), spec, d, cat));
    }
  if (j.contains("node_groups"))
    for (size_t i = 0; i < j["node_groups"].size(); ++i) {
      const ojson& g = j["node_groups"][i];
      const std::string where = fmt::format("node_groups[{}]", i);
      js.keys(g, where, {"prefix", "count", "gpus", "gpu", "pcie", "intranode", "nic", "props"});
      const OField f = js.field(g, where);
      const int count = static_cast<int>(f.at("count").integer(1, 1 << 20));
      const std::string prefix = f.at("prefix").string();
      const size_t width = std::to_string(count - 1).size();
      for (int k = 0; k < count; ++k)
        spec.nodes.push_back(
            parse_node(js, g, where, fmt::format("{}{:0{}d}", prefix, k, width), spec, d, cat));
    }
}

PlatformSpec parse_platform_spec_json(const std::string& json_text, const std::string& path,
                                      const Catalogue& cat) {
  const Json js{path};
  const ojson j = js.parse(json_text);
  js.keys(j, "",
          {"id", "comment", "price_per_gpu_hour", "price_per_kwh", "gpu_types", "node", "intranode", "nic",
           "topology", "zone_props", "nodes", "node_groups"});
  PlatformSpec spec;
  spec.id = j.contains("id") ? js.field(j, "").at("id").string() : "platform";
  spec.comment = j.contains("comment") ? js.field(j, "").at("comment").string() : "";
  parse_prices(js, j, spec);
  if (!j.contains("gpu_types") || j["gpu_types"].empty())
    js.fail("gpu_types", "missing: name at least one GPU type");
  for (auto it = j["gpu_types"].begin(); it != j["gpu_types"].end(); ++it)
    spec.gpu_types[it.key()] = parse_gpu_type(js, it.key(), it.value(), cat);
  const NodeDefaults defaults = parse_node_defaults(js, j, cat);
  parse_topology(js, j, spec.topology);
  parse_nodes(js, j, defaults, cat, spec);
  if (j.contains("zone_props"))
    for (const auto& [k, v] : js.props(j["zone_props"], "zone_props")) set_prop(spec.zone_props, k, v);
  try {
    check_platform_spec(spec);
  } catch (const Error& e) {
    js.fail("", e.what());
  }
  return spec;
}
}  // namespace

}  // namespace vitsim
