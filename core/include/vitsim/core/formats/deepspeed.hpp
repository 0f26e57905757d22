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
  std::optional<std::string> precision;   // "fp16", "bf16" when enabled
  std::optional<std::string> comm_dtype;  // communication_data_type
  std::optional<std::string> optimizer;   // optimizer.type, lower-cased
  std::optional<double> lr;               // optimizer.params.lr
  std::optional<double> weight_decay;     // optimizer.params.weight_decay
  // The activation_checkpointing section is present. It configures deepspeed.checkpointing (partitioning,
  // CPU copies, contiguous buffers) and nothing else: whether a model checkpoints its blocks is its code's
  // choice, so the scenario's training.activation_checkpointing decides (a note says so).
  std::optional<bool> activation_checkpointing;
  std::optional<double> gradient_clipping;  // 0 = off
  std::optional<double> loss_scale;         // fp16.loss_scale: 0 = dynamic, > 0 static
  bool reduce_bucket_auto = false;          // zero_optimization.reduce_bucket_size "auto": hidden^2 (HF)
  // zero_optimization.offload_optimizer / offload_param .device (or the deprecated cpu_offload,
  // cpu_offload_param): "cpu" or "nvme"; absent for "none". DeepSpeed v0.14.4 uses offload_optimizer at
  // ZeRO 1-3 and offload_param at ZeRO-3 only (engine.py _configure_zero_optimizer), and the scenario's
  // parallelism.offload_* model them there (docs/model.md "ZeRO-Offload").
  std::optional<std::string> offload_optimizer;
  std::optional<std::string> offload_param;
  // Keys set to "auto" (dotted), filled from the scenario as the HF/DeepSpeed integration fills them
  // from its TrainingArguments.
  std::vector<std::string> auto_keys;
  // Keys DeepSpeed reads that change nothing vitsim predicts (logging, monitors, checkpoint I/O,
  // schedules) or that vitsim does not model, dotted, in file order: one warning line names them.
  std::vector<std::string> unmodelled;
  // Top-level keys DeepSpeed itself ignores (it reads the sections it knows and nothing else), far from
  // any key it reads (a near miss, "zero_optimisation", is refused as a typo): warned, never refused.
  std::vector<std::string> ignored;
  // How the file was read where DeepSpeed's reading differs from what the file seems to say (a "bfloat16"
  // section read as bf16, one DeepSpeed ignores beside bf16, the activation_checkpointing section's
  // scope): one line each, printed as notes once per file.
  std::vector<std::string> notes;
};

// HF's Trainer default for train_micro_batch_size_per_gpu "auto":
// TrainingArguments.per_device_train_batch_size = 8 (transformers training_args.py; integrations/deepspeed.py
// trainer_config_process fills the key from it). `predict` takes it with a note where the scenario sets no
// micro-batch; `plan` searches the axis.
constexpr int kHfDefaultMicroBatch = 8;

// DeepSpeed's three batch figures (runtime/config.py, _set_batch_related_parameters and _batch_assertion,
// v0.12-v0.16): any two of train_batch_size, train_micro_batch_size_per_gpu and
// gradient_accumulation_steps give the third; train_batch_size alone gives the micro-batch
// train_batch_size // world and accumulation 1; the micro-batch alone gives train_batch_size
// micro x world and accumulation 1. Divisions are Python's `//`, and then train_batch_size = micro x
// accumulation x world must hold. `world` is the data-parallel ranks (DeepSpeed's world_size: the data-
// parallel group's size). Throws Error naming the values and the derivation when it does not hold, or when
// neither train_batch_size nor the micro-batch is given (DeepSpeed's assertion).
struct DeepSpeedBatch {
  long long train_batch = 0, micro_batch = 0, grad_accum = 0;
};
DeepSpeedBatch derive_deepspeed_batch(std::optional<long long> train_batch,
                                      std::optional<long long> micro_batch,
                                      std::optional<long long> grad_accum, long long world);

// "PATH: DeepSpeed keys vitsim does not model (no effect on the prediction): a, b.c"; "" when none.
std::string unmodelled_warning(const DeepSpeedConfig& c);

struct Scenario;  // scenario.hpp

// A DeepSpeed config (JSON text) for one resolved point, as `vitsim plan --emit-ds-config` writes its top
// pick: the three batch figures (consistent by DeepSpeed's rule over the data-parallel ranks), ZeRO's stage,
// overlap and bucket sizes (in elements of the gradients' dtype), fp16 or bf16, the optimizer with its lr
// and weight decay, gradient clipping, the communication dtype when the scenario sets one, activation
// checkpointing when on. read_deepspeed_config reads it back to the same settings.
std::string deepspeed_config_for(const Scenario& s);

// `vitsim plan --emit-ds-config` with the scenario's own DeepSpeed config (s.deepspeed_config): that file
// with only the planned keys changed (train_micro_batch_size_per_gpu, gradient_accumulation_steps,
// train_batch_size, zero_optimization.stage, reduce_bucket_size, allgather_bucket_size, overlap_comm, and
// fp16/bf16.enabled where the pick's precision differs), in its key order; "auto" kept as "auto" (HF's
// Trainer fills it: a note names the argument to pass); every other key and section as written; a key left
// out where DeepSpeed's default is the pick's. With sequence parallelism train_batch_size is left to
// DeepSpeed (it derives micro x accumulation x its data-parallel world, which is N / sp under Ulysses' mpu
// and N without one). `changes`: one line per key changed ("key: old -> new"), `notes` the rest.
struct DeepSpeedEdit {
  std::string text;
  std::vector<std::string> changes, notes;
};
DeepSpeedEdit deepspeed_config_edit(const Scenario& s);

// Reads and checks the file; throws Error("ds_config.json: ...") on malformed JSON, wrong types, keys
// DeepSpeed does not have (typos: "did you mean", listing the known ones), "auto" where the HF
// integration fills none, and settings that change time or memory in a way vitsim does not model
// (offload to CPU or NVMe, CPU activation checkpointing, quantized or hierarchical ZeRO, ...).
DeepSpeedConfig read_deepspeed_config(const std::string& path);

}  // namespace vitsim
