// `vitsim validate`: its flags are the CLI11 definitions below; their table in docs/calibrate-validate.md is
// generated from them.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <memory>

#include "commands.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/formats/scenario_inputs.hpp"
#include "vitsim/sim/predict/predict.hpp"
#include "vitsim/validate/validate.hpp"

namespace vitsim::app {

namespace {
struct ValidateArgs {
  std::string scenario, calibration, measured, format = "table", out;
  std::vector<std::string> sets, mpirun_args;
  bool run = false, quiet = false;
  double tolerance = -1;
  int jobs = 0;
};

// `name` as posix_spawnp finds it: a path with a '/' as it is, else the first executable in $PATH.
bool on_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t a = 0; a <= dirs.size();) {
    size_t b = dirs.find(':', a);
    if (b == std::string::npos) b = dirs.size();
    const std::string dir = b > a ? dirs.substr(a, b - a) : ".";
    if (access((dir + "/" + name).c_str(), X_OK) == 0) return true;
    a = b + 1;
  }
  return false;
}

// --run launches `mpirun ... vitsim train`: refused at once, before any simulation or launch, where it could
// not work (issue 28: a build without LibTorch launched mpirun and failed three times before saying why).
void check_can_run() {
#ifndef VITSIM_HAVE_REAL
  throw UsageError(fmt::format(
      "validate --run trains with this vitsim, which was built without LibTorch (no `vitsim train`): train "
      "with a build that has it (`mpirun -np N vitsim train SCENARIO --out measured.json`) and pass "
      "--measured measured.json, or rebuild with {}",
      kRebuildWithTorch));
#else
  // Each rank's `vitsim train` runs in vitsim-torch (app/torch/exec.cpp): missing, every rank would fail.
  std::string why;
  if (torch_executable(&why).empty())
    throw UsageError(fmt::format("validate --run trains with {}, which is missing: rebuild with {}", why,
                                 kRebuildWithTorch));
#endif
  if (!on_path("mpirun"))
    throw UsageError(
        "validate --run launches mpirun, which is not on PATH: install Open MPI (bash scripts/setup.sh), or "
        "train elsewhere and pass --measured REPORT.json");
}

std::string self_exe() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw Error("cannot find the vitsim executable (/proc/self/exe)");
  return std::string(buf, static_cast<size_t>(n));
}
}  // namespace

void add_validate(CLI::App& cli, Action& action) {
  auto a = std::make_shared<ValidateArgs>();
  CLI::App* c = cli.add_subcommand("validate", "predict a scenario and compare it with measured runs");
  add_scenario(c, a->scenario);
  c->add_option("--calibration", a->calibration, "calibration JSON from `vitsim calibrate`");
  auto* m =
      c->add_option("--measured", a->measured, "a report written by `vitsim train` (here or elsewhere)");
  auto* r = c->add_flag("--run", a->run, "run `mpirun ... vitsim train` on every point now");
  m->excludes(r);
  c->add_option("--set", a->sets, "override an attribute: KEY=VALUE, or KEY=V1,V2,... to sweep");
  c->add_option("--format", a->format, "output format (default: table)")
      ->check(CLI::IsMember({"table", "json"}));
  c->add_option("--out", a->out, "write the comparison to this file instead of stdout");
  c->add_option("--tolerance", a->tolerance,
                "step-time MAPE allowed (default: the scenario's validation.tolerance)")
      ->check(number(units::non_negative()));
  c->add_option("--mpirun-arg", a->mpirun_args,
                "an extra argument for mpirun (repeat it), e.g. --mpirun-arg=--hostfile --mpirun-arg=hosts");
  c->add_option("--jobs,-j", a->jobs, "points simulated at once (default: the cores)")
      ->check(integer(1, 4096));
  c->add_flag("--quiet,-q", a->quiet, "no progress on stderr");
  c->callback([&action, a] {
    action = [a] {
      require_scenario("validate", a->scenario, " (--measured REPORT.json | --run)");
      if (!a->run && a->measured.empty()) throw UsageError("validate needs --measured REPORT.json or --run");
      ScenarioFile f = read_scenario_file(a->scenario);
      apply_sets(f, a->sets);  // the command line's own mistakes first
      if (a->run) check_can_run();
      std::vector<NamedPath> inputs = scenario_inputs(f);
      inputs.push_back({a->calibration, "--calibration"});
      inputs.push_back({a->measured, "--measured"});
      check_output_paths({{a->out, "--out"}}, inputs);  // before predicting and running
      const std::vector<Scenario> points = expand(f);
      Report measured;
      if (!a->run) {  // read and checked before simulating: a wrong file fails at once
        measured = report_from_json(read_input_file(a->measured, "measured report"), a->measured);
        require_report_kind(measured, "measured", "validate --measured");
      }
      sim::PredictOptions po;
      po.calibration = a->calibration;
      po.jobs = a->jobs;
      po.progress = !a->quiet;
      Report predicted = sim::predict(f, po);
      if (!predicted.failed.empty())  // a point without a prediction cannot be compared
        throw Error(fmt::format("point {}: no prediction to compare: {}", predicted.failed[0].point,
                                predicted.failed[0].reason));
      if (a->run) {
        validate::RunOptions ro;
        ro.vitsim_exe = self_exe();
        if (geteuid() == 0) ro.mpirun_args.push_back("--allow-run-as-root");
        ro.mpirun_args.push_back("--oversubscribe");
        ro.mpirun_args.insert(ro.mpirun_args.end(), a->mpirun_args.begin(), a->mpirun_args.end());
        ro.sets = a->sets;
        ro.quiet = a->quiet;
        measured = validate::run_measured(f, points, ro);
      }
      const double tol = a->tolerance >= 0 ? a->tolerance : points.front().validation.tolerance;
      validate::Validation v = validate::compare(predicted, measured, tol);
      validate::DiagnoseContext dc;
      dc.scenario = a->scenario;
      dc.calibration = a->calibration;
      for (const auto& p : points) dc.ranks = std::max(dc.ranks, p.ranks());
      v.causes = validate::diagnose(v, predicted, dc);
      const std::string text = a->format == "json" ? validate::to_json(v) : validate::to_table(v);
      write_output(a->out, text);
      return v.pass ? 0 : 4;  // 4: ran fine, but the error exceeds the tolerance
    };
  });
}

}  // namespace vitsim::app
