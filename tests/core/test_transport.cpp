// Link transports (core/platform/transport.hpp) against their closed forms, the simulator applying them, and
// the platform properties that carry them; plus the GPU properties of the per-op compute model.
#include <catch2/catch.hpp>

#include <simgrid/s4u.hpp>

#include "test_util.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/platform/transport.hpp"
#include "vitsim/sim/collectives/collective.hpp"
#include "vitsim/sim/fabric/platform_build.hpp"
#include "vitsim/sim/point/simulate.hpp"

namespace sg4 = simgrid::s4u;
using namespace vitsim;

namespace {

LinkFacts tcp_link(double line, int threads = 1, int socks = 1,
                   double socket_bw = transport_defaults::socket_bw) {
  LinkFacts l;
  l.id = "nic";
  l.what = "NIC";
  l.transport = Transport::Tcp;
  l.bandwidth = line;
  l.socket_nthreads = threads;
  l.nsocks_perthread = socks;
  l.socket_bw = socket_bw;
  return l;
}

// Two one-GPU nodes joined by SPLITDUPLEX NICs that carry `nic_props`; GPU lanes and backbones never
// limit and have no latency, so a transfer between the nodes sees only the two NIC directions.
std::string two_nodes(const std::string& nic_bw, const std::string& nic_lat, const std::string& nic_props,
                      const std::string& zone_props = "") {
  std::string x =
      "<?xml version=\"1.0\"?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
      "<platform version=\"4.1\"><zone id=\"t\" routing=\"Full\">\n" +
      zone_props + "\n";
  for (int i = 0; i < 2; ++i)
    x += fmt::format(
        "<cluster id=\"n{0}\" prefix=\"n{0}-gpu\" suffix=\"\" radical=\"0-0\" speed=\"1Tf\" bw=\"1000GBps\" "
        "lat=\"0us\" "
        "sharing_policy=\"SPLITDUPLEX\" bb_bw=\"1000GBps\" bb_lat=\"0us\" bb_sharing_policy=\"FATPIPE\" "
        "loopback_bw=\"1000GBps\" loopback_lat=\"0us\" router_id=\"n{0}-router\">{1}</cluster>\n",
        i, vt::gpu_props("G", "1Tf"));
  for (int i = 0; i < 2; ++i)
    x += fmt::format(
        "<link id=\"n{}-nic\" bandwidth=\"{}\" latency=\"{}\" sharing_policy=\"SPLITDUPLEX\">{}</link>\n", i,
        nic_bw, nic_lat, nic_props);
  x += "<zoneRoute src=\"n0\" dst=\"n1\" gw_src=\"n0-router\" gw_dst=\"n1-router\"><link_ctn id=\"n0-nic\" "
       "direction=\"UP\"/><link_ctn id=\"n1-nic\" direction=\"DOWN\"/></zoneRoute>\n";
  return x + "</zone></platform>\n";
}

// One ring all-reduce of `bytes` over every GPU of the platform, after the platform's transports are
// applied as simulate_point applies them; returns its simulated time.
double ring_allreduce(const std::string& platform, double bytes) {
  return vt::in_child([&] {
    const PlatformFacts facts = read_platform_facts(platform);
    int argc = 2;
    char a0[] = "t", a1[] = "--log=root.thres:critical";
    char* argv[] = {a0, a1, nullptr};
    sg4::Engine e(&argc, argv);
    sim::configure_engine(e);  // the simulator's own network model: figures exactly as written
    e.load_platform(platform);
    sim::apply_link_transports(e, facts);
    std::vector<sg4::Host*> hosts;
    std::vector<int> node;
    for (size_t i = 0; i < facts.nodes.size(); ++i) {
      hosts.push_back(e.host_by_name(facts.nodes[i].gpus.at(0)));
      node.push_back(static_cast<int>(i));
    }
    sim::LatencyModel lat(e);
    sim::Group g("g", hosts, node, lat);
    auto ring = sim::make_collective("ring_msg");
    double end = 0;
    for (int i = 0; i < g.size(); ++i)
      sg4::Actor::create("r" + std::to_string(i), hosts[i], [&, i] {
        ring->run(g, i, bytes, sim::CollOp::AllReduce);
        end = std::max(end, sg4::Engine::get_clock());
      });
    e.run();
    return end;
  });
}

std::string error_of(const std::string& path) {
  try {
    read_platform_facts(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("tcp framing: payload (MTU-52) of (MTU+38) wire bytes", "[transport][tcp]") {
  CHECK(tcp_framing(1500) == Approx(1448.0 / 1538.0));
  CHECK(tcp_framing(1500) == Approx(0.9415).epsilon(1e-4));
  CHECK(tcp_framing(9000) == Approx(8948.0 / 9038.0));
}

TEST_CASE("NCCL sockets on 10 GbE: framing-limited goodput plus stack latency per end", "[transport][tcp]") {
  // 10 GbE line rate 1.25 GB/s; one socket at the default 2 GB/s does not bind.
  const LinkEffect e = link_effect(tcp_link(1.25e9));
  CHECK(e.bandwidth == Approx(1.25e9 * 1448 / 1538).epsilon(1e-12));
  CHECK(e.extra_latency == Approx(transport_defaults::tcp_stack_latency));
  CHECK_THAT(e.how, Catch::Contains("framing-limited"));
  // 1 GbE: 117.7 MB/s (pytorch/gloo#21 measured about 110 MB/s of 125 for a ring all-reduce).
  CHECK(link_effect(tcp_link(0.125e9)).bandwidth == Approx(0.125e9 * 1448 / 1538).epsilon(1e-12));
}

TEST_CASE("threads x sockets raise a per-socket-limited link up to the framing limit", "[transport][tcp]") {
  // 25 GbE (3.125 GB/s line, 2.942 GB/s after framing) with sockets of 1 GB/s each.
  const double line = 3.125e9, per = 1e9, wire = line * 1448 / 1538;
  CHECK(link_effect(tcp_link(line, 1, 1, per)).bandwidth == Approx(1e9));
  CHECK(link_effect(tcp_link(line, 2, 1, per)).bandwidth == Approx(2e9));
  CHECK(link_effect(tcp_link(line, 1, 2, per)).bandwidth == Approx(2e9));
  CHECK_THAT(link_effect(tcp_link(line, 1, 2, per)).how, Catch::Contains("socket-limited"));
  CHECK(link_effect(tcp_link(line, 2, 2, per)).bandwidth == Approx(wire));
  CHECK(link_effect(tcp_link(line, 4, 8, per)).bandwidth == Approx(wire));
}

TEST_CASE("NCCL's sockets: threads x sockets per connection, one connection per channel",
          "[transport][tcp]") {
  // net_socket.cc (v2.27.7-1:311-316): AWS ENA 2 threads x 8 sockets, GCP gVNIC 4 x 1, else 0 helper threads
  // (the control socket carries the data: 1). 100 GbE: 12.5 GB/s line, 11.77 GB/s after framing.
  const double line = 12.5e9, wire = line * 1448 / 1538;
  LinkFacts l = tcp_link(line);
  CHECK(sockets_per_connection(l) == 1);
  for (int connections : {1, 2, 4}) {  // a socket of 2 GB/s per connection, `connections` channels at once
    l.connections = connections;
    CHECK(link_effect(l).bandwidth == Approx(std::min(wire, 2e9 * connections)));
    CHECK_THAT(link_effect(l).how, Catch::Contains(fmt::format("x {} connection(s)", connections)));
  }
  LinkFacts gcp = tcp_link(line, 4, 1);  // 4 sockets per connection x 2 channels = 8 x 2 GB/s > 11.77
  gcp.connections = 2;
  CHECK(link_effect(gcp).bandwidth == Approx(wire));
  CHECK_THAT(link_effect(gcp).how, Catch::Contains("framing-limited"));
  // 10 GbE stays line-bound whatever the connections: 1.25 x 1448/1538 = 1.177 GB/s < one socket's 2 GB/s.
  LinkFacts ten = tcp_link(1.25e9);
  for (int connections : {1, 2, 8}) {
    ten.connections = connections;
    CHECK(link_effect(ten).bandwidth == Approx(1.25e9 * 1448 / 1538));
  }
}

TEST_CASE("efa, tcpx and tcpxo: line x framing at their MTU, efa's plugin latency, tcpx's stacks",
          "[transport][cloud]") {
  for (const auto& [name, t] : {std::pair{"efa", Transport::Efa}, std::pair{"tcpx", Transport::Tcpx},
                                std::pair{"tcpxo", Transport::Tcpxo}}) {
    CHECK(transport_by_name(name) == t);
    CHECK(std::string(transport_name(t)) == name);
    CHECK(is_cloud_transport(t));
  }
  CHECK(transport_by_name("aws-efa") == Transport::Efa);
  CHECK(transport_by_name("GPUDirect-TCPXO") == Transport::Tcpxo);
  LinkFacts efa;
  efa.transport = Transport::Efa;
  efa.bandwidth = 50e9;  // p4d: 4 x 100 Gb/s
  efa.net_latency = 75e-6;
  // EC2 jumbo frames: 9001-byte MTU, (9001 - 52) / (9001 + 38).
  CHECK(link_effect(efa).bandwidth == Approx(50e9 * 8949 / 9039));
  CHECK(link_effect(efa).extra_latency == Approx(transport_defaults::ib_stack_latency));
  CHECK_THAT(link_effect(efa).how, Catch::Contains("plugin's 75.00 us per network step"));
  LinkFacts tcpx;
  tcpx.transport = Transport::Tcpxo;
  tcpx.bandwidth = 200e9;                                             // a3-mega: 8 x 200 Gb/s
  CHECK(link_effect(tcpx).bandwidth == Approx(200e9 * 8192 / 8282));  // MTU 8244
  CHECK(link_effect(tcpx).extra_latency == Approx(transport_defaults::tcpx_stack_latency));
  // No socket cap: a tcpx link with the socket figures of a tcp one is still line-bound.
  tcpx.socket_bw = 1e9;
  CHECK(link_effect(tcpx).bandwidth == Approx(200e9 * 8192 / 8282));
}

TEST_CASE("ib is line rate x MTU / (MTU + 26) and pcie_host the staging figure whatever the lane",
          "[transport]") {
  LinkFacts ib;
  ib.transport = Transport::Ib;
  ib.bandwidth = 12.5e9;  // EDR, 100 Gb/s data rate
  CHECK(link_effect(ib).bandwidth == Approx(12.5e9 * 4096 / 4122));
  CHECK(link_effect(ib).extra_latency == Approx(transport_defaults::ib_stack_latency));

  LinkFacts host;
  host.transport = Transport::PcieHost;
  for (double lane : {12e9, 25e9}) {  // Gen3 x16 and Gen4 x16 alike: the staging, not the lane, sets it
    host.bandwidth = lane;
    CHECK(link_effect(host).bandwidth == Approx(transport_defaults::staging_bw));
    CHECK(link_effect(host).extra_latency == 0);
  }
  host.staging_bw = 3e9;
  CHECK(link_effect(host).bandwidth == Approx(3e9));

  for (Transport t : {Transport::NvLink, Transport::PcieP2p}) {
    LinkFacts l;
    l.transport = t;
    l.bandwidth = 25e9;
    CHECK(link_effect(l).bandwidth == 25e9);
    CHECK(link_effect(l).extra_latency == 0);
  }
  // A cluster backbone under pcie_p2p runs at the GPUs' lane rate, whatever its written figure.
  LinkFacts bb;
  bb.transport = Transport::PcieP2p;
  bb.bandwidth = 4e9;
  bb.lane_bw = 12e9;
  CHECK(link_effect(bb).bandwidth == 12e9);
}

TEST_CASE("platform files state transports on links (own or zone props) and on cluster backbones",
          "[transport][platform]") {
  vt::TempDir d;
  const std::string p = d.file(
      "p.xml",
      two_nodes("10Gbps", "1us", "<prop id=\"transport\" value=\"tcp\"/>",
                "<prop id=\"nccl_socket_nthreads\" value=\"2\"/><prop id=\"socket_bw\" value=\"0.5GBps\"/>"));
  const PlatformFacts f = read_platform_facts(p);
  REQUIRE(f.links.size() == 2);
  CHECK(f.links[0].id == "n0-nic");
  CHECK(f.links[0].split_duplex);
  CHECK(f.links[0].transport == Transport::Tcp);
  CHECK(f.links[0].bandwidth == Approx(1.25e9));
  CHECK(f.links[0].latency == Approx(1e-6));
  CHECK(f.links[0].mtu == 1500);
  CHECK(f.links[0].socket_nthreads == 2);  // from the zone
  CHECK(f.links[0].nsocks_perthread == 1);
  CHECK(link_effect(f.links[0]).bandwidth == Approx(1e9));  // 2 x 0.5 GB/s < 1.18 GB/s
  const auto notes = transport_notes(f.links);
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Catch::Contains("link NIC (n0-nic, n1-nic)") && Catch::Contains("1 GB/s effective"));

  // A cluster's intranode_transport: its backbone.
  std::string x = vt::platform_xml(1, 2, "12GBps", "1us", {}, {"1Tf"}, "12GBps");
  x.replace(x.find("</cluster>"), 0, "<prop id=\"intranode_transport\" value=\"pcie_host\"/>");
  const PlatformFacts g = read_platform_facts(d.file("g.xml", x));
  REQUIRE(g.links.size() == 1);
  CHECK(g.links[0].id == "n0_backbone");
  CHECK(!g.links[0].split_duplex);
  CHECK(link_effect(g.links[0]).bandwidth == Approx(4e9));
  CHECK(g.links[0].lane_bw == Approx(12e9));
}

TEST_CASE("a 2-node ring all-reduce over tcp links matches the closed form at the effective bandwidth",
          "[transport][tcp][collective]") {
  // Ring over 2 ranks: t = 2(n-1) a + 2(n-1)/n S/B = 2 a + S/B, with B the tcp goodput of a 10 GbE NIC and
  // a the route latency: written NIC latency + stack latency on each of the two NIC directions crossed.
  vt::TempDir d;
  const std::string p = d.file("p.xml", two_nodes("10Gbps", "1us", "<prop id=\"transport\" value=\"tcp\"/>"));
  const double S = 100e6;
  const double B = 1.25e9 * 1448 / 1538;
  const double a = 2 * (1e-6 + transport_defaults::tcp_stack_latency);
  CHECK(ring_allreduce(p, S) == Approx(2 * a + S / B).epsilon(1e-6));
  // The same platform without a transport runs at line rate with the written latency only.
  const std::string q = d.file("q.xml", two_nodes("10Gbps", "1us", ""));
  CHECK(ring_allreduce(q, S) == Approx(2 * 2e-6 + S / 1.25e9).epsilon(1e-6));
  // Two socket threads of 0.5 GB/s: socket-limited at 1 GB/s.
  const std::string r = d.file(
      "r.xml",
      two_nodes(
          "10Gbps", "1us",
          "<prop id=\"transport\" value=\"tcp\"/><prop id=\"socket_bw\" value=\"0.5GBps\"/>"
          "<prop id=\"nccl_socket_nthreads\" value=\"2\"/><prop id=\"tcp_stack_latency\" value=\"0us\"/>"));
  CHECK(ring_allreduce(r, S) == Approx(2 * 2e-6 + S / 1e9).epsilon(1e-6));
}

TEST_CASE("bad transports give one line with file:line and the valid names", "[transport][negative]") {
  vt::TempDir d;
  const std::string p = d.file("p.xml", two_nodes("10Gbps", "1us", "<prop id=\"transport\" value=\"udp\"/>"));
  CHECK_THAT(error_of(p),
             Catch::Matches(".*p\\.xml:[0-9]+: property transport: unknown transport 'udp'; valid: "
                            "tcp, ib, nvlink, pcie_host, pcie_p2p, efa, tcpx, tcpxo"));
  std::string x = vt::platform_xml(1, 2, "12GBps", "1us", {}, {"1Tf"});
  x.replace(x.find("</cluster>"), 0, "<prop id=\"intranode_transport\" value=\"tcp\"/>");
  CHECK_THAT(error_of(d.file("c.xml", x)),
             Catch::Matches(".*c\\.xml:[0-9]+: property intranode_transport: unknown transport 'tcp'; valid: "
                            "nvlink, pcie_host, pcie_p2p"));
  const std::string m =
      d.file("m.xml", two_nodes("10Gbps", "1us",
                                "<prop id=\"transport\" value=\"tcp\"/><prop id=\"tcp_mtu\" value=\"9k\"/>"));
  CHECK_THAT(error_of(m), Catch::Contains("property tcp_mtu: '9k' is not an integer in 576 .. 65535"));
  const std::string s =
      d.file("s.xml", two_nodes("10Gbps", "1us",
                                "<prop id=\"transport\" value=\"tcp\"/><prop id=\"nccl_socket_nthreads\" "
                                "value=\"16\"/><prop id=\"nccl_nsocks_perthread\" value=\"8\"/>"));
  CHECK_THAT(error_of(s), Catch::Contains("exceeds NCCL's 64 sockets"));
  // The CLI says the same in one line.
  const std::string scen = d.file(
      "scen.xml", fmt::format("<scenario name=\"t\"><cluster platform=\"{}\" nodes=\"2\"/>"
                              "<model preset=\"vit_cifar_tiny\"/><dataset name=\"cifar10\"/></scenario>",
                              p));
  const auto r = vt::vitsim("predict " + scen + " --quiet");
  CHECK(r.status != 0);
  CHECK_THAT(r.out,
             Catch::Contains("unknown transport 'udp'; valid: tcp, ib, nvlink, pcie_host, pcie_p2p, efa, "
                             "tcpx, tcpxo"));
}

TEST_CASE("GPU properties of the per-op compute model: defaults and fallbacks and errors",
          "[platform][gpu]") {
  vt::TempDir d;
  auto one = [&](const std::string& extra, const std::string& base = "") {
    std::string x = vt::platform_xml(1, 1, "12GBps", "1us", {}, {"1Tf"});
    const std::string legacy = "<prop id=\"gpu_efficiency\" value=\"1\"/>";
    if (!base.empty()) x.replace(x.find(legacy), legacy.size(), base);
    x.replace(x.find("</cluster>"), 0, extra);
    return d.file("g.xml", x);
  };
  {
    const GpuFacts g = read_platform_facts(one("")).gpu.at("n0-gpu0");
    CHECK(g.sm_count == 1);
    CHECK(g.tile_m == 128);
    CHECK(g.tile_n == 128);
    CHECK(g.gemm_efficiency == 1);  // the legacy gpu_efficiency
    CHECK(g.attn_efficiency == 1);
    CHECK(g.mem_efficiency == 1);
    CHECK(g.gemm_k_half == 0);
    CHECK(g.sync_overhead == 0);
    CHECK(g.host_op_overhead == 0);
    CHECK(g.async);
  }
  {
    const GpuFacts g =
        read_platform_facts(
            one("<prop id=\"gpu_sm_count\" value=\"40\"/><prop id=\"gpu_gemm_tile\" value=\"256x128\"/>"
                "<prop id=\"gpu_attn_efficiency\" value=\"0.4\"/><prop id=\"gpu_mem_efficiency\" "
                "value=\"0.8\"/>"
                "<prop id=\"gpu_gemm_k_half\" value=\"96\"/><prop id=\"gpu_sync_overhead\" value=\"20us\"/>"
                "<prop id=\"host_op_overhead\" value=\"10us\"/><prop id=\"device_kind\" value=\"cpu\"/>",
                "<prop id=\"gpu_gemm_efficiency\" value=\"0.7\"/>"))
            .gpu.at("n0-gpu0");
    CHECK(g.sm_count == 40);
    CHECK(g.tile_m == 256);
    CHECK(g.tile_n == 128);
    CHECK(g.gemm_efficiency == Approx(0.7));
    CHECK(g.efficiency == Approx(0.7));  // legacy field follows when only the new one is given
    CHECK(g.attn_efficiency == Approx(0.4));
    CHECK(g.mem_efficiency == Approx(0.8));
    CHECK(g.gemm_k_half == Approx(96));
    CHECK(g.sync_overhead == Approx(20e-6));
    CHECK(g.host_op_overhead == Approx(10e-6));
    CHECK(!g.async);
  }
  CHECK_THAT(error_of(one("", "<prop id=\"gpu_kernel_overhead\" value=\"1us\"/>")),
             Catch::Contains("lacks property 'gpu_gemm_efficiency' (or the legacy 'gpu_efficiency')"));
  CHECK_THAT(error_of(one("<prop id=\"gpu_gemm_tile\" value=\"128\"/>")),
             Catch::Matches(
                 ".*g\\.xml:[0-9]+: property gpu_gemm_tile: '128' is not MxN with two positive integers.*"));
  CHECK_THAT(error_of(one("<prop id=\"gpu_sm_count\" value=\"0\"/>")),
             Catch::Contains("property gpu_sm_count: '0' is not an integer in 1 .."));
  CHECK_THAT(error_of(one("<prop id=\"gpu_mem_efficiency\" value=\"1.5\"/>")),
             Catch::Contains("property gpu_mem_efficiency: '1.5'"));
  CHECK_THAT(error_of(one("<prop id=\"gpu_sync_overhead\" value=\"20\"/>")),
             Catch::Contains("property gpu_sync_overhead"));
  CHECK_THAT(error_of(one("<prop id=\"device_kind\" value=\"tpu\"/>")),
             Catch::Contains("property device_kind: 'tpu' is not one of: gpu, cpu"));
}

TEST_CASE("the study platforms carry their transports: Tesla's NCCL sockets, Vector's IB, staged GPU paths",
          "[transport][platform][study]") {
  const PlatformFacts tesla = read_platform_facts(vt::source("platforms/tesla.xml"));
  REQUIRE(tesla.links.size() == 5);
  for (const auto& l : tesla.links) {
    INFO(l.id);
    CHECK(l.transport == Transport::Tcp);
    const double line = l.id == "tesla3-nic" ? 0.125e9 : 1.25e9;
    CHECK(link_effect(l).bandwidth == Approx(line * 1448 / 1538).epsilon(1e-12));
  }
  const PlatformFacts vector = read_platform_facts(vt::source("platforms/vector.xml"));
  int nics = 0, backbones = 0;
  for (const auto& l : vector.links) {
    if (l.transport == Transport::Ib) {
      // InfiniBand EDR (inferred from the study's finding 6, docs/sources.md): the data rate times the
      // payload share of a packet at ib_mtu 4096 with 26 bytes of headers.
      ++nics;
      CHECK(link_effect(l).bandwidth == Approx(l.bandwidth * 4096 / (4096 + 26)).epsilon(1e-12));
    } else {
      ++backbones;
      CHECK(l.transport == Transport::PcieHost);
      CHECK(link_effect(l).bandwidth == Approx(l.staging_bw));
      CHECK(link_effect(l).bandwidth == Approx(l.bandwidth));  // the file's bb_bw is the staging figure
    }
  }
  CHECK(nics == 54);
  CHECK(backbones == 54);
  const PlatformFacts nebula = read_platform_facts(vt::source("platforms/nebula.xml"));
  const auto bb = std::find_if(nebula.links.begin(), nebula.links.end(),
                               [](const LinkFacts& l) { return l.id == "dualcard_backbone"; });
  REQUIRE(bb != nebula.links.end());
  // Staged through host memory (inferred from the study's finding 2, docs/sources.md), as on Vector.
  CHECK(bb->transport == Transport::PcieHost);
  CHECK(link_effect(*bb).bandwidth == Approx(bb->staging_bw));
  CHECK(link_effect(*bb).bandwidth == Approx(bb->bandwidth));
}

// Issue 36, end to end through `vitsim collective`: the socket transport's connections are NCCL's channels
// over the NIC, and EFA's plugin latency is in the call NCCL chose.
TEST_CASE("vitsim collective: sockets per NCCL channel, EFA's plugin latency in the call",
          "[transport][cloud]") {
  vt::TempDir d;
  // 2 nodes x 4 L40S (PCIe Gen4, NCCL rates it 24 GB/s) on 100 GbE: NCCL's inter-node search starts at 12
  // GB/s (<= min(12.5, 24)): 1 channel (one NIC of 12.5 carries one at 12), no duplication below 25; the
  // communicator doubles it: 2 channels, 2 connections of one 2 GB/s socket = 4 GB/s < 11.77 after framing.
  REQUIRE(
      vt::vitsim("platform --nodes 2 --gpus-per-node 4 --gpu l40s --nic-speed 100gbe --out " + (d / "s.xml"))
          .status == 0);
  const vt::CmdResult s = vt::vitsim("collective " + (d / "s.xml") + " -b 1M -e 1M -q");
  CHECK(s.status == 0);
  CHECK_THAT(s.out,
             Catch::Contains("x 1 socket(s) per connection x 2 connection(s) = 4 GB/s) -> socket-limited"));
  // NCCL_MIN_NCHANNELS=3 (connect.cc ncclTopoPostset: the first channels copied up to the minimum): 3
  // connections, 6 GB/s, still below 11.77; NCCL_MAX_NCHANNELS=1: one, 2 GB/s. Not with a named algorithm.
  const vt::CmdResult s3 =
      vt::vitsim("collective " + (d / "s.xml") + " -b 1M -e 1M -q --nccl-min-channels 3");
  CHECK(s3.status == 0);
  CHECK_THAT(s3.out,
             Catch::Contains("x 1 socket(s) per connection x 3 connection(s) = 6 GB/s) -> socket-limited"));
  const vt::CmdResult s1 =
      vt::vitsim("collective " + (d / "s.xml") + " -b 1M -e 1M -q --nccl-max-channels 1");
  CHECK_THAT(s1.out,
             Catch::Contains("x 1 socket(s) per connection x 1 connection(s) = 2 GB/s) -> socket-limited"));
  const vt::CmdResult named =
      vt::vitsim("collective " + (d / "s.xml") + " -b 1M -e 1M -q --collective ring --nccl-min-channels 3");
  CHECK(named.status != 0);
  CHECK_THAT(named.out, Catch::Contains("--nccl-min-channels applies to NCCL's tuner"));
  // 2 x 8 H100 with 4 EFA interfaces a node, NCCL 2.23 at 8 B: Tree/LL, latency 6.8 + 2 (7 x .6 + 1 x (5.0 +
  // 75)) = 175.2 us (test_nccl_tuning "the net plugin's latency").
  REQUIRE(vt::vitsim("platform --nodes 2 --gpus-per-node 8 --gpu h100-sxm --nics 4 --nic-speed efa --out " +
                     (d / "e.xml"))
              .status == 0);
  const vt::CmdResult e = vt::vitsim("collective " + (d / "e.xml") + " -b 8 -e 8 -q --nccl-version 2.23");
  CHECK(e.status == 0);
  CHECK_THAT(e.out, Catch::Contains("Tree/LL") && Catch::Contains("latency 175.20 us"));
}
