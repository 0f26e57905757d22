// DeepSpeed's batch rule (deepspeed.hpp, derive_deepspeed_batch): DeepSpeed v0.12-v0.16
// runtime/config.py _set_batch_related_parameters, then _batch_assertion, case by case.
#include <fmt/format.h>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/formats/deepspeed.hpp"

namespace vitsim {

DeepSpeedBatch derive_deepspeed_batch(std::optional<long long> train_batch,
                                      std::optional<long long> micro_batch,
                                      std::optional<long long> grad_accum, long long world) {
  if (world < 1) throw Error(fmt::format("DeepSpeed's batch rule needs at least one rank, got {}", world));
  DeepSpeedBatch b;
  std::string derived;  // how DeepSpeed filled the missing figures, for the message
  if (train_batch && micro_batch && grad_accum) {
    b = {*train_batch, *micro_batch, *grad_accum};
  } else if (train_batch && micro_batch) {
    b = {*train_batch, *micro_batch, *train_batch / *micro_batch / world};
    derived = fmt::format("gradient_accumulation_steps = {} // {} // {} = {}", *train_batch, *micro_batch,
                          world, b.grad_accum);
  } else if (train_batch && grad_accum) {
    b = {*train_batch, *train_batch / world / *grad_accum, *grad_accum};
    derived = fmt::format("train_micro_batch_size_per_gpu = {} // {} // {} = {}", *train_batch, world,
                          *grad_accum, b.micro_batch);
  } else if (micro_batch && grad_accum) {
    b = {*micro_batch * *grad_accum * world, *micro_batch, *grad_accum};
  } else if (train_batch) {
    b = {*train_batch, *train_batch / world, 1};
    derived = fmt::format("train_micro_batch_size_per_gpu = {} // {} = {} with gradient_accumulation_steps 1",
                          *train_batch, world, b.micro_batch);
  } else if (micro_batch) {
    b = {*micro_batch * world, *micro_batch, 1};
  } else {
    throw Error(
        "DeepSpeed needs either train_batch_size or train_micro_batch_size_per_gpu (runtime/config.py "
        "_set_batch_related_parameters); give one in the config or training.micro_batch in the scenario");
  }
  if (b.micro_batch > 0 && b.grad_accum > 0 && b.train_batch == b.micro_batch * b.grad_accum * world)
    return b;
  // The message of the three given (issue 27's wording), with DeepSpeed's derivation when it made one.
  const std::string head =
      fmt::format("train_batch_size {} != micro_batch {} x gradient_accumulation_steps {} x ranks {} = {}",
                  b.train_batch, b.micro_batch, b.grad_accum, world, b.micro_batch * b.grad_accum * world);
  if (derived.empty()) throw Error(head + " (DeepSpeed requires equality)");
  throw Error(fmt::format(
      "{} (DeepSpeed derives {}, and requires equality): give a train_batch_size the ranks divide, or the "
      "micro-batch and accumulation instead",
      head, derived));
}

}  // namespace vitsim
