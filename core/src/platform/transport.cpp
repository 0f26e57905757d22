#include "vitsim/core/platform/transport.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <tuple>

#include "vitsim/core/base/units.hpp"

namespace vitsim {

namespace {
constexpr Transport kAll[] = {Transport::Tcp,     Transport::Ib,  Transport::NvLink, Transport::PcieHost,
                              Transport::PcieP2p, Transport::Efa, Transport::Tcpx,   Transport::Tcpxo};
}

const char* transport_name(Transport t) {
  switch (t) {
    case Transport::Wire:
      return "as written";
    case Transport::Tcp:
      return "tcp";
    case Transport::Ib:
      return "ib";
    case Transport::NvLink:
      return "nvlink";
    case Transport::PcieHost:
      return "pcie_host";
    case Transport::PcieP2p:
      return "pcie_p2p";
    case Transport::Efa:
      return "efa";
    case Transport::Tcpx:
      return "tcpx";
    case Transport::Tcpxo:
      return "tcpxo";
  }
  return "?";
}

bool is_cloud_transport(Transport t) {
  return t == Transport::Efa || t == Transport::Tcpx || t == Transport::Tcpxo;
}

int sockets_per_connection(const LinkFacts& l) {
  return std::max(1, l.socket_nthreads * l.nsocks_perthread);
}

std::optional<Transport> transport_by_name(const std::string& name) {
  std::string n;
  for (char c : name)
    if (c != '-' && c != ' ') n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (Transport t : kAll)
    if (n == transport_name(t)) return t;
  // The names `vitsim platform --nic-transport` and spec files take for the same two (issue 28): NCCL's
  // socket transport, and the verbs transport that RoCE v2 and InfiniBand both run.
  static const std::map<std::string, Transport> aliases{
      {"sockets", Transport::Tcp},        {"socket", Transport::Tcp},          {"roce", Transport::Ib},
      {"rocev2", Transport::Ib},          {"infiniband", Transport::Ib},       {"awsefa", Transport::Efa},
      {"gpudirecttcpx", Transport::Tcpx}, {"gpudirecttcpxo", Transport::Tcpxo}};
  if (auto it = aliases.find(n); it != aliases.end()) return it->second;
  return std::nullopt;
}

Transport parse_transport(const std::string& name, const Origin& where, const std::string& property,
                          const std::vector<Transport>& allowed) {
  std::vector<Transport> valid = allowed;
  if (valid.empty()) valid.assign(std::begin(kAll), std::end(kAll));
  if (const auto t = transport_by_name(name); t && std::find(valid.begin(), valid.end(), *t) != valid.end())
    return *t;
  std::string names;
  for (Transport t : valid) names += (names.empty() ? "" : ", ") + std::string(transport_name(t));
  throw Error(where, fmt::format("property {}: unknown transport '{}'; valid: {}", property, name, names));
}

double tcp_framing(int mtu) {
  return static_cast<double>(mtu - 52) / (mtu + 38);
}
double ib_framing(int mtu) {
  return static_cast<double>(mtu) / (mtu + 26);
}

LinkEffect link_effect(const LinkFacts& l) {
  LinkEffect e;
  e.bandwidth = l.bandwidth;
  switch (l.transport) {
    case Transport::Wire:
      e.how = "as written";
      break;
    case Transport::NvLink:
      e.how = "nvlink: as written";
      break;
    case Transport::PcieP2p:
      if (l.lane_bw > 0) e.bandwidth = l.lane_bw;
      e.how = l.lane_bw > 0 ? "pcie_p2p: peer-to-peer at the GPUs' PCIe lane rate"
                            : "pcie_p2p: peer-to-peer as written";
      break;
    case Transport::PcieHost:
      e.bandwidth = l.staging_bw;
      e.how =
          fmt::format("pcie_host: staged through host memory at {}", units::format_bandwidth(l.staging_bw));
      break;
    case Transport::Tcp: {
      const int mtu = l.mtu > 0 ? l.mtu : transport_defaults::tcp_mtu;
      const double framing = tcp_framing(mtu);
      const int sockets = sockets_per_connection(l);
      const int connections = std::max(1, l.connections);
      const double wire = l.bandwidth * framing, socks = l.socket_bw * sockets * connections;
      e.bandwidth = std::min(wire, socks);
      e.extra_latency = l.stack_latency >= 0 ? l.stack_latency : transport_defaults::tcp_stack_latency;
      e.how = fmt::format(
          "tcp: min(line x framing {:.1f}% at MTU {} = {}, {} per socket x {} socket(s) per connection x {} "
          "connection(s) = {}) -> {}-limited; +{} stack latency per end",
          100 * framing, mtu, units::format_bandwidth(wire), units::format_bandwidth(l.socket_bw), sockets,
          connections, units::format_bandwidth(socks), wire <= socks ? "framing" : "socket",
          units::format_time(e.extra_latency));
      break;
    }
    case Transport::Efa:
    case Transport::Tcpx:
    case Transport::Tcpxo: {
      const bool efa = l.transport == Transport::Efa;
      const int mtu = l.mtu > 0 ? l.mtu : efa ? transport_defaults::efa_mtu : transport_defaults::tcpx_mtu;
      const double framing = tcp_framing(mtu);
      e.bandwidth = l.bandwidth * framing;
      e.extra_latency = l.stack_latency >= 0 ? l.stack_latency
                        : efa                ? transport_defaults::ib_stack_latency
                                             : transport_defaults::tcpx_stack_latency;
      e.how = fmt::format("{}: line x framing {:.2f}% at MTU {}; +{} per end{}", transport_name(l.transport),
                          100 * framing, mtu, units::format_time(e.extra_latency),
                          efa ? fmt::format("; NCCL's tuner adds the plugin's {} per network step",
                                            units::format_time(l.net_latency))
                              : "; a cost per network step NCCL's tuner does not see");
      break;
    }
    case Transport::Ib: {
      const int mtu = l.mtu > 0 ? l.mtu : transport_defaults::ib_mtu;
      const double framing = ib_framing(mtu);
      e.bandwidth = l.bandwidth * framing;
      e.extra_latency = l.stack_latency >= 0 ? l.stack_latency : transport_defaults::ib_stack_latency;
      e.how = fmt::format("ib: line x packet efficiency {:.2f}% at MTU {}; +{} per end", 100 * framing, mtu,
                          units::format_time(e.extra_latency));
      break;
    }
  }
  return e;
}

std::vector<std::string> transport_notes(const std::vector<LinkFacts>& links,
                                         const std::vector<LinkEffect>* effects) {
  // Group links whose line figures and result are the same; keep file order of first appearance.
  struct Group {
    std::string what, how;
    double line = 0, eff = 0;
    std::vector<std::string> ids;
  };
  std::vector<Group> groups;
  for (size_t i = 0; i < links.size(); ++i) {
    const LinkFacts& l = links[i];
    const LinkEffect e = effects ? effects->at(i) : link_effect(l);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return g.what == l.what && g.how == e.how && g.line == l.bandwidth && g.eff == e.bandwidth;
    });
    if (it == groups.end()) {
      groups.push_back({l.what, e.how, l.bandwidth, e.bandwidth, {}});
      it = groups.end() - 1;
    }
    it->ids.push_back(l.id);
  }
  std::vector<std::string> out;
  for (const auto& g : groups) {
    std::string ids = g.ids.front();
    if (g.ids.size() == 2) ids += ", " + g.ids[1];
    if (g.ids.size() > 2) ids += fmt::format(" and {} more", g.ids.size() - 1);
    out.push_back(fmt::format("link {} ({}): {} written -> {} effective [{}]", g.what, ids,
                              units::format_bandwidth(g.line), units::format_bandwidth(g.eff), g.how));
  }
  return out;
}

}  // namespace vitsim
