#include "vitsim/sim/fluid/fluid.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <tuple>
#include <utility>

#include "vitsim/core/base/error.hpp"
#include "vitsim/sim/fluid/group.hpp"

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

FluidStage one_set_stage(int members, double after) {
  FluidStage st;
  st.set.assign(static_cast<size_t>(members), 0);
  st.after = {after};
  return st;
}

FluidNet::FluidNet(std::vector<sg4::Host*> hosts) : hosts_(std::move(hosts)) {}

const FluidNet::Route& FluidNet::route(int src, int dst) {
  const std::int64_t key = static_cast<std::int64_t>(src) * static_cast<std::int64_t>(hosts_.size()) + dst;
  auto it = routes_.find(key);
  if (it != routes_.end()) return it->second;
  Route r;
  r.cap = kInf;
  std::vector<sg4::Link*> links;
  double ignored = 0;
  hosts_[static_cast<size_t>(src)]->route_to(hosts_[static_cast<size_t>(dst)], links, &ignored);
  r.ok = !links.empty();
  for (const sg4::Link* l : links) {
    const auto policy = l->get_sharing_policy();
    const double bw = l->get_bandwidth();
    const bool known = policy == sg4::Link::SharingPolicy::SHARED ||
                       policy == sg4::Link::SharingPolicy::SPLITDUPLEX ||
                       policy == sg4::Link::SharingPolicy::FATPIPE;
    if (!known || !(bw > 0) || !std::isfinite(bw)) {
      r.ok = false;
      break;
    }
    if (policy == sg4::Link::SharingPolicy::FATPIPE) {
      r.cap = std::min(r.cap, bw);
      continue;
    }
    auto [id, fresh] = link_id_.try_emplace(l, static_cast<int>(bw_.size()));
    if (fresh) bw_.push_back(bw);
    // A link crossed twice counts twice in SimGrid's share; the model here counts each once: refuse.
    if (std::find(r.links.begin(), r.links.end(), id->second) != r.links.end()) {
      r.ok = false;
      break;
    }
    r.links.push_back(id->second);
  }
  return routes_.emplace(key, std::move(r)).first->second;
}

const std::vector<int>& FluidNet::links(int src, int dst) {
  return route(src, dst).links;
}

bool FluidNet::admits(const FluidSchedule& s) {
  const int n = static_cast<int>(hosts_.size());
  for (const FluidStage& st : s.stages) {
    if (static_cast<int>(st.set.size()) != n) return false;
    for (int set : st.set)
      if (set < 0 || set >= static_cast<int>(st.after.size())) return false;
    for (const FluidEdge& e : st.edges)
      if (e.src < 0 || e.src >= n || e.dst < 0 || e.dst >= n || e.src == e.dst || !route(e.src, e.dst).ok)
        return false;
  }
  return true;
}

namespace {

// The max-min fair rates of the transfers in flight (progressive filling, as SimGrid's solver): the
// tightest shared link (its remaining bandwidth over its unfixed transfers) or FATPIPE cap fixes its
// transfers at that level, which leaves the links they cross; repeat until every transfer has a rate.
class MaxMin {
 public:
  explicit MaxMin(size_t links) : rest_(links), count_(links), version_(links), first_(links + 1) {}

  // rates[k] for flows[k] (routes[k]: its shared links and cap).
  void solve(const std::vector<const std::vector<int>*>& links, const std::vector<double>& caps,
             const std::vector<double>& bw, std::vector<double>& rates) {
    const size_t m = links.size();
    rates.assign(m, -1);
    used_.clear();
    for (size_t k = 0; k < m; ++k)
      for (int l : *links[k]) {
        if (count_[l] == 0) used_.push_back(l), rest_[l] = bw[l];
        ++count_[l];
      }
    // Flows per link (CSR over the used links).
    size_t total = 0;
    for (int l : used_) first_[l] = total, total += count_[l];
    by_link_.resize(total);
    fill_ = first_;
    for (size_t k = 0; k < m; ++k)
      for (int l : *links[k]) by_link_[fill_[l]++] = static_cast<int>(k);
    Heap heap;
    for (int l : used_) heap.push({rest_[l] / count_[l], l, ++version_[l]});
    std::vector<int> capped;
    for (size_t k = 0; k < m; ++k)
      if (caps[k] < kInf) capped.push_back(static_cast<int>(k));
    std::sort(capped.begin(), capped.end(), [&](int a, int b) { return caps[a] < caps[b]; });
    size_t next_cap = 0, fixed = 0;
    auto fix = [&](int k, double v) {
      rates[k] = v;
      ++fixed;
      for (int l : *links[k]) {
        rest_[l] = std::max(0.0, rest_[l] - v);
        if (--count_[l] > 0) heap.push({rest_[l] / count_[l], l, ++version_[l]});
      }
    };
    while (fixed < m) {
      while (!heap.empty() && (std::get<2>(heap.top()) != version_[std::get<1>(heap.top())] ||
                               count_[std::get<1>(heap.top())] == 0))
        heap.pop();
      while (next_cap < capped.size() && rates[capped[next_cap]] >= 0) ++next_cap;
      const double by_link = heap.empty() ? kInf : std::get<0>(heap.top());
      const double by_cap = next_cap < capped.size() ? caps[capped[next_cap]] : kInf;
      if (by_cap <= by_link) {
        if (!(by_cap < kInf)) throw Error("internal error: a transfer without a finite rate (fluid model)");
        fix(capped[next_cap], by_cap);
        continue;
      }
      const int l = std::get<1>(heap.top());
      heap.pop();
      for (size_t i = first_[l]; i < fill_[l]; ++i)
        if (rates[by_link_[i]] < 0) fix(by_link_[i], by_link);
    }
    for (int l : used_) count_[l] = 0;
  }

 private:
  using Entry = std::tuple<double, int, unsigned>;  // level, link, version
  using Heap = std::priority_queue<Entry, std::vector<Entry>, std::greater<>>;
  std::vector<double> rest_;
  std::vector<int> count_;
  std::vector<unsigned> version_;
  std::vector<size_t> first_, fill_;
  std::vector<int> used_, by_link_;
};

}  // namespace

namespace {

// The stages' indices: per stage each member's transfers and each set's members (CSR), and each transfer's
// global id (offset[stage] + its index in the stage).
struct Index {
  std::vector<std::vector<int>> inc_first, inc, set_first, set_members;
  std::vector<size_t> offset;

  Index(const FluidSchedule& s, int n) {
    const int stages = static_cast<int>(s.stages.size());
    inc_first.resize(stages), inc.resize(stages), set_first.resize(stages), set_members.resize(stages);
    offset.assign(stages + 1, 0);
    for (int st = 0; st < stages; ++st) {
      const FluidStage& S = s.stages[st];
      offset[st + 1] = offset[st] + S.edges.size();
      std::vector<int>& first = inc_first[st];
      first.assign(n + 1, 0);
      for (const FluidEdge& e : S.edges) ++first[e.src + 1], ++first[e.dst + 1];
      for (int m = 0; m < n; ++m) first[m + 1] += first[m];
      inc[st].resize(first[n]);
      std::vector<int> fill(first.begin(), first.end() - 1);
      for (int k = 0; k < static_cast<int>(S.edges.size()); ++k)
        inc[st][fill[S.edges[k].src]++] = k, inc[st][fill[S.edges[k].dst]++] = k;
      const int sets = static_cast<int>(S.after.size());
      set_first[st].assign(sets + 1, 0);
      for (int m = 0; m < n; ++m) ++set_first[st][S.set[m] + 1];
      for (int k = 0; k < sets; ++k) set_first[st][k + 1] += set_first[st][k];
      set_members[st].resize(n);
      std::vector<int> sfill(set_first[st].begin(), set_first[st].end() - 1);
      for (int m = 0; m < n; ++m) set_members[st][sfill[S.set[m]]++] = m;
    }
  }
  int stage_of(size_t id) const {
    return static_cast<int>(std::upper_bound(offset.begin(), offset.end(), id) - offset.begin()) - 1;
  }
};

}  // namespace

// One run of a schedule: the members' progress through the stages, the transfers waiting for their second
// end (by start instant) and those in flight with their rates.
class FluidNet::Sweep {
 public:
  Sweep(FluidNet& net, const FluidSchedule& s)
      : net_(net), s_(s), n_(static_cast<int>(net.hosts_.size())), ix_(s, n_) {
    const int stages = static_cast<int>(s.stages.size());
    const size_t edges = ix_.offset[stages];
    began_.assign(edges, 0), rem_.assign(edges, 0), rate_.assign(edges, 0), end_.assign(edges, kInf);
    stage_.assign(n_, 0), pending_.assign(n_, 0), exit_.assign(n_, 0);
    post_.assign(n_, 0), put_.assign(n_, 0), finish_.assign(n_, 0);
    set_pending_.resize(stages), release_.resize(stages);
    for (int st = 0; st < stages; ++st) {
      const int sets = static_cast<int>(s.stages[st].after.size());
      set_pending_[st].resize(sets);
      for (int k = 0; k < sets; ++k) set_pending_[st][k] = ix_.set_first[st][k + 1] - ix_.set_first[st][k];
      release_[st].assign(sets, -kInf);
    }
  }

  std::vector<double> run(const std::vector<double>& post, const std::vector<double>& put) {
    for (int m = 0; m < n_; ++m) begin_stage(m, 0, post[m], put[m]);
    MaxMin solver(net_.bw_.size());
    double now = -kInf;
    std::vector<size_t> done;
    while (true) {
      double next = starts_.empty() ? kInf : starts_.top().first;
      for (size_t id : active_) next = std::min(next, end_[id]);
      if (!(next < kInf)) break;
      // Transfers ending now (within a rounding of the instant: SimGrid ends them together too).
      const double eps = 1e-12 * std::max(1.0, std::fabs(next));
      done.clear();
      for (size_t i = 0; i < active_.size();) {
        const size_t id = active_[i];
        if (end_[id] <= next + eps) {
          done.push_back(id);
          active_[i] = active_.back();
          active_.pop_back();
        } else {
          rem_[id] -= rate_[id] * (next - now);
          ++i;
        }
      }
      now = next;
      bool changed = !done.empty();
      for (size_t id : done) edge_end(id, now);
      while (!starts_.empty() && starts_.top().first <= now) {
        const size_t id = starts_.top().second;
        starts_.pop();
        if (!(edge(id).bytes > 0)) {
          edge_end(id, now);
          continue;
        }
        rem_[id] = edge(id).bytes;
        active_.push_back(id);
        changed = true;
      }
      if (changed && !active_.empty()) solve(solver, now);
    }
    if (exited_ != n_)
      throw Error("internal error: the fluid model of a collective left members without an exit");
    return exit_;
  }

 private:
  const FluidEdge& edge(size_t id) const {
    const int st = ix_.stage_of(id);
    return s_.stages[st].edges[id - ix_.offset[st]];
  }

  // Member m begins stage st: its receives posted at post_t, its sends put at put_t; a transfer whose other
  // end is there starts at the later of its put (plus delay) and its receive.
  void begin_stage(int m, int st, double post_t, double put_t) {
    stage_[m] = st, post_[m] = post_t, put_[m] = put_t;
    finish_[m] = std::max(post_t, put_t);
    pending_[m] = ix_.inc_first[st][m + 1] - ix_.inc_first[st][m];
    for (int i = ix_.inc_first[st][m]; i < ix_.inc_first[st][m + 1]; ++i) {
      const int k = ix_.inc[st][i];
      const size_t id = ix_.offset[st] + k;
      if (++began_[id] < 2) continue;
      const FluidEdge& e = s_.stages[st].edges[k];
      starts_.push({std::max(put_[e.src] + e.delay, post_[e.dst]), id});
    }
    if (pending_[m] == 0) member_done(m);
  }

  // Every transfer of m's in its stage has ended: once its whole set is, the set is released and its members
  // begin the next stage (or leave) `after` later.
  void member_done(int m) {
    const int st = stage_[m];
    const int set = s_.stages[st].set[m];
    release_[st][set] = std::max(release_[st][set], finish_[m]);
    if (--set_pending_[st][set] > 0) return;
    const double t = release_[st][set] + s_.stages[st].after[set];
    for (int i = ix_.set_first[st][set]; i < ix_.set_first[st][set + 1]; ++i) {
      const int x = ix_.set_members[st][i];
      if (st + 1 == static_cast<int>(s_.stages.size()))
        exit_[x] = t, ++exited_;
      else
        begin_stage(x, st + 1, t, t);
    }
  }

  void edge_end(size_t id, double t) {
    const FluidEdge& e = edge(id);
    for (int m : {e.src, e.dst}) {
      finish_[m] = std::max(finish_[m], t);
      if (--pending_[m] == 0) member_done(m);
    }
  }

  // The rates of the transfers in flight at `now`, and their ends at those rates.
  void solve(MaxMin& solver, double now) {
    links_.clear(), caps_.clear();
    for (size_t id : active_) {
      const FluidEdge& e = edge(id);
      const Route& r = net_.route(e.src, e.dst);
      links_.push_back(&r.links);
      caps_.push_back(r.cap);
    }
    solver.solve(links_, caps_, net_.bw_, rates_);
    for (size_t i = 0; i < active_.size(); ++i) {
      rate_[active_[i]] = rates_[i];
      end_[active_[i]] = rates_[i] > 0 ? now + rem_[active_[i]] / rates_[i] : kInf;
    }
  }

  FluidNet& net_;
  const FluidSchedule& s_;
  const int n_;
  const Index ix_;
  std::vector<unsigned char> began_;      // per transfer: its ends that began its stage
  std::vector<double> rem_, rate_, end_;  // per transfer in flight: bytes left, rate, end at that rate
  std::vector<int> stage_, pending_;      // per member: its stage, its transfers there not ended
  std::vector<double> post_, put_, finish_, exit_;
  std::vector<std::vector<int>> set_pending_;  // per stage and set: members not done
  std::vector<std::vector<double>> release_;   // per stage and set: the latest finish so far
  using Start = std::pair<double, size_t>;     // instant, transfer
  std::priority_queue<Start, std::vector<Start>, std::greater<>> starts_;
  std::vector<size_t> active_;
  int exited_ = 0;
  std::vector<const std::vector<int>*> links_;
  std::vector<double> caps_, rates_;
};

std::vector<double> FluidNet::run(const FluidSchedule& s, const std::vector<double>& post,
                                  const std::vector<double>& put) {
  if (s.stages.empty()) {
    std::vector<double> exit(post.size());
    for (size_t m = 0; m < exit.size(); ++m) exit[m] = std::max(post[m], put[m]);
    return exit;
  }
  return Sweep(*this, s).run(post, put);
}

bool fluid_cross_call_safe(FluidNet& net, const std::vector<FluidSchedule>& candidates) {
  for (const FluidSchedule& a : candidates) {
    if (a.stages.empty() || a.stages.back().after.size() < 2) continue;
    const FluidStage& last = a.stages.back();
    // link -> the one set of the last stage crossing it (-1: none); a link two sets cross is unsafe (a
    // transfer of one set crosses it, with no member in the other).
    std::vector<int> owner(net.link_count(), -1);
    for (const FluidEdge& e : last.edges)
      for (int l : net.links(e.src, e.dst)) {
        if (owner[l] >= 0 && owner[l] != last.set[e.src]) return false;
        owner[l] = last.set[e.src];
      }
    for (const FluidSchedule& b : candidates)
      for (const FluidStage& st : b.stages)
        for (const FluidEdge& e : st.edges)
          for (int l : net.links(e.src, e.dst))
            if (const int set = owner[l]; set >= 0 && last.set[e.src] != set && last.set[e.dst] != set)
              return false;
  }
  return true;
}

FluidCalls::FluidCalls(std::vector<sg4::Host*> hosts) : net_(hosts), round_of_(hosts.size(), 0) {}

double FluidCalls::meet(const Group& g, int me, const std::tuple<int, double, int>& key, double post,
                        double put, const std::function<FluidSchedule()>& make) {
  const long long r = round_of_[static_cast<size_t>(me)]++;
  Round& R = rounds_[r & 1];
  const size_t n = round_of_.size();
  if (R.id != r) {
    R.id = r;
    R.done = false;
    R.post.assign(n, 0.0);
    R.put.assign(n, 0.0);
  }
  R.post[static_cast<size_t>(me)] = post;
  R.put[static_cast<size_t>(me)] = put;
  // After the barrier every member reads its exit before any can meet again: the round after next, which
  // would reuse this slot, needs every member at the next barrier first.
  g.barrier()->wait();
  if (!R.done) {
    R.exit = exits(key, R.post, R.put, make);
    R.done = true;
  }
  return R.exit[static_cast<size_t>(me)];
}

std::vector<double> FluidCalls::exits(const std::tuple<int, double, int>& key,
                                      const std::vector<double>& post, const std::vector<double>& put,
                                      const std::function<FluidSchedule()>& make) {
  const double t0 = *std::min_element(post.begin(), post.end());
  std::vector<double> rel_post(post.size()), rel_put(put.size());
  for (size_t i = 0; i < post.size(); ++i) rel_post[i] = post[i] - t0, rel_put[i] = put[i] - t0;
  Memo& m = memo_[key];
  if (m.exit.empty() || m.post != rel_post || m.put != rel_put) {
    const FluidSchedule s = make();
    if (!net_.admits(s))
      throw Error("internal error: a collective call's schedule is not one the fluid model runs");
    std::vector<double> exit = net_.run(s, rel_post, rel_put);
    m = {std::move(rel_post), std::move(rel_put), std::move(exit)};
  }
  std::vector<double> out(m.exit.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = t0 + m.exit[i];
  return out;
}

}  // namespace vitsim::sim
