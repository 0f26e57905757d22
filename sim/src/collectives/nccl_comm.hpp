#pragma once
// NCCL's model of a communicator as the `auto` collective builds it
// (sim/src/collectives/collective_nccl.cpp), for whoever weighs NCCL's choices outside a run:
// nccl_would_run's notes (nccl_notes.cpp), the gradient reduction's regime (sim/src/point/comm_regime.cpp).
// The platform's side (nccl_platform.cpp): each GPU's figures as the platform file gives them (GpuFacts:
// gpu_arch, gpu_link, gpu_link_bw, gpu_host_link, or the catalogue's for gpu_model), the SM version and NVLS
// capability from the catalogue's architecture.
#include <map>
#include <optional>
#include <string>

#include "vitsim/core/formats/whatif.hpp"
#include "vitsim/core/model/nccl_tuning.hpp"
#include "vitsim/sim/collectives/collective.hpp"

namespace vitsim {
struct PlatformFacts;  // vitsim/core/platform/platform.hpp
}

namespace vitsim::sim {

// What the platform says that every group's NcclPlatform shares: per GPU host its NCCL figures, and the
// node's GPU-GPU fabric and NICs (from the links that state a transport).
struct PlatformNccl {
  struct Gpu {
    int sm = 0;         // NCCL's compute capability x 10 (the catalogue architecture's nccl.sm)
    bool nvls = false;  // the architecture runs NVLS behind NVSwitch (the catalogue's nccl.nvls)
    bool cpu = false;   // device_kind cpu: the rank runs on the host and communicates over MPI
    NcclIntra fabric = NcclIntra::Pcie;  // gpu_link: NVSwitch, NVLink (a bridge, a mesh), none
    int nvlinks = 0;
    double pcie_bw = 0;  // GB/s, NCCL's rating of gpu_host_link
  };
  std::map<std::string, Gpu> gpu;              // SimGrid host name -> figures
  std::map<std::string, std::string> unrated;  // a GPU host the tuner cannot rate -> why (one line)
  bool intra_pcie = false;                     // a GPU-GPU link inside a node states a PCIe transport
  bool intra_host = false;  // ... staged through host memory (pcie_host): NCCL finds no P2P, PHB
  double node_nic_gbs = 0;  // GB/s of one node's NICs together (a vitsim platform writes them as one link)
  // Of those, the NICs the links state NCCL sees (nic_count), and the GB/s of links that state none (an older
  // or hand-written file: their NICs are inferred), per node; the most GPUs on a node.
  double node_nics_stated = 0;
  double node_unstated_nic_gbs = 0;
  int node_gpus = 0;
  double net_latency_us = 0;         // the net plugin's latency property (efa: efa_net_latency)
  double net_unseen_latency_us = 0;  // per network step, not stated to NCCL (tcpx, tcpxo: both ends' stacks)
  bool collnet = false;              // ib_sharp: SHARP through NCCL's CollNet plugin
};

// Every GPU host's figures; a host the tuner cannot rate goes to `unrated` (refused where a group holds it).
PlatformNccl platform_nccl(const PlatformFacts& facts);
// Throws Error, the first of `hosts` that holds a GPU the tuner cannot rate and why; nothing where any of
// them is a CPU device (MPI, not NCCL) or fewer than 2 are given.
void check_nccl_rated(const PlatformNccl& p, const std::vector<std::string>& hosts);
// The group as an NCCL communicator (its nodes, GPUs per node, slowest GPU, fabric, NICs); Error where a
// member is unrated.
NcclPlatform group_platform(const Group& g, const PlatformNccl& p);
// The NCCL connections each link of facts.links carries at once (LinkFacts::connections, same order), for
// the socket transport's sockets: on a tcp NIC link, the channels of one communicator over the whole platform
// (nccl_topo's comm_channels for nccl.version, "" the newest, within nccl.min_channels and
// nccl.max_channels) shared by the node's NIC links in proportion to
// their rates, at least 1; 1 on every other link, and where the platform has one node, a GPU the tuner
// cannot rate or a CPU device.
std::vector<int> nccl_net_connections(const PlatformFacts& facts, const NcclSpec& nccl);
// nccl_net_connections at the scenario's NCCL version, for EditedPlatforms::set_link_connections (a what-if's
// note on an edited link weighs it as the simulation will).
EditedPlatforms::LinkConnections nccl_link_connections();

struct NcclComm {
  NcclTopo topo;
  NcclTuning tuning;
  const NcclVersion* version = nullptr;
  NcclChoice choose(NcclFunc f, double bytes) const;
};
// Over g's members with c's version and overrides; none where g has fewer than 2 members, a CPU device (MPI,
// not NCCL) or c no platform facts. Throws Error where NCCL's topology or tuning refuses it, or a member's
// GPU is unrated.
std::optional<NcclComm> nccl_comm(const Group& g, const CollectiveContext& c);
// The group's NICs as NCCL's model took them, for the notes: "NCCL sees 4 NICs a node at 12.5 GB/s each
// (nic_count as the platform states it)", or how they were inferred; "" for a group on one node.
std::string nccl_nics_note(const NcclPlatform& np, const PlatformNccl& p);
// The NCCL function a collective operation is.
NcclFunc nccl_func_of(CollOp op);
// Whether NCCL's rating bounds a call of choice c (collective_nccl.cpp's head comment): LL and LL128 (the
// GPU's threads polling flags), NVLS, NVLSTree and CollNet (the switches reducing): there a call takes no
// less than NCCL's own estimate, c.time_us.
bool nccl_rated(const NcclChoice& c);

// For notes: "64 MiB", "all-reduce".
std::string size_text(double bytes);
const char* op_text(CollOp op);

}  // namespace vitsim::sim
