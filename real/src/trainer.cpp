// The data-parallel training loop: model replicas, bucketed gradient all-reduce (overlapped with
// backward through autograd hooks, or after it), accumulation, AdamW, per-step measurement,
// evaluation, checkpoints and the replica check.
#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include <fmt/format.h>

#include "vitsim/real/autocast.hpp"
#include "vitsim/real/checkpoint_file.hpp"
#include "vitsim/core/buckets.hpp"
#include "vitsim/core/epoch.hpp"
#include "vitsim/core/error.hpp"
#include "vitsim/core/identity.hpp"
#include "vitsim/core/io.hpp"
#include "vitsim/core/system.hpp"
#include "vitsim/core/ops.hpp"
#include "vitsim/core/platform.hpp"
#include "vitsim/core/trace.hpp"
#include "vitsim/real/comm.hpp"
#include "vitsim/real/data.hpp"
#include "vitsim/real/model.hpp"
#include "vitsim/real/optim.hpp"
#include "vitsim/real/train.hpp"

#ifdef VITSIM_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace vitsim::real {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// MFU of a measured run (README "Report files"): the op model's forward + backward FLOPs of one rank's
// micro-batches in a step (core/ops pass_ops, as predict counts them) over the dense peak of the GPUs the
// scenario's platform file gives its ranks (nodes in the scenario's order or the file's, the first
// gpus_per_node GPUs of each), in the precision used. A platform that cannot be read leaves the peak
// unknown (MFU empty); the TFLOP/s per GPU stay.
void set_model_flops(const Scenario& s, int micro, int accum, int nranks, ReportPoint& p) {
  double flops = 0;
  for (const Op& op : pass_ops(build_workload(s.model), micro, OpOptions{s.training.precision})) flops += op.flops;
  p.model_flops = flops * accum;
  try {
    const PlatformFacts facts = read_platform_facts(s.cluster.platform);
    std::vector<const NodeFacts*> nodes;
    if (s.cluster.hosts.empty()) {
      for (const auto& n : facts.nodes) nodes.push_back(&n);
    } else {
      for (const auto& h : s.cluster.hosts) nodes.push_back(&facts.node(h));
    }
    double peak = 0;
    int counted = 0;
    for (const NodeFacts* n : nodes)
      for (int g = 0; g < s.cluster.gpus_per_node && g < static_cast<int>(n->gpus.size()) && counted < nranks; ++g, ++counted)
        peak += facts.gpu.at(n->gpus[static_cast<size_t>(g)]).peak_flops(s.training.precision);
    p.peak_flops = counted == nranks && nranks > 0 ? peak / nranks : 0;
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

// ---- gradient synchronisation ----

struct Bucket {
  size_t offset = 0, count = 0;  // elements in the flat gradient buffer
  int params = 0;                // parameters whose gradients live in it
};

struct ReadyHook : torch::autograd::FunctionPostHook {
  explicit ReadyHook(std::function<void()> f) : fn(std::move(f)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    fn();
    return outputs;
  }
  std::function<void()> fn;
};

// Launches bucket all-reduces on a communication thread, strictly in bucket order (every rank must
// issue the same collectives in the same order), either as each bucket's last gradient is
// accumulated (overlap) or all at once after backward.
class GradientSync {
 public:
  // trace: record each bucket's all-reduce (core/trace.hpp) for this rank of `ranks`.
  GradientSync(Communicator& comm, float* flat, std::vector<Bucket> buckets, bool overlap, bool trace, int rank,
               int ranks)
      : comm_(comm), flat_(flat), buckets_(std::move(buckets)), overlap_(overlap), trace_(trace), rank_(rank),
        ranks_(ranks) {
    ready_count_.assign(buckets_.size(), 0);
    thread_ = std::thread([this] { loop(); });
  }
  ~GradientSync() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // Before each backward: whether this backward ends an accumulation cycle (and so reduces).
  void begin_backward(bool sync) {
    std::lock_guard<std::mutex> g(mu_);
    sync_ = sync;
    if (sync) {
      std::fill(ready_count_.begin(), ready_count_.end(), 0);
      launched_ = done_ = 0;
      busy_s_ = 0;
    }
  }
  // From the grad-accumulator hook of a parameter in bucket b.
  void param_ready(int b) {
    if (!overlap_) return;
    std::lock_guard<std::mutex> g(mu_);
    if (!sync_) return;
    ++ready_count_[b];
    while (launched_ < buckets_.size() && ready_count_[launched_] == buckets_[launched_].params) launch_locked();
  }
  // After the last backward of the cycle: launches what is left and waits. Returns the exposed
  // communication: from the end of backward (or the next launch, when nothing was in flight then) to
  // the completion of the last all-reduce. It lies inside the in-flight time by construction; the
  // training thread's wake-up after that is not communication.
  double finish() {
    auto start = Clock::now();
    std::unique_lock<std::mutex> g(mu_);
    const bool idle = launched_ == done_;  // nothing in flight as backward ends
    const bool all_done = idle && launched_ == buckets_.size();
    while (launched_ < buckets_.size()) launch_locked();
    if (idle) start = busy_since_;  // exposure starts with the launch that follows
    cv_.wait(g, [&] { return done_ == buckets_.size() || error_; });
    if (error_) std::rethrow_exception(error_);
    sync_ = false;
    return all_done ? 0.0 : std::max(0.0, seconds(start, last_done_));
  }
  // Seconds at least one launched all-reduce had not completed (queued or running) in the last cycle.
  double busy_s() const { return busy_s_; }
  // The trace's time origin: the start of the point's first step.
  void set_trace_origin(Clock::time_point t0) {
    std::lock_guard<std::mutex> g(mu_);
    t0_ = t0;
  }
  std::vector<TraceEvent> take_trace() {
    std::lock_guard<std::mutex> g(mu_);
    return std::move(trace_events_);
  }

 private:
  void launch_locked() {
    const auto now = Clock::now();
    if (launched_ == done_) busy_since_ = now;  // nothing in flight until now
    queue_.push_back({launched_, comm_.mark_ready()});
    ++launched_;
    cv_.notify_all();
  }
  void loop() {
    for (;;) {
      std::pair<size_t, uint64_t> job;
      {
        std::unique_lock<std::mutex> g(mu_);
        cv_.wait(g, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        job = queue_.front();
        queue_.pop_front();
      }
      const Bucket& b = buckets_[job.first];
      auto a = Clock::now();
      try {
        comm_.allreduce_sum(flat_ + b.offset, b.count, job.second);
      } catch (...) {
        std::lock_guard<std::mutex> g(mu_);
        error_ = std::current_exception();
        cv_.notify_all();
        return;
      }
      auto e = Clock::now();
      std::lock_guard<std::mutex> g(mu_);
      if (launched_ == done_ + 1) busy_s_ += seconds(busy_since_, e);  // the last one in flight
      last_done_ = e;
      if (trace_ && trace_events_.size() < kTraceEventsPerRank)
        trace_events_.push_back({rank_, TraceTrack::Comm, trace_allreduce(static_cast<int>(job.first)), seconds(t0_, a),
                                 seconds(a, e), allreduce_args(b.count * sizeof(float), seconds(a, e), ranks_)});
      ++done_;
      cv_.notify_all();
    }
  }

  Communicator& comm_;
  float* flat_;
  std::vector<Bucket> buckets_;
  bool overlap_;
  Clock::time_point t0_;
  bool trace_;
  int rank_, ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<size_t, uint64_t>> queue_;
  std::vector<int> ready_count_;
  size_t launched_ = 0, done_ = 0;
  Clock::time_point busy_since_, last_done_;
  bool sync_ = false, stop_ = false;
  double busy_s_ = 0;
  std::exception_ptr error_;
  std::vector<TraceEvent> trace_events_;
  std::thread thread_;
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
std::vector<double> checksum(const std::vector<torch::Tensor>& params) {
  double plain = 0, weighted = 0;
  double k = 1;
  for (const auto& p : params) {
    auto d = p.detach().to(torch::kCPU, torch::kFloat64);
    plain += d.sum().item<double>();
    weighted += k * d.abs().sum().item<double>();
    k += 1;
  }
  return {plain, weighted};
}

// ---- checkpoints ----

struct Position {
  int epoch = 0;                 // epoch in progress
  long long step_in_epoch = 0;   // optimizer steps done in it
  long long global_step = 0;     // optimizer steps done in the whole run
  std::vector<double> accuracy;  // test accuracy of the epochs finished
  double loss_scale = 65536.0;   // fp16 loss scaler state
  long long good_steps = 0;
};

std::string fingerprint(const Scenario& s, int world) {
  const auto& m = s.model;
  return fmt::format("vit {}px p{} c{} d{} L{} h{} mlp{} cls{}; {} {} samples; micro {} accum {} ranks {}; {} {} lr {} wd {} seed {}",
                     m.image_size, m.patch, m.channels, m.width, m.depth, m.heads, m.mlp_ratio, m.classes, s.dataset.name,
                     s.dataset.train_samples, s.training.micro_batch, s.training.grad_accum, world,
                     precision_name(s.training.precision), s.training.optimizer, s.training.lr, s.training.weight_decay,
                     s.training.seed);
}

std::string checkpoint_path(const Scenario& s) { return (fs::path(s.run.checkpoint_dir) / "checkpoint.pt").string(); }

// Every tensor a checkpoint holds, by name: the per-tensor CRC32s are computed over these at save and
// recomputed over what was loaded at resume.
std::vector<std::pair<std::string, torch::Tensor>> checkpoint_tensors(torch::nn::Module& model, const FlatOptimizer& opt) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : model.named_parameters(true)) out.push_back({"model/" + p.key(), p.value()});
  for (const auto& b : model.named_buffers(true)) out.push_back({"model/" + b.key(), b.value()});
  for (auto& t : opt.state()) out.push_back({"optimizer/" + t.first, t.second});
  return out;
}

uint32_t tensor_crc(const torch::Tensor& t) {
  auto c = t.detach().to(torch::kCPU).contiguous();
  return crc32_of(c.data_ptr(), c.numel() * c.element_size());
}

// "name crc32\n" per tensor, the archive's "checksums" entry.
std::string tensor_checksums(const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  std::string out;
  for (const auto& [name, t] : tensors) out += fmt::format("{} {:08x}\n", name, tensor_crc(t));
  return out;
}

// The first tensor whose CRC32 differs from the one written, as "tensor NAME (CRC32 X, Y written)"; ""
// when all match. A name missing from `written` (or a damaged list) counts as a difference.
std::string damaged_tensor(const std::vector<std::pair<std::string, torch::Tensor>>& tensors, const std::string& written) {
  std::map<std::string, std::string> recorded;
  std::istringstream in(written);
  std::string name, crc;
  while (in >> name >> crc) recorded[name] = crc;
  for (const auto& [n, t] : tensors) {
    const std::string now = fmt::format("{:08x}", tensor_crc(t));
    auto it = recorded.find(n);
    if (it == recorded.end()) return fmt::format("tensor {} (no checksum recorded for it)", n);
    if (it->second != now) return fmt::format("tensor {} (CRC32 {}, {} written)", n, now, it->second);
  }
  return "";
}

// previous_step: the global step of the checkpoint already in place (-1: none), for the error message.
void save_checkpoint(const Scenario& s, int world, torch::nn::Module& model, const FlatOptimizer& opt,
                     const Position& pos, long long previous_step) {
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive model_archive, opt_archive;
  model.save(model_archive);
  opt.save(opt_archive);
  archive.write("model", model_archive);
  archive.write("optimizer", opt_archive);
  archive.write("fingerprint", c10::IValue(fingerprint(s, world)));
  archive.write("epoch", c10::IValue(static_cast<int64_t>(pos.epoch)));
  archive.write("step_in_epoch", c10::IValue(static_cast<int64_t>(pos.step_in_epoch)));
  archive.write("global_step", c10::IValue(static_cast<int64_t>(pos.global_step)));
  archive.write("loss_scale", c10::IValue(pos.loss_scale));
  archive.write("loss_scale_good_steps", c10::IValue(static_cast<int64_t>(pos.good_steps)));
  auto tensors = checkpoint_tensors(model, opt);
  torch::Tensor accuracy =
      torch::tensor(pos.accuracy.empty() ? std::vector<double>{-1.0} : pos.accuracy, torch::kFloat64);
  archive.write("accuracy", accuracy, /*is_buffer=*/true);
  tensors.push_back({"accuracy", accuracy});
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    torch::Tensor rng = gen.get_state();
    archive.write("cpu_rng", rng, /*is_buffer=*/true);
    tensors.push_back({"cpu_rng", rng});
  }
  archive.write("checksums", c10::IValue(tensor_checksums(tensors)));
  const std::string path = checkpoint_path(s);
  // Streamed through core's atomic writer, not torch's own file writer: on a full disk that one throws
  // from a destructor (std::terminate) and leaves its partial file behind. The envelope adds the
  // archive's length and CRC32 (real/include/vitsim/real/checkpoint_file.hpp).
  try {
    write_file_atomic(path, [&](const ChunkSink& sink) {
      write_checkpoint_envelope(sink, [&](const ChunkSink& inner) {
        archive.save_to([&](const void* data, size_t size) -> size_t {
          inner(data, size);
          return size;
        });
      });
    });
  } catch (const Error& e) {
    if (previous_step < 0) throw Error(fmt::format("checkpoint after global step {}: {}", pos.global_step, e.what()));
    throw Error(fmt::format("checkpoint after global step {}: {}; the previous checkpoint (global step {}) is intact "
                            "and --resume continues from it",
                            pos.global_step, e.what(), previous_step));
  }
}

struct Loaded {
  Position pos;
  bool legacy = false;  // an older vitsim's checkpoint, without checksums
};

Loaded load_checkpoint(const Scenario& s, int world, torch::nn::Module& model, FlatOptimizer& opt,
                       const torch::Device& device) {
  const std::string path = checkpoint_path(s);
  if (!fs::exists(path))
    throw Error(fmt::format("--resume: no checkpoint at {} (run.checkpoint_dir)", path));
  const CheckpointBytes bytes = read_checkpoint_envelope(path);
  const std::string unusable = "the checkpoint cannot be used: restore a copy or start again without --resume";
  torch::serialize::InputArchive archive;
  try {
    // rank 0 wrote it from its GPU: every rank maps it to its own
    archive.load_from(bytes.file.data() + bytes.offset, bytes.size, device);
  } catch (const c10::Error& e) {
    if (!bytes.damage.empty())
      throw Error(fmt::format("{}: checksum mismatch ({}); the archive inside no longer opens: {}", path, bytes.damage,
                              unusable));
    throw Error(fmt::format("{}: unreadable checkpoint: {}", path, e.what_without_backtrace()));
  }
  if (!bytes.damage.empty()) {
    // Which part is damaged: load what still loads and compare each tensor with its own checksum.
    std::string where;
    try {
      torch::serialize::InputArchive model_archive, opt_archive;
      archive.read("model", model_archive);
      archive.read("optimizer", opt_archive);
      model.load(model_archive);
      opt.load(opt_archive);
      auto tensors = checkpoint_tensors(model, opt);
      torch::Tensor acc, rng;
      archive.read("accuracy", acc, /*is_buffer=*/true);
      archive.read("cpu_rng", rng, /*is_buffer=*/true);
      tensors.push_back({"accuracy", acc});
      tensors.push_back({"cpu_rng", rng});
      c10::IValue sums;
      archive.read("checksums", sums);
      where = damaged_tensor(tensors, sums.toStringRef());
      if (where.empty()) where = "no tensor: the damage is in the archive's names, scalars or layout";
    } catch (const std::exception&) {
      where = "the archive's structure (it no longer loads whole)";
    }
    throw Error(fmt::format("{}: checksum mismatch ({}); damaged: {}; {}", path, bytes.damage, where, unusable));
  }
  Loaded out;
  out.legacy = bytes.legacy;
  try {
    c10::IValue v;
    archive.read("fingerprint", v);
    if (v.toStringRef() != fingerprint(s, world))
      throw Error(fmt::format("{}: checkpoint is of another run:\n  checkpoint: {}\n  this run:   {}", path,
                              v.toStringRef(), fingerprint(s, world)));
    torch::serialize::InputArchive model_archive, opt_archive;
    archive.read("model", model_archive);
    archive.read("optimizer", opt_archive);
    model.load(model_archive);  // rebinds the parameters' storage: the caller binds them to the flat buffer again
    try {
      opt.load(opt_archive);
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", path, e.what()));
    }
    Position& pos = out.pos;
    archive.read("epoch", v);
    pos.epoch = static_cast<int>(v.toInt());
    archive.read("step_in_epoch", v);
    pos.step_in_epoch = v.toInt();
    archive.read("global_step", v);
    pos.global_step = v.toInt();
    archive.read("loss_scale", v);
    pos.loss_scale = v.toDouble();
    archive.read("loss_scale_good_steps", v);
    pos.good_steps = v.toInt();
    torch::Tensor acc, rng;
    archive.read("accuracy", acc, /*is_buffer=*/true);
    archive.read("cpu_rng", rng, /*is_buffer=*/true);
    if (!bytes.legacy) {
      // The file's CRC matched; each tensor is checked against its own checksum too, after loading.
      auto tensors = checkpoint_tensors(model, opt);
      tensors.push_back({"accuracy", acc});
      tensors.push_back({"cpu_rng", rng});
      archive.read("checksums", v);
      const std::string where = damaged_tensor(tensors, v.toStringRef());
      if (!where.empty())
        throw Error(fmt::format("{}: checksum mismatch: damaged: {}; {}", path, where, unusable));
    }
    acc = acc.to(torch::kCPU);
    for (int64_t i = 0; i < acc.numel(); ++i)
      if (acc[i].item<double>() >= 0) pos.accuracy.push_back(acc[i].item<double>());
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(rng.to(torch::kCPU));
  } catch (const c10::Error& e) {
    throw Error(fmt::format("{}: unreadable checkpoint: {}", path, e.what_without_backtrace()));
  }
  return out;
}

[[noreturn]] void inject(const FaultInjection& f, const World& world) {
  std::fprintf(stderr, "vitsim: %s: injected fault '%s' after step %lld\n", rank_identity().c_str(), f.kind.c_str(),
               f.step);
  std::fflush(stderr);
  (void)world;
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


// Per-step measurements of one rank.
struct StepTimes {
  double total = 0;
  Breakdown b;
};

// ---- one scenario point ----

struct PointResult {
  ReportPoint point;
  std::vector<TraceEvent> trace;  // this rank's (core/trace.hpp), times from the start of the first step
  bool trace_truncated = false;
};

// tracing: this rank records core/trace.hpp's events (`vitsim train --trace`, the ranks --trace-ranks keeps).
PointResult train_point(const Scenario& s, World& world, const TrainOptions& opt, bool tracing) {
  const int rank = world.rank(), nranks = world.size();
  std::vector<TraceEvent> trace;
  bool trace_truncated = false;
  Clock::time_point t0 = Clock::now();  // set again at the start of the first step
  auto record = [&](TraceTrack track, std::string name, Clock::time_point a, Clock::time_point b) {
    if (!tracing) return;
    if (trace.size() >= kTraceEventsPerRank) {
      trace_truncated = true;
      return;
    }
    trace.push_back({rank, track, std::move(name), seconds(t0, a), seconds(a, b), {}});
  };

  // Device and threads.
  std::string device_name = s.run.device;
  if (device_name == "auto") device_name = torch::cuda::is_available() ? "cuda" : "cpu";
  if (device_name == "cuda" && !torch::cuda::is_available())
    throw Error("run.device = cuda but this LibTorch has no usable CUDA device (build against a CUDA LibTorch via Torch_DIR)");
  torch::Device device(torch::kCPU);
  if (device_name == "cuda") device = torch::Device(torch::kCUDA, world.local_rank() % torch::cuda::device_count());
  const Precision precision = s.training.precision;
  if (precision == Precision::FP16 && !device.is_cuda())
    throw Error("training.precision fp16 needs run.device cuda (LibTorch's CPU autocast runs bf16 only)");
  LossScaler scaler;
  const bool scaling = precision == Precision::FP16;
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
  const ThreadPlan thread_plan = plan_threads(s.run.threads, world.local_size());
  const int threads = thread_plan.threads;
  set_threads(threads);
  if (!thread_plan.warning.empty() && world.local_rank() == 0)
    fmt::print(stderr, "vitsim: warning: rank {}: {}\n", rank, thread_plan.warning);
  world.set_timeout_s(s.run.timeout_s);

  // Every rank must train the same thing: a rank started with other arguments (a forgotten --set or
  // --resume in one app context of an MPMD launch) would otherwise fail later inside MPI with a
  // message-size error, or train silently wrong.
  {
    uint64_t h = 1469598103934665603ULL;  // FNV-1a, 64 bit: the same on every node whatever its libstdc++
    for (unsigned char c : fingerprint(s, nranks) + (opt.resume ? " resume" : "")) h = (h ^ c) * 1099511628211ULL;
    auto all = world.allgather({double(h >> 32), double(h & 0xffffffffULL)}, "run agreement check");
    for (int r = 1; r < nranks; ++r)
      if (all[2 * r] != all[0] || all[2 * r + 1] != all[1])
        throw Error(fmt::format("rank {} was started with another run than rank 0 (scenario, --set values or --resume "
                                "differ); every rank needs the same arguments",
                                r));
  }

  // Model, identical on every rank: same seed, then rank 0's values broadcast (as DDP does).
  torch::manual_seed(s.training.seed);
  VisionTransformer model(s.model);
  model->to(device);
  std::vector<torch::Tensor> params = model->parameters();
  const int64_t expected = build_workload(s.model).total_params();
  if (parameter_count(*model) != expected)
    throw Error(fmt::format("internal: LibTorch ViT has {} parameters, core's model {}", parameter_count(*model), expected));
  {
    auto v = flat_params(params);
    world.broadcast(v.data(), v.size() * sizeof(float), 0, "initial parameter broadcast");
    set_flat_params(params, v);
  }

  // Gradients live in one flat buffer, laid out in reverse parameter order (roughly the order backward
  // produces them), so that each bucket is one contiguous slice; parameters live the same way in another,
  // so that the optimizer steps the whole model at once.
  FlatParameters flat = flatten_parameters(params);
  torch::Tensor flat_grad = flat.grads, flat_param = flat.params;
  const std::vector<int64_t>& param_offset = flat.offsets;
  // The buckets are core's layout (gradient_buckets: the simulator cuts the same ones), over the tensors
  // in gradient-ready order, i.e. reverse parameter order: ready tensor j is parameter n-1-j.
  const std::vector<GradBucket> layout = gradient_buckets(s);
  std::vector<Bucket> buckets;
  std::vector<int> param_bucket(params.size());
  {
    std::vector<double> core_tensors = gradient_ready_tensors(s.model);
    std::reverse(core_tensors.begin(), core_tensors.end());  // registration order
    const int n = static_cast<int>(params.size());
    if (static_cast<int>(core_tensors.size()) != n)
      throw Error(fmt::format("internal: LibTorch ViT has {} parameter tensors, core's model {}", n, core_tensors.size()));
    for (int i = 0; i < n; ++i)
      if (static_cast<double>(params[i].numel()) != core_tensors[i])
        throw Error(fmt::format("internal: parameter tensor {} has {} elements in LibTorch, {} in core's model", i,
                                params[i].numel(), core_tensors[i]));
    for (size_t k = 0; k < layout.size(); ++k) {
      const GradBucket& g = layout[k];
      Bucket b{static_cast<size_t>(param_offset[n - 1 - g.begin]), static_cast<size_t>(g.elements), g.end - g.begin};
      for (int j = g.begin; j < g.end; ++j) {
        const int i = n - 1 - j;
        // Each bucket must be one contiguous slice of the flat gradient buffer.
        if (static_cast<size_t>(param_offset[i]) + params[i].numel() > b.offset + b.count ||
            static_cast<size_t>(param_offset[i]) < b.offset)
          throw Error(fmt::format("internal: parameter {} lies outside gradient bucket {}", i, k));
        param_bucket[i] = static_cast<int>(k);
      }
      buckets.push_back(b);
    }
  }

  std::unique_ptr<Communicator> comm;
  if (nranks > 1) {
    if (device.is_cuda()) {
#ifdef VITSIM_TORCH_CUDA
      comm = make_nccl_communicator(world, device.index(), c10::cuda::getCurrentCUDAStream(device.index()).stream());
#else
      throw Error("internal: CUDA device without a CUDA build");
#endif
    } else {
      comm = make_mpi_communicator(world);
    }
  }
  std::unique_ptr<GradientSync> sync;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  if (comm) {
    sync = std::make_unique<GradientSync>(*comm, flat_grad.data_ptr<float>(), buckets, s.parallel.overlap, tracing, rank,
                                          nranks);
    for (size_t i = 0; i < params.size(); ++i) {
      auto acc = torch::autograd::impl::grad_accumulator(params[i]);
      const int b = param_bucket[i];
      GradientSync* gs = sync.get();
      acc->add_post_hook(std::make_unique<ReadyHook>([gs, b] { gs->param_ready(b); }));
      accumulators.push_back(acc);  // the variable holds its accumulator only weakly
    }
  }

  auto optimizer = std::make_unique<FlatOptimizer>(optimizer_config(s.training), flat_param, flat_grad);

  // Data.
  DatasetSplit train_set = open_dataset(s.dataset, s.model, "train");
  DatasetSplit test_set = open_dataset(s.dataset, s.model, "test");
  std::vector<std::string> notes;
  if (!thread_plan.warning.empty()) notes.push_back(fmt::format("rank {}: {}", rank, thread_plan.warning));
  check_same_classes(*train_set.source, *test_set.source);
  size_t n_train = std::min<size_t>(train_set.source->size(),
                                    static_cast<size_t>(s.dataset.effective_train_samples(nranks)));
  const bool short_set = static_cast<long long>(train_set.source->size()) < s.dataset.effective_train_samples(nranks);
  if (short_set)
    notes.push_back(fmt::format("dataset has {} training samples, fewer than the {} the scenario asks for",
                                train_set.source->size(), s.dataset.effective_train_samples(nranks)));
  const int micro = s.training.micro_batch, accum = s.training.grad_accum;
  // The simulator's rule (core/epoch.hpp): padded shards, the last partial micro-batch and step kept.
  const EpochShape epoch_plan =
      epoch_shape(static_cast<long long>(n_train), nranks, micro, accum,
                  short_set ? fmt::format("dataset {} ({})", s.dataset.name, train_set.source->describe())
                            : std::string("dataset.train_samples"));
  const long long full_steps = epoch_plan.steps;
  const long long run_steps = s.run.max_steps > 0 ? std::min(s.run.max_steps, full_steps) : full_steps;
  if (nranks != s.ranks())
    notes.push_back(fmt::format("measured with {} ranks; the scenario's cluster has {} nodes x {} GPUs", nranks,
                                s.cluster.nodes, s.cluster.gpus_per_node));

  Transform train_tf{s.model.image_size, s.run.augment, train_set.norm, s.training.seed};
  Transform test_tf{s.model.image_size, false, test_set.norm, s.training.seed};

  Position pos;
  if (opt.resume) {
    Loaded loaded = load_checkpoint(s, nranks, *model, *optimizer, device);
    pos = loaded.pos;
    bind_flat_parameters(params, param_offset, flat_param);
    if (loaded.legacy) {
      const std::string warning = fmt::format(
          "{} was written by an older vitsim without checksums: resumed from it unverified", checkpoint_path(s));
      if (rank == 0) fmt::print(stderr, "vitsim: warning: {}\n", warning);
      notes.push_back(warning);
    }
    scaler.scale = pos.loss_scale;
    scaler.good_steps = pos.good_steps;
  }
  if (opt.resume && rank == 0 && opt.verbose)
    fmt::print("vitsim train: resumed {} at epoch {} step {} (global step {})\n", checkpoint_path(s), pos.epoch + 1,
               pos.step_in_epoch, pos.global_step);
  // The checkpoint folder is made (and checked) now, not at the first checkpoint an hour in.
  long long checkpointed = opt.resume ? pos.global_step : -1;
  if (!s.run.checkpoint_dir.empty() && rank == 0) {
    std::error_code ec;
    fs::create_directories(s.run.checkpoint_dir, ec);
    if (ec) throw Error(fmt::format("run.checkpoint_dir: cannot create {}: {}", s.run.checkpoint_dir, ec.message()));
    check_writable(checkpoint_path(s));
  }
  auto checkpoint = [&]() {
    if (s.run.checkpoint_dir.empty()) return;
    pos.loss_scale = scaler.scale;
    pos.good_steps = scaler.good_steps;
    if (rank == 0) save_checkpoint(s, nranks, *model, *optimizer, pos, checkpointed);
    checkpointed = pos.global_step;
    world.barrier("checkpoint barrier");
  };
  auto check_replicas = [&](const char* when) {
    if (nranks == 1) return;
    auto mine = checksum(params);
    auto all = world.allgather(mine, "replica checksum");
    for (int r = 0; r < nranks; ++r)
      if (!std::isfinite(all[2 * r]) || !std::isfinite(all[2 * r + 1]))
        throw Error(fmt::format("training diverged ({} global step {}): rank {}'s parameters are not finite", when,
                                pos.global_step, r));
    for (int r = 1; r < nranks; ++r)
      if (all[2 * r] != all[0] || all[2 * r + 1] != all[1])
        throw Error(fmt::format("replicas diverged ({} global step {}): rank {} parameter checksums {:.17g} / {:.17g} "
                                "differ from rank 0's {:.17g} / {:.17g}",
                                when, pos.global_step, r, all[2 * r], all[2 * r + 1], all[0], all[1]));
  };

  auto evaluate = [&]() -> double {
    torch::NoGradGuard ng;
    model->eval();
    size_t n_test = test_set.source->size();
    if (s.dataset.test_samples > 0) n_test = std::min<size_t>(n_test, s.dataset.test_samples);
    if (s.run.eval_samples > 0) n_test = std::min<size_t>(n_test, s.run.eval_samples);
    std::vector<size_t> idx = shard_indices(n_test, rank, nranks, 0, 0, false, false);
    Loader loader(*test_set.source, test_tf, idx, std::max(micro, 256), 0, 0, s.loader.workers, s.loader.prefetch);
    double correct = 0;
    while (auto b = loader.next()) {
      auto x = torch::from_blob(b->images.data(), {b->size, b->channels, b->image_size, b->image_size}).to(device);
      auto y = torch::from_blob(b->labels.data(), {b->size}, torch::kInt64).to(device);
      Autocast ac(device.is_cuda(), precision);
      correct += model->forward(x).argmax(1).eq(y).sum().item<double>();
    }
    model->train();
    double total = world.allreduce_sum(static_cast<double>(idx.size()), "evaluation count");
    return world.allreduce_sum(correct, "evaluation accuracy") / std::max(1.0, total);
  };

  std::vector<StepTimes> steps;
  std::vector<double> epoch_times;
  const int warmup = s.simulation.warmup;
  model->train();
  world.barrier("start barrier");
  t0 = Clock::now();  // the trace's origin: every rank leaves the barrier together
  if (sync) sync->set_trace_origin(t0);
  // Per-layer times for the trace: the forward's layers through the model's observer, the backward's
  // through a gradient hook on each layer's output (it fires as that layer's backward starts; the
  // previous layer's hook, or the end of backward, ends it). On CUDA each mark synchronises the stream.
  const std::vector<LayerCost> layers = build_workload(s.model).layers;
  std::vector<Clock::time_point> bwd_start(layers.size());
  Clock::time_point fwd_mark;
  VisionTransformerImpl::LayerObserver observe;
  if (tracing)
    observe = [&](int l, torch::Tensor& out) {
      const auto now = phase_end(device);
      record(TraceTrack::Compute, trace_fwd(layers[l].name), fwd_mark, now);
      fwd_mark = now;
      if (out.requires_grad())
        out.register_hook([&bwd_start, &device, l](const at::TensorBase&) { bwd_start[l] = phase_end(device); });
    };
  for (; pos.epoch < s.training.epochs; ++pos.epoch, pos.step_in_epoch = 0) {
    const auto epoch_start = Clock::now();
    const long long first_step = pos.step_in_epoch;
    if (pos.step_in_epoch < run_steps) {
      auto idx = padded_shard(n_train, rank, nranks, s.training.seed, pos.epoch);
      idx.resize(std::min<size_t>(idx.size(), static_cast<size_t>(run_steps * micro * accum)));
      Loader loader(*train_set.source, train_tf, std::move(idx), micro, pos.epoch, pos.step_in_epoch * accum,
                    s.loader.workers, s.loader.prefetch);
      for (; pos.step_in_epoch < run_steps; ++pos.step_in_epoch) {
        StepTimes st;
        const auto step_start = Clock::now();
        // The epoch's last step takes the micro-batches that are left (core/epoch.hpp).
        const int step_micro = static_cast<int>(std::min<long long>(accum, loader.batches() - pos.step_in_epoch * accum));
        torch::Tensor step_loss = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
        for (int m = 0; m < step_micro; ++m) {
          auto a = Clock::now();
          auto batch = loader.next();
          if (!batch) throw Error("internal: the loader ran out of batches");
          auto b = Clock::now();
          st.b.data += seconds(a, b);
          record(TraceTrack::Data, kTraceDataWait, a, b);
          auto x = torch::from_blob(batch->images.data(), {batch->size, batch->channels, batch->image_size, batch->image_size});
          auto y = torch::from_blob(batch->labels.data(), {batch->size}, torch::kInt64);
          if (device.is_cuda() && s.loader.pinned) {
            x = x.pin_memory().to(device, /*non_blocking=*/true);
            y = y.pin_memory().to(device, true);
          } else if (device.is_cuda()) {
            x = x.to(device);  // pageable memory: a synchronous copy
            y = y.to(device);
          }
          auto c = phase_end(device);
          st.b.h2d += seconds(b, c);
          if (device.is_cuda()) record(TraceTrack::Data, kTraceH2D, b, c);
          torch::Tensor loss;
          {
            Autocast ac(device.is_cuda(), precision);
            fwd_mark = c;
            loss = torch::cross_entropy_loss(tracing ? model->forward(x, observe) : model->forward(x), y) / step_micro;
          }
          if (opt.fault.kind == "nan" && pos.global_step + 1 == opt.fault.step && (opt.fault.rank < 0 || opt.fault.rank == rank))
            loss = loss * std::numeric_limits<float>::quiet_NaN();
          step_loss += loss.detach().to(torch::kFloat64);
          if (scaling) loss = loss * scaler.scale;
          auto d = phase_end(device);
          st.b.compute_fwd += seconds(c, d);
          const bool reduce = sync && m == step_micro - 1;
          if (sync) sync->begin_backward(reduce);
          loss.backward();
          auto e = phase_end(device);
          st.b.compute_bwd += seconds(d, e);
          if (tracing)
            for (size_t l = 0; l < layers.size(); ++l)
              record(TraceTrack::Compute, trace_bwd(layers[l].name), bwd_start[l], l > 0 ? bwd_start[l - 1] : e);
        }
        if (sync) {
          auto a = Clock::now();
          st.b.comm_exposed = sync->finish();
          st.b.comm_total = sync->busy_s();
          auto b = Clock::now();
          record(TraceTrack::Compute, kTraceCommWait, a, b);
        }
        auto a = Clock::now();
        const double unscale = nranks * (scaling ? scaler.scale : 1.0);
        if (unscale != 1.0) flat_grad.div_(unscale);
        // Every rank holds the same reduced gradient, so every rank takes the same decision. A loss or a
        // gradient that is not finite (fp32, bf16; under fp16 a non-finite gradient is an overflow the
        // loss scaler skips) ends the run on every rank at once, with the same message.
        const bool grad_finite = flat_grad.isfinite().all().item<bool>();
        double mean_loss = step_loss.item<double>();
        if (nranks > 1) mean_loss = world.allreduce_sum(mean_loss, "loss check") / nranks;
        if (!std::isfinite(mean_loss) || (!grad_finite && !scaling))
          throw Diverged(fmt::format(
              "training diverged at global step {} (epoch {}, step {} of {}): {}; the parameters are not updated "
              "with it{}; lower training.lr (now {:g}) or check the data",
              pos.global_step + 1, pos.epoch + 1, pos.step_in_epoch + 1, run_steps,
              !std::isfinite(mean_loss)
                  ? fmt::format("the loss is {}{}", mean_loss, nranks > 1 ? " (mean over the ranks)" : "")
                  : fmt::format("the loss is finite ({:.4g}) but the {}gradient holds {} non-finite values", mean_loss,
                                nranks > 1 ? "all-reduced " : "", (~flat_grad.isfinite()).sum().item<int64_t>()),
              checkpointed >= 0 ? fmt::format(", and the last checkpoint (global step {}) is intact", checkpointed)
                                : std::string(),
              s.training.lr));
        if (scaling && !grad_finite) {
          scaler.scale /= 2;
          scaler.good_steps = 0;
          ++scaler.skipped;
        } else {
          optimizer->step();
          if (scaling && ++scaler.good_steps % LossScaler::kGrowthInterval == 0) scaler.scale *= 2;
        }
        flat_grad.zero_();
        auto b = phase_end(device);
        st.b.optimizer = seconds(a, b);
        record(TraceTrack::Compute, kTraceOptimizer, a, b);
        st.total = seconds(step_start, b);
        steps.push_back(st);
        ++pos.global_step;
        if (s.run.check_every > 0 && pos.global_step % s.run.check_every == 0) check_replicas("periodic check at");
        const bool last_step = pos.step_in_epoch + 1 == run_steps && pos.epoch + 1 == s.training.epochs;
        if (s.run.checkpoint_every > 0 && pos.global_step % s.run.checkpoint_every == 0 && !last_step) {
          Position at = pos;
          ++pos.step_in_epoch;  // the checkpoint holds the position after this step
          checkpoint();
          pos = at;
        }
        if (!opt.fault.kind.empty() && opt.fault.kind != "nan" && pos.global_step == opt.fault.step && (opt.fault.rank < 0 || opt.fault.rank == rank))
          inject(opt.fault, world);
      }
    }
    const double epoch_s = seconds(epoch_start, Clock::now());
    if (first_step == 0) epoch_times.push_back(epoch_s);
    if (sync) {
      auto ev = sync->take_trace();
      trace.insert(trace.end(), ev.begin(), ev.end());
    }
    const double acc = evaluate();
    pos.accuracy.push_back(acc);
    if (rank == 0 && opt.verbose)
      fmt::print("vitsim train: epoch {}/{}: {} steps in {:.1f} s, test accuracy {:.2f}%\n", pos.epoch + 1,
                 s.training.epochs, run_steps - first_step, epoch_s, 100 * acc);
    std::fflush(stdout);
  }
  check_replicas("final check at");
  {
    // The final checkpoint is a finished run: epoch = epochs.
    checkpoint();
  }

  // ---- the report point ----
  auto stats_of = [&](auto get) {
    std::vector<double> v;
    for (size_t i = 0; i < steps.size(); ++i)
      if (static_cast<int>(i) >= warmup || steps.size() <= static_cast<size_t>(warmup)) v.push_back(get(steps[i]));
    return v;
  };
  auto mean_of = [&](auto get) {
    auto v = stats_of(get);
    double sum = 0;
    for (double x : v) sum += x;
    return v.empty() ? 0.0 : sum / v.size();
  };
  RankReport mine;
  mine.rank = rank;
  mine.host = world.host();
  mine.device = device.is_cuda() ? fmt::format("cuda:{}", device.index()) : "cpu";
  mine.step_time_s = step_stats(stats_of([](const StepTimes& t) { return t.total; }));
  mine.breakdown_s.data = mean_of([](const StepTimes& t) { return t.b.data; });
  mine.breakdown_s.h2d = mean_of([](const StepTimes& t) { return t.b.h2d; });
  mine.breakdown_s.compute_fwd = mean_of([](const StepTimes& t) { return t.b.compute_fwd; });
  mine.breakdown_s.compute_bwd = mean_of([](const StepTimes& t) { return t.b.compute_bwd; });
  mine.breakdown_s.optimizer = mean_of([](const StepTimes& t) { return t.b.optimizer; });
  mine.breakdown_s.comm_total = mean_of([](const StepTimes& t) { return t.b.comm_total; });
  mine.breakdown_s.comm_exposed = mean_of([](const StepTimes& t) { return t.b.comm_exposed; });
  double epoch_mean = 0;
  for (double e : epoch_times) epoch_mean += e / epoch_times.size();
  const Breakdown& mb = mine.breakdown_s;
  std::vector<double> packed{mine.step_time_s.mean, mine.step_time_s.p50, mine.step_time_s.p95, mb.data,
                             mb.h2d, mb.compute_fwd, mb.compute_bwd, mb.optimizer, mb.comm_total, mb.comm_exposed,
                             epoch_mean, peak_memory_bytes(device)};
  const size_t K = packed.size();
  auto all = world.allgather(packed, "report gather");
  auto hosts = world.gather(mine.host + "\n" + mine.device, 0, "report host gather");

  PointResult out;
  ReportPoint& p = out.point;
  p.params = s.params;
  p.scenario_id = scenario_id(s);  // the identity a report fed back in is checked against
  p.nodes = world.nodes();
  p.gpus = nranks;
  p.micro_batch = micro;
  p.grad_accum = accum;
  p.params["nodes"] = std::to_string(p.nodes);
  p.params["gpus"] = std::to_string(p.gpus);
  p.params["micro_batch"] = std::to_string(micro);
  p.params["grad_accum"] = std::to_string(accum);
  p.global_batch = 1LL * micro * accum * nranks;
  p.steps_per_epoch = full_steps;
  int slowest = 0;
  double rss_max = 0, epoch_max = 0;
  for (int r = 0; r < nranks; ++r) {
    const double* v = &all[r * K];
    RankReport rr;
    rr.rank = r;
    if (rank == 0) {
      auto nl = hosts[r].find('\n');
      rr.host = hosts[r].substr(0, nl);
      rr.device = hosts[r].substr(nl + 1);
    }
    rr.step_time_s = {v[0], v[1], v[2]};
    rr.breakdown_s = {v[3], v[4], v[5], v[6], v[7], v[8], v[9]};
    p.breakdown_s.data += v[3] / nranks;
    p.breakdown_s.h2d += v[4] / nranks;
    p.breakdown_s.compute_fwd += v[5] / nranks;
    p.breakdown_s.compute_bwd += v[6] / nranks;
    p.breakdown_s.optimizer += v[7] / nranks;
    p.breakdown_s.comm_total += v[8] / nranks;
    p.breakdown_s.comm_exposed += v[9] / nranks;
    epoch_max = std::max(epoch_max, v[10]);
    rss_max = std::max(rss_max, v[11]);
    if (v[0] > all[slowest * K]) slowest = r;
    p.per_rank.push_back(rr);
  }
  p.step_time_s = {all[slowest * K], all[slowest * K + 1], all[slowest * K + 2]};
  p.extrapolated = run_steps < full_steps || epoch_times.empty();
  p.epoch_time_s = p.extrapolated ? p.step_time_s.mean * epoch_plan.exact_steps() : epoch_max;
  p.throughput_img_s = p.step_time_s.mean > 0 ? p.global_batch / p.step_time_s.mean : 0;
  p.memory_per_gpu_bytes = rss_max;
  p.fits_in_memory = true;
  p.bound = bound_of(p.breakdown_s);
  p.simulated_steps = 0;
  set_model_flops(s, micro, accum, nranks, p);
  p.test_accuracy = pos.accuracy;
  notes.push_back(steps.size() > static_cast<size_t>(warmup)
                      ? fmt::format("measured: {} steps per rank, statistics over steps after the first {} "
                                    "(simulation.warmup)",
                                    steps.size(), warmup)
                      : fmt::format("measured: {} steps per rank, statistics over all of them (no more than "
                                    "simulation.warmup = {}: no step was left out)",
                                    steps.size(), warmup));
  notes.push_back(device.is_cuda()
                      ? "memory_per_gpu_bytes: peak reserved by the CUDA caching allocator, largest rank"
                      : "memory_per_gpu_bytes: peak resident set size of the largest rank process (CPU device)");
  if (p.extrapolated)
    notes.push_back(fmt::format("epoch_time_s extrapolated: mean step time x {:g} steps per epoch ({} micro-batches "
                                "/ grad_accum {})",
                                epoch_plan.exact_steps(), epoch_plan.micro_batches, accum));
  if (nranks > 1) notes.push_back(fmt::format("replica checksums identical on all {} ranks at the end", nranks));
  notes.push_back(describe_buckets(layout, bucket_rule(s.training.framework, s.parallel.zero), gradient_comm_dtype(s)));
  if (precision != Precision::FP32)
    notes.push_back(fmt::format("{} autocast; parameters, gradients and optimizer state fp32", precision_name(precision)));
  if (scaling)
    notes.push_back(fmt::format("fp16 loss scale {:g} at the end; {} steps skipped on overflow", scaler.scale, scaler.skipped));
  p.notes = notes;

  if (!opt.save_params.empty()) {
    auto v = flat_params(params);
    std::string bytes(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
    write_file_atomic(fmt::format("{}.rank{}.bin", opt.save_params, rank), bytes);
  }
  out.trace = std::move(trace);
  out.trace_truncated = trace_truncated;
  return out;
}

}  // namespace

static Report train_all(World& world, const std::vector<Scenario>& points, const std::string& scenario_name,
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
    if (tracing) {
      nlohmann::json mine = nlohmann::json::array();
      for (const auto& e : r.trace) mine.push_back({static_cast<int>(e.track), e.name, e.start_s, e.dur_s, e.args});
      auto parts = world.gather(nlohmann::json{{"events", mine}, {"truncated", r.trace_truncated}}.dump(), 0, "trace gather");
      if (world.rank() == 0) {
        TracePoint tp;
        if (points.size() > 1) tp.label = fmt::format("point {} {}", i + 1, nlohmann::json(s.params).dump());
        tp.ranks = kept;
        for (const auto& rr : r.point.per_rank) tp.hosts.push_back(rr.host);
        for (int rk : kept) {
          auto part = nlohmann::json::parse(parts[rk]);
          for (const auto& e : part["events"])
            tp.events.push_back({rk, static_cast<TraceTrack>(e[0].get<int>()), e[1].get<std::string>(), e[2].get<double>(),
                                 e[3].get<double>(), e[4].get<TraceArgs>()});
          if (part["truncated"].get<bool>())
            trace_notes.push_back(fmt::format("point {}: rank {} reached {} events; its later events are not in the trace",
                                              i + 1, rk, kTraceEventsPerRank));
        }
        trace_points.push_back(std::move(tp));
      }
    }
  }
  fill_scaling_efficiency(report);
  if (world.rank() == 0) {
    if (!opt.report_path.empty()) write_file_atomic(opt.report_path, report_to_json(report));
    if (tracing) write_file_atomic(opt.trace_path, write_trace(trace_points, "measured", trace_notes));
  }
  world.barrier("final barrier");
  return report;
}

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
