#include "vitsim/sim/predict.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/calibration.hpp"
#include "vitsim/core/formats/identity.hpp"
#include "vitsim/core/formats/trace.hpp"
#include "vitsim/core/formats/whatif.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/sim/process_pool.hpp"
#include "vitsim/sim/simulate.hpp"

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

// What a child process hands back: the point as a one-point report, and its trace when asked.
json point_result(PreparedEngine& engine, const PointSetup& setup, const Scenario& s,
                  const PlatformFacts& facts, const Calibration* calib, bool trace,
                  const std::vector<int>& trace_ranks) {
  SimResult r = simulate_prepared(engine, setup, s, facts, calib, trace, trace_ranks);
  Report one;
  one.points.push_back(r.point);
  json j;
  j["report"] = report_to_json(one);
  if (trace) {
    j["trace"] = trace_to_json(r.trace);
    j["trace_truncated"] = r.trace_truncated;
  }
  return j;
}

// Which ranks each point traces: --trace-ranks (core/formats/trace.hpp), else the first 64 of each point.
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
  std::string shas;
  for (const auto& [path, facts] : platforms.all())
    shas += (shas.empty() ? "" : ",") + sha256_hex(read_file(path));
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
                       const TraceSelection& sel, const RankPlacement& place,
                       std::vector<std::string>& notes) {
  TracePoint tp;
  if (points.size() > 1) tp.label = fmt::format("point {} {}", i + 1, json(points[i].params).dump());
  tp.ranks = sel.ranks[i];
  tp.hosts = place.hosts;
  tp.events = trace_from_json(result["trace"]);
  if (result.value("trace_truncated", false))
    notes.push_back(
        fmt::format("point {}: some ranks reached {} events; their later events are not in the trace", i + 1,
                    kTraceEventsPerRank));
  return tp;
}

}  // namespace

Report predict(const ScenarioFile& file, const PredictOptions& opt) {
  std::vector<Scenario> points = expand(file);
  EditedPlatforms edited;  // what-ifs: each point simulates an edited copy of its platform
  edited.apply(points);
  PlatformCache platforms;
  std::vector<PointSetup> setups;  // each point's placement and collective, inherited by its child
  for (const auto& s : points) {
    check_epoch(s);
    setups.push_back(check_point(s, platforms.of(s)));
  }
  std::unique_ptr<Calibration> calib;
  if (!opt.calibration.empty()) calib = std::make_unique<Calibration>(read_calibration(opt.calibration));
  const bool trace = !opt.trace_path.empty();
  const TraceSelection sel = select_traced(points, opt);
  ForkedPoints how;
  how.who = "vitsim predict";
  how.progress = opt.progress;
  how.jobs = opt.jobs;
  // The points of one platform file fork from one zygote that loaded it (process_pool.hpp).
  std::unique_ptr<PreparedEngine> engine;  // in a zygote and its children
  how.group_of = [&](size_t i) { return points[i].cluster.platform; };
  how.prepare = [&](size_t i) { engine = prepare_engine(points[i], platforms.of(points[i])); };
  auto name_of = [&](size_t i) { return fmt::format("point {} ({})", i + 1, json(points[i].params).dump()); };
  const std::vector<ForkedResult> results = gather_forked_each(points.size(), how, [&](size_t i) {
    return point_result(*engine, setups[i], points[i], platforms.of(points[i]), calib.get(), trace,
                        sel.ranks[i]);
  });
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
        report_from_json(result["report"].get<std::string>(), fmt::format("point {}", i + 1)).points.at(0));
    if (trace) trace_points.push_back(trace_point(result, i, points, sel, setups[i].place, trace_notes));
  }
  if (const std::string note = calib ? unused_calibration_note(*calib) : ""; !note.empty())
    for (auto& p : report.points) p.notes.push_back(note);
  fill_scaling_efficiency(report);
  if (opt.price_per_kwh >= 0)
    for (auto& p : report.points) p.energy.price_per_kwh = opt.price_per_kwh;
  if (trace) write_file_atomic(opt.trace_path, write_trace(trace_points, "predicted", trace_notes));
  return report;
}

}  // namespace vitsim::sim
