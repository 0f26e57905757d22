// Ring all-reduce (reduce-scatter then all-gather): t = 2(n-1) a + 2(n-1)/n S/B on identical links.
#include "collectives/transfers.hpp"

namespace vitsim::sim {
namespace {

// Fused form: one flow per rank per phase. Exact for link sharing, O(n) flows per all-reduce.
class RingFused : public Collective {
 public:
  std::string name() const override { return "ring"; }
  void run(const Group& g, int me, double bytes, CollOp op) const override {
    ring_collective(g, me, bytes, op, true);
  }
  void run_deferred(const Group& g, int me, double bytes, CollOp op, Deferred& d) const override {
    ring_collective(g, me, bytes, op, true, &d);
  }
  bool fused_ring(const Group&) const override { return true; }
  bool schedule(const Group& g, double bytes, CollOp op, FluidSchedule& out) const override {
    out = ring_schedule(g, bytes, op);
    return true;
  }
};

// Message level: every one of the 2(n-1) steps is its own transfer. O(n^2) messages; for checking.
class RingMessages : public Collective {
 public:
  std::string name() const override { return "ring_msg"; }
  void run(const Group& g, int me, double bytes, CollOp op) const override {
    ring_collective(g, me, bytes, op, false);
  }
};

}  // namespace
VITSIM_REGISTER_COLLECTIVE(
    "ring", RingFused, NcclAlgo::Ring, "NCCL Ring, Simple protocol",
    "one fused flow per rank standing for the 2(n-1) lock-step steps, then a ring-wide "
    "meeting, so the ring advances at its slowest edge; O(n) flows; 2(n-1) a + 2(n-1)/n "
    "S/B on identical links");
VITSIM_REGISTER_COLLECTIVE(
    "ring_msg", RingMessages, NcclAlgo::Ring, "NCCL Ring, Simple protocol, step by step",
    "every one of the ring's 2(n-1) steps its own transfer; O(n^2) messages, for checking "
    "`ring`");
}  // namespace vitsim::sim
