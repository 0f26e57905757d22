// The checks of a PlatformSpec (platform_writer.hpp: check_platform_spec): nodes, GPU counts, the fabric
// against the GPU, and the topology's own rules.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "platform/platform_read.hpp"
#include "platform/platform_writer_detail.hpp"
#include "vitsim/core/platform/platform_flat.hpp"
#include "vitsim/core/platform/platform_writer.hpp"

namespace vitsim {

using namespace platform_detail;

namespace {

constexpr double kMaxOversubscription = 1024;

std::vector<unsigned long> torus_dims_of(const TopologySpec& topo) {
  try {
    return parse_torus_dims(topo.torus_dims);
  } catch (const Error& e) {
    throw Error(fmt::format("torus dimensions '{}': {} (--torus-dims 4x4x2: nodes per dimension)",
                            topo.torus_dims, e.what()));
  }
}

// The topology's own checks: a fat-tree's pods and oversubscription, a torus's dimensions against the nodes,
// a dragonfly's groups; every topology but the star states the NIC transport per NIC link.
void check_topology(const PlatformSpec& spec) {
  const TopologySpec& topo = spec.topology;
  parse_topology_kind(topo.kind);
  const bool star = topo.kind == "star", fat_tree = topo.kind == "fat-tree", torus = topo.kind == "torus";
  if (!fat_tree && topo.oversubscription != 1)
    throw Error(fmt::format("oversubscription applies to a fat-tree, not a {}", topo.kind));
  if (!torus && !topo.torus_dims.empty())
    throw Error(fmt::format("torus dimensions apply to a torus, not a {}", topo.kind));
  if (topo.kind != "dragonfly" && topo.global_links != 1)
    throw Error(fmt::format("global links apply to a dragonfly, not a {}", topo.kind));
  if (fat_tree) {
    if (!(topo.oversubscription >= 1) || !std::isfinite(topo.oversubscription))
      throw Error(fmt::format("fat-tree oversubscription {} must be at least 1 (1 = non-blocking, 4 = 4:1)",
                              topo.oversubscription));
    // Deployed fat-trees taper at most about 8:1 (a pod's up-link an eighth of its NICs); 1024:1 leaves room
    // for any what-if, while 1e300 made each up-link 1e-300 of a NIC and predictions of 1e300 s (issue 27).
    if (topo.oversubscription > kMaxOversubscription)
      throw Error(
          fmt::format("fat-tree oversubscription {} is out of range (expected 1 .. {}: 1 = "
                      "non-blocking, 4 = 4:1)",
                      topo.oversubscription, kMaxOversubscription));
    if (topo.pod_nodes < 1) throw Error("fat-tree needs nodes per pod (--pod-nodes N, at least 1)");
  }
  if (torus) {
    if (topo.pod_nodes != 0)
      throw Error("a torus has no pods (--pod-nodes applies to a fat-tree or a dragonfly)");
    if (topo.torus_dims.empty())
      throw Error("a torus needs its dimensions (--torus-dims 4x4x2: nodes per dimension)");
    size_t cells = 1;
    for (unsigned long d : torus_dims_of(topo)) cells *= d;
    if (cells != spec.nodes.size())
      throw Error(fmt::format("torus dimensions {} hold {} nodes, the platform has {}", topo.torus_dims,
                              cells, spec.nodes.size()));
  }
  if (topo.kind == "dragonfly") {
    if (topo.pod_nodes < 1) throw Error("a dragonfly needs nodes per group (--pod-nodes N, at least 1)");
    if (spec.nodes.size() <= static_cast<size_t>(topo.pod_nodes))
      throw Error(
          fmt::format("a dragonfly of {} nodes in groups of {} has one group: use a star, or smaller groups",
                      spec.nodes.size(), topo.pod_nodes));
  }
  if (!star && find_prop(spec.zone_props, "transport"))
    throw Error(fmt::format(
        "a {} writes the NIC transport on each NIC link (its fabric links carry none): drop 'transport' "
        "from zone_props and give it as the NIC's",
        topo.kind));
}

}  // namespace

void check_platform_spec(const PlatformSpec& spec) {
  // SimGrid names the top zone by the id; an empty one was written and then refused by predict (issue 27).
  if (spec.id.empty()) throw Error("the platform's id is empty (--id, or \"id\" in a spec): give it a name");
  if (spec.nodes.empty())
    throw Error("no nodes: give at least one (--nodes N, or \"nodes\"/\"node_groups\" in a spec)");
  // Every GPU is a host, and each node is a <cluster> (a zone, one name among the netpoints) with its
  // router, in both layouts: past the reader's limit at that count, the file is refused before it is
  // written, not after (the count grows with the nodes alone, so it is checked first).
  double netpoints = 0;
  for (const auto& n : spec.nodes) netpoints += 2.0 + std::max(n.gpus, 0);
  if (netpoints > static_cast<double>(platform_read::kMaxNetpoints))
    throw Error(
        fmt::format("{} nodes with {:.0f} GPUs in all: at least {:.0f} hosts, routers and zones, more than "
                    "the {} the platform "
                    "reader takes (the platform was not written: vitsim predict would refuse it)",
                    spec.nodes.size(), netpoints - 2.0 * static_cast<double>(spec.nodes.size()), netpoints,
                    platform_read::kMaxNetpoints));
  std::set<std::string> ids;
  for (const auto& n : spec.nodes) {
    if (!ids.insert(n.id).second) throw Error(fmt::format("node '{}' is named twice", n.id));
    if (n.gpus < 1) throw Error(fmt::format("node '{}': GPUs per node must be at least 1", n.id));
    const GpuTypeSpec& t = spec.gpu_types.at(n.gpu_type);
    const std::string& k = n.fabric.kind;
    if ((k == "nvlink" || k == "nvswitch" || k == "nvlink_bridge") && n.fabric.bw.empty() &&
        t.gpu_link_bw.empty())
      throw Error(fmt::format(
          "node '{}': fabric {} needs a per-GPU NVLink bandwidth, and GPU type '{}' has no NVLink or "
          "Infinity Fabric in the catalogue; use pcie_p2p or pcie_host, or give the bandwidth "
          "(--intranode-bw)",
          n.id, k, n.gpu_type));
    if (k == "nvlink_bridge" && n.gpus > 2)
      throw Error(fmt::format(
          "node '{}': NVLink bridges join GPUs two by two; with {} GPUs a node the cluster layout gives "
          "every pair the same path (not yet): use pcie_p2p (a ring of more than 2 GPUs crosses PCIe "
          "anyway) or nvswitch",
          n.id, n.gpus));
    if (spec.nodes.size() > 1 && n.nic.speed.empty())
      throw Error(fmt::format(
          "node '{}': no NIC speed (--nic-speed 400Gbps or a catalogue NIC: ndr, 100gbe, ...)", n.id));
  }
  check_topology(spec);
}

}  // namespace vitsim
