// `vitsim predict`: its flags are the CLI11 definitions below; their table in docs/predict.md is generated
// from them.
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "interval_option.hpp"
#include "trace_option.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/formats/scenario_inputs.hpp"
#include "vitsim/core/results/measured_times.hpp"
#include "vitsim/core/results/report.hpp"
#include "vitsim/sim/compute/registries.hpp"
#include "vitsim/sim/predict/predict.hpp"

namespace vitsim::app {

namespace {
struct PredictArgs {
  std::string scenario;
  std::vector<std::string> sets;
  std::vector<std::string> what_ifs;
  std::string format = "table";
  std::string out;
  sim::PredictOptions opt;
  bool quiet = false;
  IntervalFlags interval;
  std::string list;  // --list: a registry's name, "" for the lists themselves
};
}  // namespace

void add_predict(CLI::App& cli, Action& action) {
  auto args = std::make_shared<PredictArgs>();
  CLI::App* c = cli.add_subcommand("predict", "simulate every point of a scenario and print the prediction");
  add_scenario(c, args->scenario);
  c->add_option("--calibration", args->opt.calibration, "calibration JSON from `vitsim calibrate`");
  c->add_option("--set", args->sets, "override an attribute: KEY=VALUE, or KEY=V1,V2,... to sweep");
  c->add_option(
      "--what-if", args->what_ifs,
      "a platform edit applied before simulating, KIND:TARGET=VALUE (docs/plan.md \"What-ifs\"; repeatable)");
  c->add_option("--format", args->format, "output format (default: table)")
      ->check(CLI::IsMember({"table", "json", "csv"}));
  c->add_option("--out", args->out, "write the output to this file instead of stdout");
  c->add_option("--trace", args->opt.trace_path,
                "write a Chrome trace (Perfetto, chrome://tracing) to this file");
  add_trace_ranks(c, args->opt.trace_ranks);
  c->add_option("--jobs,-j", args->opt.jobs, "points simulated at once (default: the cores)")
      ->check(integer(1, 4096));
  c->add_option("--price-per-kwh", args->opt.price_per_kwh,
                "price of one kWh for the energy cost (instead of the platform's price_per_kwh)")
      ->check(number(units::non_negative()));
  c->add_option("--epochs", args->opt.epochs,
                "epochs of the closing summary's whole run (default: the scenario's training.epochs)")
      ->check(integer(1, 1 << 20));
  add_interval_options(c, args->interval, args->opt.interval, "per point,");
  c->add_flag("--quiet,-q", args->quiet, "no progress line on stderr");
  CLI::Option* list = c->add_option("--list", args->list,
                                    "print a registry instead of predicting (no scenario): collectives, "
                                    "compute-models, frameworks; no value: the lists")
                          ->expected(0, 1);
  c->callback([&action, args, c, list] {
    action = [args, c, list] {
      if (list->count() > 0) {  // a registry, not a prediction: no scenario
        std::string text;
        try {
          text = sim::registry_listing(args->list, args->format == "json");
        } catch (const Error& e) {
          throw UsageError(std::string("--list: ") + e.what());
        }
        write_output(args->out, text);
        return 0;
      }
      check_runs_took_scenario("predict", args->scenario, args->opt.interval);
      require_scenario("predict", args->scenario);
      check_trace_ranks(c, args->opt.trace_ranks, args->opt.trace_path);
      ScenarioFile f = read_scenario_file(args->scenario);
      apply_sets(f, args->sets);
      add_what_ifs(f, args->what_ifs);
      // Before any work: outputs writable, none of them an input or another output.
      std::vector<NamedPath> inputs = scenario_inputs(f);
      inputs.push_back({args->opt.calibration, "--calibration"});
      for (const auto& run : args->opt.interval.runs) {
        inputs.push_back({run, "--runs"});
        for (NamedPath& in : measured_inputs(f, run)) inputs.push_back(std::move(in));  // its rows' files
      }
      check_output_paths({{args->out, "--out"}, {args->opt.trace_path, "--trace"}}, inputs);
      args->opt.progress = !args->quiet;
      resolve_interval(args->interval, args->opt.interval);
      Report r = sim::predict(f, args->opt);
      std::string text = args->format == "json"  ? report_to_json(r)
                         : args->format == "csv" ? report_to_csv(r)
                                                 : report_to_table(r);
      write_output(args->out, text);
      const std::string first =
          r.failed.empty() ? ""
                           : fmt::format("point {} {}: {}", r.failed[0].point,
                                         nlohmann::json(r.failed[0].params).dump(), r.failed[0].reason);
      return some_points_failed("predict", r.failed.size(), r.failed.size() + r.points.size(), first, 0);
    };
  });
}

}  // namespace vitsim::app
