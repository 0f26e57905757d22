#include "vitsim/core/model/epoch.hpp"

#include <fmt/format.h>

#include "vitsim/core/base/error.hpp"

namespace vitsim {

double EpochShape::exact_steps() const {
  return static_cast<double>(micro_batches) / static_cast<double>(grad_accum);
}

EpochShape epoch_shape(long long samples, int replicas, int micro_batch, int grad_accum,
                       const std::string& what) {
  const std::string prefix = what.empty() ? "" : what + ": ";
  if (replicas < 1 || micro_batch < 1 || grad_accum < 1)
    throw Error(fmt::format("{}internal: epoch of {} replicas, micro-batch {}, grad_accum {}", prefix,
                            replicas, micro_batch, grad_accum));
  const long long global = 1LL * micro_batch * grad_accum * replicas;
  if (samples < global)
    throw Error(fmt::format(
        "{}{} training samples are fewer than one global batch of {} (micro_batch {} x grad_accum "
        "{} x {} data-parallel ranks)",
        prefix, samples, global, micro_batch, grad_accum, replicas));
  EpochShape e;
  e.samples = samples;
  e.per_replica = (samples + replicas - 1) / replicas;
  e.micro_batches = (e.per_replica + micro_batch - 1) / micro_batch;
  e.steps = (e.micro_batches + grad_accum - 1) / grad_accum;
  e.last_micro_batch = e.per_replica - (e.micro_batches - 1) * micro_batch;
  e.last_step_micro_batches = static_cast<int>(e.micro_batches - (e.steps - 1) * grad_accum);
  e.grad_accum = grad_accum;
  return e;
}

}  // namespace vitsim
