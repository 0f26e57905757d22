// `vitsim train`'s work, in `vitsim-torch` and the trainer-only `vitsim` (torch/train_command.hpp): the
// scenario trained for real through real/ (LibTorch, MPI).
#include <string>
#include <vector>

#include "torch/train_command.hpp"
#include "trace_option.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/formats/scenario_inputs.hpp"
#include "vitsim/real/train.hpp"

namespace vitsim::app {

int run_train(const TrainArgs& a, const CLI::App* cmd) {
  check_trace_ranks(cmd, a.trace_ranks, a.trace);
  real::ensure_passive_openmp();  // OMP_WAIT_POLICY=PASSIVE by re-exec when unset (real/train.hpp)
  // Outputs that could not be written would be found out only after the training: check them first,
  // and that none of them is an input or another output.
  require_scenario("train", a.scenario);
  ScenarioFile file = read_scenario_file(a.scenario);
  apply_sets(file, a.sets);
  check_output_paths({{a.out, "--out"},
                      {a.trace, "--trace"},
                      {a.save_params.empty() ? "" : a.save_params + ".rank0.bin", "--save-params"}},
                     scenario_inputs(file));
  std::vector<Scenario> points = expand(file);
  real::TrainOptions opt;
  opt.report_path = a.out;
  opt.trace_path = a.trace;
  opt.trace_ranks = a.trace_ranks;
  opt.resume = a.resume;
  opt.save_params = a.save_params;
  if (!a.fault.empty()) opt.fault = real::parse_fault(a.fault);
  opt.verbose = !a.quiet;
  opt.command = "vitsim train " + a.scenario;
  for (const auto& s : a.sets) opt.command += " --set " + s;
  real::train(points, file.name, opt);
  return 0;
}

}  // namespace vitsim::app
