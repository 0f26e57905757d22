#include "vitsim/validate/validate.hpp"

#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/identity.hpp"

extern char** environ;

namespace vitsim::validate {
namespace fs = std::filesystem;

namespace {

bool matches(const ReportPoint& a, const ReportPoint& b) {
  if (a.nodes != b.nodes || a.gpus != b.gpus || a.micro_batch != b.micro_batch ||
      a.grad_accum != b.grad_accum)
    return false;
  for (const auto& [k, v] : a.params) {
    auto it = b.params.find(k);
    if (it != b.params.end() && it->second != v) return false;
  }
  return true;
}

std::vector<std::pair<std::string, double>> metrics_of(const ReportPoint& p) {
  const Breakdown& b = p.breakdown_s;
  return {{"step_time", p.step_time_s.mean},
          {"epoch_time", p.epoch_time_s},
          {"data", b.data},
          {"h2d", b.h2d},
          {"compute_fwd", b.compute_fwd},
          {"compute_bwd", b.compute_bwd},
          {"optimizer", b.optimizer},
          {"comm_total", b.comm_total},
          // The trainer's exposed communication holds its wait for the slowest rank; the simulator keeps
          // that apart (straggler_wait, docs/model.md "Stragglers"): compared together.
          {"comm_exposed", b.comm_exposed + b.straggler_wait}};
}

std::string describe(const std::map<std::string, std::string>& params) {
  std::string out;
  for (const auto& [k, v] : params) out += (out.empty() ? "" : " ") + k + "=" + v;
  return out;
}

}  // namespace

Validation compare(const Report& predicted, const Report& measured, double tolerance, double min_share) {
  if (measured.points.empty()) throw Error("the measured report has no points");
  Validation v;
  v.scenario = measured.scenario.empty() ? predicted.scenario : measured.scenario;
  v.tolerance = tolerance;
  v.scenario_id = report_scenario_id(predicted);
  const std::string from = measured.origin.empty() ? std::string("the measured report") : measured.origin;
  std::map<std::string, std::pair<double, int>> sums;
  std::map<std::pair<std::map<std::string, std::string>, std::string>, size_t>
      seen;  // (params, identity) -> index
  for (size_t mi = 0; mi < measured.points.size(); ++mi) {
    const ReportPoint& m = measured.points[mi];
    auto [first, fresh] = seen.emplace(std::make_pair(m.params, m.scenario_id), mi);
    if (!fresh)
      throw Error(
          fmt::format("{}: /points/{}: a second measurement of point {} (also /points/{}): which one to "
                      "compare is ambiguous; keep one",
                      from, mi, describe(m.params), first->second));
    auto it = std::find_if(predicted.points.begin(), predicted.points.end(),
                           [&](const ReportPoint& p) { return matches(p, m); });
    if (it == predicted.points.end())
      throw Error(fmt::format("measured point {} has no predicted point with the same parameters",
                              describe(m.params)));
    // The same parameters are not the same scenario: the identity covers the model, dataset, cluster,
    // training and parallelism settings (core/formats/identity.hpp).
    if (m.scenario_id != it->scenario_id)
      throw Error(fmt::format(
          "{}: /points/{}/scenario_id: the run measured another scenario than '{}' at point {} ({} "
          "measured, {} predicted): measure it with this scenario file and the same --set values",
          from, mi, predicted.scenario.empty() ? std::string("the scenario") : predicted.scenario,
          describe(m.params), m.scenario_id.empty() ? "none" : m.scenario_id.substr(0, 19),
          it->scenario_id.empty() ? "none" : it->scenario_id.substr(0, 19)));
    if (m.step_time_s.p50 > 0 &&
        (m.step_time_s.p95 / m.step_time_s.p50 - 1 > v.noise || v.noise_point.empty())) {
      v.noise = m.step_time_s.p95 / m.step_time_s.p50 - 1;
      v.noise_point = describe(m.params);
    }
    PointComparison pc;
    pc.params = m.params;
    auto pm = metrics_of(*it);
    auto mm = metrics_of(m);
    const double step = m.step_time_s.mean;
    for (size_t i = 0; i < pm.size(); ++i) {
      MetricError e{pm[i].first, pm[i].second, mm[i].second};
      const bool whole = e.metric == "step_time" || e.metric == "epoch_time";
      e.scored = e.measured > 0 && (whole || e.measured >= min_share * step);
      if (e.scored) {
        e.rel_error = (e.predicted - e.measured) / e.measured;
        auto& s = sums[e.metric];
        s.first += std::fabs(e.rel_error);
        s.second += 1;
      }
      pc.metrics.push_back(e);
    }
    v.points.push_back(pc);
  }
  for (const auto& [k, s] : sums) v.mape[k] = s.first / s.second;
  // A MAPE equal to the tolerance passes, whatever the last bit of the arithmetic says.
  v.pass = v.mape.count("step_time") && v.mape.at("step_time") <= tolerance * (1 + 1e-12);
  return v;
}

std::string to_table(const Validation& v) {
  std::string out = fmt::format("vitsim validation: {}\n", v.scenario);
  for (const auto& p : v.points) {
    out += fmt::format("\npoint: {}\n", describe(p.params));
    out += fmt::format("  {:<14}{:>14}{:>14}{:>10}\n", "metric", "predicted", "measured", "error");
    for (const auto& e : p.metrics)
      out += fmt::format("  {:<14}{:>14}{:>14}{:>10}\n", e.metric, units::format_time(e.predicted),
                         units::format_time(e.measured), e.scored ? signed_percent(e.rel_error, 1) : "-");
  }
  out += "\nMAPE over points:";
  for (const auto& [k, m] : v.mape) out += fmt::format(" {} {:.1f}%", k, 100 * m);
  out += fmt::format("\nthe run's noise: step times within {:.1f}% of their median (p95, point {})",
                     100 * v.noise, v.noise_point);
  out += fmt::format("\nstep-time MAPE {} the tolerance of {:.1f}%: {}\n", v.pass ? "is within" : "exceeds",
                     100 * v.tolerance, v.pass ? "PASS" : "FAIL");
  if (!v.causes.empty())
    out += v.causes.size() == 1 ? "likely cause:\n" : "likely causes, most likely first:\n";
  for (const auto& c : v.causes) out += fmt::format("  - {}\n", c.text);
  return out;
}

std::string to_json(const Validation& v) {
  return validation_to_json(v);
}

Report run_measured(const ScenarioFile& file, const std::vector<Scenario>& points, const RunOptions& opt) {
  const auto keys = scenario_keys();
  TempDir tmp("vitsim-validate-");
  const fs::path dir = tmp.path();
  Report all;
  all.scenario = file.name;
  all.source = "measured";
  for (size_t i = 0; i < points.size(); ++i) {
    const Scenario& s = points[i];
    const std::string out = (dir / fmt::format("point{}.json", i)).string();
    std::vector<std::string> argv{opt.mpirun};
    argv.insert(argv.end(), opt.mpirun_args.begin(), opt.mpirun_args.end());
    for (const std::string& a :
         {std::string("-np"), std::to_string(s.ranks()), opt.vitsim_exe, std::string("train"), file.path})
      argv.push_back(a);
    for (const auto& set : opt.sets) argv.insert(argv.end(), {"--set", set});
    for (const auto& [k, val] : s.params)
      if (std::find(keys.begin(), keys.end(), k) != keys.end())
        argv.insert(argv.end(), {"--set", k + "=" + val});
    argv.insert(argv.end(), {"--out", out});
    if (opt.quiet) argv.push_back("--quiet");
    std::string shown;
    for (const auto& a : argv) shown += (shown.empty() ? "" : " ") + a;
    if (!opt.quiet) fmt::print(stderr, "vitsim validate: point {}/{}: {}\n", i + 1, points.size(), shown);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawnp(&pid, opt.mpirun.c_str(), nullptr, nullptr, cargv.data(), environ) != 0)
      throw Error(fmt::format("cannot start '{}' (is OpenMPI installed?)", opt.mpirun));
    register_child(pid);  // Ctrl-C / SIGTERM end the run (core/base/io.hpp)
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    unregister_child(pid);
    stop_if_interrupted();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !fs::exists(out)) {
      throw Error(fmt::format(
          "the real run of point {} failed ({}): {}", i + 1,
          WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status)) : "killed", shown));
    }
    Report one = report_from_json(read_file(out), out);
    require_report_kind(one, "measured", "validate --run");
    for (auto& p : one.points) all.points.push_back(std::move(p));
    if (all.provenance.empty()) all.provenance = one.provenance;
  }
  return all;
}

}  // namespace vitsim::validate
