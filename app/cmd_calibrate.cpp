// `vitsim calibrate`: its flags are the CLI11 definitions below (their table in docs/calibrate-validate.md is
// generated from them). Started by mpirun (one rank per device) for the all-reduce part; one process measures
// compute alone. Its imports need no Torch (--from-nccl-tests, --from-torch-profile run in any executable
// that has them); a measurement runs in torch/run_calibrate.cpp (torch/calibrate_command.hpp).
#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "torch/calibrate_command.hpp"
#include "vitsim/calibrate/calibrate.hpp"
#include "vitsim/calibrate/imports.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/formats/scenario_inputs.hpp"

namespace vitsim::app {

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()), out;
  for (char ch : all) out += ch == '\0' ? ' ' : ch;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out.empty() ? "vitsim calibrate" : out;
}

namespace {
// --from-nccl-tests, --from-torch-profile, --from-gemm-table: the measurements read from a file into --out.
int run_import(const CalibrateArgs& a, const CLI::App* c) {
  // An import measures nothing: the flags that shape a measurement have nothing to act on.
  for (const char* flag : {"--emit-platform", "--details", "--micro-batches", "--sizes", "--warmup",
                           "--iters", "--loader-batches", "--platform-devices", "--no-op-model", "--no-step"})
    if (c->count(flag) > 0)
      throw UsageError(
          fmt::format("{} does not go with --from-nccl-tests / --from-torch-profile / --from-gemm-table: an "
                      "import measures "
                      "nothing",
                      flag));
  if (a.device_types.size() > 1)
    throw UsageError(
        "--device-type: one name with --from-torch-profile / --from-gemm-table (the device it ran on)");
  require_scenario("calibrate", a.scenario, " --from-nccl-tests FILE --out CALIB.json");
  ScenarioFile f = read_scenario_file(a.scenario);
  apply_sets(f, a.sets);
  std::vector<NamedPath> inputs = scenario_inputs(f);
  if (!a.from_nccl_tests.empty()) inputs.push_back({a.from_nccl_tests, "--from-nccl-tests"});
  if (!a.from_torch_profile.empty()) inputs.push_back({a.from_torch_profile, "--from-torch-profile"});
  if (!a.from_gemm_table.empty()) inputs.push_back({a.from_gemm_table, "--from-gemm-table"});
  check_output_paths({{a.opt.out, "--out"}}, inputs);
  calibrate::ImportOptions io;
  io.out = a.opt.out;
  io.force = a.opt.force;
  io.append = a.opt.append;
  io.nccl_tests = a.from_nccl_tests;
  io.torch_profile = a.from_torch_profile;
  io.gemm_table = a.from_gemm_table;
  if (!a.device_types.empty()) io.device_type = a.device_types.front();
  io.link_class = a.opt.link_class;
  if (!a.fit_max.empty()) io.fit_max_bytes = units::parse(a.fit_max, units::Kind::Bytes);
  if (!a.peak_flops.empty()) io.peak_flops = units::parse(a.peak_flops, units::Kind::Flops);
  if (!a.mem_bw.empty()) io.mem_bw = units::parse(a.mem_bw, units::Kind::Bandwidth);
  io.verbose = !a.quiet;
  io.command = command_line();
  calibrate::import_measurements(expand(f).front(), io);
  return 0;
}

// The options of `vitsim calibrate`, bound to `a`.
void add_calibrate_options(CLI::App* c, CalibrateArgs& a) {
  add_scenario(c, a.scenario, "scenario XML: the ViT, dataset, precision and run settings to measure");
  c->add_option("--set", a.sets, "override a scenario attribute: KEY=VALUE (e.g. run.threads=1)");
  c->add_option("--out", a.opt.out, "calibration JSON to write (vitsim.calibration/2)")->required();
  c->add_flag("--force", a.opt.force, "overwrite existing output files");
  c->add_flag("--append", a.opt.append, "merge into an existing --out, replacing the entries measured again");
  c->add_option("--emit-platform", a.opt.emit_platform,
                "also write a SimGrid platform file for the machines measured");
  c->add_option("--details", a.opt.details,
                "write every measurement with its mean, median, quartiles, min and max (JSON)");
  c->add_option(
       "--micro-batches", a.opt.micro_batches,
       "micro-batch sizes for compute (default: the scenario's micro-batch halved, as is and doubled)")
      ->delimiter(',');
  c->add_option(
       "--sizes", a.sizes,
       "all-reduce message sizes with units (default: 4KiB to 64MiB by 4x, plus the scenario's bucket and "
       "whole gradient)")
      ->delimiter(',');
  c->add_option(
      "--fit-max", a.fit_max,
      "largest all-reduce size the latency/bandwidth fit uses (default: the scenario's whole gradient)");
  c->add_option("--device-type", a.device_types,
                "device name (a platform's gpu_model): one for all ranks, or one per rank (default cpu)")
      ->delimiter(',');
  c->add_option("--link-class", a.opt.link_class,
                "name of the fitted link class (default: intra_node on one host, inter_node across hosts)");
  c->add_option(
      "--peak-flops", a.peak_flops,
      "the device's stated peak (e.g. 8.1Tf), so that its measurements predict another device type by the "
      "roofline ratio");
  c->add_option(
      "--mem-bw", a.mem_bw,
      "the device's stated memory bandwidth (e.g. 320GBps), for the roofline ratio as --peak-flops");
  c->add_option("--platform-devices", a.opt.platform_devices,
                "devices per host in the emitted platform (default: the cores)")
      ->check(integer(1, 1 << 20));
  c->add_option("--warmup", a.opt.warmup, "warm-up iterations per measurement (default 3)")
      ->check(integer(0, 1 << 20));
  c->add_option("--iters", a.opt.iters, "timed iterations per measurement (default 10)")
      ->check(integer(3, 100000));
  c->add_option("--loader-batches", a.opt.loader_batches, "batches per loader pass (default: ~2048 images)")
      ->check(integer(1, 1 << 24));
  c->add_flag("--no-op-model", a.no_op_model,
              "skip the op benchmarks (most of calibrate's time): the file then carries the measured compute "
              "points only, which predict the calibrated ViT shape but not another");
  c->add_flag(
      "--no-step", a.no_step,
      "skip the step phase (the trainer's own steps at each micro-batch): no sync figures, so predict "
      "adds nothing at the gradient sync beyond the all-reduce");
  c->add_flag("--quiet,-q", a.quiet, "print nothing but errors");
  c->add_option("--from-nccl-tests", a.from_nccl_tests,
                "import an all_reduce_perf log (nccl-tests) as the all-reduce fit, instead of measuring");
  c->add_option(
      "--from-torch-profile", a.from_torch_profile,
      "import a PyTorch profiler trace of one training step as a compute point, instead of measuring");
  c->add_option(
      "--from-gemm-table", a.from_gemm_table,
      "import a table of GEMM times (bench/gpu/gemm_shapes.py) as the op model of --device-type (default: "
      "the platform's first GPU) at the scenario's precision, instead of measuring");
}
}  // namespace

void add_calibrate(CLI::App& cli, Action& action) {
  auto a = std::make_shared<CalibrateArgs>();
  auto* c = cli.add_subcommand("calibrate",
                               "measure compute, all-reduce, copies and loading on this job's ranks: mpirun "
                               "-np N vitsim calibrate ...");
  add_calibrate_options(c, *a);
  c->callback([&action, a, c] {
    action = [a, c] {
      if (!a->from_nccl_tests.empty() || !a->from_torch_profile.empty() || !a->from_gemm_table.empty())
        return run_import(*a, c);
      return run_calibrate(*a, c);
    };
  });
}

}  // namespace vitsim::app
