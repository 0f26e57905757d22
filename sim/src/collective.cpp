#include "vitsim/sim/collective.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <map>
#include <unordered_set>
#include <utility>

#include "vitsim/core/enum_names.hpp"
#include "vitsim/core/error.hpp"
#include "vitsim/core/transport.hpp"
#include "vitsim/sim/platform_build.hpp"

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {

namespace {
constexpr EnumNames<CollOp, 3> kCollOps{
    {{CollOp::AllReduce, "allreduce"}, {CollOp::ReduceScatter, "reduce_scatter"}, {CollOp::AllGather, "allgather"}}};
}  // namespace

const char* coll_op_name(CollOp op) { return name_of(kCollOps, op); }

std::vector<std::string> apply_link_transports(sg4::Engine& e, const PlatformFacts& facts) {
  for (const LinkFacts& l : facts.links) {
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
    if (sg.empty()) throw Error(l.origin, fmt::format("SimGrid has no link '{}' to apply transport {} to", l.id, transport_name(l.transport)));
    for (sg4::Link* x : sg) {
      x->set_bandwidth(eff.bandwidth);
      if (eff.extra_latency > 0) x->set_latency(x->get_latency() + eff.extra_latency);
    }
  }
  return transport_notes(facts.links);
}

LatencyModel::LatencyModel(sg4::Engine& e) {
  for (sg4::Link* l : e.get_all_links()) {
    latency_[l] = l->get_latency();
    l->set_latency(0);
  }
}

double LatencyModel::route_latency(const sg4::Host* src, const sg4::Host* dst) const {
  std::vector<sg4::Link*> links;
  double ignored = 0;
  src->route_to(dst, links, &ignored);
  double lat = 0;
  for (const sg4::Link* l : links) {
    auto it = latency_.find(l);
    if (it != latency_.end()) lat += it->second;
  }
  return lat;
}

Group::Group(std::string name, std::vector<sg4::Host*> hosts, std::vector<int> node_of, const LatencyModel& lat)
    : name_(std::move(name)), hosts_(std::move(hosts)), node_of_(std::move(node_of)), lat_(lat) {}

sg4::Mailbox* Group::mailbox(int src, int dst) const {
  const long long key = static_cast<long long>(src) * static_cast<long long>(hosts_.size()) + dst;
  auto it = mailbox_cache_.find(key);
  if (it != mailbox_cache_.end()) return it->second;
  sg4::Mailbox* box = sg4::Mailbox::by_name(fmt::format("{}:{}>{}", name_, src, dst));
  mailbox_cache_.emplace(key, box);
  return box;
}

double Group::latency(int src, int dst) const {
  const long long key = static_cast<long long>(src) * static_cast<long long>(hosts_.size()) + dst;
  auto it = latency_cache_.find(key);
  if (it != latency_cache_.end()) return it->second;
  const double lat = lat_.route_latency(hosts_[src], hosts_[dst]);
  latency_cache_.emplace(key, lat);
  return lat;
}

double Group::ring_max_latency() const {
  if (ring_max_latency_ < 0) {
    ring_max_latency_ = 0;
    for (int i = 0; i < size(); ++i) ring_max_latency_ = std::max(ring_max_latency_, latency(i, (i + 1) % size()));
  }
  return ring_max_latency_;
}

sg4::BarrierPtr Group::barrier() const {
  if (!barrier_) barrier_ = sg4::Barrier::create(static_cast<unsigned>(size()));
  return barrier_;
}

void Group::set_lone_ring(std::vector<double> bandwidth) {
  lone_bw_ = std::move(bandwidth);
  for (auto& a : arrival_) a.assign(lone_bw_.size(), Arrival{});
  rounds_.assign(lone_bw_.size(), 0);
}

double Group::lone_ring_meet(int me, double post, double put, double bytes) const {
  const int n = size();
  const long long r = rounds_[me]++;
  std::vector<Arrival>& a = arrival_[r & 1];
  Round& round = round_[r & 1];
  if (round.round != r) round = {r, post};  // the first arrival; every transfer ends at or after it
  a[me] = {r, post, put, bytes};
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  if (a[next].round == r) round.end = std::max(round.end, std::max(put, a[next].post) + bytes / lone_bw_[me]);
  if (a[prev].round == r) round.end = std::max(round.end, std::max(a[prev].put, post) + a[prev].bytes / lone_bw_[prev]);
  barrier()->wait();
  return round.end;
}

std::vector<double> lone_ring_bandwidths(const std::vector<sg4::Host*>& hosts) {
  const size_t n = hosts.size();
  std::vector<double> bw(n, 0.0);
  std::unordered_set<const sg4::Link*> crossed;
  std::vector<sg4::Link*> links;
  for (size_t i = 0; i < n; ++i) {
    links.clear();
    double ignored = 0;
    hosts[i]->route_to(hosts[(i + 1) % n], links, &ignored);
    if (links.empty()) return {};
    double narrowest = std::numeric_limits<double>::infinity();
    for (const sg4::Link* l : links) {
      const auto policy = l->get_sharing_policy();
      if (policy == sg4::Link::SharingPolicy::WIFI) return {};
      if (policy != sg4::Link::SharingPolicy::FATPIPE && !crossed.insert(l).second) return {};
      narrowest = std::min(narrowest, l->get_bandwidth());
    }
    if (!(narrowest > 0) || !std::isfinite(narrowest)) return {};
    bw[i] = narrowest;
  }
  return bw;
}

namespace {
std::map<std::string, CollectiveFactory>& registry() {
  static std::map<std::string, CollectiveFactory> r;
  return r;
}
// Payloads carry no data: the simulator only needs the sizes.
int token = 0;
}  // namespace

bool register_collective(const std::string& name, CollectiveFactory f) {
  registry()[name] = std::move(f);
  return true;
}

std::vector<std::string> collective_names() {
  std::vector<std::string> out;
  for (const auto& [k, v] : registry()) out.push_back(k);
  return out;
}

std::unique_ptr<Collective> make_collective(const std::string& name) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string valid;
    for (const auto& n : collective_names()) valid += (valid.empty() ? "" : ", ") + n;
    throw Error(fmt::format("unknown collective '{}'; valid: {}", name, valid));
  }
  return it->second();
}

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
  for (int k = 1; k < n; ++k) comms.push_back(g.mailbox(me, (me + k) % n)->put_async(&token, static_cast<uint64_t>(bytes / n)));
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
// the receive's wait) where there were 7 (the compute stream's flush and the trailing sleep, no receive waited).
void fused_ring_steps(const Group& g, int me, double chunk, int steps, Deferred* d) {
  const int n = g.size();
  const int to = (me + 1) % n, from = (me + n - 1) % n;
  const uint64_t bytes = static_cast<uint64_t>(chunk * steps);
  const double lead = d ? std::exchange(d->lead, 0.0) : 0.0;
  const double trailing = steps > 1 ? (steps - 1) * g.ring_max_latency() : 0.0;
  if (g.lone_ring()) {
    // The same instants without flows (Group::set_lone_ring): the receive is posted now, the send starts after
    // the lead and the route latency; the ring's end and the trailing latencies are owed after the barrier.
    const double now = sg4::Engine::get_clock();
    const double end = g.lone_ring_meet(me, now, now + (lead + g.latency(me, to)), static_cast<double>(bytes));
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

void sleep_lead(Deferred* d) {
  if (!d) return;
  if (d->lead > 0) sg4::this_actor::sleep_for(d->lead);
  d->lead = 0;
}
}  // namespace

void Collective::run_deferred(const Group& g, int me, double bytes, CollOp op, Deferred& d) const {
  sleep_lead(&d);
  run(g, me, bytes, op);
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
