// `vitsim train`: runs a scenario for real, one process per device, started by mpirun (or srun). Its flags
// are the CLI11 definitions below (their table in docs/trainer.md is generated from them); what runs is
// run_train (torch/train_command.hpp: torch/run_train.cpp, or torch/exec.cpp in the full build's vitsim).
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "torch/train_command.hpp"
#include "trace_option.hpp"

namespace vitsim::app {

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
  cmd->callback([&action, args, cmd] { action = [args, cmd] { return run_train(*args, cmd); }; });
}

}  // namespace vitsim::app
