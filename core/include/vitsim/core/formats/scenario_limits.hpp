#pragma once
// The ranges of the scenario's cluster keys (docs/scenarios.md), shared by the scenario reader
// (scenario_keys.cpp) and the commands that write a scenario themselves (vitsim plan's one-line form), so a
// flag accepts exactly what the scenario it writes will accept.

namespace vitsim {

inline constexpr long long kMaxScenarioNodes = 1LL << 20;  // cluster.nodes
inline constexpr long long kMaxGpusPerNode = 1024;         // cluster.gpus_per_node

}  // namespace vitsim
