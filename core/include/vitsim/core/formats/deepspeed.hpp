#pragma once
// DeepSpeed JSON config import: the keys that change what vitsim models.
#include <optional>
#include <string>
#include <vector>

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
  std::optional<std::string> precision;          // "fp16", "bf16" when enabled
  std::optional<std::string> comm_dtype;         // communication_data_type
  std::optional<std::string> optimizer;          // optimizer.type, lower-cased
  std::optional<double> lr;                      // optimizer.params.lr
  std::optional<double> weight_decay;            // optimizer.params.weight_decay
  std::optional<bool> activation_checkpointing;  // the activation_checkpointing section is present
  std::optional<double> gradient_clipping;       // 0 = off
  std::optional<double> loss_scale;              // fp16.loss_scale: 0 = dynamic, > 0 static
  bool reduce_bucket_auto = false;               // zero_optimization.reduce_bucket_size "auto": hidden^2 (HF)
  // Keys set to "auto" (dotted), filled from the scenario as the HF/DeepSpeed integration fills them
  // from its TrainingArguments.
  std::vector<std::string> auto_keys;
  // Keys DeepSpeed reads that change nothing vitsim predicts (logging, monitors, checkpoint I/O,
  // schedules) or that vitsim does not model, dotted, in file order: one warning line names them.
  std::vector<std::string> unmodelled;
};

// "PATH: DeepSpeed keys vitsim does not model (no effect on the prediction): a, b.c"; "" when none.
std::string unmodelled_warning(const DeepSpeedConfig& c);

// Reads and checks the file; throws Error("ds_config.json: ...") on malformed JSON, wrong types, keys
// DeepSpeed does not have (typos: "did you mean", listing the known ones), "auto" where the HF
// integration fills none, and settings that change time or memory in a way vitsim does not model
// (offload to CPU or NVMe, CPU activation checkpointing, quantized or hierarchical ZeRO, ...).
DeepSpeedConfig read_deepspeed_config(const std::string& path);

}  // namespace vitsim
