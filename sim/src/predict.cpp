#include "vitsim/sim/predict.hpp"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "vitsim/core/calibration.hpp"
#include "vitsim/core/identity.hpp"
#include "vitsim/core/io.hpp"
#include "vitsim/core/platform.hpp"
#include "vitsim/core/trace.hpp"
#include "vitsim/core/whatif.hpp"
#include "vitsim/sim/process_pool.hpp"
#include "vitsim/sim/simulate.hpp"

namespace vitsim::sim {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A child's trace events for its parent, in full precision: [rank, track, name, start_s, dur_s, args].
json trace_to_json(const std::vector<TraceEvent>& events) {
  json out = json::array();
  for (const auto& e : events) out.push_back({e.rank, static_cast<int>(e.track), e.name, e.start_s, e.dur_s, e.args});
  return out;
}
std::vector<TraceEvent> trace_from_json(const json& j) {
  std::vector<TraceEvent> out;
  out.reserve(j.size());
  for (const auto& e : j)
    out.push_back({e[0].get<int>(), static_cast<TraceTrack>(e[1].get<int>()), e[2].get<std::string>(), e[3].get<double>(),
                   e[4].get<double>(), e[5].get<TraceArgs>()});
  return out;
}

// What a child process hands back: the point (as a one-point report) or the error text.
void run_child(const Scenario& s, const PlatformFacts& facts, const Calibration* calib, bool trace,
               const std::vector<int>& trace_ranks, const std::string& out_path) {
  json j;
  try {
    SimResult r = simulate_point(s, facts, calib, trace, trace_ranks);
    Report one;
    one.points.push_back(r.point);
    j["report"] = report_to_json(one);
    if (trace) {
      j["trace"] = trace_to_json(r.trace);
      j["trace_truncated"] = r.trace_truncated;
    }
  } catch (const std::exception& e) {
    j["error"] = e.what();
  }
  finish_child(out_path, j.dump());
}


}  // namespace

Report predict(const ScenarioFile& file, const PredictOptions& opt) {
  std::vector<Scenario> points = expand(file);
  EditedPlatforms edited;  // what-ifs: each point simulates an edited copy of its platform
  edited.apply(points);
  std::map<std::string, PlatformFacts> platforms;
  for (const auto& s : points) {
    if (!platforms.count(s.cluster.platform)) {
      if (!fs::exists(s.cluster.platform))
        throw Error(s.origin_of("cluster.platform"), fmt::format("cluster.platform: no such file '{}'", s.cluster.platform));
      platforms.emplace(s.cluster.platform, read_platform_facts(s.cluster.platform));
    }
    check_point(s, platforms.at(s.cluster.platform));
  }
  std::unique_ptr<Calibration> calib;
  if (!opt.calibration.empty()) calib = std::make_unique<Calibration>(read_calibration(opt.calibration));
  const bool trace = !opt.trace_path.empty();
  // --trace-ranks (core/trace.hpp): the listed ranks, else the first 64 of each point.
  std::unique_ptr<RankList> rank_list;
  int most_ranks = 0;
  for (const auto& s : points) most_ranks = std::max(most_ranks, s.ranks());
  if (!opt.trace_ranks.empty()) {
    rank_list = std::make_unique<RankList>(parse_rank_list(opt.trace_ranks));
    if (rank_list->max() >= most_ranks)
      throw Error(fmt::format("--trace-ranks '{}': rank {} is beyond the scenario's {} ranks (0-{})", opt.trace_ranks,
                              rank_list->max(), most_ranks, most_ranks - 1));
  }
  std::vector<std::vector<int>> trace_ranks(points.size());
  if (trace)
    for (size_t i = 0; i < points.size(); ++i) trace_ranks[i] = traced_ranks(rank_list.get(), points[i].ranks());
  const int jobs = opt.jobs > 0 ? opt.jobs : default_jobs();

  TempDir tmp;
  auto out_of = [&](size_t i) { return fmt::format("{}/point{}.json", tmp.path(), i); };
  std::vector<std::string> failures;
  {
    ProgressLine progress("vitsim predict", opt.progress);
    failures = run_forked(
        points.size(), jobs,
        [&](size_t i) {
          run_child(points[i], platforms.at(points[i].cluster.platform), calib.get(), trace, trace_ranks[i], out_of(i));
        },
        [&](size_t done) { progress.update(done, points.size()); });
  }

  Report report;
  report.scenario = file.name;
  report.source = "simulated";
  report.provenance["scenario_file"] = file.path;
  report.provenance["generator"] = fmt::format("vitsim {} (SimGrid S4U)", vitsim_version());
  {  // the platforms as simulated (what-ifs applied), by content
    std::string shas;
    for (const auto& [path, facts] : platforms) shas += (shas.empty() ? "" : ",") + sha256_hex(read_file(path));
    report.provenance["platform_sha256"] = shas;
  }
  if (calib) report.provenance["calibration"] = opt.calibration;
  if (!points.empty() && !points.front().what_ifs.empty()) {
    std::string w;
    for (const auto& e : points.front().what_ifs) w += (w.empty() ? "" : "; ") + e;
    report.provenance["what_ifs"] = w;
  }
  std::vector<TracePoint> trace_points;
  std::vector<std::string> trace_notes;
  if (const std::string note = trace_ranks_note(rank_list.get(), most_ranks); trace && !note.empty()) {
    trace_notes.push_back(note);
    if (opt.progress) fmt::print(stderr, "vitsim: note: {}\n", note);
  }
  for (size_t i = 0; i < points.size(); ++i) {
    const std::string out = out_of(i);
    if (!failures[i].empty() || !fs::exists(out))
      throw Error(fmt::format("point {} ({}): {}", i + 1, json(points[i].params).dump(),
                              failures[i].empty() ? "no result" : failures[i]));
    json j = json::parse(read_file(out));
    if (j.contains("error")) throw Error(j["error"].get<std::string>());
    Report one = report_from_json(j["report"].get<std::string>(), out);
    report.points.push_back(one.points.at(0));
    if (trace) {
      TracePoint tp;
      if (points.size() > 1) tp.label = fmt::format("point {} {}", i + 1, json(points[i].params).dump());
      tp.ranks = trace_ranks[i];
      tp.hosts = place_ranks(points[i], platforms.at(points[i].cluster.platform)).hosts;
      tp.events = trace_from_json(j["trace"]);
      if (j.value("trace_truncated", false))
        trace_notes.push_back(fmt::format("point {}: some ranks reached {} events; their later events are not in the trace",
                                          i + 1, kTraceEventsPerRank));
      trace_points.push_back(std::move(tp));
    }
  }
  fill_scaling_efficiency(report);
  if (opt.price_per_kwh >= 0)
    for (auto& p : report.points) p.energy.price_per_kwh = opt.price_per_kwh;
  if (trace) write_file_atomic(opt.trace_path, write_trace(trace_points, "predicted", trace_notes));
  return report;
}

}  // namespace vitsim::sim
