// The trainer's gradient synchronisation (grad_sync.hpp).
#include "comm/grad_sync.hpp"

#include <torch/csrc/autograd/function_hook.h>

#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/system.hpp"

#ifdef VITSIM_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace vitsim::real {

namespace {

struct ReadyHook : torch::autograd::FunctionPostHook {
  explicit ReadyHook(std::function<void()> f) : fn(std::move(f)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    fn();
    return outputs;
  }
  std::function<void()> fn;
};

// The LibTorch model's parameter tensors must be core's, in registration order, element for element.
void check_same_tensors(const ViTConfig& model, const std::vector<torch::Tensor>& params) {
  std::vector<double> core_tensors = gradient_ready_tensors(model);
  std::reverse(core_tensors.begin(), core_tensors.end());  // registration order
  const int n = static_cast<int>(params.size());
  if (static_cast<int>(core_tensors.size()) != n)
    throw Error(fmt::format("internal: LibTorch ViT has {} parameter tensors, core's model {}", n,
                            core_tensors.size()));
  for (int i = 0; i < n; ++i)
    if (static_cast<double>(params[i].numel()) != core_tensors[i])
      throw Error(fmt::format("internal: parameter tensor {} has {} elements in LibTorch, {} in core's model",
                              i, params[i].numel(), core_tensors[i]));
}

std::unique_ptr<Communicator> make_communicator(World& world, const torch::Device& device) {
  if (device.is_cuda()) {
#ifdef VITSIM_TORCH_CUDA
    return make_nccl_communicator(world, device.index(),
                                  c10::cuda::getCurrentCUDAStream(device.index()).stream());
#else
    throw Error("internal: CUDA device without a CUDA build");
#endif
  }
  return make_mpi_communicator(world);
}

}  // namespace

BucketBinding bind_buckets(const std::vector<GradBucket>& layout, const ViTConfig& model,
                           const std::vector<torch::Tensor>& params, const std::vector<int64_t>& offsets) {
  check_same_tensors(model, params);
  const int n = static_cast<int>(params.size());
  BucketBinding out;
  out.param_bucket.assign(params.size(), 0);
  for (size_t k = 0; k < layout.size(); ++k) {
    const GradBucket& g = layout[k];
    Bucket b{static_cast<size_t>(offsets[n - 1 - g.begin]), static_cast<size_t>(g.elements), g.end - g.begin};
    for (int j = g.begin; j < g.end; ++j) {
      const int i = n - 1 - j;
      // Each bucket must be one contiguous slice of the flat gradient buffer.
      if (static_cast<size_t>(offsets[i]) + params[i].numel() > b.offset + b.count ||
          static_cast<size_t>(offsets[i]) < b.offset)
        throw Error(fmt::format("internal: parameter {} lies outside gradient bucket {}", i, k));
      out.param_bucket[i] = static_cast<int>(k);
    }
    out.buckets.push_back(b);
  }
  return out;
}

GradientPath make_gradient_path(World& world, const torch::Device& device,
                                const std::vector<torch::Tensor>& params, const BucketBinding& binding,
                                torch::Tensor& flat_grad, bool overlap, bool tracing) {
  GradientPath path;
  if (world.size() <= 1) return path;
  path.comm = make_communicator(world, device);
  path.sync = std::make_unique<GradientSync>(*path.comm, flat_grad.data_ptr<float>(), binding.buckets,
                                             overlap, tracing, world.rank(), world.size());
  GradientSync* gs = path.sync.get();
  for (size_t i = 0; i < params.size(); ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(params[i]);
    const int b = binding.param_bucket[i];
    acc->add_post_hook(std::make_unique<ReadyHook>([gs, b] { gs->param_ready(b); }));
    path.accumulators.push_back(acc);
  }
  return path;
}

// ---- GradientSync ----

GradientSync::GradientSync(Communicator& comm, float* flat, std::vector<Bucket> buckets, bool overlap,
                           bool trace, int rank, int ranks)
    : comm_(comm),
      flat_(flat),
      buckets_(std::move(buckets)),
      overlap_(overlap),
      trace_(trace),
      rank_(rank),
      ranks_(ranks) {
  ready_count_.assign(buckets_.size(), 0);
  thread_ = std::thread([this] { loop(); });
}

GradientSync::~GradientSync() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void GradientSync::begin_backward(bool sync) {
  std::lock_guard<std::mutex> g(mu_);
  sync_ = sync;
  if (sync) {
    std::fill(ready_count_.begin(), ready_count_.end(), 0);
    launched_ = done_ = 0;
    busy_s_ = 0;
  }
}

void GradientSync::param_ready(int b) {
  if (!overlap_) return;
  std::lock_guard<std::mutex> g(mu_);
  if (!sync_) return;
  ++ready_count_[b];
  while (launched_ < buckets_.size() && ready_count_[launched_] == buckets_[launched_].params)
    launch_locked();
}

double GradientSync::finish() {
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

void GradientSync::set_trace_origin(Clock::time_point t0) {
  std::lock_guard<std::mutex> g(mu_);
  t0_ = t0;
}

std::vector<TraceEvent> GradientSync::take_trace() {
  std::lock_guard<std::mutex> g(mu_);
  return std::move(trace_events_);
}

void GradientSync::launch_locked() {
  const auto now = Clock::now();
  if (launched_ == done_) busy_since_ = now;  // nothing in flight until now
  queue_.push_back({launched_, comm_.mark_ready()});
  ++launched_;
  cv_.notify_all();
}

void GradientSync::loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> g(mu_);
      cv_.wait(g, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = queue_.front();
      queue_.pop_front();
    }
    const Bucket& b = buckets_[job.bucket];
    auto a = Clock::now();
    try {
      comm_.allreduce_sum(flat_ + b.offset, b.count, job.ready_token);
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
      trace_events_.push_back({rank_, TraceTrack::Comm, trace_allreduce(static_cast<int>(job.bucket)),
                               seconds(t0_, a), seconds(a, e),
                               allreduce_args(b.count * sizeof(float), seconds(a, e), ranks_)});
    ++done_;
    cv_.notify_all();
  }
}

}  // namespace vitsim::real
