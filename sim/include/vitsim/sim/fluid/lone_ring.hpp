#pragma once
// A lone ring: each member's transfer to the next crosses only links that no other transfer of the simulation
// crosses (the caller checks it: lone_ring_bandwidths, and that nothing else makes flows). A transfer alone
// on its links runs at its route's narrowest bandwidth from the instant both ends are there (SimGrid's
// max-min share of one flow, link latencies being zero: LatencyModel), whatever the others do, so the fused
// ring computes its end instead of making flows (fused_ring_steps, sim/src/collectives/transfers.cpp). A
// Group carries one (Group::set_lone_ring).
#include <simgrid/s4u.hpp>

#include <vector>

namespace vitsim::sim {

class LoneRing {
 public:
  // bandwidth[i]: the narrowest link from member i to member i+1.
  explicit LoneRing(std::vector<double> bandwidth);
  // A member's arrival at the ring's transfer, its receive posted at `post` and its send of `bytes` started
  // at `put`; returns the round it joined. Each transfer is settled by whichever of its two ends arrives
  // second, so a ring costs O(1) per member.
  long long arrive(int me, double post, double put, double bytes);
  // Once every member has arrived at `round` (a barrier): the instant its last transfer ends, the largest
  // over members i of max(put_i, post_{i+1}) + bytes_i / bandwidth[i], the mailbox pair's rule (a transfer
  // starts when both ends are there).
  double end(long long round) const { return round_[round & 1].end; }

 private:
  // Arrivals of the last two rounds (a member reads a round's end after its barrier, before which no member
  // can arrive at the round after next).
  struct Arrival {
    long long round = -1;
    double post = 0, put = 0, bytes = 0;
  };
  struct Round {
    long long round = -1;
    double end = 0;
  };
  std::vector<double> bw_;
  std::vector<Arrival> arrival_[2];
  std::vector<long long> rounds_;  // per member: rounds it has started
  Round round_[2];
};

// The narrowest bandwidth of each ring edge (hosts[i] to hosts[i+1], the last to the first) when no link but
// FATPIPE ones is crossed by two edges, and every edge crosses at least one link; otherwise empty (the ring's
// transfers would share a link: they run as SimGrid flows).
std::vector<double> lone_ring_bandwidths(const std::vector<simgrid::s4u::Host*>& hosts);

}  // namespace vitsim::sim
