// The platform's link transports (core/platform/transport.hpp) applied to the links SimGrid loaded or vitsim
// built (platform_build.cpp): part of building the platform, before the collectives' LatencyModel reads the
// latencies.
#include <fmt/format.h>

#include <vector>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/platform/transport.hpp"
#include "vitsim/sim/fabric/platform_build.hpp"

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {

std::vector<std::string> apply_link_transports(sg4::Engine& e, const PlatformFacts& facts,
                                               const std::vector<int>& connections) {
  std::vector<LinkFacts> links = facts.links;
  for (size_t i = 0; i < links.size() && i < connections.size(); ++i) links[i].connections = connections[i];
  for (const LinkFacts& l : links) {
    const LinkEffect eff = link_effect(l);
    std::vector<sg4::Link*> sg;
    if (l.split_duplex) {
      for (const char* dir : {"_UP", "_DOWN"})
        if (sg4::Link* x = e.link_by_name_or_null(l.id + dir)) sg.push_back(x);
    } else if (sg4::Link* x = e.link_by_name_or_null(l.id)) {
      sg.push_back(x);
    } else if (const auto* pieces = flat_link_pieces(l.id)) {  // a flat-star backbone (platform_build.hpp)
      sg = *pieces;
    }
    if (sg.empty())
      throw Error(l.origin, fmt::format("SimGrid has no link '{}' to apply transport {} to", l.id,
                                        transport_name(l.transport)));
    for (sg4::Link* x : sg) {
      x->set_bandwidth(eff.bandwidth);
      if (eff.extra_latency > 0) x->set_latency(x->get_latency() + eff.extra_latency);
    }
  }
  return transport_notes(links);
}

}  // namespace vitsim::sim
