#include "vitsim/sim/fluid/lone_ring.hpp"

#include <cmath>
#include <limits>
#include <unordered_set>
#include <utility>

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {

LoneRing::LoneRing(std::vector<double> bandwidth) : bw_(std::move(bandwidth)) {
  for (auto& a : arrival_) a.assign(bw_.size(), Arrival{});
  rounds_.assign(bw_.size(), 0);
}

long long LoneRing::arrive(int me, double post, double put, double bytes) {
  const int n = static_cast<int>(bw_.size());
  const long long r = rounds_[me]++;
  std::vector<Arrival>& a = arrival_[r & 1];
  Round& round = round_[r & 1];
  if (round.round != r) round = {r, post};  // the first arrival; every transfer ends at or after it
  a[me] = {r, post, put, bytes};
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  if (a[next].round == r) round.end = std::max(round.end, std::max(put, a[next].post) + bytes / bw_[me]);
  if (a[prev].round == r)
    round.end = std::max(round.end, std::max(a[prev].put, post) + a[prev].bytes / bw_[prev]);
  return r;
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

}  // namespace vitsim::sim
