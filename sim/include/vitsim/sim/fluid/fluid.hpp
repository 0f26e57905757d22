#pragma once
// A collective's transfers computed without SimGrid flows (issue 25 item 4, the lone ring's reasoning
// extended to shared links): the call as stages of transfers separated by barriers (FluidSchedule, written by
// each algorithm beside its actor code: Collective::schedule), and FluidNet, which computes every member's
// exit from it the way SimGrid's network model would run the same transfers as flows: a transfer starts when
// both its ends are there (the mailbox pair's rule), links share their bandwidth max-min fairly among the
// transfers crossing them (SHARED: the sum of rates is at most the bandwidth; FATPIPE: each rate is), and a
// transfer's rate changes whenever another starts or ends on a link it crosses. Exact, given that nothing
// else sends while the call runs (the caller's condition: the lone ring's, rank_setup.cpp) and that link
// latencies are zero (LatencyModel: vitsim adds them as delays, which a schedule carries). Cost: one max-min
// solve per distinct instant at which a transfer starts or ends; on identical nodes a stage's transfers start
// and end together, so a stage costs one solve over its transfers.
#include <simgrid/s4u.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "vitsim/sim/fluid/coll_op.hpp"

namespace vitsim::sim {

// One transfer of a stage: member src sends `bytes` to member dst, `delay` seconds after src begins the stage
// (its route latency, slept before the put); dst posts its receive when it begins the stage.
struct FluidEdge {
  int src = 0, dst = 0;
  double bytes = 0;
  double delay = 0;
};

// A stage: its transfers and its barriers. Every member belongs to one sync set (`set`, by member); a set is
// released when each of its members has begun the stage and every transfer from or to one of them has ended,
// and its members then begin the next stage `after[set]` seconds later (the collective's trailing latencies,
// a tree's pipeline fill).
struct FluidStage {
  std::vector<FluidEdge> edges;
  std::vector<int> set;       // member -> its sync set
  std::vector<double> after;  // sync set -> wait after its release
};

struct FluidSchedule {
  std::vector<FluidStage> stages;
};

// A schedule's every member in one sync set, released together (a ring or a tree's barrier over the group).
FluidStage one_set_stage(int members, double after);

class FluidNet {
 public:
  // The group's members (their hosts, in member order).
  explicit FluidNet(std::vector<simgrid::s4u::Host*> hosts);

  // True when every transfer of `s` has a route the model can run: at least one link, no WIFI link, no
  // shared link crossed twice, bandwidths finite and positive.
  bool admits(const FluidSchedule& s);

  // Every member's exit (the instant it leaves the last stage, its `after` included): member i begins the
  // first stage with its receives posted at post[i] and its sends put at put[i] (plus each edge's delay);
  // every later stage begins at its set's release plus `after`. The schedule must be admitted.
  std::vector<double> run(const FluidSchedule& s, const std::vector<double>& post,
                          const std::vector<double>& put);

  // The shared links (ids) a transfer from member src to dst crosses (for the caller's checks).
  const std::vector<int>& links(int src, int dst);
  // Shared links seen so far (ids are below it).
  size_t link_count() const { return bw_.size(); }

 private:
  class Sweep;
  struct Route {
    std::vector<int> links;  // shared links crossed (ids into bw_)
    double cap = 0;          // the narrowest FATPIPE link crossed (a cap per transfer), +inf if none
    bool ok = false;
  };
  const Route& route(int src, int dst);

  std::vector<simgrid::s4u::Host*> hosts_;
  std::unordered_map<const simgrid::s4u::Link*, int> link_id_;
  std::vector<double> bw_;  // shared links' bandwidths, by id
  std::unordered_map<std::int64_t, Route> routes_;
};

// No call's transfers can share a link with the previous call's: a sync set of a last stage (members released
// apart from the rest, which may start the next call while it still sends) crosses links that no transfer of
// any candidate between two members outside the set crosses (a transfer with a member of the set cannot start
// before that member has left). `candidates`: every schedule a group's calls may have, admitted by `net`.
bool fluid_cross_call_safe(FluidNet& net, const std::vector<FluidSchedule>& candidates);

class Group;
class Collective;

// A group's calls computed by the fluid model, one meeting per call: each member hands over the instants it
// posts its receives and puts its sends, waits for the others (the group's barrier: one SimGrid call), and
// the first to leave computes every member's exit from the call's schedule. A call repeated with the same
// arrivals relative to the earliest reuses the last exits (the steady state). Exact where the group's calls
// make the simulation's only transfers (Group::only_traffic) and fluid_cross_call_safe holds for every
// schedule the calls may have (the caller checks both).
class FluidCalls {
 public:
  explicit FluidCalls(std::vector<simgrid::s4u::Host*> hosts);
  FluidNet& net() { return net_; }
  // Member `me`'s exit from its next call over g (every member calls in the same order); `key` names the
  // call's schedule (the same key, the same schedule), which `make` writes when it is not known.
  double meet(const Group& g, int me, const std::tuple<int, double, int>& key, double post, double put,
              const std::function<FluidSchedule()>& make);

 private:
  struct Round {
    long long id = -1;
    std::vector<double> post, put, exit;
    bool done = false;
  };
  struct Memo {
    std::vector<double> post, put, exit;
  };
  std::vector<double> exits(const std::tuple<int, double, int>& key, const std::vector<double>& post,
                            const std::vector<double>& put, const std::function<FluidSchedule()>& make);
  FluidNet net_;
  Round rounds_[2];                  // the last two calls' meetings
  std::vector<long long> round_of_;  // per member: the meetings it has joined
  std::map<std::tuple<int, double, int>, Memo> memo_;
};

// `inner` (a named collective) computed by the fluid model over g for the operations `ops` (the point's: a
// call of another throws), as FluidCalls meets `auto`'s calls (sim/src/collectives/collective_fluid.cpp);
// null where it cannot be: g under 2 members or not the only traffic, `auto` (it meets its calls itself), a
// schedule missing or not admitted, calls that could overlap on a link (fluid_cross_call_safe).
std::unique_ptr<Collective> fluid_collective(const Collective& inner, const Group& g,
                                             const std::vector<CollOp>& ops);

}  // namespace vitsim::sim
