// `vitsim train`: runs a scenario for real, one process per device, started by mpirun (or srun). Its flags
// are the CLI11 definitions below; their table in docs/trainer.md is generated from them.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "commands.hpp"
#include "trace_option.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/formats/scenario_inputs.hpp"
#include "vitsim/real/train.hpp"

namespace vitsim::app {

namespace {
struct TrainArgs {
  std::string scenario;
  std::vector<std::string> sets;
  std::string out, trace, trace_ranks, save_params, fault;
  bool resume = false, quiet = false;
};
}  // namespace

void add_train(CLI::App& cli, Action& action) {
  auto args = std::make_shared<TrainArgs>();
  auto* cmd = cli.add_subcommand(
      "train", "Train the scenario's ViT for real, data-parallel: mpirun -np N vitsim train SCENARIO.xml");
  add_scenario(cmd, args->scenario);
  cmd->add_option("--set", args->sets, "override a scenario attribute: KEY=VALUE (a comma list sweeps)");
  cmd->add_option("--out", args->out, "write the measured report (vitsim.report/1 JSON) here");
  cmd->add_option("--trace", args->trace,
                  "write a Chrome trace (Perfetto, chrome://tracing) of the ranks here");
  add_trace_ranks(cmd, args->trace_ranks);
  cmd->add_flag("--resume", args->resume, "continue from the checkpoint in run.checkpoint_dir");
  cmd->add_option("--save-params", args->save_params,
                  "each rank writes its final parameters (raw fp32) to PREFIX.rank<R>.bin");
  cmd->add_option("--fault", args->fault,
                  "testing: KIND:STEP[:RANK] kills (kill), hangs (hang) or exits (exit) a rank after STEP, "
                  "or makes its loss NaN in STEP (nan)");
  cmd->add_flag("--quiet,-q", args->quiet, "no progress lines");
  cmd->callback([&action, args, cmd] {
    action = [args, cmd]() {
      check_trace_ranks(cmd, args->trace_ranks, args->trace);
      real::ensure_passive_openmp();  // OMP_WAIT_POLICY=PASSIVE by re-exec when unset (real/train.hpp)
      // Outputs that could not be written would be found out only after the training: check them first,
      // and that none of them is an input or another output.
      require_scenario("train", args->scenario);
      ScenarioFile file = read_scenario_file(args->scenario);
      apply_sets(file, args->sets);
      check_output_paths(
          {{args->out, "--out"},
           {args->trace, "--trace"},
           {args->save_params.empty() ? "" : args->save_params + ".rank0.bin", "--save-params"}},
          scenario_inputs(file));
      std::vector<Scenario> points = expand(file);
      real::TrainOptions opt;
      opt.report_path = args->out;
      opt.trace_path = args->trace;
      opt.trace_ranks = args->trace_ranks;
      opt.resume = args->resume;
      opt.save_params = args->save_params;
      if (!args->fault.empty()) opt.fault = real::parse_fault(args->fault);
      opt.verbose = !args->quiet;
      opt.command = "vitsim train " + args->scenario;
      for (const auto& s : args->sets) opt.command += " --set " + s;
      real::train(points, file.name, opt);
      return 0;
    };
  });
}

}  // namespace vitsim::app
