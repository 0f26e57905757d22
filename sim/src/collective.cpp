#include "vitsim/sim/collective.hpp"

#include <fmt/format.h>

#include <map>

#include "vitsim/core/error.hpp"

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {

const char* coll_op_name(CollOp op) {
  switch (op) {
    case CollOp::AllReduce: return "allreduce";
    case CollOp::ReduceScatter: return "reduce_scatter";
    case CollOp::AllGather: return "allgather";
  }
  return "?";
}

Group::Group(std::string name, std::vector<sg4::Host*> hosts, std::vector<int> node_of)
    : name_(std::move(name)), hosts_(std::move(hosts)), node_of_(std::move(node_of)) {
  latency_cache_.assign(hosts_.size(), {});
}

sg4::Mailbox* Group::mailbox(int src, int dst) const {
  return sg4::Mailbox::by_name(fmt::format("{}:{}>{}", name_, src, dst));
}

double Group::latency(int src, int dst) const {
  auto& row = latency_cache_[src];
  if (row.empty()) row.assign(hosts_.size(), -1.0);
  if (row[dst] < 0) {
    std::vector<sg4::Link*> links;
    double lat = 0;
    hosts_[src]->route_to(hosts_[dst], links, &lat);
    row[dst] = lat;
  }
  return row[dst];
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

void exchange(const Group& g, int me, int to, int from, double bytes, int extra_latency_steps) {
  sg4::CommPtr send = g.mailbox(me, to)->put_async(&token, static_cast<uint64_t>(bytes));
  void* got = nullptr;
  sg4::CommPtr recv = g.mailbox(from, me)->get_async(&got);
  send->wait();
  recv->wait();
  if (extra_latency_steps > 0) sg4::this_actor::sleep_for(extra_latency_steps * g.latency(me, to));
}

// A ring phase moves (n-1) chunks of S/n to the next rank. Message level: one transfer per step, each
// step waiting for the previous rank's chunk (O(n) messages per rank). Fused: one flow carrying the
// whole phase volume plus (n-2) more route latencies, which keeps link sharing exact and costs O(1)
// messages per rank.
void ring_phase(const Group& g, int me, double bytes, bool fused) {
  const int n = g.size();
  if (n < 2) return;
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  const double chunk = bytes / n;
  if (fused) {
    exchange(g, me, next, prev, chunk * (n - 1), n - 2);
  } else {
    for (int s = 0; s < n - 1; ++s) exchange(g, me, next, prev, chunk);
  }
}

void ring_collective(const Group& g, int me, double bytes, CollOp op, bool fused) {
  if (op == CollOp::AllReduce || op == CollOp::ReduceScatter) ring_phase(g, me, bytes, fused);
  if (op == CollOp::AllReduce || op == CollOp::AllGather) ring_phase(g, me, bytes, fused);
}

}  // namespace vitsim::sim
