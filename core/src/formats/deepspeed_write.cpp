// A DeepSpeed config for one resolved point (deepspeed.hpp, deepspeed_config_for): the keys
// read_deepspeed_config reads, with the values the scenario resolved, so that DeepSpeed trains the point
// vitsim predicted and vitsim reads the file back to the same settings.
#include <cmath>
#include <nlohmann/json.hpp>

#include "vitsim/core/formats/deepspeed.hpp"
#include "vitsim/core/formats/scenario.hpp"

namespace vitsim {

std::string deepspeed_config_for(const Scenario& s) {
  using json = nlohmann::ordered_json;
  const TrainingSpec& t = s.training;
  json j;
  j["train_batch_size"] = s.global_batch();
  j["train_micro_batch_size_per_gpu"] = t.micro_batch;
  j["gradient_accumulation_steps"] = t.grad_accum;
  // Buckets in elements of the dtype the scenario sized them in (parallelism.bucket_size's default).
  const double elem = precision_bytes(s.parallel.comm_dtype ? *s.parallel.comm_dtype : t.precision);
  j["zero_optimization"] = {
      {"stage", s.parallel.zero},
      {"overlap_comm", s.parallel.overlap},
      {"reduce_bucket_size", std::llround(s.parallel.bucket_bytes / elem)},
      {"allgather_bucket_size", std::llround(s.parallel.allgather_bucket_bytes / elem)}};
  j["fp16"] = {{"enabled", t.precision == Precision::FP16}};
  if (t.precision == Precision::FP16 && t.loss_scale > 0) j["fp16"]["loss_scale"] = t.loss_scale;
  j["bf16"] = {{"enabled", t.precision == Precision::BF16}};
  if (s.parallel.comm_dtype) j["communication_data_type"] = precision_name(*s.parallel.comm_dtype);
  const std::string type = t.optimizer == "adamw" ? "AdamW" : t.optimizer == "adam" ? "Adam" : "SGD";
  j["optimizer"] = {{"type", type}, {"params", {{"lr", t.lr}, {"weight_decay", t.weight_decay}}}};
  if (t.gradient_clipping > 0) j["gradient_clipping"] = t.gradient_clipping;
  if (t.activation_checkpointing)
    j["activation_checkpointing"] = {{"partition_activations", false}, {"cpu_checkpointing", false}};
  return j.dump(2) + "\n";
}

}  // namespace vitsim
