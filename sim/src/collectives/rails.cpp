// A group's rails and the rings that spread NCCL's channels over them (rails.hpp).
#include "collectives/rails.hpp"

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {
namespace {

int token = 0;

std::vector<sg4::Link*> route(const Group& g, int from, int to) {
  std::vector<sg4::Link*> links;
  double ignored = 0;
  g.host(from)->route_to(g.host(to), links, &ignored);
  return links;
}

bool holds(const std::vector<sg4::Link*>& links, const sg4::Link* l) {
  return std::find(links.begin(), links.end(), l) != links.end();
}

// The positions (0 .. G-1 in the node's run, members begin .. begin+G-1) at which each rail's members begin;
// empty where the node has fewer than two rails, a member crosses no link of its own to leave the node (a
// shared NIC), or a rail's members are not side by side. `other`: a member on another node.
std::vector<int> rail_starts(const Group& g, int begin, int G, int other) {
  if (G < 2) return {};
  std::vector<std::vector<sg4::Link*>> out(G);  // each member's route to `other`
  for (int i = 0; i < G; ++i) out[i] = route(g, begin + i, other);
  std::vector<int> starts;
  std::vector<std::vector<sg4::Link*>> seen;  // the rails' keys, in order
  for (int i = 0; i < G; ++i) {
    // The member's own way out: not on its route inside the node, not on every member's route to `other`.
    const std::vector<sg4::Link*> inside = route(g, begin + i, begin + (i + 1) % G);
    std::vector<sg4::Link*> key;
    for (sg4::Link* l : out[i]) {
      if (holds(inside, l)) continue;
      bool everyone = true;
      for (int j = 0; j < G && everyone; ++j) everyone = holds(out[j], l);
      if (!everyone) key.push_back(l);
    }
    if (key.empty()) return {};
    std::sort(key.begin(), key.end());
    if (!seen.empty() && seen.back() == key) continue;
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) return {};  // a rail split in two
    seen.push_back(std::move(key));
    starts.push_back(i);
  }
  return starts.size() < 2 ? std::vector<int>{} : starts;
}

// Ring q's neighbours of `me`.
int next_in(const Rails& r, int q, int me) {
  const std::vector<int>& o = r.order[q];
  const int n = static_cast<int>(o.size());
  return o[(r.position[q][me] + 1) % n];
}
int prev_in(const Rails& r, int q, int me) {
  const std::vector<int>& o = r.order[q];
  const int n = static_cast<int>(o.size());
  return o[(r.position[q][me] + n - 1) % n];
}

// `steps` ring steps of `chunk` bytes on each of rings 0 .. k-1, fused as fused_ring_steps fuses one ring
// (transfers.cpp): per ring one transfer of steps x chunk to the next member, each put after its route
// latency; every member's puts done, the rings meet at the group's barrier (the slowest ring's last transfer
// ends last), then the receives are waited and the slowest ring's remaining steps-1 latencies owed.
void rail_rings_steps(const Group& g, int me, const Rails& r, int k, double chunk, int steps, Deferred* d) {
  const uint64_t bytes = static_cast<uint64_t>(chunk * steps);
  const double lead = d ? std::exchange(d->lead, 0.0) : 0.0;
  const double trailing = steps > 1 ? (steps - 1) * r.max_latency[k] : 0.0;
  const double now = sg4::Engine::get_clock();
  std::vector<void*> got(static_cast<size_t>(k), nullptr);
  std::vector<sg4::CommPtr> recvs;
  for (int q = 0; q < k; ++q) recvs.push_back(g.mailbox(prev_in(r, q, me), me)->get_async(&got[q]));
  std::vector<std::pair<double, int>> sends;  // (route latency, ring), in the order they are put
  for (int q = 0; q < k; ++q) sends.emplace_back(g.latency(me, next_in(r, q, me)), q);
  std::stable_sort(sends.begin(), sends.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<sg4::CommPtr> puts;
  for (const auto& [latency, q] : sends) {
    if (const double at = now + (lead + latency); at > sg4::Engine::get_clock())
      sg4::this_actor::sleep_until(at);
    puts.push_back(g.mailbox(me, next_in(r, q, me))->put_async(&token, bytes));
  }
  for (auto& p : puts) p->wait();
  g.barrier()->wait();  // every ring's transfers are done, the receives with them
  for (auto& c : recvs) c->wait();
  if (d)
    d->tail += trailing;
  else if (steps > 1)
    sg4::this_actor::sleep_for(trailing);
}

}  // namespace

Rails group_rails(const Group& g) {
  Rails out;
  const int n = g.size();
  // Each node's members as a run of the group's order: [begin, end).
  std::vector<std::pair<int, int>> runs;
  std::set<int> nodes;
  for (int i = 0; i < n; ++i) {
    if (i == 0 || g.node_of(i) != g.node_of(i - 1)) {
      if (!nodes.insert(g.node_of(i)).second) return out;  // a node's members apart: no node-by-node ring
      runs.emplace_back(i, i);
    }
    runs.back().second = i + 1;
  }
  if (runs.size() < 2) return out;
  std::vector<std::vector<int>> starts(runs.size());
  int rails = INT_MAX;
  for (size_t j = 0; j < runs.size(); ++j) {
    const auto [begin, end] = runs[j];
    starts[j] = rail_starts(g, begin, end - begin, runs[(j + 1) % runs.size()].first);
    rails = std::min(rails, static_cast<int>(starts[j].size()));
    if (rails < 2) return out;
  }
  out.count = rails;
  out.order.assign(rails, {});
  out.position.assign(rails, std::vector<int>(n, 0));
  out.max_latency.assign(rails + 1, 0.0);
  for (int q = 0; q < rails; ++q) {
    std::vector<int>& o = out.order[q];
    for (size_t j = 0; j < runs.size(); ++j) {
      const auto [begin, end] = runs[j];
      const int G = end - begin;
      const int first = (starts[j][q] + 1) % G;  // enters after rail q's first GPU, leaves at it
      for (int t = 0; t < G; ++t) o.push_back(begin + (first + t) % G);
    }
    double slowest = 0;
    for (int i = 0; i < n; ++i) {
      out.position[q][o[i]] = i;
      slowest = std::max(slowest, g.latency(o[i], o[(i + 1) % n]));
    }
    out.max_latency[q + 1] = std::max(out.max_latency[q], slowest);
  }
  return out;
}

int rail_rings(const Rails& r, int channels) {
  return std::max(1, std::min(channels, r.count));
}

void rail_rings_run(const Group& g, int me, double bytes, CollOp op, const Rails& r, int k, Deferred* d) {
  const int n = g.size();
  // ring_collective's fused forms: an all-reduce one run of 2(n-1) steps, a reduce-scatter or all-gather n-1.
  rail_rings_steps(g, me, r, k, bytes / k / n, op == CollOp::AllReduce ? 2 * (n - 1) : n - 1, d);
}

FluidSchedule rail_rings_schedule(const Group& g, double bytes, CollOp op, const Rails& r, int k) {
  const int n = g.size();
  const int steps = op == CollOp::AllReduce ? 2 * (n - 1) : n - 1;
  const double bytes_put = static_cast<double>(static_cast<uint64_t>(bytes / k / n * steps));
  FluidSchedule s;
  s.stages.push_back(one_set_stage(n, steps > 1 ? (steps - 1) * r.max_latency[k] : 0.0));
  for (int q = 0; q < k; ++q)
    for (int i = 0; i < n; ++i) {
      const int from = r.order[q][i], to = r.order[q][(i + 1) % n];
      s.stages.back().edges.push_back({from, to, bytes_put, g.latency(from, to)});
    }
  return s;
}

}  // namespace vitsim::sim
