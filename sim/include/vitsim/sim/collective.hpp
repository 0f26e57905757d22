#pragma once
// Collectives as SimGrid transfers over the platform's links. Each rank's actor calls run() on its own
// side (SPMD), so a collective's time is what the links and the other ranks make it.
// Adding a collective is adding one file that calls VITSIM_REGISTER_COLLECTIVE.
#include <simgrid/s4u.hpp>

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "vitsim/core/platform.hpp"
#include "vitsim/sim/coll_op.hpp"

namespace vitsim::sim {

// Applies the platform's link transports (core/transport.hpp) to the loaded SimGrid links: each link that
// states one gets its effective bandwidth, and its latency grows by the transport's per-message stack
// latency (which LatencyModel then records with the rest). Call after load_platform, before LatencyModel.
// Returns one note per class of links (what transport model gave which bandwidth). Throws Error naming the
// platform file when SimGrid has no link of a stated id.
std::vector<std::string> apply_link_transports(simgrid::s4u::Engine& e, const PlatformFacts& facts);

// Link latencies as pure delays. SimGrid's CM02 model weighs each flow's share of a link by its route
// latency (TCP round-trip unfairness), so flows with different latencies would split a link, even a
// FATPIPE one, unequally. vitsim models NCCL-style transfers with the alpha-beta rule instead: a
// transfer costs its route latency, then its bytes at a max-min fair share. LatencyModel records every
// link's latency (with any transport's stack latency, see apply_link_transports), sets it to zero in
// SimGrid, and the collectives add route latencies themselves.
class LatencyModel {
 public:
  explicit LatencyModel(simgrid::s4u::Engine& e);  // call after load_platform, before run
  double route_latency(const simgrid::s4u::Host* src, const simgrid::s4u::Host* dst) const;

 private:
  std::unordered_map<const simgrid::s4u::Link*, double> latency_;
};


// The ranks taking part, in ring order, with mailboxes private to this group.
class Group {
 public:
  Group(std::string name, std::vector<simgrid::s4u::Host*> hosts, std::vector<int> node_of, const LatencyModel& lat);
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
  simgrid::s4u::BarrierPtr barrier() const;

  // A lone ring: each member's transfer to the next crosses only links that no other transfer of the
  // simulation crosses (the caller checks it: lone_ring_bandwidths, and that nothing else makes flows). A
  // transfer alone on its links runs at its route's narrowest bandwidth from the instant both ends are there
  // (SimGrid's max-min share of one flow, link latencies being zero: LatencyModel), whatever the others do, so
  // the fused ring computes its end instead of making flows (fused_ring_steps). bandwidth[i]: the narrowest
  // link from member i to member i+1.
  void set_lone_ring(std::vector<double> bandwidth);
  bool lone_ring() const { return !lone_bw_.empty(); }
  // A member's arrival at a lone ring's transfer, its receive posted at `post` and its send of `bytes` started
  // at `put`; waits for every member (the barrier) and returns the instant the ring's last transfer ends: the
  // largest over members i of max(put_i, post_{i+1}) + bytes_i / bandwidth[i], the mailbox pair's rule (a
  // transfer starts when both ends are there). Each transfer is settled by whichever of its two ends arrives
  // second, so a ring costs O(1) per member.
  double lone_ring_meet(int me, double post, double put, double bytes) const;

 private:
  std::string name_;
  std::vector<simgrid::s4u::Host*> hosts_;
  std::vector<int> node_of_;
  const LatencyModel& lat_;
  mutable std::unordered_map<long long, double> latency_cache_;  // (src * size + dst) -> latency
  mutable std::unordered_map<long long, simgrid::s4u::Mailbox*> mailbox_cache_;  // (src * size + dst) -> its mailbox
  mutable double ring_max_latency_ = -1;
  mutable simgrid::s4u::BarrierPtr barrier_;
  // Lone ring: arrivals of the last two rounds (a member reads a round's end after its barrier, before which no
  // member can arrive at the round after next).
  struct Arrival {
    long long round = -1;
    double post = 0, put = 0, bytes = 0;
  };
  struct Round {
    long long round = -1;
    double end = 0;
  };
  std::vector<double> lone_bw_;
  mutable std::vector<Arrival> arrival_[2];
  mutable std::vector<long long> rounds_;  // per member: lone-ring rounds it has started
  mutable Round round_[2];
};

// The narrowest bandwidth of each ring edge (hosts[i] to hosts[i+1], the last to the first) when no link but
// FATPIPE ones is crossed by two edges, and every edge crosses at least one link; otherwise empty (the ring's
// transfers would share a link: they run as SimGrid flows).
std::vector<double> lone_ring_bandwidths(const std::vector<simgrid::s4u::Host*>& hosts);

// A point-to-point exchange: send `bytes` to `to` (after the route latency) and receive from `from`,
// both at once, then wait.
void exchange(const Group& g, int me, int to, int from, double bytes);

// An all-to-all: every member sends bytes/n of its `bytes` to each other member, all pairs at once
// (NCCL's grouped send/recv), after the largest route latency to its peers; then waits for all.
void all_to_all(const Group& g, int me, double bytes);

// A member's own time carried across a collective without sleeping it (the compute stream's pending time,
// sim/src/simulate.cpp LazyClock): `lead`, work of the member's that is still to elapse before the collective's
// first action; `tail`, time the member is still to spend after run_deferred returns (a fused ring's trailing
// latencies). Folding them into the collective's own waits saves SimGrid a sleep (a simcall and two context
// switches) per member and collective; the simulated instants are the same, summed in another order.
struct Deferred {
  double lead = 0;
  double tail = 0;
};

class Collective {
 public:
  virtual ~Collective() = default;
  virtual std::string name() const = 0;
  // Called by every member with the same arguments; returns when this member's part is done.
  virtual void run(const Group& g, int me, double bytes, CollOp op) const = 0;
  // run() for a member that carries time (Deferred): on return d.lead is what the collective did not take (the
  // member's time still to elapse; all of it when the collective had nothing to do) and d.tail what the member
  // still owes after it. This default sleeps the lead first and owes nothing after.
  virtual void run_deferred(const Group& g, int me, double bytes, CollOp op, Deferred& d) const;
  // True when every run over g is the fused ring over all of g (ring_collective, fused): the transfers are then
  // one per member and edge, and a lone ring may stand for them (Group::set_lone_ring).
  virtual bool fused_ring(const Group& g) const {
    (void)g;
    return false;
  }
};

using CollectiveFactory = std::function<std::unique_ptr<Collective>()>;
// Registry: a collective by name; an unknown name throws Error listing the valid ones.
std::unique_ptr<Collective> make_collective(const std::string& name);
std::vector<std::string> collective_names();
bool register_collective(const std::string& name, CollectiveFactory f);

#define VITSIM_REGISTER_COLLECTIVE(NAME, CLASS) \
  static const bool vitsim_registered_##CLASS = ::vitsim::sim::register_collective(NAME, [] { return std::make_unique<CLASS>(); })

// Ring building blocks shared by the ring, hierarchical and tree files.
// steps: reduce-scatter or all-gather phase of a ring over g: (n-1) steps of bytes/n.
// With `d` (fused only), the member's lead goes into the ring's first wait and the trailing latencies into d->tail.
void ring_phase(const Group& g, int me, double bytes, bool fused, Deferred* d = nullptr);
void ring_collective(const Group& g, int me, double bytes, CollOp op, bool fused, Deferred* d = nullptr);

}  // namespace vitsim::sim
