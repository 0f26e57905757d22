#pragma once
// The rank actors (as SimGrid's app-masterworkers: small classes with an operator()). Per rank, two actors on
// the rank's GPU host: the compute stream (data wait, host->device copy, forward, backward, optimizer: its
// device's step actions, sim/compute/step_actions.hpp) and the communication stream (collectives, one at a
// time, in submission order, like an NCCL stream). Backward fills gradient buckets (core's
// gradient_buckets(): the trainer's own layout) in gradient-ready order; each bucket goes to the
// communication stream after the layer holding its last tensor at once when overlap is on, after backward
// when it is off.
#include "point/rank_state.hpp"
#include "vitsim/sim/engine/engine.hpp"

namespace vitsim::sim {

// One actor per rank for its compute stream, one more for its communication stream when it has one.
// Their stacks come from mmap (allocate_actor_stacks_lazily): only the pages an actor touches are resident.
void create_actors(PointRun& run);

}  // namespace vitsim::sim
