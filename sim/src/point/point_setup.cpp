// A point's checks and what it needs before an engine: its placement and collective (made once: PointSetup),
// the steps it simulates within the memory limit, the memory model's inputs and the collectives' sizes.
#include "point/point_setup.hpp"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

#include "point/rank_actors.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/model/buckets.hpp"
#include "vitsim/core/model/offload.hpp"
#include "vitsim/sim/collectives/collective.hpp"

namespace vitsim::sim {

PointSetup setup_point(const Scenario& s, const PlatformFacts& facts) {
  PointSetup setup;
  setup.place = place_ranks(s, facts);
  try {
    std::unique_ptr<Collective> c = make_collective(s.parallel.collective);
    c->configure({&facts, s.nccl.version, s.nccl.algo, s.nccl.proto, setup.place.hosts, s.nccl.min_channels,
                  s.nccl.max_channels});
    setup.collective = std::move(c);
  } catch (const Error& e) {
    throw Error(s.origin_of("parallelism.collective"), fmt::format("parallelism.collective: {}", e.what()));
  }
  return setup;
}

void check_epoch(const Scenario& s) {
  const int dp = s.dp_ranks();
  try {
    epoch_shape(s.dataset.effective_train_samples(dp), dp, s.training.micro_batch, s.training.grad_accum,
                "dataset.train_samples");
  } catch (const Error& e) {
    throw Error(s.origin_of("training.micro_batch"), e.what());
  }
}

PointSetup check_point(const Scenario& s, const PlatformFacts& facts) {
  PointSetup setup = setup_point(s, facts);
  try {
    check_compute_model(s.compute.model);
  } catch (const Error& e) {
    throw Error(s.origin_of("compute.model"), fmt::format("compute.model: {}", e.what()));
  }
  return setup;
}

std::vector<simgrid::s4u::Host*> rank_hosts(simgrid::s4u::Engine& e, const RankPlacement& place,
                                            const PlatformFacts& facts) {
  std::vector<simgrid::s4u::Host*> hosts;
  for (const auto& name : place.hosts) {
    simgrid::s4u::Host* h = e.host_by_name_or_null(name);
    if (!h)
      throw Error(fmt::format("{}: SimGrid has no host '{}' that the platform facts name", facts.path, name));
    hosts.push_back(h);
  }
  return hosts;
}

double ulysses_tensor_bytes(const ViTConfig& model, int micro_batch, int sp, int elem_bytes) {
  return static_cast<double>(micro_batch) * model.tokens() / sp * model.width * elem_bytes;
}

std::vector<BackwardBucket> backward_buckets(const Scenario& s) {
  const int tensors = static_cast<int>(parameter_tensors(s.model).size());
  std::vector<BackwardBucket> out;
  // A bucket's last gradient-ready tensor, ready index end-1, is forward tensor tensors - end; the
  // simulator's backward advances a layer at a time, so the bucket is ready after that tensor's layer.
  for (const GradBucket& g : gradient_buckets(s))
    out.push_back({tensor_layer(s.model, tensors - g.end), g.bytes});
  return out;
}

MemoryInputs memory_inputs(const Scenario& s, double reserved_bytes) {
  MemoryInputs mi;
  mi.micro_batch = s.training.micro_batch;
  mi.precision = s.training.precision;
  mi.zero_stage = s.parallel.zero;
  mi.dp_ranks = s.ranks();
  mi.bucket_bytes = s.parallel.bucket_bytes;
  mi.reserved_bytes = reserved_bytes;
  mi.optimizer = s.training.optimizer;
  mi.sequence_parallel = s.parallel.sequence_parallel;
  mi.activation_checkpointing = s.training.activation_checkpointing;
  mi.bf16_optimizer = s.training.framework == Framework::DeepSpeed &&
                      deepspeed_path(s.training.precision, s.parallel.zero) == DeepSpeedPath::Bf16Optimizer;
  mi.offload_optimizer = offloads_optimizer(s.parallel.offload_optimizer, s.parallel.zero);
  mi.offload_params = offloads_params(s.parallel.offload_param, s.parallel.zero);
  mi.half_optimizer_state = module_in_half(s) && s.training.framework != Framework::DeepSpeed;
  return mi;
}

double estimated_sim_memory(const Scenario& s, const PlatformFacts& facts, long long steps) {
  const double hosts = static_cast<double>(facts.gpu.size());
  const double ranks = s.ranks();
  return ranks * kSimBytesPerRank + hosts * kSimBytesPerHost +
         ranks * static_cast<double>(steps) * s.training.grad_accum * kSimBytesPerRankStep;
}

ComputeInputs compute_inputs(const Scenario& s) {
  ComputeInputs in;
  in.precision = s.training.precision;
  // DeepSpeed's fp16/bf16 converts the model itself (module.half()); the others run torch.autocast unless
  // training.cast=module (core/formats/scenario.hpp half_cast).
  in.autocast = half_cast(s) == HalfCast::Autocast;
  in.step = StepInputs{s.training.framework, s.training.precision,         s.training.optimizer, s.dp_ranks(),
                       s.parallel.zero,      s.training.gradient_clipping, s.training.loss_scale};
  in.step.grad_accum = s.training.grad_accum;
  in.step.torch_version = s.training.torch_version;
  // torch.optim's and the flat optimizer's tensors take the parameters' dtype (DeepSpeed's step ignores it).
  if (module_in_half(s)) in.step.param_bytes = precision_bytes(s.training.precision);
  if (s.training.optimizer_impl == "per-tensor") in.step.optimizer_impl = OptimizerImpl::PerTensor;
  if (s.training.optimizer_impl == "foreach") in.step.optimizer_impl = OptimizerImpl::Foreach;
  if (s.training.optimizer_impl == "fused") in.step.optimizer_impl = OptimizerImpl::Fused;
  in.step.grad_buckets = static_cast<int>(gradient_buckets(s).size());
  in.step.overlap = s.parallel.overlap;
  in.step.offload_optimizer = offloads_optimizer(s.parallel.offload_optimizer, s.parallel.zero);
  in.token_split = s.parallel.sequence_parallel;
  in.recompute = s.training.activation_checkpointing;
  in.model = s.compute.model;  // the registry entry that picks each device's model
  in.origin = s.origin_of("compute.model");
  return in;
}

double memory_limit(const Scenario& s, double& need) {
  const double phys =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  double limit = s.simulation.max_memory > 0 ? s.simulation.max_memory : phys / 2;
  if (rlimit as{};
      getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY && s.simulation.max_memory <= 0) {
    limit = std::min(limit, 0.9 * static_cast<double>(as.rlim_cur));
    need += 2.0 * s.ranks() * kActorStackKiB * 1024;
  }
  return limit;
}

StepBudget budget_steps(StepHorizon& h, const Scenario& s, const PlatformFacts& facts) {
  // A sequence-parallel group shares its micro-batch: the sampler shards over data-parallel replicas.
  const int dp = s.dp_ranks();
  // The epoch's steps by the trainer's rule (core/model/epoch.hpp: padded shards, the last partial
  // micro-batch and step kept, as PyTorch's and DeepSpeed's defaults).
  StepBudget out{epoch_shape(s.dataset.effective_train_samples(dp), dp, s.training.micro_batch,
                             s.training.grad_accum, "dataset.train_samples")};
  const long long steps_per_epoch = out.epoch.steps;
  out.full = s.simulation.full_epoch || steps_per_epoch <= s.simulation.steps;
  h.steps = out.full ? static_cast<int>(steps_per_epoch) : s.simulation.steps;
  h.warmup = h.steps > s.simulation.warmup ? s.simulation.warmup : 0;
  // Sizes: estimate the memory before building anything (a 100k-GPU point ran into std::bad_alloc).
  double need = estimated_sim_memory(s, facts, h.steps);
  const double limit = memory_limit(s, need);
  if (need > limit)
    throw Error(
        s.origin_of("cluster.nodes"),
        fmt::format(
            "simulating {} GPUs for {} steps needs about {} of memory (~{} KiB per rank, {} KiB per "
            "platform host, {} B per rank and micro-batch step), above the limit of {}{}; raise it "
            "with --set simulation.max_memory=SIZE",
            s.ranks(), h.steps, units::format_bytes(need), kSimBytesPerRank / 1024, kSimBytesPerHost / 1024,
            kSimBytesPerRankStep, units::format_bytes(limit),
            s.simulation.max_memory > 0 ? "" : " (half of this machine's memory, or 90% of ulimit -v)"));
  // The steady-state search may go on to the epoch or simulation.max_steps, within the same memory.
  const double per_step = estimated_sim_memory(s, facts, 1) - estimated_sim_memory(s, facts, 0);
  const long long fit = per_step > 0
                            ? static_cast<long long>((limit - estimated_sim_memory(s, facts, 0)) / per_step)
                            : steps_per_epoch;
  h.bound =
      out.full
          ? h.steps
          : static_cast<int>(std::max<long long>(
                h.steps, std::min({steps_per_epoch, static_cast<long long>(s.simulation.max_steps), fit})));
  return out;
}

}  // namespace vitsim::sim
