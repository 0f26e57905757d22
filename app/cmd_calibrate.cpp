// `vitsim calibrate`: its flags are the CLI11 definitions below; their table in docs/calibrate-validate.md is
// generated from them. Started by mpirun (one rank per device) for the all-reduce part; one process measures
// compute alone.
#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "vitsim/calibrate/calibrate.hpp"
#include "vitsim/calibrate/imports.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/formats/scenario_inputs.hpp"
#include "vitsim/core/model/memory.hpp"
#include "vitsim/real/train.hpp"

namespace vitsim::app {

namespace {
struct CalibrateArgs {
  std::string scenario, peak_flops, mem_bw, fit_max;
  std::string from_nccl_tests, from_torch_profile;  // imports: no measurement
  std::vector<std::string> sets, sizes, device_types;
  calibrate::Options opt;
  bool quiet = false;
  bool no_op_model = false, no_step = false;
};

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

// The command as typed (for the provenance), from /proc/self/cmdline.
std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()), out;
  for (char ch : all) out += ch == '\0' ? ' ' : ch;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out.empty() ? "vitsim calibrate" : out;
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
      if (!a->from_nccl_tests.empty() || !a->from_torch_profile.empty()) {
        // An import measures nothing: the flags that shape a measurement have nothing to act on.
        for (const char* flag :
             {"--emit-platform", "--details", "--micro-batches", "--sizes", "--warmup", "--iters",
              "--loader-batches", "--platform-devices", "--no-op-model", "--no-step"})
          if (c->count(flag) > 0)
            throw UsageError(
                fmt::format("{} does not go with --from-nccl-tests / --from-torch-profile: an import "
                            "measures nothing",
                            flag));
        if (a->device_types.size() > 1)
          throw UsageError(
              "--device-type: one name with --from-torch-profile (the device the profile ran on)");
        require_scenario("calibrate", a->scenario, " --from-nccl-tests FILE --out CALIB.json");
        ScenarioFile f = read_scenario_file(a->scenario);
        apply_sets(f, a->sets);
        std::vector<NamedPath> inputs = scenario_inputs(f);
        if (!a->from_nccl_tests.empty()) inputs.push_back({a->from_nccl_tests, "--from-nccl-tests"});
        if (!a->from_torch_profile.empty()) inputs.push_back({a->from_torch_profile, "--from-torch-profile"});
        check_output_paths({{a->opt.out, "--out"}}, inputs);
        calibrate::ImportOptions io;
        io.out = a->opt.out;
        io.force = a->opt.force;
        io.append = a->opt.append;
        io.nccl_tests = a->from_nccl_tests;
        io.torch_profile = a->from_torch_profile;
        if (!a->device_types.empty()) io.device_type = a->device_types.front();
        io.link_class = a->opt.link_class;
        if (!a->fit_max.empty()) io.fit_max_bytes = units::parse(a->fit_max, units::Kind::Bytes);
        if (!a->peak_flops.empty()) io.peak_flops = units::parse(a->peak_flops, units::Kind::Flops);
        if (!a->mem_bw.empty()) io.mem_bw = units::parse(a->mem_bw, units::Kind::Bandwidth);
        io.verbose = !a->quiet;
        io.command = command_line();
        calibrate::import_measurements(expand(f).front(), io);
        return 0;
      }
      real::ensure_passive_openmp();  // OMP_WAIT_POLICY=PASSIVE by re-exec when unset (real/train.hpp)
      require_scenario("calibrate", a->scenario,
                       " --out CALIB.json: it measures that scenario's ViT, dataset and precision");
      ScenarioFile f = read_scenario_file(a->scenario);
      apply_sets(f, a->sets);
      // --out is read too with --append: that is its purpose, not an input to protect.
      check_output_paths(
          {{a->opt.out, "--out"}, {a->opt.emit_platform, "--emit-platform"}, {a->opt.details, "--details"}},
          scenario_inputs(f));
      const std::vector<Scenario> points = expand(f);
      check_micro_batches(a->opt.micro_batches, points.front());
      calibrate::Options o = a->opt;
      for (const auto& s : a->sizes) o.sizes.push_back(units::parse(s, units::Kind::Bytes));
      if (!a->fit_max.empty()) o.fit_max_bytes = units::parse(a->fit_max, units::Kind::Bytes);
      if (!a->device_types.empty()) o.device_types = a->device_types;
      if (!a->peak_flops.empty()) o.peak_flops = units::parse(a->peak_flops, units::Kind::Flops);
      if (!a->mem_bw.empty()) o.mem_bw = units::parse(a->mem_bw, units::Kind::Bandwidth);
      o.op_model = !a->no_op_model;
      o.step_phase = !a->no_step;
      o.verbose = !a->quiet;
      o.command = command_line();
      calibrate::run(points.front(), o);
      return 0;
    };
  });
}

}  // namespace vitsim::app
