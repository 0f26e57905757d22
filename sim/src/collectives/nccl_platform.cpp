// The platform's side of NCCL's communicator (nccl_comm.hpp): each GPU host's figures as NCCL's topology
// search would find them, read from the platform file (GpuFacts: gpu_arch, gpu_link, gpu_link_bw,
// gpu_host_link, which the reader takes from gpu_model's catalogue entry where the file does not state them)
// and the catalogue's architectures (NCCL's SM version and NVLS capability: data/catalogue.json,
// docs/sources.md "Catalogue"). A GPU the tuner cannot rate (no architecture, an architecture without an SM
// version, no fabric or host link) is refused where a communicator holds it, with what to state; never rated
// as another.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "collectives/nccl_comm.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/platform/platform_writer.hpp"

namespace vitsim::sim {
namespace {

// The architectures the tuner knows: those with an SM version in the catalogue.
std::string known_archs() {
  std::string out;
  for (const auto& [name, a] : builtin_catalogue().archs)
    if (a.nccl_sm > 0) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// NCCL's rating of a PCIe link from its generation and width (src/graph/xml.cc kvDictPciGen, GT/s class
// per lane: 2.5 -> 15, 5 -> 30, 8 -> 60, 16 -> 120, 32 -> 240, 64 -> 480; width x class / 80, GB/s):
// pcie4_x16 -> 24, pcie5_x16 -> 48.
double pcie_bw_of(int gen, int lanes) {
  static const std::map<int, double> per_lane{{1, 15}, {2, 30}, {3, 60}, {4, 120}, {5, 240}, {6, 480}};
  return lanes * per_lane.at(gen) / 80;
}

// One GPU host's figures, or why the tuner cannot rate it (`why`, one line).
PlatformNccl::Gpu gpu_nccl(const std::string& host, const GpuFacts& f, std::string& why) {
  PlatformNccl::Gpu g;
  g.cpu = !f.async;
  if (g.cpu) return g;
  const std::string who = fmt::format("GPU host '{}' (gpu_model '{}')", host, f.model);
  if (f.arch.empty()) {
    why = fmt::format(
        "{}: NCCL's tuner needs its architecture: state gpu_arch (known: {}), gpu_link and gpu_host_link, or "
        "name a catalogue GPU as gpu_model (vitsim platform --list-gpus)",
        who, known_archs());
    return g;
  }
  const CatalogueArch& a = builtin_catalogue().archs.at(f.arch);  // the reader checked the name
  if (a.nccl_sm <= 0) {
    why = fmt::format(
        "{}: architecture '{}' has no NCCL SM version in the catalogue (RCCL is not modelled); "
        "known: {}",
        who, f.arch, known_archs());
    return g;
  }
  g.sm = a.nccl_sm;
  if (f.link.empty()) {
    why = fmt::format("{}: NCCL's tuner needs its GPU-to-GPU fabric: state gpu_link (none, nvlink, nvswitch)",
                      who);
    return g;
  }
  if (f.pcie_gen <= 0) {
    why = fmt::format("{}: NCCL's tuner needs its PCIe link: state gpu_host_link (pcie4_x16, ...)", who);
    return g;
  }
  g.nvls = a.nvls;
  g.pcie_bw = pcie_bw_of(f.pcie_gen, f.pcie_lanes);
  if (f.link != "none") {
    g.fabric = f.link == "nvswitch" ? NcclIntra::NvSwitch : NcclIntra::NvLink;
    // The per-direction bandwidth over one link's datasheet rate: NVLink 2 to 4 carry 25 GB/s per link
    // (150, 300, 450 GB/s are 6, 12, 18 links), NVLink 5 50 (900 GB/s: 18), GA102's bridge 14.0625 (4).
    g.nvlinks = std::max(1, static_cast<int>(std::lround(f.link_bw / (nvlink_line_per_link(g.sm) * 1e9))));
  }
  return g;
}

// NCCL's guess of a NIC count from a rate alone, for links that state no nic_count (an older or hand-written
// file, where a node's NICs were one link of their sum): the rate over 400 Gb/s ports (NDR, 50 GB/s), rounded
// up, at least 1. ASSUMPTION, right for 8 x NDR; nic_count replaces it.
int inferred_nics(double gbs) {
  return std::max(1, static_cast<int>(std::ceil(gbs / 50 - 1e-9)));
}

// A node's NICs as NCCL sees them. Stated (nic_count on every NIC link, as `vitsim platform` writes it): that
// count, each at the node's NIC rate / count. NCCL's search takes every net device it finds and each
// channel's bandwidth from one (search.cc ncclTopoSearchRecNet: nets[(nChannels + i) % netCount], net.bw -=
// the channel's), with no bound at one per GPU; a communicator of g of the node's G GPUs reaches the NICs
// beside its GPUs: count x g / G, rounded up (ASSUMPTION: NICs spread evenly over the node's PCIe switches,
// as on DGX, HGX and AWS p4d/p5). Not stated: the old fold, the node's rate over 400 Gb/s ports, rounded up,
// at most one per GPU of the communicator. No NIC stated: one at 25 GB/s (HDR).
void set_nics(NcclPlatform& np, const PlatformNccl& p) {
  if (p.node_nic_gbs <= 0) {
    np.nics_per_node = 1;
    np.nic_bw = 25;
    return;
  }
  if (p.node_nics_stated <= 0) {
    np.nics_per_node = std::min(inferred_nics(p.node_nic_gbs), np.gpus_per_node);
    np.nic_bw = p.node_nic_gbs / np.nics_per_node;
    return;
  }
  const double count =
      p.node_nics_stated + (p.node_unstated_nic_gbs > 0 ? inferred_nics(p.node_unstated_nic_gbs) : 0);
  const double share =
      p.node_gpus > 0 ? std::min(1.0, np.gpus_per_node / static_cast<double>(p.node_gpus)) : 1;
  np.nics_per_node = std::max(1, static_cast<int>(std::ceil(count * share - 1e-9)));
  np.nic_bw = p.node_nic_gbs / count;
}

}  // namespace

PlatformNccl platform_nccl(const PlatformFacts& facts) {
  PlatformNccl p;
  for (const auto& [host, gf] : facts.gpu) {
    std::string why;
    p.gpu[host] = gpu_nccl(host, gf, why);
    if (!why.empty()) p.unrated[host] = why;
  }
  double nic_total = 0, unstated = 0;  // bytes/s of every NIC link, of those that state no nic_count
  double stated = 0;                   // their nic_count
  for (const LinkFacts& l : facts.links) {
    if (l.what == "NIC") {
      nic_total += l.bandwidth;
      if (l.nic_count > 0)
        stated += l.nic_count;
      else
        unstated += l.bandwidth;
      // A plugin's per-step cost, the largest any NIC states (every node runs the same plugin).
      p.net_latency_us = std::max(p.net_latency_us, l.net_latency * 1e6);
      if (l.transport == Transport::Tcpx || l.transport == Transport::Tcpxo)
        p.net_unseen_latency_us = std::max(p.net_unseen_latency_us, 2 * link_effect(l).extra_latency * 1e6);
    } else if (l.transport == Transport::PcieHost || l.transport == Transport::PcieP2p)
      p.intra_pcie = true;
    if (l.what != "NIC" && l.transport == Transport::PcieHost) p.intra_host = true;
  }
  const double nodes = std::max<double>(1, static_cast<double>(facts.nodes.size()));
  p.node_nic_gbs = nic_total / 1e9 / nodes;
  p.node_nics_stated = stated / nodes;
  p.node_unstated_nic_gbs = unstated / 1e9 / nodes;
  for (const NodeFacts& n : facts.nodes) p.node_gpus = std::max(p.node_gpus, static_cast<int>(n.gpus.size()));
  if (auto it = facts.props.find("ib_sharp"); it != facts.props.end()) p.collnet = it->second == "yes";
  return p;
}

void check_nccl_rated(const PlatformNccl& p, const std::vector<std::string>& hosts) {
  if (hosts.size() < 2) return;
  for (const auto& h : hosts)
    if (auto it = p.gpu.find(h); it != p.gpu.end() && it->second.cpu) return;
  for (const auto& h : hosts)
    if (auto it = p.unrated.find(h); it != p.unrated.end()) throw Error(it->second);
}

namespace {

// The slowest GPU's figures over a communicator's members, and the fabric they share.
struct GpuFold {
  NcclPlatform np;
  bool all_nvswitch = true, all_nvlink = true, all_nvls = true;
  int nvlinks = 1 << 20;
  GpuFold() {
    np.sm = 1000;
    np.pcie_bw = 1e9;
  }
  void add(const PlatformNccl::Gpu& gpu) {
    np.sm = std::min(np.sm, gpu.sm);
    np.pcie_bw = std::min(np.pcie_bw, gpu.pcie_bw);
    all_nvswitch = all_nvswitch && gpu.fabric == NcclIntra::NvSwitch;
    all_nvlink = all_nvlink && gpu.fabric != NcclIntra::Pcie;
    all_nvls = all_nvls && gpu.nvls;
    nvlinks = std::min(nvlinks, gpu.nvlinks);
  }
  // np.nodes and np.gpus_per_node set: the fabric (PCIe when a GPU-GPU link states a PCIe transport or a GPU
  // has no NVLink; NVLS where every GPU's architecture runs it and they sit on NVSwitch), NICs, plugin.
  NcclPlatform finish(const PlatformNccl& p) {
    np.intra = p.intra_pcie || !all_nvlink ? NcclIntra::Pcie
               : all_nvswitch              ? NcclIntra::NvSwitch
                                           : NcclIntra::NvLink;
    np.nvlinks_per_gpu = np.intra == NcclIntra::Pcie ? 0 : nvlinks;
    if (np.intra == NcclIntra::Pcie && p.intra_host) np.pcie_path = NcclPath::Phb;
    np.nvls = np.intra == NcclIntra::NvSwitch && all_nvls && np.gpus_per_node > 1;
    set_nics(np, p);
    np.net_latency_us = p.net_latency_us;
    np.net_unseen_latency_us = p.net_unseen_latency_us;
    np.collnet = p.collnet;
    return np;
  }
};

}  // namespace

// The group as an NCCL communicator: its nodes and GPUs per node (the most on any node), the slowest GPU's
// figures, the fabric, the NICs and their plugin.
NcclPlatform group_platform(const Group& g, const PlatformNccl& p) {
  std::map<int, int> per_node;
  GpuFold fold;
  for (int i = 0; i < g.size(); ++i) {
    ++per_node[g.node_of(i)];
    const std::string& host = g.host(i)->get_name();
    if (auto bad = p.unrated.find(host); bad != p.unrated.end()) throw Error(bad->second);
    auto it = p.gpu.find(host);
    if (it == p.gpu.end())
      throw Error(
          fmt::format("internal error: no NCCL figures for host '{}' (the collective auto needs the "
                      "platform's facts: Collective::configure)",
                      host));
    fold.add(it->second);
  }
  fold.np.nodes = static_cast<int>(per_node.size());
  for (const auto& [node, n] : per_node) fold.np.gpus_per_node = std::max(fold.np.gpus_per_node, n);
  return fold.finish(p);
}

std::string nccl_nics_note(const NcclPlatform& np, const PlatformNccl& p) {
  if (np.nodes < 2) return "";
  const std::string seen = fmt::format("NCCL's model sees {} NIC{} a node at {:.4g} GB/s each",
                                       np.nics_per_node, np.nics_per_node == 1 ? "" : "s", np.nic_bw);
  if (p.node_nic_gbs <= 0) return seen + " (no NIC link states a transport: NCCL's rating of one HDR port)";
  if (p.node_nics_stated <= 0)
    return seen + fmt::format(
                      " (inferred from the node's {:.4g} GB/s of NICs as 400 Gb/s ports: the platform states "
                      "no nic_count; docs/platforms.md \"NICs as NCCL sees them\")",
                      p.node_nic_gbs);
  return seen + (p.node_unstated_nic_gbs > 0
                     ? " (nic_count as stated, and inferred where a NIC link states none)"
                     : " (nic_count as the platform states it)");
}

std::vector<int> nccl_net_connections(const PlatformFacts& facts, const NcclSpec& nccl) {
  std::vector<int> out(facts.links.size(), 1);
  bool sockets = false;
  for (const LinkFacts& l : facts.links)
    sockets = sockets || (l.what == "NIC" && l.transport == Transport::Tcp);
  if (facts.nodes.size() < 2 || !sockets) return out;
  const PlatformNccl p = platform_nccl(facts);
  if (!p.unrated.empty()) return out;
  GpuFold fold;
  for (const auto& [host, gpu] : p.gpu) {
    if (gpu.cpu) return out;
    fold.add(gpu);
  }
  fold.np.nodes = static_cast<int>(facts.nodes.size());
  for (const NodeFacts& n : facts.nodes)
    fold.np.gpus_per_node = std::max(fold.np.gpus_per_node, static_cast<int>(n.gpus.size()));
  const NcclVersion& v = nccl.version.empty() ? nccl_newest_version() : nccl_version(nccl.version);
  NcclTopo topo = nccl_topo(fold.finish(p), v);
  nccl_limit_channels(topo, v, nccl.overrides());
  const int channels = topo.comm_channels;
  // The node's NIC links share its channels in proportion to their rates (NCCL spreads channels over the
  // NICs: search.cc ncclTopoSearchRecNet takes nets[(nChannels + i) % netCount]).
  for (size_t i = 0; i < facts.links.size(); ++i) {
    const LinkFacts& l = facts.links[i];
    if (l.what != "NIC" || l.transport != Transport::Tcp) continue;
    const double share = p.node_nic_gbs > 0 ? std::min(1.0, l.bandwidth / 1e9 / p.node_nic_gbs) : 1;
    out[i] = std::max(1, static_cast<int>(std::lround(channels * share)));
  }
  return out;
}

EditedPlatforms::LinkConnections nccl_link_connections() {
  return [](const PlatformFacts& facts, const Scenario& s) { return nccl_net_connections(facts, s.nccl); };
}

NcclFunc nccl_func_of(CollOp op) {
  return op == CollOp::ReduceScatter ? NcclFunc::ReduceScatter
         : op == CollOp::AllGather   ? NcclFunc::AllGather
                                     : NcclFunc::AllReduce;
}

bool nccl_rated(const NcclChoice& c) {
  return c.proto != NcclProto::Simple || c.algo == NcclAlgo::Nvls || c.algo == NcclAlgo::NvlsTree ||
         c.algo == NcclAlgo::CollNetDirect || c.algo == NcclAlgo::CollNetChain;
}

NcclChoice NcclComm::choose(NcclFunc f, double bytes) const {
  return nccl_choose(f, static_cast<std::uint64_t>(bytes), tuning, topo, *version);
}

std::optional<NcclComm> nccl_comm(const Group& g, const CollectiveContext& c) {
  if (g.size() < 2 || !c.facts) return std::nullopt;
  const PlatformNccl platform = platform_nccl(*c.facts);
  for (int i = 0; i < g.size(); ++i) {
    auto it = platform.gpu.find(g.host(i)->get_name());
    if (it != platform.gpu.end() && it->second.cpu) return std::nullopt;
  }
  NcclComm comm;
  comm.version = c.nccl_version.empty() ? &nccl_newest_version() : &nccl_version(c.nccl_version);
  comm.topo = nccl_topo(group_platform(g, platform), *comm.version);
  nccl_limit_channels(comm.topo, *comm.version, c.nccl_overrides());
  comm.tuning = nccl_tune(comm.topo, *comm.version, c.nccl_overrides());
  return comm;
}

}  // namespace vitsim::sim
