#pragma once
// `vitsim train` and `vitsim calibrate`: their flags (cmd_train.cpp, cmd_calibrate.cpp) are compiled into
// every executable that offers them, so that `vitsim --help`, `vitsim train --help`, "did you mean" and the
// command-line errors come from one definition; what runs after the parse is chosen at link time:
// - in `vitsim-torch` (and the trainer-only `vitsim`): torch/run_train.cpp and torch/run_calibrate.cpp, the
// real work
//   with LibTorch and MPI;
// - in the full build's `vitsim`: torch/exec.cpp, execv() of `vitsim-torch` with the same arguments, so
//   that no other command of `vitsim` loads LibTorch or MPI (issue 35 item 7, docs/architecture.md).
// No Torch header here, nor in torch/calibrate_command.hpp.
#include <string>
#include <vector>

#include "commands.hpp"

namespace vitsim::app {

struct TrainArgs {
  std::string scenario;
  std::vector<std::string> sets;
  std::string out, trace, trace_ranks, save_params, fault;
  bool resume = false, quiet = false;
};

// A parsed `train` (`cmd`: its subcommand, for the flags' counts): its exit status.
int run_train(const TrainArgs& args, const CLI::App* cmd);

}  // namespace vitsim::app
