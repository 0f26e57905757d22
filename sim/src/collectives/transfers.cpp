#include "collectives/transfers.hpp"

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {

namespace {
// Payloads carry no data: the simulator only needs the sizes.
int token = 0;
}  // namespace

void exchange(const Group& g, int me, int to, int from, double bytes) {
  void* got = nullptr;
  sg4::CommPtr recv = g.mailbox(from, me)->get_async(&got);
  if (double lat = g.latency(me, to); lat > 0) sg4::this_actor::sleep_for(lat);
  sg4::CommPtr send = g.mailbox(me, to)->put_async(&token, static_cast<uint64_t>(bytes));
  send->wait();
  recv->wait();
}

void all_to_all(const Group& g, int me, double bytes) {
  const int n = g.size();
  if (n < 2) return;
  // Every pair at once, as NCCL's grouped send/recv: bytes/n to each peer, over the platform's links.
  std::vector<void*> got(n, nullptr);
  std::vector<sg4::CommPtr> comms;
  double lat = 0;
  for (int k = 1; k < n; ++k) {
    const int from = (me + n - k) % n;
    comms.push_back(g.mailbox(from, me)->get_async(&got[from]));
    lat = std::max(lat, g.latency(me, (me + k) % n));
  }
  if (lat > 0) sg4::this_actor::sleep_for(lat);
  for (int k = 1; k < n; ++k)
    comms.push_back(g.mailbox(me, (me + k) % n)->put_async(&token, static_cast<uint64_t>(bytes / n)));
  for (auto& c : comms) c->wait();
}

namespace {
// `steps` lock-step ring steps of `chunk` bytes each, as one flow per rank. In the message-level ring
// every step waits for the previous rank's chunk, so the whole ring advances at its slowest edge; here
// each rank moves its steps' volume in one flow (the links see the same flows, so sharing is the same),
// then all ranks meet (the slowest edge's flow ends last) and the remaining steps-1 latencies of the
// slowest edge are added. Equal to the message-level form when the slowest edge is also the one with
// the largest latency, and on identical links to 2(n-1) a + 2(n-1)/n S/B.
//
// Each rank waits for its own send, then the barrier (it opens at the last flow's end), then its receive (the
// predecessor's send, done by then: waited so that SimGrid 3.32 drops it from the rank's list of activities,
// which it searches linearly at every end of a communication). A direct host-to-host Comm::sendto would spare
// the receive, but SimGrid 3.32 detaches those and removes each from the maestro's list of detached
// activities at its end, a linear search over every flow in flight: 26% of a 4,096-GPU point.
// With `d`, the rank's lead is slept with the route latency in one wait and the trailing latencies are left
// in d->tail: per rank and collective 6 simcalls (the sleep, the receive, the send and its wait, the barrier,
// the receive's wait) where there were 7 (the compute stream's flush and the trailing sleep, no receive
// waited).
void fused_ring_steps(const Group& g, int me, double chunk, int steps, Deferred* d) {
  const int n = g.size();
  const int to = (me + 1) % n, from = (me + n - 1) % n;
  const uint64_t bytes = static_cast<uint64_t>(chunk * steps);
  const double lead = d ? std::exchange(d->lead, 0.0) : 0.0;
  const double trailing = steps > 1 ? (steps - 1) * g.ring_max_latency() : 0.0;
  if (g.lone_ring()) {
    // The same instants without flows (Group::set_lone_ring): the receive is posted now, the send starts
    // after the lead and the route latency; the ring's end and the trailing latencies are owed after the
    // barrier.
    const double now = sg4::Engine::get_clock();
    const double end =
        g.lone_ring_meet(me, now, now + (lead + g.latency(me, to)), static_cast<double>(bytes));
    const double owed = std::max(0.0, end - sg4::Engine::get_clock()) + trailing;
    if (d)
      d->tail += owed;
    else if (owed > 0)
      sg4::this_actor::sleep_for(owed);
    return;
  }
  void* got = nullptr;
  sg4::CommPtr recv = g.mailbox(from, me)->get_async(&got);
  if (double wait = lead + g.latency(me, to); wait > 0) sg4::this_actor::sleep_for(wait);
  g.mailbox(me, to)->put_async(&token, bytes)->wait();
  g.barrier()->wait();  // every flow of the ring is done, `recv` with them
  recv->wait();
  if (d)
    d->tail += trailing;
  else if (steps > 1)
    sg4::this_actor::sleep_for(trailing);
}
}  // namespace

void add_ring_edges(FluidStage& stage, const Group& ring, const std::vector<int>& members, double chunk,
                    int steps, int set) {
  const int n = ring.size();
  if (n < 2) return;
  // The bytes fused_ring_steps puts (an integer count), and its trailing latencies after the barrier.
  const double bytes = static_cast<double>(static_cast<uint64_t>(chunk * steps));
  for (int i = 0; i < n; ++i) {
    stage.edges.push_back({members[i], members[(i + 1) % n], bytes, ring.latency(i, (i + 1) % n)});
  }
  stage.after[set] = steps > 1 ? (steps - 1) * ring.ring_max_latency() : 0.0;
}

FluidSchedule ring_schedule(const Group& g, double bytes, CollOp op) {
  FluidSchedule s;
  const int n = g.size();
  if (n < 2) return s;
  std::vector<int> all(n);
  for (int i = 0; i < n; ++i) all[i] = i;
  // ring_collective: a fused all-reduce is one run of 2(n-1) steps; reduce-scatter and all-gather one phase.
  s.stages.push_back(one_set_stage(n, 0.0));
  add_ring_edges(s.stages.back(), g, all, bytes / n, op == CollOp::AllReduce ? 2 * (n - 1) : n - 1, 0);
  return s;
}

void sleep_lead(Deferred* d) {
  if (!d) return;
  if (d->lead > 0) sg4::this_actor::sleep_for(d->lead);
  d->lead = 0;
}

// A ring phase moves (n-1) chunks of S/n to the next rank. Message level: one transfer per step, each
// step waiting for the previous rank's chunk (O(n) messages per rank). Fused: O(1) flows per rank.
void ring_phase(const Group& g, int me, double bytes, bool fused, Deferred* d) {
  const int n = g.size();
  if (n < 2) return;
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  const double chunk = bytes / n;
  if (fused) {
    fused_ring_steps(g, me, chunk, n - 1, d);
  } else {
    sleep_lead(d);
    for (int s = 0; s < n - 1; ++s) exchange(g, me, next, prev, chunk);
  }
}

void ring_collective(const Group& g, int me, double bytes, CollOp op, bool fused, Deferred* d) {
  const int n = g.size();
  if (fused && op == CollOp::AllReduce && n >= 2) {
    // Both phases cross the same links in the same direction with the same volume: one fused run of
    // 2(n-1) steps.
    fused_ring_steps(g, me, bytes / n, 2 * (n - 1), d);
    return;
  }
  // A fused all-reduce returned above: one phase here carries `d`; the message-level phases sleep its lead.
  if (op == CollOp::AllReduce || op == CollOp::ReduceScatter) ring_phase(g, me, bytes, fused, d);
  if (op == CollOp::AllReduce || op == CollOp::AllGather) ring_phase(g, me, bytes, fused, d);
}

}  // namespace vitsim::sim
