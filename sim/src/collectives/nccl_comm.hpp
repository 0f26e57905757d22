#pragma once
// NCCL's model of a communicator as the `auto` collective builds it
// (sim/src/collectives/collective_nccl.cpp), for whoever weighs NCCL's choices outside a run:
// nccl_would_run's notes, the gradient reduction's regime (sim/src/point/comm_regime.cpp).
#include <optional>

#include "vitsim/core/model/nccl_tuning.hpp"
#include "vitsim/sim/collectives/collective.hpp"

namespace vitsim::sim {

struct NcclComm {
  NcclTopo topo;
  NcclTuning tuning;
  const NcclVersion* version = nullptr;
  NcclChoice choose(NcclFunc f, double bytes) const;
};
// Over g's members with c's version and overrides; none where g has fewer than 2 members, a CPU device (MPI,
// not NCCL) or c no platform facts. Throws Error where NCCL's topology or tuning refuses it.
std::optional<NcclComm> nccl_comm(const Group& g, const CollectiveContext& c);
// The NCCL function a collective operation is.
NcclFunc nccl_func_of(CollOp op);

}  // namespace vitsim::sim
