#pragma once
// The trainer of one scenario point on this rank (internal to real/): its state and its named steps.
// Set-up (device, threads, the run agreement, model and optimizer over flat buffers, gradient path, data)
// is point_setup.cpp; the epoch loop, one optimizer step and evaluation point_loop.cpp; checkpoints,
// resume and replica checks point_state.cpp; the report point point_report.cpp.
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/grad_sync.hpp"
#include "model/checkpoint.hpp"
#include "trainer/point.hpp"
#include "trainer/point_measure.hpp"
#include "trainer/trace_recorder.hpp"
#include "vitsim/core/model/buckets.hpp"
#include "vitsim/core/model/epoch.hpp"
#include "vitsim/core/model/vit.hpp"
#include "vitsim/real/comm.hpp"
#include "vitsim/real/data.hpp"
#include "vitsim/real/model.hpp"
#include "vitsim/real/optim.hpp"
#include "vitsim/real/train.hpp"

namespace vitsim::real {

// fp16 dynamic loss scaling with torch.cuda.amp.GradScaler's defaults: initial scale 2^16, halved on
// an overflow (the step is skipped), doubled after 2000 steps without one.
struct LossScaler {
  double scale = 65536.0;
  long long good_steps = 0, skipped = 0;
  static constexpr long long kGrowthInterval = 2000;
};

// The parameters as one fp32 vector on the host, in parameter order (point_setup.cpp).
std::vector<float> flat_params(const std::vector<torch::Tensor>& params);

// One scenario point on this rank: set up in the constructor, trained by run().
class PointTrainer {
 public:
  // tracing: this rank records core/results/trace.hpp's events (`vitsim train --trace`, the ranks
  // --trace-ranks keeps).
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
  void sample_memory(Clock::time_point t);  // the trace's "memory" counter at t (tracing only)
  // ---- training ----
  void run_epoch();
  std::string epoch_rate(size_t first_index);  // "; step 52.1 ms (...), 1228.4 img/s, MFU ..." or ""
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
  ReportPoint rate_flops_;  // model_flops and peak_flops for epoch_rate (set_model_flops), made once
  // Per-layer times for the trace (observe_layers).
  std::vector<LayerCost> layers_;
  std::vector<Clock::time_point> bwd_start_;
  Clock::time_point fwd_mark_;
  VisionTransformerImpl::LayerObserver observe_;
};

}  // namespace vitsim::real
