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
#include <unordered_map>
#include <vector>

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

}  // namespace vitsim::sim
