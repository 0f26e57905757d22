#pragma once
// Link transports: what a link's written (line-rate) bandwidth and latency become once the protocol
// that carries NCCL's bytes over it is accounted for. Pure functions, no SimGrid; the simulator applies
// the result to its links (sim/src/fabric/link_transports.cpp, apply_link_transports). docs/platforms.md and
// docs/sources.md give the sources of every default below.
//
//   tcp        NCCL's socket transport over TCP/IP on Ethernet. Goodput =
//                min(line rate x (MTU - 52) / (MTU + 38),
//                    socket_bw x nccl_socket_nthreads x nccl_nsocks_perthread x connections)
//              (52: IPv4 20 + TCP 20 + timestamp option 12 bytes of each packet; 38: Ethernet header 14 + FCS
//              4 + preamble 8 + inter-frame gap 12 bytes of each frame). NCCL opens threads x sockets per
//              connection, one connection per channel and peer (src/transport/net_socket.cc), and runs as
//              many channels at once as its topology search gives the communicator (LinkFacts::connections,
//              set by the simulator from NCCL's model: sim/src/collectives/nccl_platform.cpp
//              nccl_net_connections). Each direction of the link adds tcp_stack_latency (the kernel stack and
//              NCCL's socket proxy of one end) to every message: a message between two nodes crosses the
//              sender's NIC and the receiver's, so it pays two.
//   efa        AWS Elastic Fabric Adapter through the aws-ofi-nccl plugin (libfabric, SRD over Ethernet):
//              line rate x (efa_mtu - 52) / (efa_mtu + 38) (ASSUMPTION: SRD's headers cost what IP + TCP's
//              do); + ib_stack_latency per end. The plugin states a latency property (efa_net_latency) that
//              NCCL's tuner adds to every inter-node step (NcclPlatform::net_latency_us).
//   tcpx,      GCP GPUDirect-TCPX (A3 High) and TCPXO (A3 Mega) plugins: TCP on gVNIC with payloads moved
//   tcpxo      straight to GPU memory: line rate x tcp framing at tcpx_mtu, no socket cap (ASSUMPTION: the
//              plugin opens enough flows to fill its NIC); + tcpx_stack_latency per end. The plugins state no
//              latency property (0), so NCCL's tuner does not see that cost: it is charged to the call NCCL
//              chose (NcclPlatform::net_unseen_latency_us), not to NCCL's choice.
//   ib         InfiniBand / RoCE verbs: line rate (the data rate after 64b/66b encoding, as quoted: EDR 100
//              Gb/s) x MTU / (MTU + 26) (LRH 8 + BTH 12 + ICRC 4 + VCRC 2 bytes per packet, ib_mtu);
//              + ib_stack_latency per end.
//   nvlink     as written (the datasheet per-direction rate).
//   pcie_host  GPU to GPU without peer-to-peer: NCCL stages through a host-memory buffer; the rate is that
//              of the staging, not of the PCIe generation: staging_bw.
//   pcie_p2p   GPU to GPU peer-to-peer over PCIe: the GPUs' PCIe lane rate (a cluster's bw; for a <link>,
//              its written bandwidth).
// A cluster backbone with a transport thus takes its rate from the transport (nvlink: bb_bw as written);
// `vitsim platform` (core/platform/platform_writer.hpp) writes bb_bw equal to it, so a reader of the file
// sees the same figure.
#include <optional>
#include <string>
#include <vector>

#include "vitsim/core/base/error.hpp"

namespace vitsim {

// Wire: no transport stated, as written.
enum class Transport { Wire, Tcp, Ib, NvLink, PcieHost, PcieP2p, Efa, Tcpx, Tcpxo };

const char* transport_name(Transport t);  // "tcp", ...; "as written" for Wire
// A transport by any name vitsim takes for it, case and '-' ignored: the names above, and the aliases
// `vitsim platform --nic-transport` takes (sockets for tcp; roce, rocev2, infiniband for ib; aws-efa for efa;
// gpudirect-tcpx, gpudirect-tcpxo); none else.
std::optional<Transport> transport_by_name(const std::string& name);
// Parses a transport name; throws Error at `where` listing the valid names. `allowed` narrows them (the
// GPU-to-GPU path inside a node takes only nvlink, pcie_host, pcie_p2p); empty = all.
Transport parse_transport(const std::string& name, const Origin& where, const std::string& property,
                          const std::vector<Transport>& allowed = {});

// Defaults (docs/sources.md).
namespace transport_defaults {
inline constexpr int tcp_mtu = 1500;        // bytes, Ethernet's standard MTU
inline constexpr int ib_mtu = 4096;         // bytes, the largest IB MTU (NCCL's default)
inline constexpr int socket_nthreads = 1;   // NCCL_SOCKET_NTHREADS outside AWS/GCP auto-detection
inline constexpr int nsocks_perthread = 1;  // NCCL_NSOCKS_PERTHREAD likewise
inline constexpr double socket_bw = 2e9;    // bytes/s one NCCL socket reached (NVIDIA/nccl#209, 1 ring)
inline constexpr double tcp_stack_latency = 20e-6;  // s per end per message (NVIDIA/nccl-tests#82)
inline constexpr double ib_stack_latency = 1e-6;    // s per end per message (assumption)
inline constexpr double staging_bw = 4e9;  // bytes/s, no P2P (docs/sources.md "Links and transports")
inline constexpr int efa_mtu = 9001;       // bytes, EC2 jumbo frames (docs/sources.md "Links and transports")
inline constexpr double efa_net_latency = 75e-6;     // s, aws-ofi-nccl's latency property on p4d/p5
inline constexpr int tcpx_mtu = 8244;                // bytes, A3 VMs' GPU NIC MTU
inline constexpr double tcpx_stack_latency = 20e-6;  // s per end per message (ASSUMPTION: as tcp's)
}  // namespace transport_defaults

// One link as the platform file states it.
struct LinkFacts {
  std::string id;             // SimGrid's name: the <link id>, or "<cluster id>_backbone"
  std::string what;           // "NIC" or "GPU-GPU in node", for notes
  bool split_duplex = false;  // SimGrid names the two directions id_UP and id_DOWN
  Transport transport = Transport::Wire;
  double bandwidth = 0;  // as written, bytes/s
  double lane_bw = 0;    // a cluster backbone's GPU lane rate (the cluster's bw), bytes/s; 0 for a <link>
  double latency = 0;    // as written, s
  int mtu = 0;           // tcp_mtu or ib_mtu (bytes); 0 = the transport's default
  int socket_nthreads = transport_defaults::socket_nthreads;
  int nsocks_perthread = transport_defaults::nsocks_perthread;
  double socket_bw = transport_defaults::socket_bw;
  double stack_latency = -1;  // tcp_stack_latency or ib_stack_latency; < 0: the transport's default
  double staging_bw = transport_defaults::staging_bw;
  // NCCL connections that run over the link at once (tcp: each with its own sockets): the channels of NCCL's
  // communicator that cross this NIC; 1 until the simulator sets it from NCCL's model.
  int connections = 1;
  double net_latency = 0;  // s, the net plugin's latency property (efa: efa_net_latency; others 0)
  // A NIC link: the NICs it stands for as NCCL sees them (nic_count), each at bandwidth / nic_count; 0 = not
  // stated (NCCL's model infers them from the node's rate: sim/src/collectives/nccl_platform.cpp).
  int nic_count = 0;
  Origin origin;
};

struct LinkEffect {
  double bandwidth = 0;      // effective, bytes/s
  double extra_latency = 0;  // added to the link's written latency, s (per direction crossed)
  std::string how;           // one line: the mechanism and its figures
};

double tcp_framing(int mtu);  // (mtu - 52) / (mtu + 38)
double ib_framing(int mtu);   // mtu / (mtu + 26)
// What one NCCL connection opens over sockets: NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD, at least 1
// (NCCL's default of 0 helper threads sends over the connection's control socket: net_socket.cc).
int sockets_per_connection(const LinkFacts& l);
// A NIC transport NCCL reaches through a net plugin with a stated or unseen per-call cost: efa, tcpx, tcpxo.
bool is_cloud_transport(Transport t);
LinkEffect link_effect(const LinkFacts& l);
// One note per class of links with the same transport and figures: "NIC tcp ...: 1.25 GB/s line -> ...".
// `effects`, where given, are the links' effects as the simulator applied them (one per link, in order;
// default: link_effect of each).
std::vector<std::string> transport_notes(const std::vector<LinkFacts>& links,
                                         const std::vector<LinkEffect>* effects = nullptr);

}  // namespace vitsim
