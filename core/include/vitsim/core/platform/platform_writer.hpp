#pragma once
// The one writer of vitsim's platform files, and the GPU and interconnect catalogue it draws from.
// Pure: a PlatformSpec (a data model of nodes, GPUs, fabrics, NICs and a topology) becomes SimGrid XML text;
// no SimGrid here. `vitsim platform` (app/cmd_platform.cpp) builds a spec from flags or a JSON spec file
// (platforms/specs/*.json); docs/platforms.md documents both.
//
// The catalogue (data/catalogue.json, compiled in at build time) lists GPUs (dense peaks per precision,
// memory, bandwidth, SMs, TDP, GPU-to-GPU fabric, per-architecture efficiencies) and interconnects (PCIe,
// NVLink, NVSwitch, Ethernet, InfiniBand, RoCE), every figure with its source (docs/sources.md).
//
// Output layouts: Layout::ClusterPerNode is the layout every shipped platform uses (one <cluster> per node in
// a routing="Full" zone, one <zoneRoute> per pair of nodes: quadratic in nodes). The spec does not depend on
// the layout, so a flat star-zone layout for very large platforms is another value of Layout and another
// writer function over the same PlatformSpec.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "vitsim/core/base/error.hpp"

namespace vitsim {

// ---------------------------------------------------------------------------------------------- catalogue
struct CatalogueGpu {
  std::string name;                  // canonical ("H100-SXM")
  std::string model;                 // what gpu_model is written as
  std::vector<std::string> aliases;  // other names users type ("h100-sxm5", "h100")
  std::string vendor, arch;          // arch: key into Catalogue::archs
  std::map<std::string, std::string>
      flops;                // precision (fp32, tf32, fp16, bf16, fp8) -> "989.4Tf"; absent = none
  std::string memory_sold;  // as marketed ("80GB")
  std::string memory;       // what gpu_mem is written as ("80GiB")
  std::string mem_bw;       // "3350GBps"
  int sm_count = 0;         // SMs (NVIDIA) or CUs (AMD)
  std::string tdp;          // "700W"
  std::string host_link;    // key into Catalogue::links (pcie3_x16, ...)
  std::string gpu_link;     // GPU-to-GPU fabric name ("nvlink4"), empty when none
  std::string gpu_link_bw;  // per GPU, per direction ("450GBps")
  std::string note, source;
};

struct CatalogueArch {
  std::string name;
  std::map<std::string, double> gemm_efficiency;  // precision -> fraction of that precision's peak
  // precision -> the spread of the public runs behind it (written as gpu_gemm_efficiency.range,
  // core/platform/figure_range.hpp); absent where the source gives one figure
  std::map<std::string, std::pair<double, double>> gemm_efficiency_range;
  std::string range_source;  // what the ends are, where not the spread of the runs (a GPU's own figures)
  double mem_efficiency = 0;
  std::optional<std::pair<double, double>> mem_efficiency_range;  // as gemm_efficiency_range
  std::string source;
  // What NCCL's tuner reads of the architecture (sim/src/collectives/nccl_platform.cpp): its SM version
  // (compute capability x 10) and whether NVLS (NVLink SHARP) can run on it behind NVSwitch; 0 where the
  // catalogue gives none (AMD: RCCL is not modelled), which the tuner refuses.
  int nccl_sm = 0;
  bool nvls = false;
  std::string nccl_source;
};

struct CatalogueLink {
  std::string name;
  std::vector<std::string> aliases;
  std::string kind;       // host (PCIe), intranode, nic, transport
  std::string line_rate;  // "400Gbps", or words ("per GPU") for fabrics whose rate is the GPU's
  std::string effective;  // what vitsim writes (PCIe: the measured pinned-copy rate)
  std::string transport;  // tcp, ib, nvlink, pcie_host, pcie_p2p
  std::string source;
};

struct CatalogueDefault {
  std::string name, value, source;
  std::string range, range_source;  // "LOW..HIGH" and why (written as NAME.range); "" = none
};

struct Catalogue {
  std::vector<CatalogueDefault> defaults;  // file order: gpu_gemm_tile, gpu_kernel_overhead, ...
  std::map<std::string, CatalogueArch> archs;
  // A GPU's own figures (its entry's "efficiency": a public measurement of that part), by GPU name: its
  // architecture's with those it states replaced; arch_of returns them.
  std::map<std::string, CatalogueArch> gpu_figures;
  std::vector<CatalogueGpu> gpus;    // file order
  std::vector<CatalogueLink> links;  // file order
  // Case-insensitive, '-', '_' and ' ' ignored, aliases included. Unknown: Error "unknown GPU 'x' (did you
  // mean 'y'?); known: ..." in one line.
  const CatalogueGpu& gpu(const std::string& name) const;
  const CatalogueGpu* find_gpu(const std::string& name) const;  // the same; nullptr when unknown
  const CatalogueLink& link(const std::string& name) const;
  const CatalogueArch& arch_of(const CatalogueGpu& g) const;
  const std::string& default_value(const std::string& name) const;
  const CatalogueDefault& default_entry(const std::string& name) const;
};

// Parses and checks a catalogue: every figure parses with its unit, every entry has a source, every name and
// alias is unique once normalised, every arch and link a GPU names exists. Throws Error naming `origin`.
Catalogue parse_catalogue(const std::string& json_text, const std::string& origin);
// The catalogue compiled into vitsim (data/catalogue.json), parsed once.
const Catalogue& builtin_catalogue();
// The catalogue's text as compiled in.
const std::string& builtin_catalogue_text();
// A catalogue GPU's GPU-to-GPU fabric as NCCL sees it (the `gpu_link` property): "nvswitch" for NVLink
// through NVSwitch chips (SXM boards: an NVLink name without "bridge"), "nvlink" for a bridge or another
// vendor's fabric (GPUs linked without a switch), "none" without one.
std::string catalogue_gpu_link_kind(const CatalogueGpu& g);
// Names compared as users type them: lower case, without '-', '_', ' ', '.'.
std::string normalise_name(const std::string& name);

// The gpu_* properties a platform states for a catalogue GPU, in the order they are written; the GEMM
// efficiency is the architecture's figure (or the GPU's own, Catalogue::gpu_figures) for `precision` (fp32,
// fp16, bf16; without one, bf16 takes fp16's where the chip runs both on one tensor path, else fp32's;
// `used_precision` says which one was taken).
std::vector<std::pair<std::string, std::string>> catalogue_gpu_props(const Catalogue& cat,
                                                                     const CatalogueGpu& g,
                                                                     const std::string& precision,
                                                                     std::string* used_precision = nullptr);

// ------------------------------------------------------------------------------------------- spec model
using Props = std::vector<std::pair<std::string, std::string>>;  // written in order

struct PcieSpec {
  std::string bw, lat, h2d_bw, h2d_lat;  // the GPU's lane, its latency, pinned host->device copies
};

// A GPU type of the platform: the properties every GPU of it carries (gpu_* and node figures).
struct GpuTypeSpec {
  std::string name;
  Props props;
  PcieSpec pcie;
  std::string gpu_link_bw;         // per-GPU NVLink/Infinity Fabric bandwidth per direction; empty when none
  std::string default_fabric;      // a catalogue GPU's GPU-to-GPU path (default_fabric); "" otherwise
  std::vector<std::string> notes;  // one line per figure with its source, for the file's header comment
};

// The GPU-to-GPU path inside a node (the cluster backbone).
struct FabricSpec {
  std::string kind;  // pcie_host, pcie_p2p, nvlink (direct links), nvswitch, nvlink_bridge; "" = as written
  std::string bw;    // per GPU per direction for nvlink/nvswitch; the backbone figure when kind is ""
  std::string lat = "5us";
  std::string staging_bw;  // pcie_host
};

struct NicSpec {
  int count = 1;
  std::string speed;        // one NIC's line rate ("400Gbps")
  std::string lat = "5us";  // NIC + cable + switch, per end
  std::string transport;    // tcp, ib ("roce" is written as ib); "" = no transport stated
  bool rail_optimised = false;
  Props props;  // transport settings and extra props written on the NIC link
};

struct NodeSpec {
  std::string id;
  int gpus = 1;
  std::string gpu_type;  // key of PlatformSpec::gpu_types
  PcieSpec pcie;         // resolved: the type's, overridden per node
  FabricSpec fabric;
  NicSpec nic;
  Props props;  // node props after the type's (cpu_cores, loader_bw, ...), overriding them
};

struct TopologySpec {
  std::string kind =
      "star";  // star (non-blocking), fat-tree (pods under an oversubscribed core), torus, dragonfly
  double oversubscription = 1;  // fat-tree: a pod's down-link capacity over its up-link capacity
  int pod_nodes = 0;            // fat-tree: nodes per pod; dragonfly: nodes per group
  std::string uplink_lat =
      "1us";               // fat-tree: a pod's up-link (leaf -> spine hop); torus, dragonfly: each fabric hop
  std::string torus_dims;  // torus: nodes per dimension, "4x4x2" (first fastest; their product = nodes)
  int global_links = 1;    // dragonfly: links between each pair of groups, each of one NIC's line rate
};

// ClusterPerNode: one <cluster> per node and one <zoneRoute> per pair of nodes (SimGrid loads it; quadratic
// in nodes). FlatStar: the same <cluster>s and NIC links with no routes, in a routing="None" zone marked with
// the prop vitsim_layout=flat-star; vitsim builds one star zone in code (core/platform/platform_flat.hpp,
// sim/fabric/platform_build.hpp): linear in GPUs. A fat-tree's pods are nested zones; rail-optimised NICs are
// one link per NIC ("<node>-nic<r>").
enum class Layout { ClusterPerNode, FlatStar };
inline constexpr const char* kFlatStarProp = "vitsim_layout";
inline constexpr const char* kFlatStarValue = "flat-star";

struct PlatformSpec {
  std::string id = "platform";
  std::string comment;       // header comment; empty = generated from the figures and their sources
  std::string generated_by;  // one line naming the command or spec file that wrote the file
  Props zone_props;          // price_per_gpu_hour, NIC transport settings (star), extras
  std::map<std::string, GpuTypeSpec> gpu_types;
  std::vector<NodeSpec> nodes;
  TopologySpec topology;
};

// A GPU type for a catalogue GPU: its props (catalogue_gpu_props), PCIe figures (its host link's effective
// rate, the default latencies), NVLink bandwidth, and one note per figure with its source for the header
// comment.
GpuTypeSpec gpu_type_from_catalogue(const Catalogue& cat, const CatalogueGpu& g,
                                    const std::string& precision);

// Parses a JSON spec (platforms/specs/*.json; docs/platforms.md). Throws Error "PATH: KEY: what".
// The defaults `vitsim platform`'s flags and spec files share (issue 28: a spec file had no loader figures
// and another GPU path). The GPU-to-GPU path in a node for a catalogue GPU: its NVLink/Infinity Fabric if
// it has one (boards with NVLink 3/4/5 are NVSwitch boards), else PCIe: peer-to-peer for data-centre and
// professional cards, staged through host memory for GeForce cards (their driver disables peer-to-peer).
std::string default_fabric(const CatalogueGpu& g);
// A node's CPU and loader figures: cpu_cores 14 a GPU (a DGX H100 has 112 cores for 8 GPUs), loader_bw
// 600MBps and loader_image_overhead 100us (the study's Vector assumptions, docs/sources.md). All three are
// assumptions `vitsim calibrate` replaces.
Props default_node_props(int gpus_per_node);

PlatformSpec parse_platform_spec(const std::string& json_text, const std::string& path,
                                 const Catalogue& cat = builtin_catalogue());
// Checks a spec (nodes, GPU counts, types, fabric against the GPU, topology): one clear Error per fault.
void check_platform_spec(const PlatformSpec& spec);
std::string write_platform_xml(const PlatformSpec& spec, Layout layout = Layout::ClusterPerNode);

// The NIC transport settings written for a transport name (tcp, ib, roce, efa, tcpx, tcpxo): every setting
// with its default, so a reader sees each figure. Throws Error listing the valid names.
Props nic_transport_props(const std::string& transport);
inline constexpr const char* kNicTransportNames =
    "tcp (NCCL sockets), roce, ib, efa (AWS, aws-ofi-nccl), tcpx (GCP A3 High), tcpxo (GCP A3 Mega)";
// A topology name as users type it: star, fat-tree (fattree, fat_tree), torus, dragonfly. Others: Error
// naming the valid ones.
std::string parse_topology_kind(const std::string& name);
// A NIC speed as users give it (--nic-speed, a spec's nic.speed): a rate with its unit ("400Gbps": nullptr)
// or a catalogue NIC ("ndr": its entry, for its line rate and transport). Else Error "neither a rate with
// its unit ... nor a catalogue NIC: ..." or "'nvlink4' is an intranode link, not a NIC; NICs: ...".
const CatalogueLink* catalogue_nic(const std::string& speed, const Catalogue& cat);

// Tables for `vitsim platform --list-gpus` / `--list-links`.
std::string catalogue_gpu_table(const Catalogue& cat);
std::string catalogue_link_table(const Catalogue& cat);

}  // namespace vitsim
