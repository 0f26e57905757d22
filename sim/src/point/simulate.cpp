// A point's simulation, stage by stage (as SimGrid's app-masterworkers' main: engine, platform, actors, run):
// the point set-up (point_setup.hpp), the engine with its platform (engine.hpp), the rank actors
// (rank_actors.hpp), the point report (point_report.hpp).
#include "vitsim/sim/point/simulate.hpp"

#include <fmt/format.h>

#include <simgrid/s4u.hpp>

#include "point/point_report.hpp"
#include "point/point_setup.hpp"
#include "point/rank_actors.hpp"

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {
namespace {

// The engine a point runs on: `pe` (prepared when null, into `own`), which must be of the point's platform
// and unused; rethrows the platform's error if it failed to load.
sg4::Engine& engine_for(PreparedEngine*& pe, std::unique_ptr<PreparedEngine>& own, const Scenario& s,
                        const PlatformFacts& facts) {
  if (!pe) {
    own = prepare_engine(s, facts);
    pe = own.get();
  }
  if (pe->platform != s.cluster.platform || pe->used)
    throw Error(fmt::format("{}: internal error: a prepared engine of '{}'{} cannot simulate this point",
                            s.cluster.platform, pe->platform, pe->used ? " that ran a point already" : ""));
  pe->used = true;
  if (pe->error) std::rethrow_exception(pe->error);
  return *pe->engine;
}

// The point's own state first (traced ranks, the steps and the memory they need), then the engine (`pe`,
// prepared here when null) and its platform's error if it failed to load, then the actors and the run.
SimResult simulate_on(PreparedEngine* pe, const PointSetup& setup, const Scenario& s,
                      const PlatformFacts& facts, const Calibration* calib, bool want_trace,
                      const std::vector<int>& trace_ranks) {
  PointRun run(s);
  run.coll = setup.collective.get();
  run.record_calls = run.coll->name() != "auto";
  run.trace.select(s.ranks(), want_trace, trace_ranks);
  const StepBudget budget = budget_steps(run.horizon, s, facts);

  std::unique_ptr<PreparedEngine> own;
  sg4::Engine& e = engine_for(pe, own, s, facts);
  std::vector<std::string> notes = pe->notes;
  const LatencyModel& latency = *pe->latency;  // made with the engine (prepare_engine)
  const RankHosts rh{setup.place, rank_hosts(e, setup.place, facts), latency};
  make_groups(run, rh, notes);
  const MemoryVerdict mem = setup_ranks(run, facts, calib, rh, notes);
  choose_fast_paths(run, facts, rh, notes);
  create_actors(run);
  e.run();
  for (auto& line : run.coll->run_notes()) notes.push_back(std::move(line));
  if (run.record_calls && run.group)
    for (auto& line : nccl_would_run(*run.group,
                                     {&facts,
                                      s.nccl.version,
                                      s.nccl.algo,
                                      s.nccl.proto,
                                      {},
                                      s.nccl.min_channels,
                                      s.nccl.max_channels},
                                     run.coll->name(), run.calls))
      notes.push_back(std::move(line));
  if (s.parallel.collective != "auto" && (!s.nccl.algo.empty() || !s.nccl.proto.empty()))
    notes.push_back(
        fmt::format("nccl.algo and nccl.proto are NCCL's choice, read by parallelism.collective=auto only: "
                    "this point runs "
                    "the collective '{}' as named and does not read them",
                    s.parallel.collective));

  SimResult out;
  out.point = point_report(run, facts, setup.place, budget, mem, sg4::Engine::get_clock(), std::move(notes));
  out.trace = std::move(run.trace.events);
  out.trace_truncated = run.trace.truncated;
  if (setup.comm_regime) out.comm = comm_regime(run, facts);
  return out;
}

}  // namespace

SimResult simulate_prepared(PreparedEngine& pe, const PointSetup& setup, const Scenario& s,
                            const PlatformFacts& facts, const Calibration* calib, bool want_trace,
                            const std::vector<int>& trace_ranks) {
  return simulate_on(&pe, setup, s, facts, calib, want_trace, trace_ranks);
}

SimResult simulate_prepared(PreparedEngine& pe, const Scenario& s, const PlatformFacts& facts,
                            const Calibration* calib, bool want_trace, const std::vector<int>& trace_ranks) {
  return simulate_on(&pe, setup_point(s, facts), s, facts, calib, want_trace, trace_ranks);
}

SimResult simulate_point(const Scenario& s, const PlatformFacts& facts, const Calibration* calib,
                         bool want_trace, const std::vector<int>& trace_ranks) {
  return simulate_on(nullptr, setup_point(s, facts), s, facts, calib, want_trace, trace_ranks);
}

}  // namespace vitsim::sim
