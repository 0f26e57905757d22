// `vitsim calibrate`'s measurement, in `vitsim-torch` (torch/calibrate_command.hpp): the phases through
// calibrate/ and real/ (LibTorch, MPI).
#include <fmt/format.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "torch/calibrate_command.hpp"
#include "vitsim/calibrate/calibrate.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/formats/scenario_inputs.hpp"
#include "vitsim/core/model/memory.hpp"
#include "vitsim/real/train.hpp"

namespace vitsim::app {

namespace {
// A micro-batch the machine cannot hold ends in the allocator's exception or a LibTorch backtrace after
// minutes of measuring: refuse it first, by the core memory model (one rank's weights, gradients,
// optimizer state and activations) against this machine's physical memory.
void check_micro_batches(const std::vector<int>& mbs, const Scenario& s) {
  const Workload w = build_workload(s.model);
  const double ram = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  for (int mb : mbs) {
    if (mb < 1 || mb > (1 << 24))  // training.micro_batch's range
      throw Error(fmt::format("--micro-batches: {} is out of range (expected 1 .. 16777216)", mb));
    MemoryInputs mi;
    mi.micro_batch = mb;
    mi.precision = s.training.precision;
    mi.optimizer = s.training.optimizer;
    const double need = memory_per_gpu(w, mi).total();
    if (ram > 0 && need > ram)
      throw Error(
          fmt::format("--micro-batches: a micro-batch of {} needs about {} for one rank (core memory model); "
                      "this machine has {}",
                      mb, units::format_bytes(need), units::format_bytes(ram)));
  }
}
}  // namespace

int run_calibrate(const CalibrateArgs& a, const CLI::App*) {
  real::ensure_passive_openmp();  // OMP_WAIT_POLICY=PASSIVE by re-exec when unset (real/train.hpp)
  require_scenario("calibrate", a.scenario,
                   " --out CALIB.json: it measures that scenario's ViT, dataset and precision");
  ScenarioFile f = read_scenario_file(a.scenario);
  apply_sets(f, a.sets);
  // --out is read too with --append: that is its purpose, not an input to protect.
  check_output_paths(
      {{a.opt.out, "--out"}, {a.opt.emit_platform, "--emit-platform"}, {a.opt.details, "--details"}},
      scenario_inputs(f));
  const std::vector<Scenario> points = expand(f);
  check_micro_batches(a.opt.micro_batches, points.front());
  calibrate::Options o = a.opt;
  for (const auto& s : a.sizes) o.sizes.push_back(units::parse(s, units::Kind::Bytes));
  if (!a.fit_max.empty()) o.fit_max_bytes = units::parse(a.fit_max, units::Kind::Bytes);
  if (!a.device_types.empty()) o.device_types = a.device_types;
  if (!a.peak_flops.empty()) o.peak_flops = units::parse(a.peak_flops, units::Kind::Flops);
  if (!a.mem_bw.empty()) o.mem_bw = units::parse(a.mem_bw, units::Kind::Bandwidth);
  o.op_model = !a.no_op_model;
  o.step_phase = !a.no_step;
  o.verbose = !a.quiet;
  o.command = command_line();
  calibrate::run(points.front(), o);
  return 0;
}

}  // namespace vitsim::app
