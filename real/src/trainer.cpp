// The data-parallel training loop of one scenario point, in named steps: set-up (device, threads, the
// run agreement, model and optimizer over flat buffers, gradient path, data, resume), one optimizer step
// (micro-batches' forward and backward, gradient sync, the update), the epoch loop with evaluation,
// replica checks and checkpoints, and the report point assembled from every rank's measurements. The
// gradient sync lives in grad_sync.cpp, the checkpoints in checkpoint.cpp.
#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>
#include <thread>

#include <fmt/format.h>

#include "checkpoint.hpp"
#include "grad_sync.hpp"
#include "vitsim/core/buckets.hpp"
#include "vitsim/core/epoch.hpp"
#include "vitsim/core/error.hpp"
#include "vitsim/core/identity.hpp"
#include "vitsim/core/io.hpp"
#include "vitsim/core/ops.hpp"
#include "vitsim/core/placement.hpp"
#include "vitsim/core/platform.hpp"
#include "vitsim/core/system.hpp"
#include "vitsim/core/trace.hpp"
#include "vitsim/real/autocast.hpp"
#include "vitsim/real/comm.hpp"
#include "vitsim/real/data.hpp"
#include "vitsim/real/gather.hpp"
#include "vitsim/real/model.hpp"
#include "vitsim/real/optim.hpp"
#include "vitsim/real/train.hpp"

#ifdef VITSIM_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace vitsim::real {
using Clock = std::chrono::steady_clock;

namespace {

// MFU of a measured run (docs/reports.md): the op model's forward + backward FLOPs of one rank's
// micro-batches in a step (core/ops pass_ops, as predict counts them) over the dense peak of the GPUs the
// scenario's platform file gives its ranks (core/placement.hpp: the simulator's placement, for as many
// ranks as this job has), in the precision used. A platform that cannot be read or cannot hold the ranks
// leaves the peak unknown (MFU empty); the TFLOP/s per GPU stay.
void set_model_flops(const Scenario& s, int micro, int accum, int nranks, ReportPoint& p) {
  double flops = 0;
  for (const Op& op : pass_ops(build_workload(s.model), micro, OpOptions{s.training.precision})) flops += op.flops;
  p.model_flops = flops * accum;
  try {
    const PlatformFacts facts = read_platform_facts(s.cluster.platform);
    p.peak_flops = mean_peak_flops(place_ranks(s, facts, nranks), facts, s.training.precision);
  } catch (const std::exception&) {
    p.peak_flops = 0;
  }
}

// An error every rank raises at the same step with the same message (training diverged: the decision
// rests on the all-reduced gradient and loss): the ranks end together, without MPI_Abort.
struct Diverged : Error {
  using Error::Error;
};

// The clock at a phase boundary. On CUDA the compute stream is drained first, so a phase's time is its
// kernels' time; only that stream: a device-wide synchronize would also wait for the NCCL stream and
// hide the overlap being measured.
Clock::time_point phase_end(const torch::Device& device) {
#ifdef VITSIM_TORCH_CUDA
  if (device.is_cuda()) c10::cuda::getCurrentCUDAStream(device.index()).synchronize();
#else
  (void)device;
#endif
  return Clock::now();
}

// fp16 dynamic loss scaling with torch.cuda.amp.GradScaler's defaults: initial scale 2^16, halved on
// an overflow (the step is skipped), doubled after 2000 steps without one.
struct LossScaler {
  double scale = 65536.0;
  long long good_steps = 0, skipped = 0;
  static constexpr long long kGrowthInterval = 2000;
};

// ---- threads ----

// torch's intra-op threads times OpenBLAS's own threads must not exceed the cores
// (docs/sources.md "Software and machine facts", threads per rank).
// OpenBLAS is reached through Debian's alternatives, so its setter is looked up, not linked.
void set_threads(int threads) {
  torch::set_num_threads(threads);
  using SetFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) fn(threads);
}

// ---- parameters as one vector ----

std::vector<float> flat_params(const std::vector<torch::Tensor>& params) {
  std::vector<float> out;
  for (const auto& p : params) {
    auto c = p.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    out.insert(out.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  return out;
}

void set_flat_params(const std::vector<torch::Tensor>& params, const std::vector<float>& v) {
  torch::NoGradGuard ng;
  size_t off = 0;
  for (const auto& p : params) {
    auto src = torch::from_blob(const_cast<float*>(v.data() + off), p.sizes(), torch::kFloat32);
    p.copy_(src);
    off += p.numel();
  }
}

// Two sums that any divergence between replicas changes (a swap of values changes the weighted one).
struct ReplicaChecksum {
  double plain = 0, weighted = 0;
};
ReplicaChecksum checksum(const std::vector<torch::Tensor>& params) {
  ReplicaChecksum c;
  double k = 1;
  for (const auto& p : params) {
    auto d = p.detach().to(torch::kCPU, torch::kFloat64);
    c.plain += d.sum().item<double>();
    c.weighted += k * d.abs().sum().item<double>();
    k += 1;
  }
  return c;
}

[[noreturn]] void inject(const FaultInjection& f) {
  std::fprintf(stderr, "vitsim: %s: injected fault '%s' after step %lld\n", rank_identity().c_str(), f.kind.c_str(),
               f.step);
  std::fflush(stderr);
  if (f.kind == "kill") std::raise(SIGKILL);
  if (f.kind == "exit") std::_Exit(17);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // hang
}

// Peak memory of this rank's device: the CUDA caching allocator's peak reservation on a GPU, the
// process's peak resident set on CPU.
double peak_memory_bytes(const torch::Device& device) {
#ifdef VITSIM_TORCH_CUDA
  if (device.is_cuda()) {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return static_cast<double>(stats.reserved_bytes[static_cast<size_t>(c10::cuda::CUDACachingAllocator::StatType::AGGREGATE)].peak);
  }
#else
  (void)device;
#endif
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0;  // Linux reports KiB
}

// ---- set-up checks ----

// run.device resolved ("auto": CUDA when this LibTorch has a device); rank r takes local GPU r mod count.
torch::Device choose_device(const Scenario& s, const World& world) {
  std::string name = s.run.device;
  if (name == "auto") name = torch::cuda::is_available() ? "cuda" : "cpu";
  if (name == "cuda" && !torch::cuda::is_available())
    throw Error("run.device = cuda but this LibTorch has no usable CUDA device (build against a CUDA LibTorch via Torch_DIR)");
  if (name == "cuda") return torch::Device(torch::kCUDA, world.local_rank() % torch::cuda::device_count());
  return torch::Device(torch::kCPU);
}

// What the real trainer implements: data parallelism, ZeRO stage 0, fp32 gradient all-reduce, fp16 on CUDA.
void check_supported(const Scenario& s, const torch::Device& device) {
  if (s.training.precision == Precision::FP16 && !device.is_cuda())
    throw Error("training.precision fp16 needs run.device cuda (LibTorch's CPU autocast runs bf16 only)");
  if (s.parallel.zero != 0)
    throw Error(fmt::format("parallelism.zero {}: the real trainer implements stage 0 (replicated optimizer state, "
                            "gradient all-reduce) only", s.parallel.zero));
  if (s.parallel.sequence_parallel != 1)
    throw Error(fmt::format("parallelism.sequence_parallel {}: the real trainer is data-parallel only (patch "
                            "parallelism is simulated by vitsim predict/plan, not trained)",
                            s.parallel.sequence_parallel));
  // The buckets' bytes (core's gradient_buckets) are in this dtype: it must be the one all-reduced here.
  if (gradient_comm_dtype(s) != Precision::FP32)
    throw Error(fmt::format("parallelism.comm_dtype {}{}: the real trainer all-reduces fp32 gradients only (set "
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
  for (unsigned char c : fingerprint(s, world.size()) + (resume ? " resume" : "")) h = (h ^ c) * 1099511628211ULL;
  const auto all = allgather_record(world, RunHash{double(h >> 32), double(h & 0xffffffffULL)}, "run agreement check");
  for (int r = 1; r < world.size(); ++r)
    if (all[r].high != all[0].high || all[r].low != all[0].low)
      throw Error(fmt::format("rank {} was started with another run than rank 0 (scenario, --set values or --resume "
                              "differ); every rank needs the same arguments",
                              r));
}

// ---- the statistics of a rank's steps ----

// Per-step measurements of one rank.
struct StepTimes {
  double total = 0;
  Breakdown b;
};

// The steps after the first `warmup` (all of them when there are no more than that).
std::vector<double> after_warmup(const std::vector<StepTimes>& steps, int warmup, double (*get)(const StepTimes&)) {
  std::vector<double> v;
  for (size_t i = 0; i < steps.size(); ++i)
    if (static_cast<int>(i) >= warmup || steps.size() <= static_cast<size_t>(warmup)) v.push_back(get(steps[i]));
  return v;
}

double mean_after_warmup(const std::vector<StepTimes>& steps, int warmup, double (*get)(const StepTimes&)) {
  auto v = after_warmup(steps, warmup, get);
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0.0 : sum / v.size();
}

// What each rank measured, gathered by every rank for the report point.
struct RankMeasure {
  StepStats step_time_s;
  Breakdown breakdown_s;
  double epoch_mean_s = 0;       // mean of the whole epochs it ran (0: none)
  double peak_memory_bytes = 0;  // peak_memory_bytes()
};

RankMeasure measure_rank(const std::vector<StepTimes>& steps, int warmup, const std::vector<double>& epoch_times,
                         const torch::Device& device) {
  RankMeasure m;
  m.step_time_s = step_stats(after_warmup(steps, warmup, [](const StepTimes& t) { return t.total; }));
  Breakdown& b = m.breakdown_s;
  b.data = mean_after_warmup(steps, warmup, [](const StepTimes& t) { return t.b.data; });
  b.h2d = mean_after_warmup(steps, warmup, [](const StepTimes& t) { return t.b.h2d; });
  b.compute_fwd = mean_after_warmup(steps, warmup, [](const StepTimes& t) { return t.b.compute_fwd; });
  b.compute_bwd = mean_after_warmup(steps, warmup, [](const StepTimes& t) { return t.b.compute_bwd; });
  b.optimizer = mean_after_warmup(steps, warmup, [](const StepTimes& t) { return t.b.optimizer; });
  b.comm_total = mean_after_warmup(steps, warmup, [](const StepTimes& t) { return t.b.comm_total; });
  b.comm_exposed = mean_after_warmup(steps, warmup, [](const StepTimes& t) { return t.b.comm_exposed; });
  for (double e : epoch_times) m.epoch_mean_s += e / epoch_times.size();
  m.peak_memory_bytes = peak_memory_bytes(device);
  return m;
}

// The point's breakdown is the mean of the ranks' terms, its step time the slowest rank's; epoch time and
// memory are the largest rank's. rank_names: "HOST\nDEVICE" per rank (rank 0 only; empty elsewhere).
struct RankSummary {
  double epoch_max_s = 0, memory_max_bytes = 0;
};
RankSummary fill_ranks(const std::vector<RankMeasure>& all, const std::vector<std::string>& rank_names, ReportPoint& p) {
  const int nranks = static_cast<int>(all.size());
  RankSummary sum;
  int slowest = 0;
  for (int r = 0; r < nranks; ++r) {
    const RankMeasure& m = all[static_cast<size_t>(r)];
    RankReport rr;
    rr.rank = r;
    if (!rank_names.empty()) {
      auto nl = rank_names[r].find('\n');
      rr.host = rank_names[r].substr(0, nl);
      rr.device = rank_names[r].substr(nl + 1);
    }
    rr.step_time_s = m.step_time_s;
    rr.breakdown_s = m.breakdown_s;
    p.breakdown_s.data += m.breakdown_s.data / nranks;
    p.breakdown_s.h2d += m.breakdown_s.h2d / nranks;
    p.breakdown_s.compute_fwd += m.breakdown_s.compute_fwd / nranks;
    p.breakdown_s.compute_bwd += m.breakdown_s.compute_bwd / nranks;
    p.breakdown_s.optimizer += m.breakdown_s.optimizer / nranks;
    p.breakdown_s.comm_total += m.breakdown_s.comm_total / nranks;
    p.breakdown_s.comm_exposed += m.breakdown_s.comm_exposed / nranks;
    sum.epoch_max_s = std::max(sum.epoch_max_s, m.epoch_mean_s);
    sum.memory_max_bytes = std::max(sum.memory_max_bytes, m.peak_memory_bytes);
    if (m.step_time_s.mean > all[static_cast<size_t>(slowest)].step_time_s.mean) slowest = r;
    p.per_rank.push_back(rr);
  }
  p.step_time_s = all[static_cast<size_t>(slowest)].step_time_s;
  return sum;
}

// This rank's trace events (core/trace.hpp), times from the start of the point's first step.
struct TraceRecorder {
  bool on = false;
  int rank = 0;
  Clock::time_point t0 = Clock::now();  // set again at the start of the first step
  std::vector<TraceEvent> events;
  bool truncated = false;
  void record(TraceTrack track, std::string name, Clock::time_point a, Clock::time_point b) {
    if (!on) return;
    if (events.size() >= kTraceEventsPerRank) {
      truncated = true;
      return;
    }
    events.push_back({rank, track, std::move(name), seconds(t0, a), seconds(a, b), {}});
  }
};

// ---- one scenario point ----

struct PointResult {
  ReportPoint point;
  std::vector<TraceEvent> trace;  // this rank's (core/trace.hpp), times from the start of the first step
  bool trace_truncated = false;
};

// One scenario point on this rank: set up in the constructor, trained by run().
class PointTrainer {
 public:
  // tracing: this rank records core/trace.hpp's events (`vitsim train --trace`, the ranks --trace-ranks keeps).
  PointTrainer(const Scenario& s, World& world, const TrainOptions& opt, bool tracing);
  PointResult run();

 private:
  // ---- set-up, in this order ----
  void set_up_device();
  void set_up_model();
  void set_up_gradients();
  void set_up_data();
  void resume();
  void set_up_checkpoints();
  void observe_layers();
  // ---- training ----
  void run_epoch();
  void train_step(Loader& loader);
  void micro_batch(Loader& loader, int step_micro, bool reduce, StepTimes& st, torch::Tensor& step_loss);
  Clock::time_point update(const torch::Tensor& step_loss, StepTimes& st);  // returns the step's end
  [[noreturn]] void diverged(double mean_loss);
  void after_step();
  double evaluate();
  void checkpoint();
  void check_replicas(const char* when);
  bool fault_here() const { return opt_.fault.rank < 0 || opt_.fault.rank == rank_; }
  // ---- the report point ----
  ReportPoint assemble_point();
  void add_notes(ReportPoint& p);

  const Scenario& s_;
  World& world_;
  const TrainOptions& opt_;
  const int rank_, nranks_;
  const Precision precision_;
  const bool scaling_;  // fp16: dynamic loss scaling
  const int micro_, accum_, warmup_;
  TraceRecorder trace_;
  torch::Device device_{torch::kCPU};
  ThreadPlan thread_plan_;
  LossScaler scaler_;
  // Model and optimizer over flat buffers; the gradient path reads the flat gradient buffer, so it is
  // declared after it (destroyed before it).
  VisionTransformer model_{nullptr};
  std::vector<torch::Tensor> params_;
  FlatParameters flat_;
  std::vector<GradBucket> layout_;
  GradientPath grad_;
  std::unique_ptr<FlatOptimizer> optimizer_;
  // Data.
  DatasetSplit train_set_, test_set_;
  size_t n_train_ = 0;
  EpochShape epoch_plan_;
  long long full_steps_ = 0, run_steps_ = 0;
  Transform train_tf_, test_tf_;
  // Where the run stands, and what it measured.
  Position pos_;
  long long checkpointed_ = -1;  // global step of the checkpoint in place (-1: none)
  std::vector<std::string> notes_;
  std::vector<StepTimes> steps_;
  std::vector<double> epoch_times_;
  // Per-layer times for the trace (observe_layers).
  std::vector<LayerCost> layers_;
  std::vector<Clock::time_point> bwd_start_;
  Clock::time_point fwd_mark_;
  VisionTransformerImpl::LayerObserver observe_;
};

PointTrainer::PointTrainer(const Scenario& s, World& world, const TrainOptions& opt, bool tracing)
    : s_(s), world_(world), opt_(opt), rank_(world.rank()), nranks_(world.size()), precision_(s.training.precision),
      scaling_(s.training.precision == Precision::FP16), micro_(s.training.micro_batch), accum_(s.training.grad_accum),
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
  device_ = choose_device(s_, world_);
  check_supported(s_, device_);
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
    throw Error(fmt::format("internal: LibTorch ViT has {} parameters, core's model {}", parameter_count(*model_), expected));
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

// The datasets, this run's epoch (core/epoch.hpp: the simulator's rule, padded shards, the last partial
// micro-batch and step kept) and the transforms.
void PointTrainer::set_up_data() {
  train_set_ = open_dataset(s_.dataset, s_.model, "train");
  test_set_ = open_dataset(s_.dataset, s_.model, "test");
  if (!thread_plan_.warning.empty()) notes_.push_back(fmt::format("rank {}: {}", rank_, thread_plan_.warning));
  check_same_classes(*train_set_.source, *test_set_.source);
  const long long asked = s_.dataset.effective_train_samples(nranks_);
  n_train_ = std::min<size_t>(train_set_.source->size(), static_cast<size_t>(asked));
  const bool short_set = static_cast<long long>(train_set_.source->size()) < asked;
  if (short_set)
    notes_.push_back(fmt::format("dataset has {} training samples, fewer than the {} the scenario asks for",
                                 train_set_.source->size(), asked));
  epoch_plan_ = epoch_shape(static_cast<long long>(n_train_), nranks_, micro_, accum_,
                            short_set ? fmt::format("dataset {} ({})", s_.dataset.name, train_set_.source->describe())
                                      : std::string("dataset.train_samples"));
  full_steps_ = epoch_plan_.steps;
  run_steps_ = s_.run.max_steps > 0 ? std::min(s_.run.max_steps, full_steps_) : full_steps_;
  if (nranks_ != s_.ranks())
    notes_.push_back(fmt::format("measured with {} ranks; the scenario's cluster has {} nodes x {} GPUs", nranks_,
                                 s_.cluster.nodes, s_.cluster.gpus_per_node));
  train_tf_ = Transform{s_.model.image_size, s_.run.augment, train_set_.norm, s_.training.seed};
  test_tf_ = Transform{s_.model.image_size, false, test_set_.norm, s_.training.seed};
}

// --resume: the checkpoint's model, optimizer, position and loss scale.
void PointTrainer::resume() {
  Loaded loaded = load_checkpoint(s_, nranks_, *model_, *optimizer_, device_);
  pos_ = loaded.pos;
  bind_flat_parameters(params_, flat_.offsets, flat_.params);
  if (loaded.legacy) {
    const std::string warning = fmt::format(
        "{} was written by an older vitsim without checksums: resumed from it unverified", checkpoint_path(s_));
    if (rank_ == 0) fmt::print(stderr, "vitsim: warning: {}\n", warning);
    notes_.push_back(warning);
  }
  scaler_.scale = pos_.loss_scale;
  scaler_.good_steps = pos_.good_steps;
  if (rank_ == 0 && opt_.verbose)
    fmt::print("vitsim train: resumed {} at epoch {} step {} (global step {})\n", checkpoint_path(s_), pos_.epoch + 1,
               pos_.step_in_epoch, pos_.global_step);
  checkpointed_ = pos_.global_step;
}

// The checkpoint folder is made (and checked) now, not at the first checkpoint an hour in.
void PointTrainer::set_up_checkpoints() {
  if (!s_.run.checkpoint_dir.empty() && rank_ == 0) prepare_checkpoint_dir(s_);
}

void PointTrainer::checkpoint() {
  if (s_.run.checkpoint_dir.empty()) return;
  pos_.loss_scale = scaler_.scale;
  pos_.good_steps = scaler_.good_steps;
  if (rank_ == 0) save_checkpoint(s_, nranks_, *model_, *optimizer_, pos_, checkpointed_);
  checkpointed_ = pos_.global_step;
  world_.barrier("checkpoint barrier");
}

void PointTrainer::check_replicas(const char* when) {
  if (nranks_ == 1) return;
  const auto all = allgather_record(world_, checksum(params_), "replica checksum");
  for (int r = 0; r < nranks_; ++r)
    if (!std::isfinite(all[r].plain) || !std::isfinite(all[r].weighted))
      throw Error(fmt::format("training diverged ({} global step {}): rank {}'s parameters are not finite", when,
                              pos_.global_step, r));
  for (int r = 1; r < nranks_; ++r)
    if (all[r].plain != all[0].plain || all[r].weighted != all[0].weighted)
      throw Error(fmt::format("replicas diverged ({} global step {}): rank {} parameter checksums {:.17g} / {:.17g} "
                              "differ from rank 0's {:.17g} / {:.17g}",
                              when, pos_.global_step, r, all[r].plain, all[r].weighted, all[0].plain, all[0].weighted));
}

// Test accuracy over this rank's shard of the test set, summed over the ranks.
double PointTrainer::evaluate() {
  torch::NoGradGuard ng;
  model_->eval();
  size_t n_test = test_set_.source->size();
  if (s_.dataset.test_samples > 0) n_test = std::min<size_t>(n_test, s_.dataset.test_samples);
  if (s_.run.eval_samples > 0) n_test = std::min<size_t>(n_test, s_.run.eval_samples);
  std::vector<size_t> idx = shard_indices(n_test, rank_, nranks_, 0, 0, false, false);
  Loader loader(*test_set_.source, test_tf_, idx, std::max(micro_, 256), 0, 0, s_.loader.workers, s_.loader.prefetch);
  double correct = 0;
  while (auto b = loader.next()) {
    auto x = torch::from_blob(b->images.data(), {b->size, b->channels, b->image_size, b->image_size}).to(device_);
    auto y = torch::from_blob(b->labels.data(), {b->size}, torch::kInt64).to(device_);
    Autocast ac(device_.is_cuda(), precision_);
    correct += model_->forward(x).argmax(1).eq(y).sum().item<double>();
  }
  model_->train();
  double total = world_.allreduce_sum(static_cast<double>(idx.size()), "evaluation count");
  return world_.allreduce_sum(correct, "evaluation accuracy") / std::max(1.0, total);
}

// Per-layer times for the trace: the forward's layers through the model's observer, the backward's
// through a gradient hook on each layer's output (it fires as that layer's backward starts; the
// previous layer's hook, or the end of backward, ends it). On CUDA each mark synchronises the stream.
void PointTrainer::observe_layers() {
  layers_ = build_workload(s_.model).layers;
  bwd_start_.assign(layers_.size(), Clock::time_point{});
  if (!trace_.on) return;
  observe_ = [this](int l, torch::Tensor& out) {
    const auto now = phase_end(device_);
    trace_.record(TraceTrack::Compute, trace_fwd(layers_[l].name), fwd_mark_, now);
    fwd_mark_ = now;
    if (out.requires_grad())
      out.register_hook([this, l](const at::TensorBase&) { bwd_start_[l] = phase_end(device_); });
  };
}

PointResult PointTrainer::run() {
  model_->train();
  world_.barrier("start barrier");
  trace_.t0 = Clock::now();  // the trace's origin: every rank leaves the barrier together
  if (grad_.sync) grad_.sync->set_trace_origin(trace_.t0);
  observe_layers();
  for (; pos_.epoch < s_.training.epochs; ++pos_.epoch, pos_.step_in_epoch = 0) run_epoch();
  check_replicas("final check at");
  checkpoint();  // the final checkpoint is a finished run: epoch = epochs

  PointResult out;
  out.point = assemble_point();
  if (!opt_.save_params.empty()) {
    auto v = flat_params(params_);
    std::string bytes(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
    write_file_atomic(fmt::format("{}.rank{}.bin", opt_.save_params, rank_), bytes);
  }
  out.trace = std::move(trace_.events);
  out.trace_truncated = trace_.truncated;
  return out;
}

// The steps left in epoch pos_.epoch, then its evaluation.
void PointTrainer::run_epoch() {
  const auto epoch_start = Clock::now();
  const long long first_step = pos_.step_in_epoch;
  if (pos_.step_in_epoch < run_steps_) {
    auto idx = padded_shard(n_train_, rank_, nranks_, s_.training.seed, pos_.epoch);
    idx.resize(std::min<size_t>(idx.size(), static_cast<size_t>(run_steps_ * micro_ * accum_)));
    Loader loader(*train_set_.source, train_tf_, std::move(idx), micro_, pos_.epoch, pos_.step_in_epoch * accum_,
                  s_.loader.workers, s_.loader.prefetch);
    for (; pos_.step_in_epoch < run_steps_; ++pos_.step_in_epoch) {
      train_step(loader);
      after_step();
    }
  }
  const double epoch_s = seconds(epoch_start, Clock::now());
  if (first_step == 0) epoch_times_.push_back(epoch_s);
  if (grad_.sync) {
    auto ev = grad_.sync->take_trace();
    trace_.events.insert(trace_.events.end(), ev.begin(), ev.end());
  }
  const double acc = evaluate();
  pos_.accuracy.push_back(acc);
  if (rank_ == 0 && opt_.verbose)
    fmt::print("vitsim train: epoch {}/{}: {} steps in {:.1f} s, test accuracy {:.2f}%\n", pos_.epoch + 1,
               s_.training.epochs, run_steps_ - first_step, epoch_s, 100 * acc);
  std::fflush(stdout);
}

// One optimizer step: its micro-batches' forward and backward, the gradient all-reduce, the update.
void PointTrainer::train_step(Loader& loader) {
  StepTimes st;
  const auto step_start = Clock::now();
  // The epoch's last step takes the micro-batches that are left (core/epoch.hpp).
  const int step_micro = static_cast<int>(std::min<long long>(accum_, loader.batches() - pos_.step_in_epoch * accum_));
  torch::Tensor step_loss = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device_));
  for (int m = 0; m < step_micro; ++m) micro_batch(loader, step_micro, grad_.sync && m == step_micro - 1, st, step_loss);
  if (grad_.sync) {
    auto a = Clock::now();
    st.b.comm_exposed = grad_.sync->finish();
    st.b.comm_total = grad_.sync->busy_s();
    auto b = Clock::now();
    trace_.record(TraceTrack::Compute, kTraceCommWait, a, b);
  }
  st.total = seconds(step_start, update(step_loss, st));
  steps_.push_back(st);
}

// One micro-batch: data wait, host-to-device copy, forward (autocast), backward; its loss / step_micro
// added to step_loss. reduce: this backward ends the accumulation cycle, so the gradient sync reduces.
void PointTrainer::micro_batch(Loader& loader, int step_micro, bool reduce, StepTimes& st, torch::Tensor& step_loss) {
  auto a = Clock::now();
  auto batch = loader.next();
  if (!batch) throw Error("internal: the loader ran out of batches");
  auto b = Clock::now();
  st.b.data += seconds(a, b);
  trace_.record(TraceTrack::Data, kTraceDataWait, a, b);
  auto x = torch::from_blob(batch->images.data(), {batch->size, batch->channels, batch->image_size, batch->image_size});
  auto y = torch::from_blob(batch->labels.data(), {batch->size}, torch::kInt64);
  if (device_.is_cuda() && s_.loader.pinned) {
    x = x.pin_memory().to(device_, /*non_blocking=*/true);
    y = y.pin_memory().to(device_, true);
  } else if (device_.is_cuda()) {
    x = x.to(device_);  // pageable memory: a synchronous copy
    y = y.to(device_);
  }
  auto c = phase_end(device_);
  st.b.h2d += seconds(b, c);
  if (device_.is_cuda()) trace_.record(TraceTrack::Data, kTraceH2D, b, c);
  torch::Tensor loss;
  {
    Autocast ac(device_.is_cuda(), precision_);
    fwd_mark_ = c;
    loss = torch::cross_entropy_loss(trace_.on ? model_->forward(x, observe_) : model_->forward(x), y) / step_micro;
  }
  if (opt_.fault.kind == "nan" && pos_.global_step + 1 == opt_.fault.step && fault_here())
    loss = loss * std::numeric_limits<float>::quiet_NaN();
  step_loss += loss.detach().to(torch::kFloat64);
  if (scaling_) loss = loss * scaler_.scale;
  auto d = phase_end(device_);
  st.b.compute_fwd += seconds(c, d);
  if (grad_.sync) grad_.sync->begin_backward(reduce);
  loss.backward();
  auto e = phase_end(device_);
  st.b.compute_bwd += seconds(d, e);
  if (trace_.on)
    for (size_t l = 0; l < layers_.size(); ++l)
      trace_.record(TraceTrack::Compute, trace_bwd(layers_[l].name), bwd_start_[l], l > 0 ? bwd_start_[l - 1] : e);
}

// The update from the reduced gradient. Every rank holds the same reduced gradient, so every rank takes
// the same decision. A loss or a gradient that is not finite (fp32, bf16; under fp16 a non-finite
// gradient is an overflow the loss scaler skips) ends the run on every rank at once, with the same message.
Clock::time_point PointTrainer::update(const torch::Tensor& step_loss, StepTimes& st) {
  auto a = Clock::now();
  torch::Tensor& flat_grad = flat_.grads;
  const double unscale = nranks_ * (scaling_ ? scaler_.scale : 1.0);
  if (unscale != 1.0) flat_grad.div_(unscale);
  const bool grad_finite = flat_grad.isfinite().all().item<bool>();
  double mean_loss = step_loss.item<double>();
  if (nranks_ > 1) mean_loss = world_.allreduce_sum(mean_loss, "loss check") / nranks_;
  if (!std::isfinite(mean_loss) || (!grad_finite && !scaling_)) diverged(mean_loss);
  if (scaling_ && !grad_finite) {
    scaler_.scale /= 2;
    scaler_.good_steps = 0;
    ++scaler_.skipped;
  } else {
    optimizer_->step();
    if (scaling_ && ++scaler_.good_steps % LossScaler::kGrowthInterval == 0) scaler_.scale *= 2;
  }
  flat_grad.zero_();
  auto b = phase_end(device_);
  st.b.optimizer = seconds(a, b);
  trace_.record(TraceTrack::Compute, kTraceOptimizer, a, b);
  return b;
}

void PointTrainer::diverged(double mean_loss) {
  const std::string what =
      !std::isfinite(mean_loss)
          ? fmt::format("the loss is {}{}", mean_loss, nranks_ > 1 ? " (mean over the ranks)" : "")
          : fmt::format("the loss is finite ({:.4g}) but the {}gradient holds {} non-finite values", mean_loss,
                        nranks_ > 1 ? "all-reduced " : "", (~flat_.grads.isfinite()).sum().item<int64_t>());
  throw Diverged(fmt::format(
      "training diverged at global step {} (epoch {}, step {} of {}): {}; the parameters are not updated "
      "with it{}; lower training.lr (now {:g}) or check the data",
      pos_.global_step + 1, pos_.epoch + 1, pos_.step_in_epoch + 1, run_steps_, what,
      checkpointed_ >= 0 ? fmt::format(", and the last checkpoint (global step {}) is intact", checkpointed_)
                         : std::string(),
      s_.training.lr));
}

// After an optimizer step: the periodic replica check, a checkpoint (not after the run's last step: the
// final one follows), the injected fault of the tests.
void PointTrainer::after_step() {
  ++pos_.global_step;
  if (s_.run.check_every > 0 && pos_.global_step % s_.run.check_every == 0) check_replicas("periodic check at");
  const bool last_step = pos_.step_in_epoch + 1 == run_steps_ && pos_.epoch + 1 == s_.training.epochs;
  if (s_.run.checkpoint_every > 0 && pos_.global_step % s_.run.checkpoint_every == 0 && !last_step) {
    Position at = pos_;
    ++pos_.step_in_epoch;  // the checkpoint holds the position after this step
    checkpoint();
    pos_ = at;
  }
  if (!opt_.fault.kind.empty() && opt_.fault.kind != "nan" && pos_.global_step == opt_.fault.step && fault_here())
    inject(opt_.fault);
}

// ---- the report point ----

// Every rank's measurements gathered; the point's figures from them (identical on every rank; rank 0
// alone knows the other ranks' hosts).
ReportPoint PointTrainer::assemble_point() {
  RankMeasure mine = measure_rank(steps_, warmup_, epoch_times_, device_);
  const std::string device_name = device_.is_cuda() ? fmt::format("cuda:{}", device_.index()) : "cpu";
  const auto all = allgather_record(world_, mine, "report gather");
  const auto names = world_.gather(world_.host() + "\n" + device_name, 0, "report host gather");
  ReportPoint p;
  p.params = s_.params;
  p.scenario_id = scenario_id(s_);  // the identity a report fed back in is checked against
  p.nodes = world_.nodes();
  p.gpus = nranks_;
  p.micro_batch = micro_;
  p.grad_accum = accum_;
  p.params["nodes"] = std::to_string(p.nodes);
  p.params["gpus"] = std::to_string(p.gpus);
  p.params["micro_batch"] = std::to_string(micro_);
  p.params["grad_accum"] = std::to_string(accum_);
  p.global_batch = 1LL * micro_ * accum_ * nranks_;
  p.steps_per_epoch = full_steps_;
  const RankSummary ranks = fill_ranks(all, rank_ == 0 ? names : std::vector<std::string>{}, p);
  p.extrapolated = run_steps_ < full_steps_ || epoch_times_.empty();
  p.epoch_time_s = p.extrapolated ? p.step_time_s.mean * epoch_plan_.exact_steps() : ranks.epoch_max_s;
  p.throughput_img_s = p.step_time_s.mean > 0 ? p.global_batch / p.step_time_s.mean : 0;
  p.memory_per_gpu_bytes = ranks.memory_max_bytes;
  p.fits_in_memory = true;
  p.bound = bound_of(p.breakdown_s);
  p.simulated_steps = 0;
  set_model_flops(s_, micro_, accum_, nranks_, p);
  p.test_accuracy = pos_.accuracy;
  add_notes(p);
  return p;
}

// The notes of set-up (notes_) and those of the measurement.
void PointTrainer::add_notes(ReportPoint& p) {
  std::vector<std::string> notes = notes_;
  notes.push_back(steps_.size() > static_cast<size_t>(warmup_)
                      ? fmt::format("measured: {} steps per rank, statistics over steps after the first {} "
                                    "(simulation.warmup)",
                                    steps_.size(), warmup_)
                      : fmt::format("measured: {} steps per rank, statistics over all of them (no more than "
                                    "simulation.warmup = {}: no step was left out)",
                                    steps_.size(), warmup_));
  notes.push_back(device_.is_cuda()
                      ? "memory_per_gpu_bytes: peak reserved by the CUDA caching allocator, largest rank"
                      : "memory_per_gpu_bytes: peak resident set size of the largest rank process (CPU device)");
  if (p.extrapolated)
    notes.push_back(fmt::format("epoch_time_s extrapolated: mean step time x {:g} steps per epoch ({} micro-batches "
                                "/ grad_accum {})",
                                epoch_plan_.exact_steps(), epoch_plan_.micro_batches, accum_));
  if (nranks_ > 1) notes.push_back(fmt::format("replica checksums identical on all {} ranks at the end", nranks_));
  notes.push_back(describe_buckets(layout_, bucket_rule(s_.training.framework, s_.parallel.zero), gradient_comm_dtype(s_)));
  if (precision_ != Precision::FP32)
    notes.push_back(fmt::format("{} autocast; parameters, gradients and optimizer state fp32", precision_name(precision_)));
  if (scaling_)
    notes.push_back(fmt::format("fp16 loss scale {:g} at the end; {} steps skipped on overflow", scaler_.scale, scaler_.skipped));
  p.notes = std::move(notes);
}

PointResult train_point(const Scenario& s, World& world, const TrainOptions& opt, bool tracing) {
  PointTrainer trainer(s, world, opt, tracing);
  return trainer.run();
}

// The trace events of the traced ranks (`kept`) gathered on rank 0 as one TracePoint; other ranks get
// nothing. index, points: this point's place in the sweep, for its label and notes.
std::optional<TracePoint> gather_trace(World& world, const PointResult& r, const std::vector<int>& kept, size_t index,
                                       size_t points, const Scenario& s, std::vector<std::string>& trace_notes) {
  nlohmann::json mine = nlohmann::json::array();
  for (const auto& e : r.trace) mine.push_back({static_cast<int>(e.track), e.name, e.start_s, e.dur_s, e.args});
  auto parts = world.gather(nlohmann::json{{"events", mine}, {"truncated", r.trace_truncated}}.dump(), 0, "trace gather");
  if (world.rank() != 0) return std::nullopt;
  TracePoint tp;
  if (points > 1) tp.label = fmt::format("point {} {}", index + 1, nlohmann::json(s.params).dump());
  tp.ranks = kept;
  for (const auto& rr : r.point.per_rank) tp.hosts.push_back(rr.host);
  for (int rk : kept) {
    auto part = nlohmann::json::parse(parts[rk]);
    for (const auto& e : part["events"])
      tp.events.push_back({rk, static_cast<TraceTrack>(e[0].get<int>()), e[1].get<std::string>(), e[2].get<double>(),
                           e[3].get<double>(), e[4].get<TraceArgs>()});
    if (part["truncated"].get<bool>())
      trace_notes.push_back(fmt::format("point {}: rank {} reached {} events; its later events are not in the trace",
                                        index + 1, rk, kTraceEventsPerRank));
  }
  return tp;
}

Report train_all(World& world, const std::vector<Scenario>& points, const std::string& scenario_name,
                 const TrainOptions& opt) {
  Report report;
  report.scenario = scenario_name;
  report.source = "measured";
  report.provenance["host"] = world.host();
  report.provenance["date"] = now_utc();
  report.provenance["libtorch"] = TORCH_VERSION;
  report.provenance["ranks"] = std::to_string(world.size());
  report.provenance["command"] = opt.command;
  // The trace (core/trace.hpp): the ranks --trace-ranks lists, else the first 64; rank 0 gathers them.
  const bool tracing = !opt.trace_path.empty();
  std::unique_ptr<RankList> rank_list;
  if (tracing && !opt.trace_ranks.empty()) {
    rank_list = std::make_unique<RankList>(parse_rank_list(opt.trace_ranks));
    if (rank_list->max() >= world.size())
      throw Error(fmt::format("--trace-ranks '{}': rank {} is beyond this job's {} ranks (0-{})", opt.trace_ranks,
                              rank_list->max(), world.size(), world.size() - 1));
  }
  const std::vector<int> kept = traced_ranks(rank_list.get(), world.size());
  const bool rank_traced = tracing && std::find(kept.begin(), kept.end(), world.rank()) != kept.end();
  std::vector<TracePoint> trace_points;
  std::vector<std::string> trace_notes;
  if (const std::string note = trace_ranks_note(rank_list.get(), world.size()); tracing && !note.empty()) {
    trace_notes.push_back(note);
    if (world.rank() == 0 && opt.verbose) fmt::print(stderr, "vitsim: note: {}\n", note);
  }
  for (size_t i = 0; i < points.size(); ++i) {
    const Scenario& s = points[i];
    if (world.rank() == 0 && opt.verbose && points.size() > 1) fmt::print("vitsim train: point {}/{}\n", i + 1, points.size());
    PointResult r = train_point(s, world, opt, rank_traced);
    report.points.push_back(r.point);
    if (!tracing) continue;
    if (auto tp = gather_trace(world, r, kept, i, points.size(), s, trace_notes)) trace_points.push_back(std::move(*tp));
  }
  fill_scaling_efficiency(report);
  if (world.rank() == 0) {
    if (!opt.report_path.empty()) write_file_atomic(opt.report_path, report_to_json(report));
    if (tracing) write_file_atomic(opt.trace_path, write_trace(trace_points, "measured", trace_notes));
  }
  world.barrier("final barrier");
  return report;
}

}  // namespace

Report train(const std::vector<Scenario>& points, const std::string& scenario_name, const TrainOptions& opt) {
  if (points.empty()) throw Error("no scenario point to train");
  keep_freed_memory();  // before any tensor: freed activations stay in the process (real/src/io.cpp)
  bool quiet_exit = false;
  {
    World world(points.front().run.timeout_s);
    try {
      return train_all(world, points, scenario_name, opt);
    } catch (const Diverged&) {
      // Every rank stopped at the same step with the same message: rank 0 reports it, the others end
      // quietly with the same status once MPI is finalised (World's destructor).
      if (world.rank() == 0) throw;
      quiet_exit = true;
    } catch (const std::exception& e) {
      // A rank that fails (bad input, a file missing on its node, diverged replicas) ends the whole job at
      // once with its message, instead of leaving the others in a collective until the timeout.
      if (world.size() > 1) world.abort(e.what(), 1);
      throw;
    }
  }
  if (quiet_exit) {
    std::fflush(stdout);
    std::_Exit(1);
  }
  throw Error("internal: training ended without a report");
}

}  // namespace vitsim::real
