#include "vitsim/sim/fluid/group.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {

Group::Group(std::string name, std::vector<sg4::Host*> hosts, std::vector<int> node_of,
             const LatencyModel& lat)
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
  if (dst == (src + 1) % size()) {
    if (next_latency_.empty()) next_latency_.assign(hosts_.size(), std::numeric_limits<double>::quiet_NaN());
    double& lat = next_latency_[static_cast<size_t>(src)];
    if (std::isnan(lat)) lat = lat_.route_latency(hosts_[src], hosts_[dst]);
    return lat;
  }
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
    for (int i = 0; i < size(); ++i)
      ring_max_latency_ = std::max(ring_max_latency_, latency(i, (i + 1) % size()));
  }
  return ring_max_latency_;
}

const sg4::BarrierPtr& Group::barrier() const {
  if (!barrier_) barrier_ = sg4::Barrier::create(static_cast<unsigned>(size()));
  return barrier_;
}

void Group::set_lone_ring(std::vector<double> bandwidth) {
  lone_ = bandwidth.empty() ? nullptr : std::make_unique<LoneRing>(std::move(bandwidth));
}

double Group::lone_ring_meet(int me, double post, double put, double bytes) const {
  const long long round = lone_->arrive(me, post, put, bytes);
  barrier()->wait();
  return lone_->end(round);
}

}  // namespace vitsim::sim
