#pragma once
// `vitsim calibrate`, as torch/train_command.hpp says: cmd_calibrate.cpp parses and runs the imports (no
// Torch); a measurement is run_calibrate, in torch/run_calibrate.cpp (vitsim-torch) or torch/exec.cpp (the
// full build's vitsim). calibrate.hpp is core's types only: no Torch.
#include <string>
#include <vector>

#include "commands.hpp"
#include "vitsim/calibrate/calibrate.hpp"

namespace vitsim::app {

struct CalibrateArgs {
  std::string scenario, peak_flops, mem_bw, fit_max;
  std::string from_nccl_tests, from_torch_profile, from_gemm_table;  // imports: no measurement
  std::vector<std::string> sets, sizes, device_types;
  calibrate::Options opt;
  bool quiet = false;
  bool no_op_model = false, no_step = false;
};

// A parsed `calibrate` that measures (`cmd`: its subcommand): its exit status.
int run_calibrate(const CalibrateArgs& args, const CLI::App* cmd);

// The command as typed (for the provenance), from /proc/self/cmdline: the same in vitsim-torch, which
// vitsim starts with its own arguments.
std::string command_line();

}  // namespace vitsim::app
