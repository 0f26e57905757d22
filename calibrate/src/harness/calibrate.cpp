// The measurement run of `vitsim calibrate` (calibrate.hpp run): its set-up, then one phase after another
// (phase_*.cpp: compute, the op model, occupancy, copies, the loader, the all-reduce sweep with the
// trainer's communicator, the trainer's own steps), then the calibration file, the details file and the
// platform file (outputs.cpp).
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "harness/phases.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/model/vit.hpp"
#include "vitsim/real/train.hpp"

namespace vitsim::calibrate {
namespace fs = std::filesystem;

namespace {

// The device name each rank calibrates as.
std::vector<std::string> rank_devices(const Options& o, int ranks) {
  if (o.device_types.empty()) throw Error("calibrate: --device-type needs a name");
  if (o.device_types.size() == 1) return std::vector<std::string>(ranks, o.device_types.front());
  if (static_cast<int>(o.device_types.size()) != ranks)
    throw Error(
        fmt::format("calibrate: --device-type lists {} names for {} ranks; give one name, or one per rank",
                    o.device_types.size(), ranks));
  return o.device_types;
}

void refuse_overwrite(const std::string& path, const char* what, bool force) {
  if (path.empty()) return;
  if (!force && fs::exists(path))
    throw Error(fmt::format("{}: {} exists; pass --force to overwrite it", path, what));
  check_writable(path);  // before the measurements, not after them
}

void check_options(const Options& o) {
  if (o.out.empty()) throw Error("calibrate: --out FILE is required");
  if (o.warmup < 0 || o.iters < 3)
    throw Error(fmt::format("calibrate: need warm-up >= 0 and at least 3 timed runs, got {} and {}", o.warmup,
                            o.iters));
  refuse_overwrite(o.out, "calibration file", o.force || o.append);
  refuse_overwrite(o.emit_platform, "platform file", o.force);
  refuse_overwrite(o.details, "details file", o.force);
}

// --micro-batches, else the scenario's micro-batch / 2, x1, x2; ascending, each once.
std::vector<int> calibration_micro_batches(const Scenario& s, const Options& o) {
  std::vector<int> mbs = o.micro_batches;
  if (mbs.empty()) {
    const int b = s.training.micro_batch;
    mbs = {std::max(1, b / 2), b, 2 * b};
  }
  std::sort(mbs.begin(), mbs.end());
  mbs.erase(std::unique(mbs.begin(), mbs.end()), mbs.end());
  if (mbs.front() < 1)
    throw Error(fmt::format("calibrate: micro-batch sizes must be positive, got {}", mbs.front()));
  return mbs;
}

std::vector<std::string> distinct_in_order(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& n : names)
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  return out;
}

// The job, this rank's device, the environment, the model and the micro-batches: what every phase shares.
void set_up(RunContext& x) {
  const Scenario& s = x.s;
  const Options& o = x.o;
  x.rank = x.world.rank();
  x.nranks = x.world.size();
  x.root = x.rank == 0;
  x.devices = rank_devices(o, x.nranks);
  x.type_order = distinct_in_order(x.devices);
  if (!o.emit_platform.empty() && x.nranks < 2)
    throw Error("--emit-platform needs the all-reduce fit: run calibrate under mpirun with 2 or more ranks");
  x.dev = open_device(s, x.world.local_rank(), x.world.local_size());
  x.env = record_environment();
  x.workload = build_workload(s.model);
  x.details = {{"schema", "vitsim.calibration-details/1"}, {"ranks", x.nranks}, {"devices", x.devices}};
  x.mbs = calibration_micro_batches(s, o);
  x.say(
      fmt::format("vitsim calibrate: {} rank(s), {} on each ({} intra-op thread(s)), ViT {}px patch {} width "
                  "{} depth {}, {}\n",
                  x.nranks, x.dev.device, x.dev.threads, s.model.image_size, s.model.patch, s.model.width,
                  s.model.depth, precision_name(s.training.precision)));
}

}  // namespace

Calibration run(const Scenario& s, const Options& o) {
  check_options(o);
  // Freed memory stays in the process, as in `vitsim train` (real/src/model/io.cpp): the compute phase then
  // times steps as the trainer runs them, without page faults on every step's activations.
  real::keep_freed_memory();
  real::World world(s.run.timeout_s);
  RunContext x(s, o, world);
  set_up(x);

  Measured m;
  // The compute and step phases' rounds take turns, so that a slow spell of the machine spoils one round of
  // each, not a phase; a phase whose rounds spread beyond the limit gets more (docs/calibrate-validate.md
  // "Noisy rounds"). The step rounds' figures are settled after the all-reduce fit, which they need.
  ComputeRounds compute_rounds = start_compute(x);
  StepRounds step_rounds = start_step(x);
  std::vector<RoundedPhase> rounded = {{"compute", [&] { compute_round(x, compute_rounds); },
                                        [&] { return compute_spread(x, compute_rounds); }}};
  if (step_rounds.active)
    rounded.push_back(
        {"step", [&] { step_round(x, step_rounds); }, [&] { return step_spread(step_rounds); }});
  const std::vector<RoundCheck> checks =
      run_rounds(rounded, RoundRules{kComputeRounds}, [&](const std::string& l) {
        if (x.root) fmt::print(stderr, "vitsim calibrate: {}\n", l);
      });
  m.rounds.compute = checks[0];
  if (step_rounds.active) m.rounds.step = checks[1];
  for (size_t p = 0; p < rounded.size(); ++p)
    x.say(fmt::format("rounds ({}): {} with {} repeat(s), spread {} about the kept round (limit {}){}\n",
                      rounded[p].name, checks[p].rounds, checks[p].repeats, pct(checks[p].spread),
                      pct(checks[p].limit), checks[p].noisy ? ": noisy" : ""));
  m.compute = finish_compute(x, compute_rounds);
  if (o.op_model) m.op_models = op_model_phase(x, m.compute);
  m.alone_ratio = occupancy_phase(x, m.compute);
  m.h2d = copy_phase(x);
  m.loader = loader_phase(x);
  m.allreduce = allreduce_phase(x);
  m.step = finish_step(x, step_rounds, m.compute, m.allreduce.fit);

  Calibration c;
  if (o.append && fs::exists(o.out)) c = read_calibration(o.out);
  const std::vector<std::string> hosts = world.gather(world.host(), 0, "calibrate host gather");  // rank 0's
  complete_calibration(c, x, m, hosts);
  write_outputs(x, c, m, hosts);
  world.barrier("calibrate final barrier");
  return c;
}

}  // namespace vitsim::calibrate
