// nccl_topo (core/include/vitsim/core/model/nccl_tuning.hpp): an approximation of NCCL's topology search
// (src/graph/search.cc ncclTopoCompute, src/init.cc, src/graph/connect.cc ncclTopoPostset) from what a
// platform knows. NCCL searches rings over its detected PCI/NVLink/NIC graph with a timeout; this keeps its
// outline in closed form (docs/model.md "NCCL's tuner"):
//  - the speeds tried are the version's speed array (Hopper's or the others'; inside a node or across
//    nodes), starting at the first at most the fastest path (maxBw) whose minimum channels fit the GPU's
//    total bandwidth (search.cc 18:855-858);
//  - at speed s a ring gets min(maxChannels, floor(gpu_bw / s), NICs x floor(nic_bw / s)) channels: each
//    channel enters and leaves every GPU once and crosses one NIC (ASSUMPTION: links are shared evenly,
//    as through an NVSwitch or a PCIe switch);
//  - the search keeps the solution with most bandwidth (channels x speed), stops when it reaches the GPU's
//    total bandwidth or maxChannels, and tries slower speeds only while they are above .49 of the best
//    (search.cc 18:880-881, 18:925);
//  - channels at 25 GB/s or more are duplicated (18:970-978), then the communicator doubles them again
//    (connect.cc 18:390, 23:455), and Hopper across nodes doubles once more (18:403, 23:469);
//  - the tree takes the ring's channels and speeds (init.cc 18:886-887: min = max = the ring's channels);
//    CollNet likewise; NVLS one channel per GPU at the first speed that fits (search.cc 18:834-836).
// A platform that knows NCCL's graphs (NCCL_DEBUG=INFO, NCCL_GRAPH_DUMP_FILE) should state them instead.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/model/nccl_tuning.hpp"

namespace vitsim {
namespace {

constexpr double kLocBw = 5000.0;  // LOC_BW: one GPU alone (topo.h 18:13, 23:13, 27:15)

struct Speeds {
  int n = 0;
  double bw = 0;
  double total() const { return n * bw; }
};

// The per-GPU bandwidth figures the search starts from (ncclTopoSearchInit): the fastest path to a peer
// (or to a NIC across nodes) and the GPU's total (NVLink or PCIe).
struct Budget {
  double gpu_bw = 0;    // what one GPU's links carry, one direction
  double max_bw = 0;    // the fastest single path
  double total_bw = 0;  // system->totalBw
};

Budget budget(const NcclPlatform& p, const NcclVersion& v) {
  Budget b;
  const double nvlink = p.intra == NcclIntra::Pcie ? 0 : p.nvlinks_per_gpu * v.nvlink_bw(p.sm);
  b.gpu_bw = std::max(nvlink, p.pcie_bw);
  b.total_bw = b.gpu_bw;
  if (p.nodes > 1) {
    b.max_bw = std::min(p.nic_bw, p.pcie_bw);  // GPU -> PCIe switch -> NIC
  } else if (p.gpus_per_node == 1) {
    b.max_bw = b.total_bw = b.gpu_bw = kLocBw;
  } else if (p.intra == NcclIntra::NvLink) {
    b.max_bw = nvlink / (p.gpus_per_node - 1);  // ASSUMPTION: links spread evenly over the peers
  } else {
    b.max_bw = p.intra == NcclIntra::NvSwitch ? nvlink : p.pcie_bw;
  }
  return b;
}

// The ring search at fixed channel bounds; `tree` scales totalBw by g/(g-1) as search.cc does for
// patterns other than the ring (18:856).
Speeds search(const NcclPlatform& p, const NcclVersion& v, int min_channels, int max_channels, bool tree) {
  const Budget b = budget(p, v);
  const bool net = p.nodes > 1;
  const bool blackwell = p.sm >= 100 && !v.sm100_speed_intra.empty();  // 27: search.cc:1040-1044
  const auto& speeds = blackwell    ? (net ? v.sm100_speed_inter : v.sm100_speed_intra)
                       : p.sm >= 90 ? (net ? v.sm90_speed_inter : v.sm90_speed_intra)
                                    : (net ? v.speed_inter : v.speed_intra);
  const int g = p.gpus_per_node;
  double total = b.total_bw;  // search.cc scales it by g / (g - 1): infinite for one GPU
  if (g == 1) total = std::numeric_limits<double>::infinity();
  if (g > 1 && tree) total *= g / (g - 1.0);
  size_t i = 0;
  while (i + 1 < speeds.size() && (speeds[i] > b.max_bw || speeds[i] * min_channels > total)) i++;
  Speeds best;
  for (; i < speeds.size(); i++) {
    const double s = speeds[i];
    double n = std::floor(b.gpu_bw / s + 1e-9);
    if (net) n = std::min(n, p.nics_per_node * std::floor(p.nic_bw / s + 1e-9));
    const int channels = static_cast<int>(std::min<double>(max_channels, n));
    if (channels >= min_channels && channels * s > best.total() + 1e-9) best = Speeds{channels, s};
    if (best.n > 0 && (best.total() >= b.total_bw - 1e-9 || best.n == max_channels)) break;
    if (best.n > 0 && i + 1 < speeds.size() && speeds[i + 1] / best.bw <= .49) break;
  }
  if (best.n == 0) best = Speeds{1, 0.1};  // "falling back to simple order" (search.cc 18:958-966)
  return best;
}

// Duplicate channels at >= 25 GB/s (search.cc 18:970-978, 23:918-926).
Speeds duplicate(Speeds s, int sm, int max_channels) {
  if (s.bw < 25.0) return s;
  if (sm > 80 && s.bw < 50.0 && s.n > 4) return s;
  const int dup = std::min(s.n * 2, max_channels);
  s.bw /= (dup + s.n - 1) / s.n;
  s.n = dup;
  return s;
}

NcclGraph graph(Speeds s, NcclPath intra, NcclPath inter) {
  NcclGraph g;
  g.n_channels = s.n;
  g.bw_intra = g.bw_inter = s.bw;
  g.type_intra = intra;
  g.type_inter = inter;
  g.same_channels = true;
  return g;
}

void check(const NcclPlatform& p) {
  if (p.nodes < 1 || p.gpus_per_node < 1)
    throw Error(fmt::format("NCCL platform: {} nodes x {} GPUs: need at least one of each", p.nodes,
                            p.gpus_per_node));
  if (p.intra != NcclIntra::Pcie && p.gpus_per_node > 1 && p.nvlinks_per_gpu < 1)
    throw Error("NCCL platform: NVLink or NVSwitch inside the node needs nvlinks_per_gpu >= 1");
  if (!(p.pcie_bw > 0)) throw Error("NCCL platform: the GPU's PCIe bandwidth must be > 0");
  if (p.nodes > 1 && (p.nics_per_node < 1 || !(p.nic_bw > 0)))
    throw Error(fmt::format("NCCL platform: {} nodes need NICs (nics_per_node >= 1, nic_bw > 0)", p.nodes));
}

}  // namespace

NcclTopo nccl_topo(const NcclPlatform& p, const NcclVersion& v) {
  check(p);
  NcclTopo t;
  t.nnodes = p.nodes;
  t.nranks = p.nodes * p.gpus_per_node;
  t.sm_min = t.sm_max = p.sm;
  t.cpu = p.cpu;
  const bool v18 = v.rules == NcclRules::V2_18;
  // Path types: one GPU is LOC inside; a single node has no NIC, and the search starts at PIX (search.cc
  // 18:915).
  const NcclPath intra = p.gpus_per_node == 1         ? NcclPath::Loc
                         : p.intra == NcclIntra::Pcie ? p.pcie_path
                                                      : NcclPath::Nvl;
  const NcclPath inter = p.nodes > 1 ? p.nic_path : NcclPath::Pix;
  // Ring: 1 to MAXCHANNELS/2 channels (init.cc 18:878-879, 23:896-897, 27:850-851), then duplicated.
  const int max_channels = v.max_channels;
  const Speeds ring = duplicate(search(p, v, 1, max_channels / 2, false), p.sm, max_channels / 2);
  t.ring = graph(ring, intra, inter);
  t.tree = t.ring;  // min = max = the ring's channels (init.cc 18:886-887, 23:904-905)
  // One GPU per node: the tree pattern is the plain TREE, not BALANCED_TREE (search.cc 18:832, 23:978).
  t.tree.tree_pattern = p.gpus_per_node == 1;
  t.nvswitch = p.intra == NcclIntra::NvSwitch && p.gpus_per_node > 1;
  // NVLS: Hopper and an NVSwitch with multicast, more than 2 GPUs (nvls.cc 18:239, 23:154).
  if (p.nvls && p.sm >= 90 && t.nvswitch && p.gpus_per_node > 2) {
    const int g = p.gpus_per_node;
    t.nvls = graph(search(p, v, g, g, true), intra, inter);
    t.nvls_channels = v.nvls_channels;
    // 27 (nvls.cc:179-193): Blackwell runs 24 NVLS channels inside one NVLink domain, 32 across nodes.
    if (p.sm >= 100 && v.nvls_channels_sm100 > 0)
      t.nvls_channels = p.nodes > 1 ? v.nvls_channels_sm100 : v.nvls_channels_sm100_nvl;
  }
  // CollNet (collNetSupport, init.cc): a CollNet plugin (SHARP) with NCCL_COLLNET_ENABLE=1, on at least
  // NCCL_COLLNET_NODE_THRESHOLD = 2 nodes (init.cc 18:540 and 18:1016, 27:656 and 27:1029-1032).
  t.collnet = p.collnet && p.nodes > 1;
  if (t.collnet) {
    // CollNetChain: the TREE pattern held to the ring's channels (init.cc 23:913-914, 27:867-868), so the
    // ring's graph. CollNetDirect: one channel per head, a NIC with a GPU beside it (search.cc
    // ncclTopoSearchRecNet, 27:670-690), at most one per GPU (23:974-975) and from 2.27 at most
    // NCCL_MAX_DIRECT_ARITY + 1 = 8 (search.cc 27:1015, device.h 27:192); searched as NVLS is (the tree
    // scaling of totalBw).
    t.collnet_chain = t.ring;
    int heads = std::max(1, std::min(p.nics_per_node, p.gpus_per_node));
    if (v.rules == NcclRules::V2_27) heads = std::min(heads, 8);
    t.collnet_direct = graph(search(p, v, 1, heads, p.gpus_per_node > 1), intra, inter);
    t.collnet_heads = heads;
  }
  // comm->nChannels (connect.cc ncclTopoPostset): twice the ring/tree channels, CollNet's half more, and
  // Hopper across nodes twice again when the ring runs above 45 GB/s per channel.
  int nc = std::min(max_channels, 2 * std::min(t.ring.n_channels, t.tree.n_channels));
  if (t.collnet && t.collnet_chain.bw_intra > t.collnet_chain.bw_inter && t.nranks > t.nnodes)
    nc = std::min(max_channels, nc + nc / 2);
  // 18:403 and 23:469 on sm90 only, 27:466 from sm90 on.
  const bool hopper = v.rules == NcclRules::V2_27 ? p.sm >= 90 : p.sm == 90;
  if (hopper && p.nodes > 1 && t.ring.bw_intra > 45.0 && (v18 ? 2 * nc <= max_channels : nc < 16)) nc *= 2;
  t.comm_channels = nc;
  for (NcclGraph* g : {&t.ring, &t.tree, &t.nvls, &t.collnet_direct, &t.collnet_chain}) {
    g->latency_inter_us = p.nodes > 1 ? p.net_latency_us : 0;
    g->latency_unseen_us = p.nodes > 1 ? p.net_unseen_latency_us : 0;
  }
  return t;
}

void nccl_limit_channels(NcclTopo& t, const NcclVersion& v, const NcclOverrides& o) {
  for (const auto& [name, value] :
       {std::pair{"NCCL_MIN_NCHANNELS", o.min_channels}, std::pair{"NCCL_MAX_NCHANNELS", o.max_channels}})
    if (value < 0 || value > v.max_channels)
      throw Error(fmt::format("{} {}: NCCL {} runs 1 to {} channels (MAXCHANNELS); 0 leaves NCCL's default",
                              name, value, v.name, v.max_channels));
  if (o.max_channels > 0) t.comm_channels = std::min(t.comm_channels, o.max_channels);
  t.comm_channels = std::max(t.comm_channels, o.min_channels);
}

}  // namespace vitsim
