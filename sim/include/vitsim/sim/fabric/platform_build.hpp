#pragma once
// Loading a platform into SimGrid: flat-star files (core/platform/platform_flat.hpp) are built in code
// through the s4u NetZone API, linear in GPUs; every other file goes to SimGrid's own parser unchanged.
//
// The flat build: one star zone (a fat-tree: a star zone per pod under a top star zone of pods). Each GPU's
// route to the star's centre is its lane ("<node>_link_<r>", split-duplex) + its node's backbone
// ("<node>_backbone", FATPIPE) + its node's NIC ("<node>-nic"), or, rail-optimised, its lane + its rail's NIC
// ("<node>-nic<r>"); a pair of GPUs in one node takes a bypass route lane + backbone + lane (no NIC); a GPU
// to itself its loopback
// ("<node>_link_<r>_loopback"). The links and their names are those SimGrid's <cluster> creates, but for the
// FATPIPE backbone, built as one FATPIPE piece per GPU and direction ("<node>_backbone_<r>_UP"/"_DOWN": the
// same cap and latency for every transfer, without coupling all flows of a ring in SimGrid's solver); so a
// route between two GPUs holds the same links, caps and latency as in the cluster-per-node layout; a pod's
// route to the top adds its up-link ("<pod>-uplink"), as the cluster-per-node fat-tree's zoneRoutes do.
#include <simgrid/s4u.hpp>

#include <string>
#include <vector>

#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/platform/platform_flat.hpp"

namespace vitsim::sim {

struct BuildCounts {
  size_t zones = 0, hosts = 0, routers = 0, links = 0, routes = 0, bypass_routes = 0;
};

// Builds `p` into `e` (whose configuration is already set; no zone may exist yet), then seals the platform.
BuildCounts build_flat_platform(simgrid::s4u::Engine& e, const FlatPlatform& p);
// The one loader of platform files: a flat-star file is read (core) and built; any other goes to
// Engine::load_platform. Returns the counts of a flat build (zeros for a parsed file).
BuildCounts load_platform_file(simgrid::s4u::Engine& e, const std::string& path);
// The same for the file at `path` whose facts are `facts` (read from it), without reading it again: a
// flat-star file (facts.flat_layout) is built from `flat` (its description, as check_platform_loads returned
// it), or read now when `flat` is null; any other goes to Engine::load_platform.
BuildCounts load_platform(simgrid::s4u::Engine& e, const std::string& path, const PlatformFacts& facts,
                          const FlatPlatform* flat);
// The pieces of a link of the file that the last flat build split ("<node>_backbone"), or nullptr.
const std::vector<simgrid::s4u::Link*>* flat_link_pieces(const std::string& name);

// Applies the platform's link transports (core/platform/transport.hpp) to the loaded SimGrid links
// (sim/src/fabric/link_transports.cpp): each link that states one gets its effective bandwidth, and its
// latency grows by the transport's per-message stack latency (which LatencyModel then records with the rest).
// Call after load_platform_file, before LatencyModel. Returns one note per class of links (what transport
// model gave which bandwidth). Throws Error naming the platform file when SimGrid has no link of a stated id.
// `connections`: per link of facts.links (same order), the NCCL connections it carries at once (LinkFacts::
// connections; the engine takes them from NCCL's model); empty: each link's own.
std::vector<std::string> apply_link_transports(simgrid::s4u::Engine& e, const PlatformFacts& facts,
                                               const std::vector<int>& connections = {});

}  // namespace vitsim::sim
