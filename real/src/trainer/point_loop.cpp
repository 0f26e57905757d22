// The training of one scenario point (point_trainer.hpp): the epoch loop with its evaluation, one
// optimizer step (micro-batches' forward and backward, the gradient sync, the update), what follows a step
// (replica check, checkpoint, the tests' injected fault), and the per-layer times of the trace.
#include <fcntl.h>
#include <unistd.h>

#include <ATen/autocast_mode.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <limits>
#include <thread>

#include <fmt/format.h>

#include "trainer/point_trainer.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/system.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/results/trace.hpp"
#include "vitsim/real/autocast.hpp"
#include "vitsim/real/gather.hpp"

#ifdef VITSIM_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace vitsim::real {

namespace {

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

// This process's resident set size in bytes (/proc/self/statm's second field, in pages): one pread of a
// descriptor opened once. It counts all the process holds: its code, LibTorch's libraries and pools, the
// loader's buffers, not only tensors. 0 where it cannot be read.
double resident_set_bytes() {
  static const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  static const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  char buf[128];
  const ssize_t n = fd >= 0 ? ::pread(fd, buf, sizeof buf - 1, 0) : -1;
  if (n <= 0) return 0;
  buf[n] = 0;
  unsigned long long size = 0, resident = 0;
  if (std::sscanf(buf, "%llu %llu", &size, &resident) != 2) return 0;
  return static_cast<double>(resident) * page;
}

// The memory the trace's "memory" counter shows: on a CUDA device the caching allocator's allocated bytes
// now (tensors live on the device, not the cache it keeps), elsewhere the process's resident set.
double memory_in_use(const torch::Device& device) {
#ifdef VITSIM_TORCH_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return static_cast<double>(stats.allocated_bytes[0].current);  // [0]: StatType::AGGREGATE, all pools
  }
#else
  (void)device;
#endif
  return resident_set_bytes();
}

[[noreturn]] void inject(const FaultInjection& f) {
  std::fprintf(stderr, "vitsim: %s: injected fault '%s' after step %lld\n", rank_identity().c_str(),
               f.kind.c_str(), f.step);
  std::fflush(stderr);
  if (f.kind == "kill") std::raise(SIGKILL);
  if (f.kind == "exit") std::_Exit(17);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // hang
}

}  // namespace

PointResult train_point(const Scenario& s, World& world, const TrainOptions& opt, bool tracing) {
  PointTrainer trainer(s, world, opt, tracing);
  return trainer.run();
}

// Test accuracy over this rank's shard of the test set, summed over the ranks.
double PointTrainer::evaluate() {
  torch::NoGradGuard ng;
  model_->eval();
  size_t n_test = test_set_.source->size();
  if (s_.dataset.test_samples > 0) n_test = std::min<size_t>(n_test, s_.dataset.test_samples);
  if (s_.run.eval_samples > 0) n_test = std::min<size_t>(n_test, s_.run.eval_samples);
  std::vector<size_t> idx = shard_indices(n_test, rank_, nranks_, 0, 0, false, false);
  Loader loader(*test_set_.source, test_tf_, idx, std::max(micro_, 256), 0, 0, s_.loader.workers,
                s_.loader.prefetch);
  double correct = 0;
  while (auto b = loader.next()) {
    auto x =
        torch::from_blob(b->images.data(), {b->size, b->channels, b->image_size, b->image_size}).to(device_);
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
    sample_memory(now);
    fwd_mark_ = now;
    if (out.requires_grad())
      out.register_hook([this, l](const at::TensorBase&) {
        bwd_start_[l] = phase_end(device_);
        sample_memory(bwd_start_[l]);  // the end of layer l + 1's backward
      });
  };
}

// The trace's "memory" counter where the predicted one changes: each layer's forward and backward end,
// each step's start and end (issue 28 item 8).
void PointTrainer::sample_memory(Clock::time_point t) {
  if (trace_.on) trace_.record_memory(t, memory_in_use(device_));
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
  out.memory = std::move(trace_.memory);
  out.trace_truncated = trace_.truncated;
  return out;
}

// The steps left in epoch pos_.epoch, then its evaluation.
void PointTrainer::run_epoch() {
  const auto epoch_start = Clock::now();
  const long long first_step = pos_.step_in_epoch;
  const size_t first_index = steps_.size();
  if (pos_.step_in_epoch < run_steps_) {
    auto idx = padded_shard(n_train_, rank_, nranks_, s_.training.seed, pos_.epoch);
    idx.resize(std::min<size_t>(idx.size(), static_cast<size_t>(run_steps_ * micro_ * accum_)));
    Loader loader(*train_set_.source, train_tf_, std::move(idx), micro_, pos_.epoch,
                  pos_.step_in_epoch * accum_, s_.loader.workers, s_.loader.prefetch);
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
  const std::string rate = epoch_rate(first_index);
  const double acc = evaluate();
  pos_.accuracy.push_back(acc);
  if (rank_ == 0 && opt_.verbose)
    fmt::print("vitsim train: epoch {}/{}: {} steps in {:.1f} s{}, test accuracy {:.2f}%\n", pos_.epoch + 1,
               s_.training.epochs, run_steps_ - first_step, epoch_s, rate, 100 * acc);
  std::fflush(stdout);
}

// The epoch's rate on the terminal (issue 28: `vitsim train` printed no step time, img/s or MFU): the mean
// step of its steps past simulation.warmup (all of them when none is), the slowest rank's as in the report,
// the images per second of the global batch, and MFU as the report computes it (the op model's FLOPs of a
// rank's step over the step and the platform's peak per device). Every rank calls it (one allgather).
std::string PointTrainer::epoch_rate(size_t first_index) {
  double sum = 0;
  int n = 0;
  for (int pass = 0; pass < 2 && n == 0; ++pass)
    for (size_t i = first_index; i < steps_.size(); ++i)
      if (pass == 1 || static_cast<long long>(i) >= warmup_) {
        sum += steps_[i].total;
        ++n;
      }
  const double mine = n > 0 ? sum / n : 0;
  double step = 0;
  for (double r : allgather_record(world_, mine, "epoch rate gather")) step = std::max(step, r);
  if (step <= 0) return "";
  if (rate_flops_.model_flops == 0) set_model_flops(s_, micro_, accum_, nranks_, rate_flops_);
  const double batch = 1.0 * micro_ * accum_ * nranks_;
  std::string mfu;
  if (rate_flops_.peak_flops > 0)
    mfu = fmt::format(", MFU {:.1f}% of {:.3g} GFLOP/s per device",
                      100 * rate_flops_.model_flops / (step * rate_flops_.peak_flops),
                      rate_flops_.peak_flops / 1e9);
  return fmt::format("; step {} (mean of {} steps, slowest rank), {:.1f} img/s{}", units::format_time(step),
                     n, batch / step, mfu);
}

// One optimizer step: its micro-batches' forward and backward, the gradient all-reduce, the update.
void PointTrainer::train_step(Loader& loader) {
  Progress& at = progress();
  at.epoch = pos_.epoch;
  at.step_in_epoch = pos_.step_in_epoch;
  at.steps_per_epoch = run_steps_;
  at.global_step = pos_.global_step;
  at.phase = 1;
  StepTimes st;
  const auto step_start = Clock::now();
  sample_memory(step_start);
  // The epoch's last step takes the micro-batches that are left (core/model/epoch.hpp).
  const int step_micro =
      static_cast<int>(std::min<long long>(accum_, loader.batches() - pos_.step_in_epoch * accum_));
  torch::Tensor step_loss = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device_));
  for (int m = 0; m < step_micro; ++m)
    micro_batch(loader, step_micro, grad_.sync && m == step_micro - 1, st, step_loss);
  if (grad_.sync) {
    auto a = Clock::now();
    st.b.comm_exposed = grad_.sync->finish();
    st.b.comm_total = grad_.sync->busy_s();
    auto b = Clock::now();
    trace_.record(TraceTrack::Compute, kTraceCommWait, a, b);
  }
  const auto step_end = update(step_loss, st);
  sample_memory(step_end);
  st.total = seconds(step_start, step_end);
  steps_.push_back(st);
}

// One micro-batch: data wait, host-to-device copy, forward (autocast), backward; its loss / step_micro
// added to step_loss. reduce: this backward ends the accumulation cycle, so the gradient sync reduces.
void PointTrainer::micro_batch(Loader& loader, int step_micro, bool reduce, StepTimes& st,
                               torch::Tensor& step_loss) {
  auto a = Clock::now();
  auto batch = loader.next();
  if (!batch) throw Error("internal: the loader ran out of batches");
  auto b = Clock::now();
  st.b.data += seconds(a, b);
  trace_.record(TraceTrack::Data, kTraceDataWait, a, b);
  auto x = torch::from_blob(batch->images.data(),
                            {batch->size, batch->channels, batch->image_size, batch->image_size});
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
    loss = torch::cross_entropy_loss(trace_.on ? model_->forward(x, observe_) : model_->forward(x), y) /
           step_micro;
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
  sample_memory(e);  // the end of the first layer's backward
  if (trace_.on)
    for (size_t l = 0; l < layers_.size(); ++l)
      trace_.record(TraceTrack::Compute, trace_bwd(layers_[l].name), bwd_start_[l],
                    l > 0 ? bwd_start_[l - 1] : e);
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
          : fmt::format("the loss is finite ({:.4g}) but the {}gradient holds {} non-finite values",
                        mean_loss, nranks_ > 1 ? "all-reduced " : "",
                        (~flat_.grads.isfinite()).sum().item<int64_t>());
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
  if (s_.run.check_every > 0 && pos_.global_step % s_.run.check_every == 0)
    check_replicas("periodic check at");
  const bool last_step = pos_.step_in_epoch + 1 == run_steps_ && pos_.epoch + 1 == s_.training.epochs;
  if (s_.run.checkpoint_every > 0 && pos_.global_step % s_.run.checkpoint_every == 0 && !last_step) {
    Position at = pos_;
    ++pos_.step_in_epoch;  // the checkpoint holds the position after this step
    checkpoint();
    pos_ = at;
  }
  if (!opt_.fault.kind.empty() && opt_.fault.kind != "nan" && pos_.global_step == opt_.fault.step &&
      fault_here())
    inject(opt_.fault);
}

}  // namespace vitsim::real
