#pragma once
// The flat-star platform layout (platform_writer.hpp: Layout::FlatStar), read as a description vitsim builds
// in code (sim/fabric/platform_build.hpp) instead of handing the file to SimGrid's parser. Pure: no SimGrid
// here.
//
// The file is SimGrid-style XML whose first <zone> has routing="None" and the prop vitsim_layout=flat-star.
// Its children are <cluster>s (one per node: hosts prefix+radical+suffix, a lane per GPU (bw, lat), a FATPIPE
// backbone (bb_bw, bb_lat), a loopback (loopback_bw, loopback_lat)) and the nodes' NIC links, named
// "<node>-nic" (one link for the node's NICs) or "<node>-nic0" ... (rail-optimised: one link per NIC; GPU k
// of G uses rail k x R / G); or, for a fat-tree, <zone routing="None"> pods holding those, and a
// "<pod>-uplink" link per pod. No <route>, <zoneRoute> or <host>: routes are computed (docs/platforms.md,
// layouts). Two more network topologies are named by the top zone's prop vitsim_topology: `torus` (the nodes,
// in the top zone, in torus order: the first dimension varies fastest; props vitsim_torus_dims "4,4,2",
// vitsim_link_bw and vitsim_link_lat give each torus link) and `dragonfly` (the nodes in group zones,
// routing="None", without up-links; every pair of groups joined by one global link of vitsim_link_bw and
// vitsim_link_lat).
#include <string>
#include <vector>

namespace vitsim {

struct FlatLink {
  std::string id;
  double bw = 0, lat = 0;
};

struct FlatNode {
  std::string id;
  std::vector<std::string> hosts;  // GPU hosts in radical order
  std::vector<long> radicals;
  double speed = 0;                          // flop/s of one host
  double lane_bw = 0, lane_lat = 0;          // "<id>_link_<radical>" (split-duplex), per GPU
  double bb_bw = 0, bb_lat = 0;              // "<id>_backbone" (FATPIPE); bb_bw 0 = none
  double loopback_bw = 0, loopback_lat = 0;  // "<id>_link_<radical>_loopback" (FATPIPE); 0 = none
  std::string router;                        // router_id, or "<id>-router"
  std::vector<FlatLink> nics;                // empty: no NIC (a one-node platform); 1: shared; R: rails
  int line = 0;
  int rail_of(int k) const {
    return nics.empty() ? -1 : static_cast<int>(static_cast<long long>(k) * nics.size() / hosts.size());
  }
};

struct FlatPod {
  std::string id;  // "" for the nodes of a star (no pods)
  std::vector<FlatNode> nodes;
  FlatLink uplink;  // pods only
};

enum class FlatTopology { Star, FatTree, Torus, Dragonfly };

struct FlatPlatform {
  std::string path;
  std::string zone_id;
  bool pods = false;  // a fat-tree or a dragonfly: nodes in pod (group) zones
  FlatTopology topology = FlatTopology::Star;
  std::vector<unsigned long> torus_dims;  // torus: nodes per dimension, first fastest
  FlatLink fabric;                        // torus: each torus link; dragonfly: each global link (id unused)
  std::vector<FlatPod> groups;            // one group (id "") for a star
  size_t gpus() const;
  size_t nodes() const;
};

// True when `text`'s first <zone> carries the prop vitsim_layout=flat-star (cheap: looks at the text before
// and just after that zone's opening tag; the writer puts the prop first).
bool is_flat_layout_text(const std::string& text);
// True when the file at `path` is a flat-star platform (reads its first 1 MiB).
bool is_flat_layout_file(const std::string& path);
// Parses a flat-star file; throws Error "PATH:LINE: what" for anything the layout does not allow.
FlatPlatform read_flat_platform(const std::string& path, const std::string& text);
FlatPlatform read_flat_platform_file(const std::string& path);
// "4x4x2" or "4,4,2": a torus's nodes per dimension (1 to 6 dimensions, at most 2^20 nodes); throws Error.
std::vector<unsigned long> parse_torus_dims(const std::string& text);

}  // namespace vitsim
