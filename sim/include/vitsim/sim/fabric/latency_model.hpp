#pragma once
// Link latencies as pure delays. SimGrid's CM02 model weighs each flow's share of a link by its route
// latency (TCP round-trip unfairness), so flows with different latencies would split a link, even a
// FATPIPE one, unequally. vitsim models NCCL-style transfers with the alpha-beta rule instead: a
// transfer costs its route latency, then its bytes at a max-min fair share. LatencyModel records every
// link's latency (with any transport's stack latency, see apply_link_transports in
// sim/fabric/platform_build.hpp), sets it to zero in SimGrid, and the collectives add route latencies
// themselves.
#include <simgrid/s4u.hpp>

#include <unordered_map>

namespace vitsim::sim {

class LatencyModel {
 public:
  explicit LatencyModel(simgrid::s4u::Engine& e);  // call after load_platform, before run
  double route_latency(const simgrid::s4u::Host* src, const simgrid::s4u::Host* dst) const;
  // Every route without latency: for a collective whose latencies come from elsewhere (`auto`: NCCL's own
  // latency model, sim/src/collectives/collective_nccl.cpp), its transfers then cost their bytes only.
  static const LatencyModel& none();

 private:
  LatencyModel() = default;
  bool none_ = false;
  std::unordered_map<const simgrid::s4u::Link*, double> latency_;
};

}  // namespace vitsim::sim
