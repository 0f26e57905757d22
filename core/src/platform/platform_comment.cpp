// The header comment `vitsim platform` writes when a spec gives none: a sketch of the topology and every
// figure with its source (data/catalogue.json, docs/sources.md).
#include <fmt/format.h>

#include <map>
#include <sstream>

#include "platform/platform_writer_detail.hpp"
#include "vitsim/core/platform/platform_writer.hpp"

namespace vitsim::platform_detail {

namespace {

// "  - text" wrapped at 110 columns, continuation lines indented under the text.
std::string bullet(const std::string& text) {
  std::string out = "  -", word;
  size_t col = 3;
  std::istringstream words(text);
  while (words >> word) {
    if (col + 1 + word.size() > 110 && col > 4) out += "\n   ", col = 3;
    out += ' ' + word;
    col += 1 + word.size();
  }
  return out + "\n";
}

// The sketch: the first node's box (its GPUs, GPU-to-GPU path and NICs) and, for several nodes, the network.
std::string sketch(const PlatformSpec& spec) {
  std::map<std::string, int> per_type;
  int gpus = 0;
  for (const auto& n : spec.nodes) per_type[n.gpu_type] += n.gpus, gpus += n.gpus;
  const NodeSpec& first = spec.nodes.front();
  std::string types;
  for (const auto& [t, c] : per_type) types += (types.empty() ? "" : ", ") + fmt::format("{} x {}", c, t);
  const std::string fabric = first.fabric.kind.empty() ? "as written" : first.fabric.kind;
  const bool multi = spec.nodes.size() > 1;
  const std::string nics =
      multi
          ? fmt::format("{} x {} NIC{}, {}", first.nic.count, first.nic.speed, first.nic.count > 1 ? "s" : "",
                        first.nic.transport.empty() ? "no transport" : first.nic.transport)
          : "no NIC (one node)";
  const TopologySpec& topo = spec.topology;
  const std::string core = topo.kind == "star"    ? std::string("non-blocking switch (star)")
                           : topo.kind == "torus" ? fmt::format("torus {}", topo.torus_dims)
                           : topo.kind == "dragonfly"
                               ? fmt::format("dragonfly: groups of {} nodes", topo.pod_nodes)
                               : fmt::format("fat-tree: pods of {} nodes, up-links {:g}:1 oversubscribed",
                                             topo.pod_nodes, topo.oversubscription);
  std::string c = fmt::format("  {}: {} node{}, {} GPUs ({}).\n\n", spec.id, spec.nodes.size(),
                              multi ? "s" : "", gpus, types);
  auto row = [](const std::string& text) { return fmt::format("   | {:<32}|\n", text); };
  c += fmt::format("      {:<30}{}\n", first.id, multi ? "...   " + spec.nodes.back().id : "");
  c += "   +---------------------------------+\n";
  c += row(fmt::format("gpu0 ... gpu{} ({})", first.gpus - 1, first.gpu_type));
  c += row("GPU<->GPU: " + fabric);
  c += row(nics);
  c += "   +----------------+----------------+\n";
  if (multi) c += "                    |\n   +---- " + core + " ----+\n";
  return c;
}

// The first node's GPU-to-GPU path, when a fabric is named.
std::string fabric_bullets(const NodeSpec& first, const Catalogue& cat) {
  std::string c;
  const CatalogueLink& l = cat.link(first.fabric.kind == "nvlink_bridge" ? "nvlink3_bridge"
                                    : first.fabric.kind == "nvlink"      ? "infinity_fabric"
                                                                         : first.fabric.kind);
  c += bullet(fmt::format("GPU<->GPU {}{}: {}", first.fabric.kind,
                          first.fabric.bw.empty() ? "" : " at " + first.fabric.bw + " (given)",
                          first.fabric.kind == "nvlink"
                              ? "direct links (NVLink without a switch, Infinity Fabric), ASSUMPTION: "
                                "collectives spread over every link, as NCCL/RCCL run a ring per link; " +
                                    l.source
                              : l.source));
  c += bullet(fmt::format(
      "GPU<->GPU latency {}: ASSUMPTION (NCCL's per-step cost inside a node); an 8-byte all_reduce_perf "
      "on one node replaces it",
      first.fabric.lat));
  return c;
}

// The NICs and the topology of a platform of several nodes.
std::string network_bullets(const PlatformSpec& spec, Layout layout) {
  const NodeSpec& first = spec.nodes.front();
  std::string c;
  if (spec.nodes.size() > 1) {
    c += bullet(fmt::format(
        "NICs: {} x {} line rate, {} per end (NIC, cable and switch: ASSUMPTION; ping replaces it); the "
        "node's "
        "NICs are one link of {} (NCCL spreads its channels over every NIC){}{}",
        first.nic.count, first.nic.speed, first.nic.lat, nic_bw(first.nic),
        first.nic.transport.empty()
            ? ""
            : "; nic_count states the NICs NCCL sees (docs/platforms.md \"NICs as NCCL sees them\")",
        !first.nic.rail_optimised ? ""
        : layout == Layout::FlatStar
            ? "; rail-optimised: each NIC is a rail, its own link, GPU k of G on rail k x NICs / G"
            : "; rail-optimised: in this layout a rail is not a separate path (the flat-star layout has "
              "rails)"));
    if (!first.nic.transport.empty())
      c += bullet(fmt::format(
          "transport {}: docs/platforms.md \"Link transports\" and docs/sources.md give each setting's "
          "source",
          normalise_name(first.nic.transport) == "roce" ? "roce (written as ib: RoCE v2 runs NCCL's verbs)"
                                                        : first.nic.transport));
  }
  if (spec.topology.kind == "fat-tree")
    c += bullet(fmt::format(
        "fat-tree: each pod's up-link is its nodes' NIC capacity / {:g}, latency {} (a leaf-to-spine hop: "
        "ASSUMPTION); a route between pods crosses both pods' up-links",
        spec.topology.oversubscription, spec.topology.uplink_lat));
  if (spec.topology.kind == "torus")
    c += bullet(fmt::format(
        "torus {}: nodes in order, the first dimension fastest; each node has a link to its next neighbour "
        "in "
        "every dimension at one NIC's line rate {} each way, latency {} a hop (ASSUMPTION); routes go "
        "dimension by dimension, each the shorter way round (SimGrid's TorusZone)",
        spec.topology.torus_dims, first.nic.speed, spec.topology.uplink_lat));
  if (spec.topology.kind == "dragonfly")
    c += bullet(fmt::format(
        "dragonfly: groups of {} consecutive nodes, non-blocking inside a group (ASSUMPTION: a balanced "
        "dragonfly's local links carry its minimal routes, Kim et al. 2008); each pair of groups joined by "
        "{} global link{} of {} each way, latency {} (ASSUMPTION); minimal routes, one global hop",
        spec.topology.pod_nodes, spec.topology.global_links, spec.topology.global_links > 1 ? "s" : "",
        first.nic.speed, spec.topology.uplink_lat));
  return c;
}

}  // namespace

std::string default_comment(const PlatformSpec& spec, Layout layout) {
  const NodeSpec& first = spec.nodes.front();
  std::string c = sketch(spec);
  c += "\n  Every figure with its source (data/catalogue.json, docs/sources.md):\n";
  for (const auto& [name, t] : spec.gpu_types)
    for (const auto& note : t.notes) c += bullet(note);
  const Catalogue& cat = builtin_catalogue();
  for (const char* d :
       {"gpu_gemm_tile", "gpu_kernel_overhead", "gpu_sync_overhead", "host_op_overhead", "gpu_reserved",
        "pcie_lat", "h2d_lat", "gpu_busy_power_fraction", "gpu_idle_power_fraction"})
    c += bullet(fmt::format("{} {}: {}", d, cat.default_value(d), cat.default_entry(d).source));
  if (!first.fabric.kind.empty()) c += fabric_bullets(first, cat);
  c += network_bullets(spec, layout);
  std::string node;
  for (const auto& [k, v] : first.props) node += (node.empty() ? "" : ", ") + k + " " + v;
  if (!node.empty())
    c += bullet(node +
                ": given, or the defaults (14 CPU cores a GPU, as a DGX H100's 112 for 8; the study's loader "
                "figures, "
                "docs/sources.md): ASSUMPTIONS that `vitsim calibrate` replaces");
  if (const std::string* p = find_prop(spec.zone_props, "price_per_gpu_hour"))
    c += bullet("price per GPU-hour " + *p + ": as given");
  if (const std::string* p = find_prop(spec.zone_props, "price_per_kwh"))
    c += bullet("price per kWh " + *p + ": as given");
  return c;
}

}  // namespace vitsim::platform_detail
