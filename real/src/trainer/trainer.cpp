// The real trainer's entry point (train.hpp): every point of a sweep trained one after another on the
// processes of the job (each point: point_trainer.hpp), the report and the trace gathered and written by
// rank 0, and the end of the job when a rank fails. The gradient sync lives in grad_sync.cpp, the
// checkpoints in checkpoint.cpp.
#include <torch/version.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include <fmt/format.h>

#include "model/checkpoint.hpp"
#include "trainer/point.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/system.hpp"
#include "vitsim/core/results/trace.hpp"
#include "vitsim/real/comm.hpp"
#include "vitsim/real/train.hpp"

namespace vitsim::real {

Progress& progress() {
  static Progress p;
  return p;
}

namespace {

// The end of the line an interruption prints (core's set_interrupt_note): where the run stood and what is
// on disk. Rank 0 says it; the other ranks of a job end without a line.
void note_interruptions(const World& world, const std::vector<Scenario>& points, const TrainOptions& opt) {
  std::vector<std::string> checkpoints;
  for (const auto& s : points) checkpoints.push_back(s.run.checkpoint_dir.empty() ? "" : checkpoint_path(s));
  const bool quiet = world.rank() != 0;
  set_interrupt_note([quiet, checkpoints, out = opt.report_path]() -> std::optional<std::string> {
    if (quiet) return std::nullopt;
    const Progress& p = progress();
    const int phase = p.phase, point = p.point;
    std::string where = phase == 0 ? " while setting up the run"
                        : phase == 2
                            ? " after training, while writing the outputs"
                            : fmt::format(" in global step {} (epoch {}, step {} of {})", p.global_step + 1,
                                          p.epoch + 1, p.step_in_epoch + 1, p.steps_per_epoch.load());
    if (checkpoints.size() > 1 && phase != 2)
      where += fmt::format(" of point {}/{}", point + 1, checkpoints.size());
    std::vector<std::string> parts;
    if (!out.empty()) parts.push_back(fmt::format("no report written (--out {})", out));
    const std::string& ck = checkpoints[std::min<size_t>(point, checkpoints.size() - 1)];
    const long long k = p.checkpoint_step;
    if (ck.empty())
      parts.push_back("nothing saved (no run.checkpoint_dir)");
    else if (k < 0)
      parts.push_back(fmt::format("no checkpoint written yet ({})", ck));
    else
      parts.push_back(
          fmt::format("the checkpoint of global step {} ({}) is intact: --resume continues from it", k, ck));
    std::string line = where + ":";
    for (size_t i = 0; i < parts.size(); ++i) line += (i ? "; " : " ") + parts[i];
    return line;
  });
}

// The trace events of the traced ranks (`kept`) gathered on rank 0 as one TracePoint; other ranks get
// nothing. index, points: this point's place in the sweep, for its label and notes.
std::optional<TracePoint> gather_trace(World& world, const PointResult& r, const std::vector<int>& kept,
                                       size_t index, size_t points, const Scenario& s,
                                       std::vector<std::string>& trace_notes) {
  nlohmann::json mine = nlohmann::json::array();
  for (const auto& e : r.trace)
    mine.push_back({static_cast<int>(e.track), e.name, e.start_s, e.dur_s, e.args});
  nlohmann::json memory = nlohmann::json::array();
  for (const auto& m : r.memory) memory.push_back({m.t_s, m.bytes});
  auto parts = world.gather(
      nlohmann::json{{"events", mine}, {"memory", memory}, {"truncated", r.trace_truncated}}.dump(), 0,
      "trace gather");
  if (world.rank() != 0) return std::nullopt;
  TracePoint tp;
  if (points > 1) tp.label = fmt::format("point {} {}", index + 1, nlohmann::json(s.params).dump());
  tp.ranks = kept;
  for (const auto& rr : r.point.per_rank) tp.hosts.push_back(rr.host);
  for (int rk : kept) {
    auto part = nlohmann::json::parse(parts[rk]);
    for (const auto& e : part["events"])
      tp.events.push_back({rk, static_cast<TraceTrack>(e[0].get<int>()), e[1].get<std::string>(),
                           e[2].get<double>(), e[3].get<double>(), e[4].get<TraceArgs>()});
    for (const auto& m : part["memory"])
      tp.measured_memory[rk].push_back({m[0].get<double>(), m[1].get<double>()});
    if (part["truncated"].get<bool>())
      trace_notes.push_back(
          fmt::format("point {}: rank {} reached {} events; its later events are not in the trace", index + 1,
                      rk, kTraceEventsPerRank));
  }
  return tp;
}

Report train_all(World& world, const std::vector<Scenario>& points, const std::string& scenario_name,
                 const TrainOptions& opt) {
  Report report;
  report.scenario = scenario_name;
  report.source = "measured";
  report.provenance["host"] = world.host();
  report.provenance["date"] = now_utc();
  report.provenance["libtorch"] = TORCH_VERSION;
  report.provenance["ranks"] = std::to_string(world.size());
  report.provenance["command"] = opt.command;
  // The trace (core/results/trace.hpp): the ranks --trace-ranks lists, else the first 64; rank 0 gathers
  // them.
  const bool tracing = !opt.trace_path.empty();
  std::unique_ptr<RankList> rank_list;
  if (tracing && !opt.trace_ranks.empty()) {
    rank_list = std::make_unique<RankList>(parse_rank_list(opt.trace_ranks));
    if (rank_list->max() >= world.size())
      throw Error(fmt::format("--trace-ranks '{}': rank {} is beyond this job's {} ranks (0-{})",
                              opt.trace_ranks, rank_list->max(), world.size(), world.size() - 1));
  }
  const std::vector<int> kept = traced_ranks(rank_list.get(), world.size());
  const bool rank_traced = tracing && std::find(kept.begin(), kept.end(), world.rank()) != kept.end();
  std::vector<TracePoint> trace_points;
  std::vector<std::string> trace_notes;
  if (const std::string note = trace_ranks_note(rank_list.get(), world.size()); tracing && !note.empty()) {
    trace_notes.push_back(note);
    if (world.rank() == 0 && opt.verbose) fmt::print(stderr, "vitsim: note: {}\n", note);
  }
  for (size_t i = 0; i < points.size(); ++i) {
    const Scenario& s = points[i];
    if (world.rank() == 0 && opt.verbose && points.size() > 1)
      fmt::print("vitsim train: point {}/{}\n", i + 1, points.size());
    progress().phase = 0;
    progress().point = static_cast<int>(i);
    progress().checkpoint_step = -1;
    PointResult r = train_point(s, world, opt, rank_traced);
    report.points.push_back(r.point);
    if (!tracing) continue;
    if (auto tp = gather_trace(world, r, kept, i, points.size(), s, trace_notes))
      trace_points.push_back(std::move(*tp));
  }
  fill_scaling_efficiency(report);
  progress().phase = 2;
  if (world.rank() == 0) {
    if (!opt.report_path.empty()) write_file_atomic(opt.report_path, report_to_json(report));
    if (tracing) write_file_atomic(opt.trace_path, write_trace(trace_points, "measured", trace_notes));
  }
  world.barrier("final barrier");
  return report;
}

}  // namespace

ReportPoint train_point_on(World& world, const Scenario& s, const TrainOptions& opt) {
  return train_point(s, world, opt, false).point;
}

Report train(const std::vector<Scenario>& points, const std::string& scenario_name, const TrainOptions& opt) {
  if (points.empty()) throw Error("no scenario point to train");
  keep_freed_memory();  // before any tensor: freed activations stay in the process (real/src/model/io.cpp)
  bool quiet_exit = false;
  {
    World world(points.front().run.timeout_s);
    note_interruptions(world, points, opt);
    try {
      return train_all(world, points, scenario_name, opt);
    } catch (const Diverged&) {
      // Every rank stopped at the same step with the same message: rank 0 reports it, the others end
      // quietly with the same status once MPI is finalised (World's destructor).
      if (world.rank() == 0) throw;
      quiet_exit = true;
    } catch (const std::exception& e) {
      // A rank that fails (bad input, a file missing on its node, diverged replicas) ends the whole job at
      // once with its message, instead of leaving the others in a collective until the timeout.
      if (world.size() > 1) world.abort(e.what(), 1);
      throw;
    }
  }
  if (quiet_exit) {
    std::fflush(stdout);
    std::_Exit(1);
  }
  throw Error("internal: training ended without a report");
}

}  // namespace vitsim::real
