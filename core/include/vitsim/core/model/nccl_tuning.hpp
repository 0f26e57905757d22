#pragma once
// NCCL's tuner as a pure model (docs/model.md "NCCL's tuner"): for one collective call, the algorithm,
// protocol, channel and thread counts NCCL would pick, and the time NCCL itself predicts for it, from
// NCCL's published model (src/graph/tuning.cc ncclTopoTuneModel and ncclTopoGetAlgoTime, src/enqueue.cc
// getAlgoInfo / topoGetAlgoInfo) for a named NCCL version. Each version is a table of NCCL's constants
// (core/src/model/nccl_versions.cpp, every entry with its file:line at the release tag) and the rules of
// its generation; docs/sources.md "NCCL's tuner" lists the sources.
//
// What the tuner needs from NCCL's topology search (src/graph/search.cc) is an NcclTopo: the channels and
// per-channel bandwidths of each algorithm's graph, the path types, the communicator's channel counts. A
// platform that knows them (an NCCL_DEBUG=INFO log prints them: "Pattern 4, crossNic 0, nChannels 12, bw
// 30.0/30.0, type NVL/PIX") states them; otherwise nccl_topo() approximates the search from an
// NcclPlatform (GPU architecture, NVLink or PCIe, NICs), as documented there.
//
// Use: const auto& v = nccl_version("2.23"); NcclTopo t = nccl_topo(platform, v);
//      NcclChoice c = nccl_choose(NcclFunc::AllReduce, bytes, t, v, {"", ""});
// c.algo, c.proto, c.n_channels, c.n_threads say what runs; c.time_us is NCCL's own estimate; c.table holds
// every (algorithm, protocol) NCCL weighed, so a note can say why.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace vitsim {

// NCCL's order (NCCL_ALGO_* in src/include/devcomm.h at v2.18.3-1, nccl_common.h at v2.23.4-1 and v2.27.7-1).
enum class NcclAlgo { Tree, Ring, CollNetDirect, CollNetChain, Nvls, NvlsTree, Pat };
constexpr int kNcclAlgos = 7;
// NCCL_PROTO_*: LL (8-byte lines, 4 of data), LL128 (128-byte lines, 120 of data), Simple.
enum class NcclProto { LL, LL128, Simple };
constexpr int kNcclProtos = 3;
// ncclFunc_t's order (the first five are the tuned functions); AllToAll is NCCL's grouped send/recv, which
// the tuner does not see (p2p).
enum class NcclFunc { Broadcast, Reduce, AllGather, ReduceScatter, AllReduce, AllToAll };
constexpr int kNcclTunedFuncs = 5;

// NCCL's spellings: ncclAlgoStr / ncclProtoStr (src/init.cc), "AllReduce" etc.
const char* nccl_algo_name(NcclAlgo a);
const char* nccl_proto_name(NcclProto p);
const char* nccl_func_name(NcclFunc f);
// "AllReduce" or "all_reduce" (either spelling, any case); else Error listing the valid names.
NcclFunc nccl_func(const std::string& name);

// NCCL's path types (src/graph/topo.h PATH_*), in NCCL's order: a smaller value is a closer path.
enum class NcclPath { Loc, Nvl, Nvb, Pix, Pxb, Pxn, Phb, Sys, Net };
// The CPU NCCL finds (ncclTopoCpuType): it picks LL's bandwidth cap on several nodes and the network
// overhead.
enum class NcclCpu { IntelX86, AmdX86, Other };

// One ncclTopoGraph as the search leaves it (src/graph/search.cc ncclTopoCompute).
struct NcclGraph {
  int n_channels = 0;   // 0: no graph (NVLS without NVSwitch multicast, CollNet not declared)
  double bw_intra = 0;  // GB/s per channel inside a node
  double bw_inter = 0;  // GB/s per channel between nodes
  NcclPath type_intra = NcclPath::Nvl;
  NcclPath type_inter = NcclPath::Pix;
  double latency_inter_us = 0;  // the net plugin's latency property (search.cc: graph->latencyInter)
  // A cost per network step the net plugin does not state (GPUDirect-TCPX's kernel TCP stacks): not in
  // NCCL's tables or choice; added to the chosen call's latency (NcclTuning::unseen_us).
  double latency_unseen_us = 0;
  bool same_channels = true;  // every channel the same GPU order (Broadcast/Reduce latency)
  bool tree_pattern = false;  // NCCL_TOPO_PATTERN_TREE rather than BALANCED_TREE: Tree bandwidth x .85
};

// What the tuner reads from one communicator.
struct NcclTopo {
  int nranks = 1;
  int nnodes = 1;
  int sm_min = 80, sm_max = 80;  // compute capability x 10 of the slowest and fastest GPU (70, 80, 86, 90)
  NcclCpu cpu = NcclCpu::IntelX86;
  NcclGraph ring, tree, collnet_direct, collnet_chain, nvls;  // PAT uses the tree's graph, NVLSTree NVLS's
  int comm_channels = 1;        // comm->nChannels after ncclTopoPostset (src/graph/connect.cc)
  int nvls_channels = 0;        // comm->nvlsChannels: NCCL_NVLS_NCHANNELS (16) where NVLS works, else 0
  bool collnet = false;         // comm->collNetSupport: a CollNet (SHARP) plugin declared and working
  bool nvswitch = false;        // an NVSwitch in the node (CollNetDirect needs one)
  int collnet_heads = 1;        // CollNetDirect heads (NICs) per node
  bool net_device_host = true;  // the net plugin does not offload (PAT needs it)
  double ranks_per_node() const { return static_cast<double>(nranks) / nnodes; }
};

// One NCCL release's model: its constants (tables) and the rules of its generation.
enum class NcclRules { V2_18, V2_23, V2_27 };
struct NcclVersion {
  std::string name;  // "2.18"
  std::string tag;   // the release tag the tables were read at, "v2.18.3-1"
  NcclRules rules = NcclRules::V2_18;
  std::vector<NcclAlgo> algos;  // ncclAlgoStr: the algorithms NCCL_ALGO may name
  using AlgoProto = std::array<std::array<double, kNcclProtos>, kNcclAlgos>;
  // [Volta, Ampere, Hopper, Blackwell][1 node, 2, more]; Blackwell's row from 2.27 (before: Hopper's).
  using ArchNodes = std::array<std::array<double, 3>, 4>;
  int arch_rows = 3;                                                   // rows of ArchNodes the version has
  AlgoProto base_lat_us{};                                             // baseLat
  std::array<AlgoProto, 3> hw_lat_us{};                                // hwLat [NVLink, PCI, network]
  ArchNodes ll_max_bw{}, ring_ll128_bw{}, tree_ll128_bw{}, tree_bw{};  // llMaxBws, perChMax*Bws
  std::array<std::array<double, 23>, kNcclProtos> tree_correction{};   // treeCorrectionFactor
  // NCCL's topology constants the approximation of the search reads (src/graph/topo.h, search.cc).
  double nvlink_bw_sm60 = 0, nvlink_bw_sm70 = 0, nvlink_bw_sm80 = 0, nvlink_bw_sm86 = 0, nvlink_bw_sm90 = 0;
  double nvlink_bw_sm100 = 0;  // 0: the version rates Blackwell as Hopper
  double pci_bw = 12;          // PCI_BW: a Gen3 x16 link; below it a ring runs 256 Simple threads
  std::vector<double> speed_intra, speed_inter, sm90_speed_intra, sm90_speed_inter;
  std::vector<double> sm100_speed_intra, sm100_speed_inter;  // empty: Hopper's
  int max_channels = 32;                                     // MAXCHANNELS
  int nvls_channels = 16;           // NVLS channels on Hopper (NCCL_NVLS_NCHANNELS's default)
  int nvls_channels_sm100 = 0;      // on Blackwell across nodes (0: as Hopper)
  int nvls_channels_sm100_nvl = 0;  // on Blackwell inside one NVLink domain (0: as Hopper)
  double nvlink_bw(int sm) const;
};

// The datasheet rate of one NVLink per direction (GB/s) on a GPU of SM version `sm`: the line rate that
// NCCL's per-link rating (NcclVersion::nvlink_bw, what its channels are searched at) is a fraction of. NVLink
// 1 (sm60, P100): 20; NVLink 2, 3, 4 (sm70 V100, sm80 A100, sm90 H100): 25; GA102's NVLink 3 bridge (sm86):
// 14.0625 (112.5 GB/s both ways over 4 links); NVLink 5 (sm100, B200): 50 (docs/sources.md "NVLink as NCCL
// runs it"). A GPU's NVLinks are its per-direction bandwidth over this.
double nvlink_line_per_link(int sm);

// The tables, newest last; nccl_version("2.18") or a full tag ("2.18.3"); an unknown name is an Error
// listing the valid ones. The newest is the default of the scenario key nccl.version.
const std::vector<NcclVersion>& nccl_versions();
const NcclVersion& nccl_version(const std::string& name);
const NcclVersion& nccl_newest_version();

// NCCL_ALGO / NCCL_PROTO in NCCL's syntax (parseList, src/graph/tuning.cc): a comma list of names (any
// case) enables only those; "^" before it disables those. "" leaves NCCL's defaults. From 2.27, entries
// separated by ';' may name the function they apply to: "ring;allreduce:tree,ring" (only the first may
// lack one). An unknown name is an Error listing the valid ones (2.18 and 2.23 ignore it, 2.27 refuses it).
// NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS bound comm->nChannels, the channels rings and trees run on (0:
// NCCL's default, no bound); see nccl_limit_channels.
struct NcclOverrides {
  std::string algo;      // NCCL_ALGO, "ring", "^tree", "Tree,Ring"
  std::string proto;     // NCCL_PROTO, "^LL128"
  int min_channels = 0;  // NCCL_MIN_NCHANNELS
  int max_channels = 0;  // NCCL_MAX_NCHANNELS
};
struct NcclEnable {  // per tuned function; before 2.27 every function alike
  std::array<std::array<int, kNcclAlgos>, kNcclTunedFuncs> algo;
  std::array<std::array<int, kNcclProtos>, kNcclTunedFuncs> proto;  // 2: LL128 by NCCL's default rule
  NcclEnable();
};
NcclEnable nccl_enable(const NcclOverrides& o, const NcclVersion& v);
// The names a scenario's nccl.algo / nccl.proto value may hold, for messages and docs.
std::string nccl_algo_names(const NcclVersion& v);

// The tuner's tables for one communicator, as ncclTopoTuneModel leaves them: latency (us) and bandwidth
// (GB/s, 0 = off) per tuned function, algorithm and protocol, the ring bandwidths kept as backup (2.23),
// the most threads and the bytes per thread before adding channels.
struct NcclTuning {
  using Table = std::array<std::array<std::array<double, kNcclProtos>, kNcclAlgos>, kNcclTunedFuncs>;
  Table latency_us{}, bandwidth{};
  Table unseen_us{};  // the graphs' latency_unseen_us over each algorithm's network steps (not weighed)
  std::array<std::array<double, kNcclProtos>, kNcclTunedFuncs> ring_backup_bw{};
  std::array<std::array<int, kNcclProtos>, kNcclAlgos> max_threads{}, thread_threshold{};
};
NcclTuning nccl_tune(const NcclTopo& t, const NcclVersion& v, const NcclOverrides& o = {});

// One (algorithm, protocol) NCCL weighed for a call: time_us < 0 when it is off or does not apply.
struct NcclCost {
  NcclAlgo algo = NcclAlgo::Ring;
  NcclProto proto = NcclProto::Simple;
  double latency_us = 0;  // after the ring plateau factor
  double bandwidth = 0;   // GB/s after the tree correction
  double time_us = -1;    // latency_us + bytes / (1000 x bandwidth)
  bool backup = false;    // 2.23 only: the disabled ring kept as a last resort
};

struct NcclChoice {
  NcclFunc func = NcclFunc::AllReduce;
  std::uint64_t bytes = 0;
  bool p2p = false;  // AllToAll: send/recv, not tuned; algo/proto/time are not set
  NcclAlgo algo = NcclAlgo::Ring;
  NcclProto proto = NcclProto::Simple;
  int n_channels = 0;  // channels (CUDA blocks) the kernel runs on
  int n_threads = 0;   // threads per block
  // NCCL's estimate: time_us = latency_us + bytes / (1000 bandwidth), bandwidth in GB/s.
  double time_us = 0, latency_us = 0, bandwidth = 0;
  double unseen_us = 0;  // of latency_us: the network's cost NCCL's tuner did not see (NcclTuning::unseen_us)
  bool backup = false;
  std::vector<NcclCost> table;  // every (algorithm, protocol) of the function, NCCL's order
  // "AllReduce 1 MiB: Ring/LL 28.0 us = 15.0 us + 1 MiB / 80.6 GB/s (next NVLS/Simple 28.9 us), 24
  // channels x 512 threads"
  std::string why() const;
};

// NCCL's choice for one call of `func` on `bytes` (NCCL's nBytes: the buffer for AllReduce, Broadcast and
// Reduce; the whole gathered output for AllGather and the whole input for ReduceScatter, as nccl-tests'
// size), one call alone in its group (no aggregation). Throws Error when the overrides leave nothing.
NcclChoice nccl_choose(NcclFunc func, std::uint64_t bytes, const NcclTopo& t, const NcclVersion& v,
                       const NcclOverrides& o = {});
// The same from tables already tuned (a communicator's tuning is done once, choices per call).
NcclChoice nccl_choose(NcclFunc func, std::uint64_t bytes, const NcclTuning& tuning, const NcclTopo& t,
                       const NcclVersion& v);

// The share of a protocol's wire bytes that is data: LL sends 8-byte lines of 4 data and 4 flag bytes
// (union ncclLLFifoLine: 0.5), LL128 128-byte lines of 120 (NCCL_LL128_DATAELEMS / LINEELEMS = 15/16),
// Simple only data (1). A simulated transfer of `bytes` under `proto` moves bytes / fraction on the wire.
double nccl_payload_fraction(NcclProto p);

// How a simulated collective uses this (sim/ does not yet): once per communicator (a Group), the
// NcclTopo of its ranks (nccl_topo from the platform: nodes and GPUs per node of the group, the GPU's
// compute capability, NVLinks or PCIe, NICs and their speed, NVLS, CollNet), its version
// (Scenario::nccl.version) and overrides (nccl.algo, nccl.proto), and nccl_tune(); per call,
// nccl_choose(func, bytes, tuning, topo, version): run c.algo's transfers split over c.n_channels
// channels, each at nccl_payload_fraction(c.proto), and report c.why(). c.time_us is NCCL's own estimate,
// to hold the simulated time against, not to replace it.

// What a platform knows, from which nccl_topo() approximates NCCL's topology search.
enum class NcclIntra { NvSwitch, NvLink, Pcie };
struct NcclPlatform {
  int nodes = 1;
  int gpus_per_node = 1;
  int sm = 80;  // compute capability x 10
  NcclIntra intra = NcclIntra::NvSwitch;
  int nvlinks_per_gpu = 0;             // NVLinks of one GPU (to the NVSwitches, or spread over its peers)
  double pcie_bw = 24;                 // GB/s of the GPU's PCIe link as NCCL rates it (Gen4 x16: 24)
  NcclPath pcie_path = NcclPath::Pxb;  // GPU to GPU over PCIe: PIX, PXB (a switch), PHB (the CPU), SYS
  int nics_per_node = 0;
  double nic_bw = 0;                  // GB/s per NIC port (NCCL: port speed in Mb/s / 8000)
  NcclPath nic_path = NcclPath::Pxb;  // GPU to its NIC
  bool nvls = false;                  // NVSwitch with multicast (NVLink SHARP, sm90 and CUDA 12.1+)
  bool collnet = false;               // a CollNet (SHARP) plugin
  NcclCpu cpu = NcclCpu::IntelX86;
  // The network's latency beyond NCCL's per-hop figure (hwLat NET), as a net plugin states it in its
  // `latency` property (ncclNetProperties_t; NCCL's IB and socket plugins state 0): every graph's
  // latency_inter_us. vitsim's `auto` leaves it 0, as NCCL's own plugins do.
  double net_latency_us = 0;
  // A cost per network step that the plugin does not state (its latency property is 0) but the transport
  // pays (GPUDirect-TCPX/TCPXO: the kernel TCP stacks of both ends): every graph's latency_unseen_us.
  double net_unseen_latency_us = 0;
};
NcclTopo nccl_topo(const NcclPlatform& p, const NcclVersion& v);

// NCCL_MAX_NCHANNELS, then NCCL_MIN_NCHANNELS, on t.comm_channels as ncclTopoPostset applies them
// (src/graph/connect.cc, 18:416-417, 23:486-487, 27:483-484): at most max, then at least min, the first
// channels copied ("we permit combining max, then min, to only use the first channels, then duplicate
// them"). NCCL's search and its own time estimate do not see them (tuning.cc rates the graph's channels);
// NVLS keeps its own (NCCL_NVLS_NCHANNELS). Where NCCL clamps with a warning (above MAXCHANNELS, a maximum
// below 1), this is an Error naming the variable and v's MAXCHANNELS; 0 leaves a bound off.
void nccl_limit_channels(NcclTopo& t, const NcclVersion& v, const NcclOverrides& o);

}  // namespace vitsim
