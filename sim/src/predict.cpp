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
#include "vitsim/core/whatif.hpp"
#include "vitsim/sim/process_pool.hpp"
#include "vitsim/sim/simulate.hpp"

namespace vitsim::sim {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

json trace_to_json(const std::vector<TraceEvent>& events, int pid) {
  json out = json::array();
  for (const auto& e : events)
    out.push_back({{"name", e.name},
                   {"cat", e.cat},
                   {"ph", "X"},
                   {"pid", pid},
                   {"tid", e.rank * 2 + e.track},
                   {"ts", e.start_s * 1e6},
                   {"dur", e.dur_s * 1e6}});
  return out;
}

// What a child process hands back: the point (as a one-point report) or the error text.
void run_child(const Scenario& s, const PlatformFacts& facts, const Calibration* calib, bool trace,
               const std::string& out_path, int index) {
  json j;
  try {
    SimResult r = simulate_point(s, facts, calib, trace);
    Report one;
    one.points.push_back(r.point);
    j["report"] = report_to_json(one);
    if (trace) j["trace"] = trace_to_json(r.trace, index);
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
  const int jobs = opt.jobs > 0 ? opt.jobs : default_jobs();

  TempDir tmp;
  auto out_of = [&](size_t i) { return fmt::format("{}/point{}.json", tmp.path(), i); };
  std::vector<std::string> failures;
  {
    ProgressLine progress("vitsim predict", opt.progress);
    failures = run_forked(
        points.size(), jobs,
        [&](size_t i) {
          run_child(points[i], platforms.at(points[i].cluster.platform), calib.get(), trace, out_of(i), static_cast<int>(i));
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
  json trace_events = json::array();
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
      trace_events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", i},
                              {"args", {{"name", fmt::format("point {} {}", i + 1, json(points[i].params).dump())}}}});
      for (int r = 0; r < points[i].ranks(); ++r)
        for (int track = 0; track < 2; ++track)
          trace_events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", i}, {"tid", r * 2 + track},
                                  {"args", {{"name", fmt::format("rank {} {}", r, track ? "comm" : "compute")}}}});
      for (auto& e : j["trace"]) trace_events.push_back(std::move(e));
    }
  }
  fill_scaling_efficiency(report);
  if (opt.price_per_kwh >= 0)
    for (auto& p : report.points) p.energy.price_per_kwh = opt.price_per_kwh;
  if (trace) write_file_atomic(opt.trace_path, json{{"traceEvents", trace_events}, {"displayTimeUnit", "ms"}}.dump() + "\n");
  return report;
}

}  // namespace vitsim::sim
