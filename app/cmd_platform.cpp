// `vitsim platform`: its flags are the CLI11 definitions below; their table in docs/platforms.md is generated
// from them.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include "commands.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/model/energy.hpp"
#include "vitsim/core/platform/platform_props.hpp"
#include "vitsim/core/platform/platform_writer.hpp"
#include "vitsim/core/platform/transport.hpp"

namespace vitsim::app {

namespace {
struct PlatformArgs {
  std::string spec_file;
  std::string out;
  std::string id = "platform";
  int nodes = 1;
  int gpus_per_node = 1;
  std::string gpu;
  std::string precision = "bf16";
  std::string intranode;
  std::string intranode_bw;
  std::string staging_bw;
  int nics = 1;
  std::string nic_speed;
  std::string nic_transport;
  std::string nic_lat = "5us";
  bool rail_optimised = false;
  bool sharp = false;
  int socket_nthreads = 0;      // NCCL_SOCKET_NTHREADS (0: not stated)
  int nsocks_perthread = 0;     // NCCL_NSOCKS_PERTHREAD (0: not stated)
  std::string layout = "auto";  // --layout
  std::string topology = "star";
  double oversubscription = 1;
  int pod_nodes = 0;
  std::string torus_dims;
  int global_links = 1;
  std::string hop_lat;
  int cpu_cores = 0;
  std::string loader_bw;              // "": default_node_props' (core)
  std::string loader_image_overhead;  // likewise
  std::string price;
  std::string price_kwh;
  bool list_gpus = false;
  bool list_links = false;
};

void check_quantity(const std::string& flag, const std::string& value, units::Kind kind) {
  double v = 0;
  try {
    v = units::parse(value, kind);
  } catch (const Error& e) {
    throw Error(fmt::format("{} {}: {}", flag, value, e.what()));
  }
  if (!std::isfinite(v) || v < 0 || (v == 0 && kind != units::Kind::Time))
    throw Error(fmt::format("{} {}: must be {}", flag, value,
                            kind == units::Kind::Time ? "non-negative" : "positive"));
  if (kind == units::Kind::Bandwidth && !plausible_bandwidth().contains(v))
    throw Error(
        fmt::format("{} {}: not a plausible bandwidth (expected {})", flag, value, kPlausibleBandwidthText));
}

// --layout: auto is flat-star for more than 64 nodes (a full mesh of routes grows with nodes squared), for
// rail-optimised NICs (rails are separate links only there) and for a torus or a dragonfly (computed routes
// only).
Layout choose_layout(const std::string& name, const PlatformSpec& spec) {
  const std::string n = normalise_name(name);
  if (n == "clusterpernode") return Layout::ClusterPerNode;
  if (n == "flatstar") return Layout::FlatStar;
  if (n != "auto") throw Error(fmt::format("--layout {}: valid: auto, cluster-per-node, flat-star", name));
  bool rails = false;
  for (const auto& node : spec.nodes) rails = rails || (node.nic.rail_optimised && node.nic.count > 1);
  const bool grid = spec.topology.kind == "torus" || spec.topology.kind == "dragonfly";
  return spec.nodes.size() > 64 || ((rails || grid) && spec.nodes.size() > 1) ? Layout::FlatStar
                                                                              : Layout::ClusterPerNode;
}

void check_counts(const PlatformArgs& a) {
  if (a.gpu.empty())
    throw Error("--gpu is required (a catalogue name: vitsim platform --list-gpus), or give a spec file");
  if (a.nodes < 1) throw Error(fmt::format("--nodes {}: a platform needs at least 1 node", a.nodes));
  if (a.gpus_per_node < 1)
    throw Error(fmt::format("--gpus-per-node {}: a node needs at least 1 GPU", a.gpus_per_node));
  // A node's NICs: at most one per GPU (an NVL72 rack written as one node of 72 GPUs has 72), and at least
  // 64 where a node has fewer GPUs (a NIC link of their sum).
  const int max_nics = std::max(64, a.gpus_per_node);
  if (a.nics < 1 || a.nics > max_nics)
    throw Error(
        fmt::format("--nics {}: between 1 and {} NICs a node (64, or one per GPU)", a.nics, max_nics));
  if (a.precision != "fp32" && a.precision != "fp16" && a.precision != "bf16")
    throw Error(fmt::format("--precision {}: valid: fp32, fp16, bf16", a.precision));
}

// --price-per-gpu-hour and --price-per-kwh, kept as written in the zone's properties.
void add_prices(const PlatformArgs& a, PlatformSpec& spec) {
  if (!a.price.empty()) {
    try {
      (void)units::parse_number(a.price, platform_prop("price_per_gpu_hour").range);  // core's strict reader
    } catch (const Error&) {
      throw Error(fmt::format("--price-per-gpu-hour {}: not a non-negative number", a.price));
    }
    spec.zone_props.emplace_back("price_per_gpu_hour", a.price);
  }
  if (!a.price_kwh.empty()) {
    parse_price_per_kwh(a.price_kwh, "--price-per-kwh " + echo(a.price_kwh));
    spec.zone_props.emplace_back("price_per_kwh", a.price_kwh);
  }
}

FabricSpec fabric_from_flags(const PlatformArgs& a, const CatalogueGpu& g) {
  FabricSpec fabric;
  fabric.kind = a.intranode.empty() ? default_fabric(g) : a.intranode;
  static const std::vector<std::string> kinds{"pcie_host", "pcie_p2p", "nvlink", "nvswitch", "nvlink_bridge"};
  if (std::find(kinds.begin(), kinds.end(), fabric.kind) == kinds.end())
    throw Error(fmt::format("--intranode {}: valid: pcie_host, pcie_p2p, nvlink, nvswitch, nvlink_bridge",
                            fabric.kind));
  if (!a.intranode_bw.empty()) check_quantity("--intranode-bw", a.intranode_bw, units::Kind::Bandwidth);
  if (!a.staging_bw.empty()) check_quantity("--staging-bw", a.staging_bw, units::Kind::Bandwidth);
  fabric.bw = a.intranode_bw;
  fabric.staging_bw = a.staging_bw;
  return fabric;
}

// --nic-speed: a rate with its unit (over TCP unless --nic-transport says otherwise) or a catalogue NIC
// (its line rate and transport).
void nic_speed_from_flag(const std::string& speed, const Catalogue& cat, NicSpec& nic) {
  const CatalogueLink* l = nullptr;
  try {
    l = catalogue_nic(speed, cat);
  } catch (const Error& e) {
    throw Error(fmt::format("--nic-speed {}: {}", speed, e.what()));
  }
  if (!l) {
    check_quantity("--nic-speed", speed, units::Kind::Bandwidth);
    nic.speed = speed;
    nic.transport = "tcp";
  } else {
    nic.speed = l->line_rate;
    nic.transport = l->transport;
  }
}

NicSpec nic_from_flags(const PlatformArgs& a, const Catalogue& cat) {
  NicSpec nic;
  nic.count = a.nics;
  nic.rail_optimised = a.rail_optimised;
  check_quantity("--nic-lat", a.nic_lat, units::Kind::Time);
  nic.lat = a.nic_lat;
  if (!a.nic_speed.empty()) nic_speed_from_flag(a.nic_speed, cat, nic);
  if (!a.nic_transport.empty()) {
    try {
      nic_transport_props(a.nic_transport);  // checks the name
    } catch (const Error& e) {
      throw Error(fmt::format("--nic-transport {}: {}", a.nic_transport, e.what()));
    }
    nic.transport = a.nic_transport;
  }
  if (a.nodes > 1 && nic.speed.empty())
    throw Error(
        "--nic-speed is required with more than one node (a rate such as 400Gbps, or ndr, hdr, edr, 100gbe, "
        "...)");
  // NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD as the run set them: the socket transport's properties.
  if (a.socket_nthreads > 0 || a.nsocks_perthread > 0) {
    const auto t = transport_by_name(nic.transport.empty() ? std::string("tcp") : nic.transport);
    if (t != Transport::Tcp)
      throw Error(fmt::format(
          "--nccl-socket-nthreads and --nccl-nsocks-perthread set NCCL's socket transport; the NICs run {} "
          "(--nic-transport tcp, or a rate such as 200Gbps, runs sockets)",
          nic.transport));
    if (a.socket_nthreads > 0)
      nic.props.emplace_back("nccl_socket_nthreads", std::to_string(a.socket_nthreads));
    if (a.nsocks_perthread > 0)
      nic.props.emplace_back("nccl_nsocks_perthread", std::to_string(a.nsocks_perthread));
  }
  const bool roce = normalise_name(nic.transport).rfind("roce", 0) == 0;
  if (a.sharp && (a.nodes < 2 || roce || transport_by_name(nic.transport) != Transport::Ib))
    throw Error(fmt::format(
        "--sharp: SHARP reduces in InfiniBand switches between nodes; it needs --nodes 2 or more and an ib "
        "transport (--nic-speed ndr, hdr, ... or --nic-transport ib), not {}",
        a.nodes < 2             ? "one node"
        : nic.transport.empty() ? std::string("no NIC transport")
                                : nic.transport));
  return nic;
}

TopologySpec topology_from_flags(const PlatformArgs& a) {
  TopologySpec topo;
  topo.kind = parse_topology_kind(a.topology);
  topo.oversubscription = a.oversubscription;
  topo.pod_nodes = a.pod_nodes;
  topo.torus_dims = a.torus_dims;
  topo.global_links = a.global_links;
  if (!a.hop_lat.empty()) {
    check_quantity("--hop-lat", a.hop_lat, units::Kind::Time);
    topo.uplink_lat = a.hop_lat;
  }
  if (topo.kind == "star" && (a.oversubscription != 1 || a.pod_nodes != 0))
    throw Error("--oversubscription and --pod-nodes need --topology fat-tree (a star is non-blocking)");
  if (topo.kind != "torus" && !a.torus_dims.empty()) throw Error("--torus-dims needs --topology torus");
  if (topo.kind != "dragonfly" && a.global_links != 1)
    throw Error("--global-links needs --topology dragonfly");
  if (topo.kind == "star" && !a.hop_lat.empty())
    throw Error("--hop-lat needs --topology fat-tree, torus or dragonfly");
  return topo;
}

// CPU cores and the loader figures: the flags over core's defaults, the ones spec files take too.
Props node_props_from_flags(const PlatformArgs& a) {
  Props props = default_node_props(a.gpus_per_node);
  auto set_prop = [](Props& ps, const std::string& key, const std::string& value) {
    for (auto& [k, v] : ps)
      if (k == key) v = value;
  };
  if (a.cpu_cores > 0) set_prop(props, "cpu_cores", std::to_string(a.cpu_cores));
  if (!a.loader_bw.empty()) {
    check_quantity("--loader-bw", a.loader_bw, platform_prop("loader_bw").unit);
    set_prop(props, "loader_bw", a.loader_bw);
  }
  if (!a.loader_image_overhead.empty()) {
    check_quantity("--loader-image-overhead", a.loader_image_overhead,
                   platform_prop("loader_image_overhead").unit);
    set_prop(props, "loader_image_overhead", a.loader_image_overhead);
  }
  return props;
}

PlatformSpec spec_from_flags(const PlatformArgs& a, const std::string& command_line) {
  check_counts(a);
  const Catalogue& cat = builtin_catalogue();
  const CatalogueGpu& g = cat.gpu(a.gpu);
  PlatformSpec spec;
  spec.id = a.id;
  spec.generated_by = "Generated by: " + command_line;
  add_prices(a, spec);
  const GpuTypeSpec t = gpu_type_from_catalogue(cat, g, a.precision);
  const FabricSpec fabric = fabric_from_flags(a, g);
  const NicSpec nic = nic_from_flags(a, cat);
  if (a.sharp) spec.zone_props.emplace_back("ib_sharp", "yes");
  spec.topology = topology_from_flags(a);
  const Props node_props = node_props_from_flags(a);
  spec.gpu_types[t.name] = t;
  const size_t width = std::to_string(a.nodes - 1).size();
  for (int i = 0; i < a.nodes; ++i) {
    NodeSpec n;
    n.id = fmt::format("node{:0{}d}", i, width);
    n.gpus = a.gpus_per_node;
    n.gpu_type = t.name;
    n.pcie = t.pcie;
    n.fabric = fabric;
    n.nic = nic;
    n.props = node_props;
    spec.nodes.push_back(std::move(n));
  }
  return spec;
}

// The options of `vitsim platform`, bound to `a`.
void add_platform_options(CLI::App* c, const std::shared_ptr<PlatformArgs>& a) {
  c->add_option("spec", a->spec_file,
                "JSON spec (platforms/specs/*.json; per-node GPU types and figures); or use the flags");
  c->add_option("--out", a->out, "platform file to write (atomically); default: standard output");
  c->add_option("--id", a->id, "the platform's zone id (default: platform)");
  c->add_option("--nodes", a->nodes, "nodes (default 1)")->check(integer(0, 1 << 20));
  c->add_option("--gpus-per-node", a->gpus_per_node, "GPUs in each node (default 1)")
      ->check(integer(0, 1 << 16));
  c->add_option(
      "--gpu", a->gpu,
      "GPU type from the catalogue, case-insensitive, with aliases (h100-sxm, a100-sxm-80gb, rtx3070)");
  c->add_option(
      "--precision", a->precision,
      "the precision whose measured GEMM efficiency the file carries: fp32, fp16, bf16 (default bf16)");
  c->add_option(
      "--intranode", a->intranode,
      "GPU-to-GPU path in a node: pcie_host (staged through host memory), pcie_p2p, nvlink (direct links), "
      "nvswitch, nvlink_bridge (2 GPUs); default: the GPU's NVLink/NVSwitch, else PCIe");
  c->add_option("--intranode-bw", a->intranode_bw,
                "per-GPU bandwidth of that path per direction (default: the catalogue's)");
  c->add_option("--staging-bw", a->staging_bw, "pcie_host: the staging rate (default 4GBps)");
  c->add_option("--nics", a->nics,
                "NICs per node (default 1, at most 64 or one per GPU); they form one link of NICs x speed")
      ->check(integer(0, 1 << 16));
  c->add_option("--nic-speed", a->nic_speed,
                "one NIC's line rate (400Gbps) or a catalogue NIC: 1gbe ... 400gbe, edr, hdr, ndr, xdr");
  c->add_option("--nic-transport", a->nic_transport,
                "tcp (NCCL sockets), roce, ib, efa (AWS, aws-ofi-nccl), tcpx (GCP A3 High), tcpxo (GCP A3 "
                "Mega) (default: the catalogue NIC's; tcp for a rate)");
  c->add_option("--nic-lat", a->nic_lat, "NIC + cable + switch latency per end (default 5us)");
  c->add_flag(
      "--rail-optimised", a->rail_optimised,
      "each NIC a rail of its own: one link per NIC, GPU k of G on NIC k x N / G (the flat-star layout)");
  c->add_option(
       "--nccl-socket-nthreads", a->socket_nthreads,
       "NCCL_SOCKET_NTHREADS over tcp NICs, as the run sets it (default 1; NCCL auto-detects 2 on AWS, "
       "4 on GCP gVNIC)")
      ->check(integer(1, 16));
  c->add_option(
       "--nccl-nsocks-perthread", a->nsocks_perthread,
       "NCCL_NSOCKS_PERTHREAD over tcp NICs (default 1; auto: 8 on AWS); threads x sockets at most 64")
      ->check(integer(1, 64));
  c->add_flag("--sharp", a->sharp,
              "the InfiniBand fabric reduces in its switches (SHARP through NCCL's CollNet plugin, "
              "NCCL_COLLNET_ENABLE=1): NCCL's tuner may pick CollNetDirect and CollNetChain");
  c->add_option("--topology", a->topology, "star (non-blocking, default), fat-tree, torus or dragonfly");
  c->add_option("--oversubscription", a->oversubscription,
                "fat-tree: a pod's NIC capacity over its up-link (4 = 4:1)")
      ->check(number(units::Range{}));
  c->add_option("--pod-nodes", a->pod_nodes, "fat-tree: nodes per pod; dragonfly: nodes per group")
      ->check(integer(0, 1 << 20));
  c->add_option("--torus-dims", a->torus_dims,
                "torus: nodes per dimension, 4x4x2 (the first fastest; their product = --nodes)");
  c->add_option("--global-links", a->global_links,
                "dragonfly: links between each pair of groups, each of one NIC's rate (default 1)")
      ->check(integer(1, 1 << 10));
  c->add_option("--hop-lat", a->hop_lat,
                "fat-tree up-link, torus link or dragonfly global link latency (default 1us)");
  // Its range is the property's (0 was taken as "not given" and silently became the default: issue 27).
  const PlatformProp& cores = platform_prop("cpu_cores");
  c->add_option("--cpu-cores", a->cpu_cores, "CPU cores per node (default 14 per GPU, as a DGX H100)")
      ->check(integer(cores.int_low(), cores.int_high()));
  c->add_option("--loader-bw", a->loader_bw,
                "bytes of input tensor one loader worker makes per second (default 600MBps)");
  c->add_option("--loader-image-overhead", a->loader_image_overhead,
                "loader CPU time per image (default 100us)");
  c->add_option("--price-per-gpu-hour", a->price, "price of one GPU-hour (vitsim plan --objective cost)");
  c->add_option("--price-per-kwh", a->price_kwh,
                "price of one kWh of energy (energy cost per epoch in reports and plans)");
  c->add_option(
      "--layout", a->layout,
      "auto (default: flat-star above 64 nodes or with rail-optimised NICs), cluster-per-node "
      "(routes listed; "
      "SimGrid loads it alone), flat-star (routes computed by vitsim: linear in GPUs; docs/platforms.md "
      "\"Layouts\")");
  c->add_flag("--list-gpus", a->list_gpus, "print the GPU catalogue and exit");
  c->add_flag("--list-links", a->list_links, "print the interconnect catalogue and exit");
}

// The cluster: from the spec file (no cluster flags beside it), else from the flags.
PlatformSpec platform_spec(const std::shared_ptr<PlatformArgs>& a, CLI::App* c) {
  PlatformSpec spec;
  if (!a->spec_file.empty()) {
    for (const char* flag : {"--nodes",
                             "--gpus-per-node",
                             "--gpu",
                             "--precision",
                             "--intranode",
                             "--intranode-bw",
                             "--staging-bw",
                             "--nics",
                             "--nic-speed",
                             "--nic-transport",
                             "--nic-lat",
                             "--rail-optimised",
                             "--sharp",
                             "--nccl-socket-nthreads",
                             "--nccl-nsocks-perthread",
                             "--topology",
                             "--oversubscription",
                             "--pod-nodes",
                             "--torus-dims",
                             "--global-links",
                             "--hop-lat",
                             "--cpu-cores",
                             "--loader-bw",
                             "--loader-image-overhead",
                             "--price-per-gpu-hour",
                             "--price-per-kwh",
                             "--id"})
      if (c->count(flag) > 0)
        throw Error(fmt::format("{}: give the cluster in the spec file {} or in flags, not both", flag,
                                a->spec_file));
    spec = parse_platform_spec(read_input_file(a->spec_file, "platform spec"), a->spec_file);
    spec.generated_by =
        fmt::format("Generated by `vitsim platform {}`; edit the spec and regenerate (one line per figure).",
                    a->spec_file);
  } else {
    // The flags as given, for the file's header (no "--" inside an XML comment).
    std::string line = "vitsim platform";
    for (const auto* o : c->get_options())
      if (o->count() > 0 && o->get_name() != "--out" && o->get_name() != "--help" && !o->get_name().empty())
        line += " " + (o->get_name().rfind("--", 0) == 0 ? o->get_name().substr(2) : o->get_name()) + "=" +
                (o->get_type_size() == 0 ? std::string("true") : o->as<std::string>());
    spec = spec_from_flags(*a, line);
  }
  return spec;
}

// What `vitsim platform` does once its options are parsed.
int run_platform(const std::shared_ptr<PlatformArgs>& a, CLI::App* c) {
  if (a->list_gpus || a->list_links) {
    if (a->list_gpus) std::fputs(catalogue_gpu_table(builtin_catalogue()).c_str(), stdout);
    if (a->list_links) std::fputs(catalogue_link_table(builtin_catalogue()).c_str(), stdout);
    return 0;
  }
  check_output_paths({{a->out, "--out"}}, {{a->spec_file, "the spec"}});  // writable, and not the spec
  const PlatformSpec spec = platform_spec(a, c);
  const std::string xml = write_platform_xml(spec, choose_layout(a->layout, spec));
  if (a->out.empty())
    std::fputs(xml.c_str(), stdout);
  else
    write_file_atomic(a->out, xml);
  return 0;
}

}  // namespace

std::string platform_xml_for(const std::string& gpu, int nodes, int gpus_per_node,
                             const std::string& nic_speed, int nics) {
  PlatformArgs a;
  a.gpu = gpu;
  a.nodes = nodes;
  a.gpus_per_node = gpus_per_node;
  a.nic_speed = nic_speed;
  a.nics = nics;
  const std::string line =
      fmt::format("vitsim platform gpu={} nodes={} gpus-per-node={} nic-speed={} nics={} (from vitsim plan)",
                  gpu, nodes, gpus_per_node, nic_speed, nics);
  const PlatformSpec spec = spec_from_flags(a, line);
  return write_platform_xml(spec, choose_layout(a.layout, spec));
}

void add_platform(CLI::App& cli, Action& action) {
  auto a = std::make_shared<PlatformArgs>();
  CLI::App* c = cli.add_subcommand("platform",
                                   "write a SimGrid platform file for a GPU cluster, from flags or a JSON "
                                   "spec, with GPUs and links from the "
                                   "built-in catalogue (docs/platforms.md)");
  c->footer(
      "Examples:\n"
      "  vitsim platform --list-gpus\n"
      "  vitsim platform --nodes 16 --gpus-per-node 8 --gpu h100-sxm --nics 8 --nic-speed ndr --out "
      "h100.xml\n"
      "  vitsim platform --nodes 4 --gpus-per-node 4 --gpu a100-pcie-40gb --intranode pcie_p2p --nic-speed "
      "100gbe\n"
      "      --nic-transport roce --price-per-gpu-hour 1.10 --out a100.xml\n"
      "  vitsim platform --nodes 64 --gpus-per-node 8 --gpu h100-sxm --nics 8 --nic-speed 400Gbps "
      "--nic-transport ib\n"
      "      --topology fat-tree --pod-nodes 16 --oversubscription 4 --out pods.xml\n"
      "  vitsim platform --nodes 64 --gpus-per-node 4 --gpu a100-sxm-80gb --nic-speed hdr --topology torus\n"
      "      --torus-dims 4x4x4 --out torus.xml\n"
      "  vitsim platform platforms/specs/tesla.json --out platforms/tesla.xml   (per-node GPU types: a spec "
      "file)");
  add_platform_options(c, a);
  c->callback([&action, a, c] { action = [a, c] { return run_platform(a, c); }; });
}

}  // namespace vitsim::app
