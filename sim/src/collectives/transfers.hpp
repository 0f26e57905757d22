#pragma once
// The building blocks of the collectives (sim/src/collective_*.cpp) and of the Ulysses all-to-alls of the
// rank actors: point-to-point exchanges, all-to-alls and ring phases as SimGrid transfers over a Group.
#include <vector>

#include "vitsim/sim/collectives/collective.hpp"
#include "vitsim/sim/fluid/fluid.hpp"

namespace vitsim::sim {

// A point-to-point exchange: send `bytes` to `to` (after the route latency) and receive from `from`,
// both at once, then wait.
void exchange(const Group& g, int me, int to, int from, double bytes);

// An all-to-all: every member sends bytes/n of its `bytes` to each other member, all pairs at once
// (NCCL's grouped send/recv), after the largest route latency to its peers; then waits for all.
void all_to_all(const Group& g, int me, double bytes);

// Ring building blocks shared by the ring, hierarchical and tree files.
// steps: reduce-scatter or all-gather phase of a ring over g: (n-1) steps of bytes/n.
// With `d` (fused only), the member's lead goes into the ring's first wait and the trailing latencies into
// d->tail.
void ring_phase(const Group& g, int me, double bytes, bool fused, Deferred* d = nullptr);
void ring_collective(const Group& g, int me, double bytes, CollOp op, bool fused, Deferred* d = nullptr);

// ring_collective(fused) as a FluidSchedule: one stage whose transfers are the fused ring's (member i to i+1,
// steps x chunk bytes after the route latency), one barrier, the trailing latencies after it. Empty (no
// stage) under 2 members.
FluidSchedule ring_schedule(const Group& g, double bytes, CollOp op);
// One ring phase (fused_ring_steps) over `members` (indices into the schedule's group, in ring order) as
// edges of `stage`: `steps` steps of `chunk`, latencies from `ring` (the members as a Group); the trailing
// latencies become stage.after[set] (the caller puts the members in `set`).
void add_ring_edges(FluidStage& stage, const Group& ring, const std::vector<int>& members, double chunk,
                    int steps, int set);

// Sleeps d->lead (nothing without `d`) and clears it: what a collective that cannot carry time does first.
void sleep_lead(Deferred* d);

}  // namespace vitsim::sim
