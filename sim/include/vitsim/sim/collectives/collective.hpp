#pragma once
// Collectives as SimGrid transfers over the platform's links: the interface and its registry. Each rank's
// actor calls run() on its own side (SPMD), so a collective's time is what the links and the other ranks make
// it. Adding a collective is adding one file that calls VITSIM_REGISTER_COLLECTIVE (its building blocks:
// sim/src/collectives/transfers.hpp; who takes part: group.hpp).
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "vitsim/core/model/nccl_tuning.hpp"
#include "vitsim/sim/fluid/coll_op.hpp"
#include "vitsim/sim/fluid/group.hpp"

namespace vitsim {
struct PlatformFacts;  // vitsim/core/platform/platform.hpp
}

namespace vitsim::sim {

struct FluidSchedule;  // vitsim/sim/fluid/fluid.hpp

// What a collective may read of its point besides its group, handed over once after make_collective and
// before any run: the platform's GPUs and links (read during configure() only; a collective keeps what it
// needs) and the scenario's nccl.* keys (the "auto" collective, collective_nccl.cpp).
struct CollectiveContext {
  const PlatformFacts* facts = nullptr;
  std::string nccl_version{};        // nccl.version: a name of nccl_versions(); "" = the newest
  std::string nccl_algo{};           // nccl.algo: NCCL_ALGO's syntax; "" = NCCL's default
  std::string nccl_proto{};          // nccl.proto: NCCL_PROTO's syntax
  std::vector<std::string> hosts{};  // the ranks' hosts where known before the run: configure() checks them
  int nccl_min_channels = 0;         // nccl.min_channels: NCCL_MIN_NCHANNELS; 0 = NCCL's default
  int nccl_max_channels = 0;         // nccl.max_channels: NCCL_MAX_NCHANNELS
  NcclOverrides nccl_overrides() const {
    return {nccl_algo, nccl_proto, nccl_min_channels, nccl_max_channels};
  }
};

// A member's own time carried across a collective without sleeping it (the compute stream's pending time,
// sim/src/point/rank_state.hpp LazyClock): `lead`, work of the member's that is still to elapse before the
// collective's first action; `tail`, time the member is still to spend after run_deferred returns (a fused
// ring's trailing latencies). Folding them into the collective's own waits saves SimGrid a sleep (a simcall
// and two context switches) per member and collective; the simulated instants are the same, summed in another
// order.
struct Deferred {
  double lead = 0;
  double tail = 0;
};

class Collective {
 public:
  virtual ~Collective() = default;
  virtual std::string name() const = 0;
  // Called by every member with the same arguments; returns when this member's part is done.
  virtual void run(const Group& g, int me, double bytes, CollOp op) const = 0;
  // run() for a member that carries time (Deferred): on return d.lead is what the collective did not take
  // (the member's time still to elapse; all of it when the collective had nothing to do) and d.tail what the
  // member still owes after it. This default sleeps the lead first and owes nothing after.
  virtual void run_deferred(const Group& g, int me, double bytes, CollOp op, Deferred& d) const;
  // True when every run over g is the fused ring over all of g (ring_collective, fused): the transfers are
  // then one per member and edge, and a lone ring may stand for them (Group::set_lone_ring).
  virtual bool fused_ring(const Group& g) const {
    (void)g;
    return false;
  }
  // Takes the point's context (CollectiveContext); throws Error on a setting it cannot use. Most collectives
  // need nothing of it.
  virtual void configure(const CollectiveContext& c) { (void)c; }
  // The transfers of one run() over g, as stages between barriers (fluid.hpp), written beside run() by each
  // collective whose run is that; false when it cannot say (it then runs as flows only). FluidNet computes
  // from it the instants run()'s flows would give (tests/sim/test_fluid.cpp holds them equal).
  virtual bool schedule(const Group& g, double bytes, CollOp op, FluidSchedule& out) const {
    (void)g, (void)bytes, (void)op, (void)out;
    return false;
  }
  // Lines for the point's notes on what ran, read after the engine ran (the "auto" collective's choices);
  // may be empty.
  virtual std::vector<std::string> run_notes() const { return {}; }
};

// Where a point names a collective other than "auto": per distinct call (operation, bytes) over g, what NCCL
// would run there (its tuner for c's version and overrides) and NCCL's own estimate of it beside its estimate
// of the forced algorithm where NCCL has one (ring: Ring, tree: Tree), as note lines. Empty when g has fewer
// than 2 members or a CPU device (MPI, not NCCL).
std::vector<std::string> nccl_would_run(const Group& g, const CollectiveContext& c, const std::string& forced,
                                        const std::set<std::pair<CollOp, double>>& calls);

using CollectiveFactory = std::function<std::unique_ptr<Collective>()>;

// What a registered collective is, as its file registers it (SimGrid's SIMGRID_REGISTER_NETWORK_MODEL: name,
// description): what it stands for in NCCL's terms and one line on how it runs. `vitsim predict --list
// collectives` prints them; docs/model.md's and docs/collective.md's lists are generated from them
// (tests/cli/test_descriptors.cpp).
struct CollectiveInfo {
  std::string name;
  // NCCL's algorithm an all-reduce under this collective is (ring and ring_msg: Ring; tree: Tree); none where
  // it is no one NCCL algorithm (auto picks per call; rail, hierarchical and topology are other shapes).
  // The one mapping from vitsim's collectives to NCCL's algorithms: nccl_would_run's notes and the gradient
  // reduction's regime (sim/src/point/comm_regime.cpp) read it.
  std::optional<NcclAlgo> nccl_algo;
  std::string stands_for;   // in NCCL's terms: "NCCL Ring, Simple protocol"
  std::string description;  // one line: how it runs
};

// Registry: a collective by name; an unknown name throws Error listing the valid ones.
std::unique_ptr<Collective> make_collective(const std::string& name);
std::vector<std::string> collective_names();                     // by name
std::vector<CollectiveInfo> collectives();                       // by name
const CollectiveInfo& collective_info(const std::string& name);  // Error listing the valid names
bool register_collective(CollectiveInfo info, CollectiveFactory f);

// Registers CLASS under NAME with what it stands for: NCCL_ALGO (a NcclAlgo, or std::nullopt), STANDS_FOR
// and DESCRIPTION (CollectiveInfo).
#define VITSIM_REGISTER_COLLECTIVE(NAME, CLASS, NCCL_ALGO, STANDS_FOR, DESCRIPTION) \
  static const bool vitsim_registered_##CLASS = ::vitsim::sim::register_collective( \
      ::vitsim::sim::CollectiveInfo{NAME, NCCL_ALGO, STANDS_FOR, DESCRIPTION},      \
      [] { return std::make_unique<CLASS>(); })

}  // namespace vitsim::sim
