#pragma once
// The ranks taking part in a collective (the algorithm's topology, apart from the algorithm: collective.hpp,
// and from the network: the platform's links through LatencyModel and SimGrid).
#include <simgrid/s4u.hpp>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "vitsim/sim/fabric/latency_model.hpp"
#include "vitsim/sim/fluid/lone_ring.hpp"

namespace vitsim::sim {

// The ranks taking part, in ring order, with mailboxes private to this group.
class Group {
 public:
  Group(std::string name, std::vector<simgrid::s4u::Host*> hosts, std::vector<int> node_of,
        const LatencyModel& lat);
  int size() const { return static_cast<int>(hosts_.size()); }
  simgrid::s4u::Host* host(int i) const { return hosts_[i]; }
  int node_of(int i) const { return node_of_[i]; }
  // Mailbox carrying messages from member `src` to member `dst` (FIFO, so successive collectives pair up).
  simgrid::s4u::Mailbox* mailbox(int src, int dst) const;
  // Latency of the route between two members (cached).
  double latency(int src, int dst) const;
  const LatencyModel& latency_model() const { return lat_; }
  const std::string& name() const { return name_; }
  // The largest route latency between ring neighbours (member i to i+1), cached.
  double ring_max_latency() const;
  // A barrier over all members, for fused forms that stand for lock-step algorithms.
  const simgrid::s4u::BarrierPtr& barrier() const;

  // The group's ring as a lone ring (lone_ring.hpp: no flows); bandwidth[i]: the narrowest link from member i
  // to member i+1 (lone_ring_bandwidths).
  void set_lone_ring(std::vector<double> bandwidth);
  bool lone_ring() const { return lone_ != nullptr; }
  // A member's arrival at the lone ring's transfer (LoneRing::arrive); waits for every member (the barrier)
  // and returns the instant the ring's last transfer ends (LoneRing::end).
  double lone_ring_meet(int me, double post, double put, double bytes) const;

  // The group's collectives make the simulation's only transfers and no link changes its figures (the set-up
  // checks it: rank_setup.cpp choose_fast_paths); a collective may then compute its transfers without flows
  // (FluidNet, fluid.hpp; the lone ring).
  void set_only_traffic() { only_traffic_ = true; }
  bool only_traffic() const { return only_traffic_; }

 private:
  std::string name_;
  std::vector<simgrid::s4u::Host*> hosts_;
  std::vector<int> node_of_;
  const LatencyModel& lat_;
  mutable std::unordered_map<long long, double> latency_cache_;  // (src * size + dst) -> latency
  // latency(i, i + 1): a ring's every transfer asks for it (a hash lookup per transfer was ~9% of a 256-rank
  // point's CPU, perf; docs/benchmarks.md "Prediction intervals (issue 26)"); NaN until asked.
  mutable std::vector<double> next_latency_;
  mutable std::unordered_map<long long, simgrid::s4u::Mailbox*>
      mailbox_cache_;  // (src * size + dst) -> its mailbox
  mutable double ring_max_latency_ = -1;
  mutable simgrid::s4u::BarrierPtr barrier_;
  std::unique_ptr<LoneRing> lone_;
  bool only_traffic_ = false;
};

}  // namespace vitsim::sim
