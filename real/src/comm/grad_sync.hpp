#pragma once
// The trainer's gradient synchronisation (internal to real/): core's bucket layout bound to the flat
// gradient buffer, and the bucket all-reduces launched on a communication thread, either as each bucket's
// last gradient is accumulated during backward (overlap) or all at once after it.
#include <torch/torch.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/model/buckets.hpp"
#include "vitsim/core/results/trace.hpp"
#include "vitsim/real/comm.hpp"

namespace vitsim::real {

struct Bucket {
  size_t offset = 0, count = 0;  // elements in the flat gradient buffer
  int params = 0;                // parameters whose gradients live in it
};

// core's layout (gradient_buckets, the simulator's buckets) over the flat gradient buffer.
struct BucketBinding {
  std::vector<Bucket> buckets;    // in launch order
  std::vector<int> param_bucket;  // per parameter (registration order): its bucket
};
// The layout's buckets over the tensors in gradient-ready order, i.e. reverse parameter order (ready tensor
// j is parameter n-1-j), checked against the LibTorch model: the same tensors with the same elements as
// core's model, each bucket one contiguous slice of the flat buffer (`offsets`: each parameter's first
// element in it). Throws Error("internal: ...") when they disagree.
BucketBinding bind_buckets(const std::vector<GradBucket>& layout, const ViTConfig& model,
                           const std::vector<torch::Tensor>& params, const std::vector<int64_t>& offsets);

// Launches bucket all-reduces on a communication thread, strictly in bucket order (every rank must
// issue the same collectives in the same order), either as each bucket's last gradient is
// accumulated (overlap) or all at once after backward.
class GradientSync {
 public:
  using Clock = std::chrono::steady_clock;
  // trace: record each bucket's all-reduce (core/results/trace.hpp) for this rank of `ranks`.
  GradientSync(Communicator& comm, float* flat, std::vector<Bucket> buckets, bool overlap, bool trace,
               int rank, int ranks);
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Before each backward: whether this backward ends an accumulation cycle (and so reduces).
  void begin_backward(bool sync);
  // From the grad-accumulator hook of a parameter in bucket b.
  void param_ready(int b);
  // After the last backward of the cycle: launches what is left and waits. Returns the exposed
  // communication: from the end of backward (or the next launch, when nothing was in flight then) to
  // the completion of the last all-reduce. It lies inside the in-flight time by construction; the
  // training thread's wake-up after that is not communication.
  double finish();
  // Seconds at least one launched all-reduce had not completed (queued or running) in the last cycle.
  double busy_s() const { return busy_s_; }
  // The trace's time origin: the start of the point's first step.
  void set_trace_origin(Clock::time_point t0);
  std::vector<TraceEvent> take_trace();

 private:
  struct Job {
    size_t bucket = 0;
    uint64_t ready_token = 0;  // Communicator::mark_ready's
  };
  void launch_locked();
  void loop();

  Communicator& comm_;
  float* flat_;
  std::vector<Bucket> buckets_;
  bool overlap_;
  Clock::time_point t0_;
  bool trace_;
  int rank_, ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::vector<int> ready_count_;
  size_t launched_ = 0, done_ = 0;
  Clock::time_point busy_since_, last_done_;
  bool sync_ = false, stop_ = false;
  double busy_s_ = 0;
  std::exception_ptr error_;
  std::vector<TraceEvent> trace_events_;
  std::thread thread_;
};

// The gradient path of one point: the communicator (MPI on CPU, NCCL on a GPU), the sync thread and the
// grad-accumulator hooks that tell it each parameter's gradient is ready. Empty with one rank. Members are
// destroyed hooks first, the communicator last.
struct GradientPath {
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<GradientSync> sync;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;  // the parameters hold them only weakly
};
GradientPath make_gradient_path(World& world, const torch::Device& device,
                                const std::vector<torch::Tensor>& params, const BucketBinding& binding,
                                torch::Tensor& flat_grad, bool overlap, bool tracing);

}  // namespace vitsim::real
