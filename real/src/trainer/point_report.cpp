// The report point of one scenario point (point_trainer.hpp): every rank's measurements gathered, the
// point's figures and notes (the statistics themselves are point_measure.cpp's).
#include <sys/resource.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "trainer/point_trainer.hpp"
#include "vitsim/core/formats/identity.hpp"
#include "vitsim/real/gather.hpp"

#ifdef VITSIM_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace vitsim::real {

namespace {

// Peak memory of this rank's device: the CUDA caching allocator's peak reservation on a GPU, the
// process's peak resident set on CPU.
double peak_memory_bytes(const torch::Device& device) {
#ifdef VITSIM_TORCH_CUDA
  if (device.is_cuda()) {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return static_cast<double>(
        stats.reserved_bytes[static_cast<size_t>(c10::cuda::CUDACachingAllocator::StatType::AGGREGATE)].peak);
  }
#else
  (void)device;
#endif
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0;  // Linux reports KiB
}

}  // namespace

// ---- the report point ----

// Every rank's measurements gathered; the point's figures from them (identical on every rank; rank 0
// alone knows the other ranks' hosts).
ReportPoint PointTrainer::assemble_point() {
  RankMeasure mine = measure_rank(steps_, warmup_, epoch_times_, peak_memory_bytes(device_));
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
  notes.push_back(
      device_.is_cuda()
          ? "memory_per_gpu_bytes: peak reserved by the CUDA caching allocator, largest rank"
          : "memory_per_gpu_bytes: peak resident set size of the largest rank process (CPU device)");
  if (p.extrapolated)
    notes.push_back(
        fmt::format("epoch_time_s extrapolated: mean step time x {:g} steps per epoch ({} micro-batches "
                    "/ grad_accum {})",
                    epoch_plan_.exact_steps(), epoch_plan_.micro_batches, accum_));
  if (nranks_ > 1)
    notes.push_back(fmt::format("replica checksums identical on all {} ranks at the end", nranks_));
  notes.push_back(
      describe_buckets(layout_, bucket_rule(s_.training.framework, s_.parallel.zero, s_.training.precision),
                       gradient_comm_dtype(s_)));
  if (precision_ != Precision::FP32)
    notes.push_back(fmt::format("{} autocast; parameters, gradients and optimizer state fp32",
                                precision_name(precision_)));
  if (scaling_)
    notes.push_back(fmt::format("fp16 loss scale {:g} at the end; {} steps skipped on overflow",
                                scaler_.scale, scaler_.skipped));
  p.notes = std::move(notes);
}

}  // namespace vitsim::real
