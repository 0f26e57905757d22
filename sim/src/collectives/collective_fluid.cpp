// A named collective (`ring`, `tree`, `rail`, `hierarchical`, `topology`) computed by the fluid model: where
// its group's calls make the simulation's only transfers, every run over the group is one meeting of the
// members (FluidCalls) and each owes its exit, computed from the collective's own schedule
// (Collective::schedule) with its routes' latencies as the schedule carries them. The same instants as its
// flows: tests/sim/test_fluid.cpp. (`auto` meets its calls itself, collective_nccl.cpp.)
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "vitsim/core/base/error.hpp"
#include "vitsim/sim/collectives/collective.hpp"
#include "vitsim/sim/fluid/fluid.hpp"

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {
namespace {

class FluidCollective : public Collective {
 public:
  FluidCollective(const Collective& inner, const Group& g, std::unique_ptr<FluidCalls> calls,
                  std::vector<CollOp> ops)
      : inner_(inner), group_(g), calls_(std::move(calls)), ops_(std::move(ops)) {}

  std::string name() const override { return inner_.name(); }

  void run(const Group& g, int me, double bytes, CollOp op) const override {
    Deferred d;
    run_deferred(g, me, bytes, op, d);
    if (const double owed = d.lead + d.tail; owed > 0) sg4::this_actor::sleep_for(owed);
  }

  // The fused ring posts its receive before its lead (fused_ring_steps); the others sleep the lead first
  // (Collective::run_deferred).
  void run_deferred(const Group& g, int me, double bytes, CollOp op, Deferred& d) const override {
    if (&g != &group_ || g.size() < 2) {
      inner_.run_deferred(g, me, bytes, op, d);
      return;
    }
    if (std::find(ops_.begin(), ops_.end(), op) == ops_.end())
      throw Error(
          fmt::format("internal error: a {} call of the collective '{}', which the fluid model was not "
                      "checked for",
                      coll_op_name(op), inner_.name()));
    const double now = sg4::Engine::get_clock();
    const double put = now + std::exchange(d.lead, 0.0);
    const double exit =
        calls_->meet(g, me, {static_cast<int>(op), bytes, 0}, inner_.fused_ring(g) ? now : put, put, [&] {
          FluidSchedule s;
          inner_.schedule(g, bytes, op, s);
          return s;
        });
    d.tail += std::max(0.0, exit - sg4::Engine::get_clock());
  }

  bool fused_ring(const Group& g) const override { return inner_.fused_ring(g); }
  bool schedule(const Group& g, double bytes, CollOp op, FluidSchedule& out) const override {
    return inner_.schedule(g, bytes, op, out);
  }
  std::vector<std::string> run_notes() const override { return inner_.run_notes(); }

 private:
  const Collective& inner_;
  const Group& group_;
  std::unique_ptr<FluidCalls> calls_;
  std::vector<CollOp> ops_;  // the operations checked (fluid_collective)
};

}  // namespace

std::unique_ptr<Collective> fluid_collective(const Collective& inner, const Group& g,
                                             const std::vector<CollOp>& ops) {
  if (g.size() < 2 || !g.only_traffic() || inner.name() == "auto") return nullptr;
  std::vector<sg4::Host*> hosts;
  for (int i = 0; i < g.size(); ++i) hosts.push_back(g.host(i));
  auto calls = std::make_unique<FluidCalls>(hosts);
  std::vector<FluidSchedule> candidates;
  for (CollOp op : ops) {
    FluidSchedule s;
    if (!inner.schedule(g, 1 << 20, op, s) || !calls->net().admits(s)) return nullptr;
    candidates.push_back(std::move(s));
  }
  if (!fluid_cross_call_safe(calls->net(), candidates)) return nullptr;
  return std::make_unique<FluidCollective>(inner, g, std::move(calls), ops);
}

}  // namespace vitsim::sim
