// `vitsim fit`: its flags are the CLI11 definitions below; their table in docs/fit.md is generated from them.
#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "commands.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/formats/scenario_inputs.hpp"
#include "vitsim/core/results/measured_times.hpp"
#include "vitsim/sim/fit/fit.hpp"

namespace vitsim::app {

namespace {
struct FitArgs {
  std::string scenario, measured, out, format = "table";
  std::vector<std::string> sets, what_ifs, free;
  sim::FitOptions opt;
  bool quiet = false;
};

// The default output: the platform's name with "-fitted", in the current folder.
std::string default_out(const ScenarioFile& f) {
  for (const Scenario& s : expand(f)) {
    const std::filesystem::path p(s.cluster.platform);
    return p.stem().string() + "-fitted.xml";
  }
  return "platform-fitted.xml";
}
}  // namespace

void add_fit(CLI::App& cli, Action& action) {
  auto a = std::make_shared<FitArgs>();
  CLI::App* c = cli.add_subcommand(
      "fit", "fit the platform's ranged figures to measured times of a few configurations (docs/fit.md)");
  add_scenario(c, a->scenario);
  c->add_option("--measured", a->measured,
                "measured times: a report of kind measured (vitsim train) or a CSV of scenario keys and "
                "step_time_s or epoch_time_s");
  c->add_option("--free", a->free,
                "the figures to fit: KEY or KEY@ID (an element's id), comma-separated (default: the most "
                "sensitive at the measured points)")
      ->delimiter(',');
  c->add_option("--out", a->out,
                "the fitted platform file (default: PLATFORM-fitted.xml in the current folder)");
  c->add_option("--calibration", a->opt.predict.calibration, "calibration JSON from `vitsim calibrate`");
  c->add_option("--set", a->sets,
                "override an attribute: KEY=VALUE (applied before each measured row's keys)");
  c->add_option(
      "--what-if", a->what_ifs,
      "a platform edit applied before simulating, KIND:TARGET=VALUE (docs/plan.md \"What-ifs\"; repeatable)");
  c->add_option("--format", a->format, "summary format (default: table)")
      ->check(CLI::IsMember({"table", "json"}));
  c->add_option("--jobs,-j", a->opt.predict.jobs, "simulations at once (default: the cores)")
      ->check(integer(1, 4096));
  c->add_flag("--quiet,-q", a->quiet, "no progress on stderr");
  c->callback([&action, a] {
    action = [a] {
      require_scenario("fit", a->scenario, " --measured FILE");
      if (a->measured.empty()) throw UsageError("fit needs --measured FILE (a measured report or a CSV)");
      ScenarioFile f = read_scenario_file(a->scenario);
      apply_sets(f, a->sets);
      add_what_ifs(f, a->what_ifs);
      if (a->out.empty()) a->out = default_out(f);
      const MeasuredTimes measured = read_measured_times(a->measured);
      std::vector<NamedPath> inputs = scenario_inputs(f);
      inputs.push_back({a->opt.predict.calibration, "--calibration"});
      inputs.push_back({a->measured, "--measured"});
      for (NamedPath& in : measured_inputs(f, measured)) inputs.push_back(std::move(in));  // its rows' files
      check_output_paths({{a->out, "--out"}}, inputs);  // before hours of simulating
      a->opt.free = a->free;
      a->opt.measured_label = a->measured;
      a->opt.predict.progress = !a->quiet;
      sim::FitResult r = sim::fit(f, measured, a->opt);
      r.written = a->out;
      write_file_atomic(a->out, r.platform_text);
      std::string summary = a->format == "json" ? sim::fit_to_json(r) : sim::fit_to_table(r);
      if (a->format == "table")
        summary +=
            fmt::format("wrote {}: predict and plan read it as the platform (--set cluster.platform={})\n",
                        a->out, a->out);
      print_stdout(summary);
      return 0;
    };
  });
}

}  // namespace vitsim::app
