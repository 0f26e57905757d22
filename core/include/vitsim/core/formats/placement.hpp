#pragma once
// Which platform GPU each data-parallel rank runs on. One rule, used by the simulator
// (sim/src/point/simulate.cpp builds its process group on these hosts; predict's trace names them) and by the
// real trainer (real/src/trainer/trainer.cpp: MFU over the dense peak of these GPUs), so that a measured
// point's MFU is over the GPUs its prediction ran on. Ranks are node-major: rank r runs on GPU r %
// gpus_per_node (the node's GPUs in radical order) of node r / gpus_per_node, nodes taken in cluster.hosts'
// order, or in the platform file's order when the scenario lists none. Every node used must hold
// cluster.gpus_per_node GPUs.
#include <string>
#include <vector>

#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/platform/platform.hpp"

namespace vitsim {

struct RankPlacement {
  std::vector<std::string> hosts;  // SimGrid host name (PlatformFacts::gpu's key) per rank
  std::vector<int> node;           // node index (in PlatformFacts::nodes) per rank
};

// The scenario's cluster.nodes x cluster.gpus_per_node ranks. Throws Error naming the scenario attribute
// at fault (an unknown cluster.hosts name, more nodes or GPUs per node than the platform has).
RankPlacement place_ranks(const Scenario& s, const PlatformFacts& facts);

// `ranks` ranks by the same rule (the trainer measures with as many processes as its job has, which may
// differ from the scenario's count): ceil(ranks / gpus_per_node) nodes, the last one possibly partly used.
RankPlacement place_ranks(const Scenario& s, const PlatformFacts& facts, int ranks);

// The dense peak per rank in `precision` (FLOP/s): the mean over the placed ranks of their GPU's peak, the
// denominator of MFU in predicted and measured reports alike. 0 for an empty placement.
double mean_peak_flops(const RankPlacement& place, const PlatformFacts& facts, Precision precision);

}  // namespace vitsim
