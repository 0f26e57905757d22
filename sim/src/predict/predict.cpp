#include "vitsim/sim/predict/predict.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "collectives/nccl_comm.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/calibration.hpp"
#include "vitsim/core/formats/identity.hpp"
#include "vitsim/core/formats/whatif.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/results/trace.hpp"
#include "vitsim/sim/engine/process_pool.hpp"
#include "vitsim/sim/point/simulate.hpp"
#include "vitsim/sim/predict/interval.hpp"

namespace vitsim::sim {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A child's trace events for its parent, in full precision: [rank, track, name, start_s, dur_s, args].
json trace_to_json(const std::vector<TraceEvent>& events) {
  json out = json::array();
  for (const auto& e : events)
    out.push_back({e.rank, static_cast<int>(e.track), e.name, e.start_s, e.dur_s, e.args});
  return out;
}
std::vector<TraceEvent> trace_from_json(const json& j) {
  std::vector<TraceEvent> out;
  out.reserve(j.size());
  for (const auto& e : j)
    out.push_back({e[0].get<int>(), static_cast<TraceTrack>(e[1].get<int>()), e[2].get<std::string>(),
                   e[3].get<double>(), e[4].get<double>(), e[5].get<TraceArgs>()});
  return out;
}

// A point's ranks as columns, one JSON array a field (a few vectors, where an object a rank would be
// 16,384 maps of 13 keys on a large point: most of the memory the child and the parent spend on its report).
// The members are listed here: a field added to RankReport, StepStats or Breakdown must be added below.
static_assert(sizeof(StepStats) == 3 * sizeof(double) && sizeof(Breakdown) == 8 * sizeof(double),
              "rank_columns and ranks_from_columns carry every member of StepStats and Breakdown");
constexpr double StepStats::*kStatsColumns[] = {&StepStats::mean, &StepStats::p50, &StepStats::p95};
constexpr double Breakdown::*kBreakdownColumns[] = {
    &Breakdown::data,      &Breakdown::h2d,        &Breakdown::compute_fwd,  &Breakdown::compute_bwd,
    &Breakdown::optimizer, &Breakdown::comm_total, &Breakdown::comm_exposed, &Breakdown::straggler_wait};
json rank_columns(const std::vector<RankReport>& ranks) {
  json rank = json::array(), host = json::array(), device = json::array(), step = json::array(),
       breakdown = json::array();
  for (const RankReport& r : ranks) {
    rank.push_back(r.rank);
    host.push_back(r.host);
    device.push_back(r.device);
    for (auto m : kStatsColumns) step.push_back(r.step_time_s.*m);
    for (auto m : kBreakdownColumns) breakdown.push_back(r.breakdown_s.*m);
  }
  return {{"rank", rank}, {"host", host}, {"device", device}, {"step", step}, {"breakdown", breakdown}};
}
std::vector<RankReport> ranks_from_columns(const json& j) {
  std::vector<RankReport> out(j["rank"].size());
  size_t s = 0, b = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    RankReport& r = out[i];
    r.rank = j["rank"][i].get<int>();
    r.host = j["host"][i].get<std::string>();
    r.device = j["device"][i].get<std::string>();
    for (auto m : kStatsColumns) r.step_time_s.*m = j["step"][s++].get<double>();
    for (auto m : kBreakdownColumns) r.breakdown_s.*m = j["breakdown"][b++].get<double>();
  }
  return out;
}

// What a child process hands back: the point as a one-point report (its ranks apart, as columns), and its
// trace when asked.
json point_result(PreparedEngine& engine, const PointSetup& setup, const Scenario& s,
                  const PlatformFacts& facts, const Calibration* calib, bool trace,
                  const std::vector<int>& trace_ranks) {
  SimResult r = simulate_prepared(engine, setup, s, facts, calib, trace, trace_ranks);
  json j;
  j["per_rank"] = rank_columns(r.point.per_rank);
  r.point.per_rank.clear();
  Report one;
  one.points.push_back(std::move(r.point));
  j["report"] = report_to_json_value(one);
  if (trace) {
    j["trace"] = trace_to_json(r.trace);
    j["trace_truncated"] = r.trace_truncated;
  }
  return j;
}

// Which ranks each point traces: --trace-ranks (core/results/trace.hpp), else the first 64 of each point.
struct TraceSelection {
  std::unique_ptr<RankList> list;       // --trace-ranks, when given
  int most_ranks = 0;                   // of the points
  std::vector<std::vector<int>> ranks;  // per point (empty without --trace)
};

TraceSelection select_traced(const std::vector<Scenario>& points, const PredictOptions& opt) {
  TraceSelection t;
  for (const auto& s : points) t.most_ranks = std::max(t.most_ranks, s.ranks());
  if (!opt.trace_ranks.empty()) {
    t.list = std::make_unique<RankList>(parse_rank_list(opt.trace_ranks));
    if (t.list->max() >= t.most_ranks)
      throw Error(fmt::format("--trace-ranks '{}': rank {} is beyond the scenario's {} ranks (0-{})",
                              opt.trace_ranks, t.list->max(), t.most_ranks, t.most_ranks - 1));
  }
  t.ranks.resize(points.size());
  if (!opt.trace_path.empty())
    for (size_t i = 0; i < points.size(); ++i) t.ranks[i] = traced_ranks(t.list.get(), points[i].ranks());
  return t;
}

// The scenario file, the platforms as simulated (what-ifs applied) by content, the calibration, the what-ifs.
void add_provenance(Report& report, const ScenarioFile& file, const std::vector<Scenario>& points,
                    const PlatformCache& platforms, const PredictOptions& opt) {
  report.provenance["scenario_file"] = file.path;
  report.provenance["generator"] = fmt::format("vitsim {} (SimGrid S4U)", vitsim_version());
  std::set<std::string> simulated;  // the points' files; not the interval's copies, which the cache also has
  for (const auto& s : points) simulated.insert(s.cluster.platform);
  std::string shas;
  for (const auto& [path, facts] : platforms.all())
    if (simulated.count(path)) shas += (shas.empty() ? "" : ",") + sha256_hex(read_file(path));
  report.provenance["platform_sha256"] = shas;
  if (!opt.calibration.empty()) report.provenance["calibration"] = opt.calibration;
  if (!points.empty() && !points.front().what_ifs.empty()) {
    std::string w;
    for (const auto& e : points.front().what_ifs) w += (w.empty() ? "" : "; ") + e;
    report.provenance["what_ifs"] = w;
  }
}

// Point i's share of the trace file, from what its child handed back.
TracePoint trace_point(const json& result, size_t i, const std::vector<Scenario>& points,
                       const TraceSelection& sel, const RankPlacement& place, const ReportPoint& reported,
                       std::vector<std::string>& notes) {
  const Scenario& s = points[i];
  TracePoint tp;
  if (points.size() > 1) tp.label = fmt::format("point {} {}", i + 1, json(s.params).dump());
  tp.ranks = sel.ranks[i];
  tp.hosts = place.hosts;
  tp.events = trace_from_json(result["trace"]);
  // The memory counter: the point's resident memory (its largest GPU's, as reported) and the activations
  // each layer keeps, from the same memory model (core/model/memory.hpp).
  tp.memory.resident_bytes = reported.memory.total() - reported.memory.activations;
  tp.memory.saved_bytes = saved_bytes_per_layer(build_workload(s.model), memory_inputs(s, 0));
  // A ring's all-reduces go from each rank to the next over the data-parallel group, ranks in order.
  if (s.parallel.collective == "ring") tp.ring_size = s.ranks();
  if (result.value("trace_truncated", false))
    notes.push_back(
        fmt::format("point {}: some ranks reached {} events; their later events are not in the trace", i + 1,
                    kTraceEventsPerRank));
  return tp;
}

// How a set of points forks: from one zygote per platform file that loaded it (process_pool.hpp), into
// `engine` in the zygote and its children; `on(i)` is the scenario point i's engine loads.
template <typename On>
ForkedPoints zygote_points(const std::string& who, const PredictOptions& opt, PlatformCache& platforms,
                           std::unique_ptr<PreparedEngine>& engine, On on) {
  ForkedPoints how;
  how.who = who;
  how.progress = opt.progress;
  how.jobs = opt.jobs;
  how.group_of = [on](size_t i) { return on(i).cluster.platform; };
  how.prepare = [on, &platforms, &engine](size_t i) { engine = prepare_engine(on(i), platforms.of(on(i))); };
  return how;
}

}  // namespace

namespace {

// simulate_points' simulations, made in the parent (each point on its engine's platform, its placement
// checked there unless it is a copy, whose facts and placement its own child reads and checks), then run in
// children: simulate_points' batch, or predict's beside its points (IntervalPlan).
class Simulations {
 public:
  Simulations(const std::vector<Scenario>& points, const Calibration* calib,
              const std::vector<std::string>& engine_of, const std::vector<const Calibration*>& calib_of,
              PlatformCache& platforms, const std::function<PlatformFacts(size_t)>& copy_facts)
      : points_(points),
        calib_(calib),
        engine_of_(engine_of),
        calib_of_(calib_of),
        platforms_(platforms),
        copy_facts_(copy_facts),
        setups_(points.size()) {
    for (size_t i = 0; i < points.size(); ++i) {
      Scenario e = points[i];
      if (!engine_of.empty()) e.cluster.platform = engine_of[i];
      runs_.push_back(std::move(e));
      if (is_copy(i))
        platforms.of(runs_.back());  // the engine's file read and load-checked once, before the fork
      else
        setups_[i] = check_point(runs_.back(), platforms.of(points[i]));
    }
  }
  size_t size() const { return points_.size(); }
  // Point i as it runs: on its engine's platform (the zygote's group and preparation).
  const Scenario& on_engine(size_t i) const { return runs_[i]; }
  std::string name(size_t i) const {
    return fmt::format("simulation {} ({})", i + 1, json(points_[i].params).dump());
  }
  // In point i's child: its two times.
  json simulate(size_t i, PreparedEngine& engine) {
    std::optional<PlatformFacts> copy;
    if (is_copy(i)) copy = facts_of_copy(i);
    const PlatformFacts& facts = copy ? *copy : platforms_.of(points_[i]);
    const SimResult r =
        simulate_prepared(engine, copy ? check_point(runs_[i], facts) : std::move(setups_[i]), runs_[i],
                          facts, calib_of_.empty() ? calib_ : calib_of_[i], false, {});
    return json{r.point.epoch_time_s, r.point.step_time_s.mean};
  }
  static std::vector<SimulatedTimes> times(const std::vector<json>& results) {
    std::vector<SimulatedTimes> out;
    for (const json& r : results) out.push_back({r.at(0).get<double>(), r.at(1).get<double>()});
    return out;
  }

 private:
  const std::vector<Scenario>& points_;
  const Calibration* calib_;
  const std::vector<std::string>& engine_of_;
  const std::vector<const Calibration*>& calib_of_;
  PlatformCache& platforms_;
  const std::function<PlatformFacts(size_t)>& copy_facts_;
  std::vector<Scenario> runs_;
  std::vector<PointSetup> setups_;

  // A point on a copy that differs from its engine's file only in figures SimGrid never sees (the
  // interval's ends and samples of GPU and node figures): its facts are read without the load check (its
  // engine's file had it) and its placement checked in its own child, where they run in parallel with the
  // other children instead of one after another in the parent (docs/benchmarks.md "Prediction intervals
  // (issue 26)").
  bool is_copy(size_t i) const { return !engine_of_.empty() && engine_of_[i] != points_[i].cluster.platform; }
  PlatformFacts facts_of_copy(size_t i) {
    const PlatformFacts& engine = platforms_.of(runs_[i]);
    const std::string& path = points_[i].cluster.platform;
    PlatformFacts f =
        copy_facts_ ? copy_facts_(i) : read_platform_text(path, read_input_file(path, "platform file"));
    f.path = engine.path;
    f.flat = engine.flat;
    return f;
  }
};

}  // namespace

std::vector<SimulatedTimes> simulate_points(const std::vector<Scenario>& points, const Calibration* calib,
                                            const PredictOptions& opt, const std::string& who,
                                            const std::vector<std::string>& engine_of,
                                            const std::vector<const Calibration*>& calib_of,
                                            PlatformCache* cache,
                                            const std::function<PlatformFacts(size_t)>& copy_facts) {
  PlatformCache own;
  PlatformCache& platforms = cache ? *cache : own;
  Simulations sims(points, calib, engine_of, calib_of, platforms, copy_facts);
  std::unique_ptr<PreparedEngine> engine;
  ForkedPoints how = zygote_points(who, opt, platforms, engine,
                                   [&sims](size_t i) -> const Scenario& { return sims.on_engine(i); });
  how.what = "simulations";
  return Simulations::times(gather_forked(
      points.size(), how, [&](size_t i) { return sims.simulate(i, *engine); },
      [&](size_t i) { return sims.name(i); }));
}

Report predict(const ScenarioFile& file, const PredictOptions& opt) {
  std::vector<Scenario> points = expand(file);
  EditedPlatforms edited;  // what-ifs: each point simulates an edited copy of its platform
  edited.set_link_connections(nccl_link_connections());
  edited.apply(points);
  PlatformCache platforms;
  std::vector<PointSetup> setups;  // each point's placement and collective, inherited by its child
  std::vector<double> prices;      // per GPU-hour, read before any work: a bad price fails at once
  for (const auto& s : points) {
    check_epoch(s);
    setups.push_back(check_point(s, platforms.of(s)));
    prices.push_back(parse_price_per_gpu_hour(platforms.of(s).props, platforms.of(s).path));
  }
  std::unique_ptr<Calibration> calib;
  if (!opt.calibration.empty()) calib = std::make_unique<Calibration>(read_calibration(opt.calibration));
  // --runs: read and resolved before any simulation, so that a bad file fails at once.
  const std::vector<MeasuredRun> runs =
      opt.interval.samples > 0 ? measured_runs(file, opt.interval.runs) : std::vector<MeasuredRun>{};
  const bool trace = !opt.trace_path.empty();
  const TraceSelection sel = select_traced(points, opt);
  // --interval: its first simulations (the figures' ends) run in the points' batch, forked from the points'
  // zygotes beside them: they need nothing of the points' results, and a batch of their own would load the
  // platform again and wait for the points (docs/benchmarks.md, "Prediction intervals (issue 26)").
  std::unique_ptr<IntervalPlan> interval;
  const std::function<PlatformFacts(size_t)> copy_facts = [&interval](size_t n) {
    return interval->copy_facts(n);
  };
  std::unique_ptr<Simulations> ends;
  if (opt.interval.samples > 0) {
    interval = std::make_unique<IntervalPlan>(points, calib.get(), opt, platforms);
    ends = std::make_unique<Simulations>(interval->scenarios(), calib.get(), interval->engine_of(),
                                         interval->calib_of(), platforms, copy_facts);
  }
  const size_t n_points = points.size(), n_ends = ends ? ends->size() : 0;
  std::unique_ptr<PreparedEngine> engine;
  ForkedPoints how = zygote_points(
      "vitsim predict", opt, platforms, engine,
      [&](size_t i) -> const Scenario& { return i < n_points ? points[i] : ends->on_engine(i - n_points); });
  if (n_ends > 0) how.what = "simulations (the points and their intervals' ends)";
  auto name_of = [&](size_t i) { return fmt::format("point {} ({})", i + 1, json(points[i].params).dump()); };
  std::vector<ForkedResult> results = gather_forked_each(n_points + n_ends, how, [&](size_t i) {
    if (i >= n_points) return ends->simulate(i - n_points, *engine);
    return point_result(*engine, setups[i], points[i], platforms.of(points[i]), calib.get(), trace,
                        sel.ranks[i]);
  });
  const std::vector<ForkedResult> end_results(results.begin() + static_cast<long>(n_points), results.end());
  results.resize(n_points);
  // One point that fails (its simulation threw, its process was killed) is listed with its reason and the
  // others are kept; when every point failed there is nothing to report: the first failure is the error.
  if (std::none_of(results.begin(), results.end(), [](const ForkedResult& r) { return r.ok(); }))
    throw Error(forked_error(results.front(), name_of(0)));

  Report report;
  report.scenario = file.name;
  report.source = "simulated";
  add_provenance(report, file, points, platforms, opt);
  std::vector<TracePoint> trace_points;
  std::vector<std::string> trace_notes;
  if (const std::string note = trace_ranks_note(sel.list.get(), sel.most_ranks); trace && !note.empty()) {
    trace_notes.push_back(note);
    if (opt.progress) fmt::print(stderr, "vitsim: note: {}\n", note);
  }
  for (size_t i = 0; i < points.size(); ++i) {
    if (!results[i].ok()) {
      report.failed.push_back({static_cast<int>(i) + 1, points[i].params, results[i].error});
      if (trace) trace_notes.push_back(fmt::format("point {} failed: {}", i + 1, results[i].error));
      continue;
    }
    const json& result = results[i].result;
    report.points.push_back(
        report_from_json_value(result["report"], fmt::format("point {}", i + 1)).points.at(0));
    ReportPoint& p = report.points.back();  // the whole run: the closing summary (docs/predict.md)
    p.per_rank = ranks_from_columns(result["per_rank"]);
    p.total_epochs = opt.epochs > 0 ? opt.epochs : points[i].training.epochs;
    p.price_per_gpu_hour = prices[i];
    if (trace) trace_points.push_back(trace_point(result, i, points, sel, setups[i].place, p, trace_notes));
  }
  if (const std::string note = calib ? unused_calibration_note(*calib) : ""; !note.empty())
    for (auto& p : report.points) p.notes.push_back(note);
  fill_scaling_efficiency(report);
  if (interval && report.failed.empty()) {
    std::vector<json> times;  // the ends' times, all or nothing (simulate_points' gather_forked)
    for (size_t k = 0; k < end_results.size(); ++k) {
      if (!end_results[k].ok()) throw Error(forked_error(end_results[k], ends->name(k)));
      times.push_back(end_results[k].result);
    }
    interval->finish(report, "vitsim predict --interval", runs, Simulations::times(times));
  } else if (interval)
    for (auto& p : report.points)
      p.notes.push_back(fmt::format("no interval: {} point(s) of the sweep failed (listed below the table)",
                                    report.failed.size()));
  if (opt.price_per_kwh >= 0)
    for (auto& p : report.points) p.energy.price_per_kwh = opt.price_per_kwh;
  if (trace) write_file_atomic(opt.trace_path, write_trace(trace_points, "predicted", trace_notes));
  return report;
}

}  // namespace vitsim::sim
