#pragma once
// DeepSpeed JSON config import: the keys that change what vitsim models.
#include <optional>
#include <string>

namespace vitsim {

struct DeepSpeedConfig {
  std::string path;
  std::optional<long long> train_batch_size;
  std::optional<long long> micro_batch;  // train_micro_batch_size_per_gpu
  std::optional<long long> grad_accum;   // gradient_accumulation_steps
  std::optional<int> zero_stage;
  std::optional<bool> overlap_comm;
  std::optional<double> reduce_bucket_elements;
  std::optional<double> allgather_bucket_elements;
  std::optional<std::string> precision;           // "fp16", "bf16" when enabled
  std::optional<std::string> comm_dtype;          // communication_data_type
  std::optional<std::string> optimizer;           // optimizer.type, lower-cased
  std::optional<double> lr;                       // optimizer.params.lr
};

// Reads and checks the file; throws Error("ds_config.json: ...") on malformed JSON, wrong types and
// unknown keys (listing the known ones).
DeepSpeedConfig read_deepspeed_config(const std::string& path);

}  // namespace vitsim
