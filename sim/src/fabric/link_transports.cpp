// The platform's link transports (core/platform/transport.hpp) applied to the links SimGrid loaded or vitsim
// built (platform_build.cpp): part of building the platform, before the collectives' LatencyModel reads the
// latencies.
// NVLink as NCCL runs it: a node's NVLink backbone ("<node>_backbone", transport nvlink) carries each GPU's
// flow at NCCL's own rating of one NVLink (NcclVersion::nvlink_bw of the newest table: topo.h
// SM80_NVLINK_BW 20 GB/s, SM90 20.6, SM100 40.1, ...) times its links, not at the datasheet's line rate:
// NCCL's channels over NVLink reach that rating (an 8 x A100 NVSwitch node: 12 x 20 = 240 GB/s against 300
// written; public all_reduce_perf runs on DGX A100 measure a ring's busbw of 230-235 GB/s, docs/sources.md
// "NVLink as NCCL runs it"). The factor is the rating over the link's datasheet rate
// (nvlink_line_per_link), the slowest GPU's of the node; a node whose GPUs have no NCCL SM version (AMD's
// Infinity Fabric, a GPU without gpu_arch) keeps the rate as written. The GPUs' own lanes keep theirs, so a
// GPU's several flows at once share its written NVLink bandwidth.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/model/nccl_tuning.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/platform/platform_writer.hpp"
#include "vitsim/core/platform/transport.hpp"
#include "vitsim/sim/fabric/platform_build.hpp"

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {

namespace {

// NCCL's rating of the node's NVLink over its line rate, the lowest of its GPUs'; 0 where a GPU has no NCCL
// SM version (the link then runs as written).
double nvlink_factor(const PlatformFacts& facts, const NodeFacts& node, int* sm_out) {
  double factor = 0;
  for (const std::string& h : node.gpus) {
    auto g = facts.gpu.find(h);
    if (g == facts.gpu.end() || g->second.arch.empty()) return 0;
    const int sm = builtin_catalogue().archs.at(g->second.arch).nccl_sm;
    if (sm <= 0) return 0;
    const double f = nccl_newest_version().nvlink_bw(sm) / nvlink_line_per_link(sm);
    if (*sm_out == 0 || f < factor) {
      factor = f;
      *sm_out = sm;
    }
  }
  return factor;
}

const std::string kBackbone = "_backbone";

}  // namespace

std::vector<std::string> apply_link_transports(sg4::Engine& e, const PlatformFacts& facts,
                                               const std::vector<int>& connections) {
  std::vector<LinkFacts> links = facts.links;
  for (size_t i = 0; i < links.size() && i < connections.size(); ++i) links[i].connections = connections[i];
  std::map<std::string, const NodeFacts*> nodes;
  for (const NodeFacts& n : facts.nodes) nodes[n.name] = &n;
  std::vector<LinkEffect> effects;
  for (const LinkFacts& l : links) {
    LinkEffect& eff = effects.emplace_back(link_effect(l));
    if (l.transport == Transport::NvLink && l.id.size() > kBackbone.size() &&
        l.id.compare(l.id.size() - kBackbone.size(), kBackbone.size(), kBackbone) == 0) {
      int sm = 0;
      auto node = nodes.find(l.id.substr(0, l.id.size() - kBackbone.size()));
      if (const double f = node == nodes.end() ? 0 : nvlink_factor(facts, *node->second, &sm);
          f > 0 && f < 1) {
        eff.bandwidth *= f;
        eff.how = fmt::format(
            "nvlink: NCCL's rating of one NVLink, {:g} of {:g} GB/s per link (SM {}, NCCL {}; "
            "docs/sources.md "
            "\"NVLink as NCCL runs it\")",
            nccl_newest_version().nvlink_bw(sm), nvlink_line_per_link(sm), sm, nccl_newest_version().name);
      }
    }
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
  return transport_notes(links, &effects);
}

}  // namespace vitsim::sim
