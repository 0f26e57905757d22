#pragma once
// The collective operations a step submits (no SimGrid: sim/compute/step_actions.hpp lists them,
// sim/collectives/collective.hpp runs them).
namespace vitsim::sim {

enum class CollOp { AllReduce, ReduceScatter, AllGather };
const char* coll_op_name(CollOp op);

}  // namespace vitsim::sim
