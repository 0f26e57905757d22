// Set-up of one scenario point (point_trainer.hpp), in this order: device, the supported configuration
// and threads; the run agreement between the ranks; the model and optimizer over flat buffers; the
// gradient path; the data; resume (point_state.cpp); the checkpoint folder.
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "trainer/point_trainer.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/real/device.hpp"
#include "vitsim/real/gather.hpp"

namespace vitsim::real {

RankDevice choose_device(const Scenario& s, int local_rank) {
  std::string name = s.run.device;
  if (name == "auto") name = torch::cuda::is_available() ? "cuda" : "cpu";
  if (name == "cuda" && !torch::cuda::is_available())
    throw Error(
        "run.device = cuda but this LibTorch has no usable CUDA device (build against a CUDA LibTorch via "
        "Torch_DIR)");
  if (s.training.precision == Precision::FP16 && name != "cuda")
    throw Error("training.precision fp16 needs run.device cuda (LibTorch's CPU autocast runs bf16 only)");
  if (name != "cuda") return {};
  return {true, static_cast<int>(local_rank % torch::cuda::device_count())};
}

void set_threads(int threads) {
  torch::set_num_threads(threads);
  using SetFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) fn(threads);
}

namespace {

void set_flat_params(const std::vector<torch::Tensor>& params, const std::vector<float>& v) {
  torch::NoGradGuard ng;
  size_t off = 0;
  for (const auto& p : params) {
    auto src = torch::from_blob(const_cast<float*>(v.data() + off), p.sizes(), torch::kFloat32);
    p.copy_(src);
    off += p.numel();
  }
}

// ---- set-up checks ----

// What the real trainer implements: data parallelism, ZeRO stage 0, fp32 gradient all-reduce (and fp16 on
// CUDA only: choose_device).
void check_supported(const Scenario& s) {
  if (s.parallel.zero != 0)
    throw Error(
        fmt::format("parallelism.zero {}: the real trainer implements stage 0 (replicated optimizer state, "
                    "gradient all-reduce) only",
                    s.parallel.zero));
  if (s.parallel.sequence_parallel != 1)
    throw Error(
        fmt::format("parallelism.sequence_parallel {}: the real trainer is data-parallel only (patch "
                    "parallelism is simulated by vitsim predict/plan, not trained)",
                    s.parallel.sequence_parallel));
  // The trainer runs fp16/bf16 under torch.autocast over fp32 flat buffers (parameters, gradients, optimizer
  // state, checkpoints); the module in half is simulated (training.cast=module), not trained.
  if (s.training.framework != Framework::DeepSpeed && module_in_half(s))
    throw Error(
        s.origin_of("training.cast"),
        fmt::format("training.cast module: the real trainer runs {} under torch.autocast only (fp32 "
                    "parameters, gradients and optimizer state in flat buffers); the module in half is "
                    "simulated by vitsim predict/plan, not trained (set training.cast=autocast)",
                    precision_name(s.training.precision)));
  // The buckets' bytes (core's gradient_buckets) are in this dtype: it must be the one all-reduced here.
  if (gradient_comm_dtype(s) != Precision::FP32)
    throw Error(
        fmt::format("parallelism.comm_dtype {}{}: the real trainer all-reduces fp32 gradients only (set "
                    "parallelism.comm_dtype=fp32)",
                    precision_name(gradient_comm_dtype(s)),
                    s.parallel.comm_dtype ? "" : " (DeepSpeed's default: the training precision)"));
}

// Every rank must train the same thing: a rank started with other arguments (a forgotten --set or
// --resume in one app context of an MPMD launch) would otherwise fail later inside MPI with a
// message-size error, or train silently wrong.
void check_same_run(const Scenario& s, World& world, bool resume) {
  struct RunHash {
    double high = 0, low = 0;  // the 64-bit hash in two exact halves
  };
  uint64_t h = 1469598103934665603ULL;  // FNV-1a, 64 bit: the same on every node whatever its libstdc++
  for (unsigned char c : fingerprint(s, world.size()) + (resume ? " resume" : ""))
    h = (h ^ c) * 1099511628211ULL;
  const auto all =
      allgather_record(world, RunHash{double(h >> 32), double(h & 0xffffffffULL)}, "run agreement check");
  for (int r = 1; r < world.size(); ++r)
    if (all[r].high != all[0].high || all[r].low != all[0].low)
      throw Error(
          fmt::format("rank {} was started with another run than rank 0 (scenario, --set values or --resume "
                      "differ); every rank needs the same arguments",
                      r));
}

}  // namespace

// ---- parameters as one vector ----

std::vector<float> flat_params(const std::vector<torch::Tensor>& params) {
  std::vector<float> out;
  for (const auto& p : params) {
    auto c = p.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    out.insert(out.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  return out;
}

PointTrainer::PointTrainer(const Scenario& s, World& world, const TrainOptions& opt, bool tracing)
    : s_(s),
      world_(world),
      opt_(opt),
      rank_(world.rank()),
      nranks_(world.size()),
      precision_(s.training.precision),
      scaling_(s.training.precision == Precision::FP16),
      micro_(s.training.micro_batch),
      accum_(s.training.grad_accum),
      warmup_(s.simulation.warmup) {
  trace_.on = tracing;
  trace_.rank = rank_;
  set_up_device();
  check_same_run(s_, world_, opt_.resume);
  set_up_model();
  set_up_gradients();
  set_up_data();
  if (opt_.resume) resume();
  set_up_checkpoints();
}

// Device, the supported configuration, threads and the collectives' timeout.
void PointTrainer::set_up_device() {
  const RankDevice d = choose_device(s_, world_.local_rank());
  device_ = d.cuda ? torch::Device(torch::kCUDA, d.index) : torch::Device(torch::kCPU);
  check_supported(s_);
  thread_plan_ = plan_threads(s_.run.threads, world_.local_size());
  set_threads(thread_plan_.threads);
  if (!thread_plan_.warning.empty() && world_.local_rank() == 0)
    fmt::print(stderr, "vitsim: warning: rank {}: {}\n", rank_, thread_plan_.warning);
  world_.set_timeout_s(s_.run.timeout_s);
}

// Model, identical on every rank: same seed, then rank 0's values broadcast (as DDP does). Its parameters
// live in one flat buffer and its gradients in another, laid out in reverse parameter order (roughly the
// order backward produces them), so that each bucket is one contiguous slice and the optimizer steps
// the whole model at once.
void PointTrainer::set_up_model() {
  torch::manual_seed(s_.training.seed);
  model_ = VisionTransformer(s_.model);
  model_->to(device_);
  params_ = model_->parameters();
  const int64_t expected = build_workload(s_.model).total_params();
  if (parameter_count(*model_) != expected)
    throw Error(fmt::format("internal: LibTorch ViT has {} parameters, core's model {}",
                            parameter_count(*model_), expected));
  auto v = flat_params(params_);
  world_.broadcast(v.data(), v.size() * sizeof(float), 0, "initial parameter broadcast");
  set_flat_params(params_, v);
  flat_ = flatten_parameters(params_);
}

// The buckets are core's layout (gradient_buckets: the simulator cuts the same ones); then the
// optimizer over the flat buffers.
void PointTrainer::set_up_gradients() {
  layout_ = gradient_buckets(s_);
  const BucketBinding binding = bind_buckets(layout_, s_.model, params_, flat_.offsets);
  grad_ = make_gradient_path(world_, device_, params_, binding, flat_.grads, s_.parallel.overlap, trace_.on);
  optimizer_ = std::make_unique<FlatOptimizer>(optimizer_config(s_.training), flat_.params, flat_.grads);
}

// The datasets, this run's epoch (core/model/epoch.hpp: the simulator's rule, padded shards, the last partial
// micro-batch and step kept) and the transforms.
void PointTrainer::set_up_data() {
  train_set_ = open_dataset(s_.dataset, s_.model, "train");
  test_set_ = open_dataset(s_.dataset, s_.model, "test");
  if (!thread_plan_.warning.empty())
    notes_.push_back(fmt::format("rank {}: {}", rank_, thread_plan_.warning));
  check_same_classes(*train_set_.source, *test_set_.source);
  const long long asked = s_.dataset.effective_train_samples(nranks_);
  n_train_ = std::min<size_t>(train_set_.source->size(), static_cast<size_t>(asked));
  const bool short_set = static_cast<long long>(train_set_.source->size()) < asked;
  if (short_set)
    notes_.push_back(fmt::format("dataset has {} training samples, fewer than the {} the scenario asks for",
                                 train_set_.source->size(), asked));
  epoch_plan_ =
      epoch_shape(static_cast<long long>(n_train_), nranks_, micro_, accum_,
                  short_set ? fmt::format("dataset {} ({})", s_.dataset.name, train_set_.source->describe())
                            : std::string("dataset.train_samples"));
  full_steps_ = epoch_plan_.steps;
  run_steps_ = s_.run.max_steps > 0 ? std::min(s_.run.max_steps, full_steps_) : full_steps_;
  if (nranks_ != s_.ranks())
    notes_.push_back(fmt::format("measured with {} ranks; the scenario's cluster has {} nodes x {} GPUs",
                                 nranks_, s_.cluster.nodes, s_.cluster.gpus_per_node));
  train_tf_ = Transform{s_.model.image_size, s_.run.augment, train_set_.norm, s_.training.seed};
  test_tf_ = Transform{s_.model.image_size, false, test_set_.norm, s_.training.seed};
}

// The checkpoint folder is made (and checked) now, not at the first checkpoint an hour in.
void PointTrainer::set_up_checkpoints() {
  if (!s_.run.checkpoint_dir.empty() && rank_ == 0) prepare_checkpoint_dir(s_);
}

}  // namespace vitsim::real
