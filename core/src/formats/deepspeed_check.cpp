// The checks of a DeepSpeed config (deepspeed_check.hpp): the keys DeepSpeed reads in each section, each
// value's type and range, "auto" where the HF integration fills it, the settings vitsim refuses, and the
// keys it reads but does not model.
#include "formats/deepspeed_check.hpp"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim::deepspeed {

namespace {
using json = nlohmann::json;

std::string join(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

void check_keys(const json& obj, const std::set<std::string>& known, const std::string& where,
                const Origin& o) {
  for (const auto& [key, value] : obj.items()) {
    if (known.count(key)) continue;
    const std::vector<std::string> names(known.begin(), known.end());
    const std::string best = closest_name(key, names);
    throw Error(
        o, fmt::format("unknown DeepSpeed key '{}{}'{}; known: {}", where, echo(key),
                       best.empty() ? "" : fmt::format(" (did you mean '{}{}'?)", where, best), join(known)));
  }
}

// The key tables, packed as DeepSpeed's sources list them (clang-format would put one key per line).
// clang-format off
// Keys vitsim reads, and keys DeepSpeed users commonly set that do not change the performance model.
// Every top-level key DeepSpeed v0.12-v0.14 reads (runtime/config.py, runtime/constants.py and the
// feature configs it imports); any other is a typo.
const std::set<std::string> kTopKeys{
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "zero_optimization", "fp16",
    "bf16", "communication_data_type", "optimizer", "scheduler", "steps_per_print", "wall_clock_breakdown",
    "gradient_clipping", "prescale_gradients", "zero_allow_untested_optimizer", "dump_state", "amp",
    "gradient_predivide_factor", "sparse_gradients", "flops_profiler", "tensorboard", "comms_logger", "seed",
    "activation_checkpointing", "aio", "autotuning", "checkpoint", "compression_training", "curriculum_learning",
    "data_efficiency", "data_types", "elasticity", "nebula", "pipeline", "sparse_attention",
    "zero_force_ds_cpu_optimizer", "memory_breakdown", "disable_allgather", "fp32_allreduce", "csv_monitor", "wandb",
    "progressive_layer_drop", "eigenvalue", "quantize_training", "weight_quantization", "hybrid_engine",
    "torch_autocast", "graph_harvesting", "use_data_before_expert_parallelism", "compile", "timers",
    "load_universal_checkpoint", "use_node_local_storage", "zero_legacy_stage1", "dataloader_drop_last",
    "moe", "bfloat16", "monitor_config", "gradient_accumulation_dtype", "allgather_size"};

// The keys DeepSpeed v0.12 reads in each section (deepspeed/runtime/config.py, fp16/loss_scaler.py,
// zero/config.py and zero/offload_config.py, ops/adam, ops/lamb, runtime/lr_schedules.py): a key outside
// these is a typo that DeepSpeed would ignore or reject.
const std::set<std::string> kFp16Keys{"enabled", "auto_cast", "loss_scale", "initial_scale_power", "loss_scale_window",
                                      "hysteresis", "consecutive_hysteresis", "min_loss_scale",
                                      "fp16_master_weights_and_grads"};
// DeepSpeed v0.14.4 reads two keys of the bf16 section (runtime/config.py get_bfloat16_enabled,
// get_bfloat16_immediate_grad_update, one get_scalar_param each) and nothing else: any other key, as the fp16
// keys DeepSpeedExamples' cifar config carries into its bf16 section, or v0.16's DeepSpeedBF16Config keys
// (check_grad_overflow, bf16_master_weights_and_grads, bf16_optimizer_states), is ignored by DeepSpeed.
const std::set<std::string> kBf16Keys{"enabled", "immediate_grad_update"};
const std::set<std::string> kOptimizerKeys{"type", "params", "legacy_fusion"};
const std::set<std::string> kOptimizerParams{
    "lr", "betas", "eps", "weight_decay", "adam_w_mode", "torch_adam", "amsgrad", "bias_correction", "momentum",
    "dampening", "nesterov", "max_coeff", "min_coeff", "max_grad_norm", "freeze_step", "cuda_aware",
    "comm_backend_name", "coeff_beta", "factor_max", "factor_min", "factor_threshold", "var_freeze_step",
    "var_update_scaler", "local_step_scaler", "local_step_clipper", "fused"};
const std::set<std::string> kSchedulerKeys{"type", "params"};
const std::set<std::string> kSchedulerParams{
    "warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "warmup_type", "total_num_steps", "last_batch_iteration",
    "cycle_min_lr", "cycle_max_lr", "decay_lr_rate", "cycle_first_step_size", "cycle_second_step_size",
    "cycle_first_stair_count", "cycle_second_stair_count", "decay_step_size", "cycle_momentum", "cycle_min_mom",
    "cycle_max_mom", "decay_mom_rate", "lr_range_test_min_lr", "lr_range_test_step_size", "lr_range_test_step_rate",
    "lr_range_test_staircase"};
const std::set<std::string> kZeroKeys{
    "stage", "contiguous_gradients", "reduce_scatter", "reduce_bucket_size", "use_multi_rank_bucket_allreduce",
    "allgather_partitions", "allgather_bucket_size", "overlap_comm", "load_from_fp32_weights", "elastic_checkpoint",
    "offload_param", "offload_optimizer", "sub_group_size", "cpu_offload", "cpu_offload_param",
    "cpu_offload_use_pin_memory", "prefetch_bucket_size", "stage3_prefetch_bucket_size", "param_persistence_threshold",
    "stage3_param_persistence_threshold", "model_persistence_threshold", "stage3_model_persistence_threshold",
    "max_live_parameters", "stage3_max_live_parameters", "max_reuse_distance", "stage3_max_reuse_distance",
    "gather_16bit_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save",
    "stage3_gather_fp16_weights_on_model_save", "ignore_unused_parameters", "legacy_stage1", "round_robin_gradients",
    "zero_hpz_partition_size", "zero_quantized_weights", "zero_quantized_nontrainable_weights",
    "zero_quantized_gradients", "mics_shard_size", "mics_hierarchical_params_gather", "memory_efficient_linear",
    "pipeline_loading_checkpoint", "override_module_apply",
    // DeepSpeed v0.16 zero/config.py DeepSpeedZeroConfig, with their stage3_ aliases.
    "module_granularity_threshold", "stage3_module_granularity_threshold", "use_all_reduce_for_fetch_params",
    "stage3_use_all_reduce_for_fetch_params", "zeropp_loco_param", "log_trace_cache_warnings"};
// runtime/activation_checkpointing/config.py.
const std::set<std::string> kActivationCheckpointingKeys{"partition_activations", "contiguous_memory_optimization",
                                                         "cpu_checkpointing", "number_checkpoints",
                                                         "synchronize_checkpoint_boundary", "profile"};
const std::set<std::string> kOffloadKeys{"device",        "nvme_path",      "buffer_count", "buffer_size", "max_in_cpu",
                                         "pin_memory",    "pipeline_read",  "pipeline_write", "fast_init", "ratio"};
// The keys the HF integration fills when they read "auto" (auto_allowed, below).
const std::set<std::string> kAutoKeys{
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "gradient_clipping",
    "fp16.enabled", "bf16.enabled", "optimizer.params.lr", "optimizer.params.betas", "optimizer.params.eps",
    "optimizer.params.weight_decay", "zero_optimization.reduce_bucket_size",
    "zero_optimization.stage3_prefetch_bucket_size", "zero_optimization.stage3_param_persistence_threshold",
    "zero_optimization.stage3_gather_16bit_weights_on_model_save", "communication_data_type"};
// Top-level keys vitsim reads (modelled) or validates with no effect on time or memory (scheduler,
// logging cadence, seed): any other present is named by unmodelled_keys.
const std::set<std::string> kReadTopKeys{
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "zero_optimization", "fp16",
    "bf16", "communication_data_type", "optimizer", "scheduler", "steps_per_print", "gradient_clipping",
    "activation_checkpointing", "seed", "fp32_allreduce", "zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer",
    "amp", "sparse_attention", "progressive_layer_drop", "compression_training", "curriculum_learning",
    "data_efficiency", "elasticity", "hybrid_engine", "torch_autocast"};
// The zero_optimization keys vitsim reads (unmodelled_keys).
const std::set<std::string> kReadZeroKeys{
    "stage", "overlap_comm", "reduce_bucket_size", "allgather_bucket_size", "offload_optimizer", "offload_param",
    "cpu_offload", "cpu_offload_param", "zero_quantized_weights", "zero_quantized_nontrainable_weights",
    "zero_quantized_gradients", "zero_hpz_partition_size", "mics_shard_size"};
// clang-format on

// A section that must be an object, its keys checked.
const json* section(const json& parent, const std::string& key, const std::set<std::string>& known,
                    const std::string& prefix, const Origin& o) {
  if (!parent.contains(key)) return nullptr;
  const json& v = parent.at(key);
  if (!v.is_object())
    throw Error(o,
                fmt::format("DeepSpeed key '{}{}' must be an object, got {}", prefix, key, echo(v.dump())));
  check_keys(v, known, prefix + key + ".", o);
  return &v;
}

// Values: a JSON number of the right kind within its range; `name` is the dotted key for the message.
long long int_in(const json& j, const std::string& key, const std::string& name, long long lo, long long hi,
                 const Origin& o, const char* what = "an integer") {
  const json& v = j.at(key);
  const bool integral = v.is_number_integer() ||
                        (v.is_number_float() && std::isfinite(v.get<double>()) &&
                         v.get<double>() == std::floor(v.get<double>()) && std::fabs(v.get<double>()) < 9e15);
  const double x = v.is_number() ? v.get<double>() : 0;
  if (!integral || x < static_cast<double>(lo) || x > static_cast<double>(hi))
    throw Error(o, fmt::format("DeepSpeed key '{}' must be {} in {} .. {}, got {}", name, what, lo, hi,
                               echo(v.dump())));
  return v.is_number_integer() ? v.get<long long>() : static_cast<long long>(x);
}

double number_in(const json& j, const std::string& key, const std::string& name, const units::Range& r,
                 const Origin& o) {
  const json& v = j.at(key);
  if (!v.is_number() || !r.contains(v.get<double>()))
    throw Error(o,
                fmt::format("DeepSpeed key '{}' must be a number {}{}, got {}", name,
                            r.str().find("..") != std::string::npos ? "in " : "", r.str(), echo(v.dump())));
  return v.get<double>();
}

void bool_of(const json& j, const std::string& key, const std::string& name, const Origin& o) {
  if (!j.at(key).is_boolean())
    throw Error(
        o, fmt::format("DeepSpeed key '{}' must be true or false, got {}", name, echo(j.at(key).dump())));
}

constexpr long long kMaxInt = 1LL << 53;

void check_fp16(const json& j, const Origin& o) {
  if (const json* f = j.contains("fp16") ? &j.at("fp16") : nullptr) {
    for (const char* k : {"enabled", "auto_cast", "consecutive_hysteresis", "fp16_master_weights_and_grads"})
      if (f->contains(k)) bool_of(*f, k, std::string("fp16.") + k, o);
    if (f->contains("loss_scale")) number_in(*f, "loss_scale", "fp16.loss_scale", units::non_negative(), o);
    if (f->contains("initial_scale_power"))
      int_in(*f, "initial_scale_power", "fp16.initial_scale_power", 0, 64, o);
    if (f->contains("loss_scale_window"))
      int_in(*f, "loss_scale_window", "fp16.loss_scale_window", 1, kMaxInt, o);
    if (f->contains("hysteresis")) int_in(*f, "hysteresis", "fp16.hysteresis", 1, kMaxInt, o);
    if (f->contains("min_loss_scale"))
      number_in(*f, "min_loss_scale", "fp16.min_loss_scale", units::positive(), o);
  }
}

void check_optimizer(const json& j, const Origin& o) {
  if (const json* opt = section(j, "optimizer", kOptimizerKeys, "", o)) {
    if (const json* p = section(*opt, "params", kOptimizerParams, "optimizer.", o)) {
      if (p->contains("lr")) number_in(*p, "lr", "optimizer.params.lr", units::closed(0, 1e3), o);
      if (p->contains("eps")) number_in(*p, "eps", "optimizer.params.eps", units::positive(), o);
      if (p->contains("weight_decay"))
        number_in(*p, "weight_decay", "optimizer.params.weight_decay", units::closed(0, 1e3), o);
      if (p->contains("momentum"))
        number_in(*p, "momentum", "optimizer.params.momentum", units::closed(0, 1), o);
      if (p->contains("betas")) {
        const json& betas = p->at("betas");
        const units::Range beta{0, 1, false, true};
        if (!betas.is_array() || betas.size() != 2 || !betas[0].is_number() || !betas[1].is_number() ||
            !beta.contains(betas[0].get<double>()) || !beta.contains(betas[1].get<double>()))
          throw Error(o, fmt::format("DeepSpeed key 'optimizer.params.betas' must be two numbers {}, got {}",
                                     beta.str(), echo(betas.dump())));
      }
    }
  }
}

void check_scheduler(const json& j, const Origin& o) {
  if (const json* sch = section(j, "scheduler", kSchedulerKeys, "", o)) {
    if (sch->contains("type") && !sch->at("type").is_string())
      throw Error(o, fmt::format("DeepSpeed key 'scheduler.type' must be a string, got {}",
                                 echo(sch->at("type").dump())));
    if (const json* p = section(*sch, "params", kSchedulerParams, "scheduler.", o))
      for (const auto& [k, v] : p->items()) {
        if (k == "warmup_type" || k == "cycle_momentum" || k == "lr_range_test_staircase") continue;
        if (k.find("num_steps") != std::string::npos || k.find("step_size") != std::string::npos ||
            k.find("stair_count") != std::string::npos)
          int_in(*p, k, "scheduler.params." + k, k == "last_batch_iteration" ? -1 : 0, kMaxInt, o);
        else if (k == "last_batch_iteration")
          int_in(*p, k, "scheduler.params." + k, -1, kMaxInt, o);
        else
          number_in(*p, k, "scheduler.params." + k, units::non_negative(), o);
      }
  }
}

void check_zero(const json& j, const Origin& o) {
  if (const json* z = section(j, "zero_optimization", kZeroKeys, "", o)) {
    // Bucket sizes and thresholds count elements: positive whole numbers (0.5 of an element is a typo).
    for (const char* k : {"reduce_bucket_size", "allgather_bucket_size", "prefetch_bucket_size",
                          "stage3_prefetch_bucket_size", "sub_group_size", "max_live_parameters",
                          "stage3_max_live_parameters"})
      if (z->contains(k))
        int_in(*z, k, std::string("zero_optimization.") + k, 1, kMaxInt, o,
               "a positive integer number of elements");
    for (const char* k :
         {"param_persistence_threshold", "stage3_param_persistence_threshold", "model_persistence_threshold",
          "stage3_model_persistence_threshold", "max_reuse_distance", "stage3_max_reuse_distance"})
      if (z->contains(k))
        int_in(*z, k, std::string("zero_optimization.") + k, 0, kMaxInt, o, "a whole number of elements");
    for (const char* k : {"contiguous_gradients", "reduce_scatter", "allgather_partitions", "overlap_comm",
                          "round_robin_gradients", "cpu_offload", "ignore_unused_parameters"})
      if (z->contains(k)) bool_of(*z, k, std::string("zero_optimization.") + k, o);
    for (const char* k : {"offload_optimizer", "offload_param"})
      if (const json* off = section(*z, k, kOffloadKeys, "zero_optimization.", o)) {
        if (off->contains("buffer_count"))
          int_in(*off, "buffer_count", std::string("zero_optimization.") + k + ".buffer_count", 1, 1 << 20,
                 o);
        if (off->contains("ratio"))
          number_in(*off, "ratio", std::string("zero_optimization.") + k + ".ratio", units::closed(0, 1), o);
      }
  }
}

// Keys the HF/DeepSpeed integration (transformers/integrations/deepspeed.py, HfTrainerDeepSpeedConfig
// .trainer_config_process and trainer_config_finalize) fills when they read "auto"; vitsim fills them
// from the scenario the same way: batch sizes, lr, weight decay, betas, eps, clipping and fp16/bf16 from
// training.*, reduce_bucket_size from the model's hidden size (hidden^2), ZeRO-3's prefetch and
// persistence thresholds (0.9 hidden^2, 10 hidden: not modelled), scheduler parameters (no effect).
bool auto_allowed(const std::string& dotted) {
  return kAutoKeys.count(dotted) || dotted.rfind("scheduler.params.", 0) == 0;
}

bool enabled(const json& j, const std::string& key) {
  if (!j.contains(key)) return false;
  const json& v = j.at(key);
  if (v.is_boolean()) return v.get<bool>();
  return v.is_object() && v.contains("enabled") && v.at("enabled").is_boolean() &&
         v.at("enabled").get<bool>();
}

}  // namespace

std::vector<std::string> check_top_level(const json& j, const Origin& o) {
  // DeepSpeed reads the top-level keys it knows and ignores the others (runtime/config.py reads each with
  // get_scalar_param or its section's reader; nothing lists the rest): a key near one it reads is a typo
  // that would silently change nothing, refused with "did you mean"; any other is ignored, as by DeepSpeed.
  std::vector<std::string> ignored;
  const std::vector<std::string> names(kTopKeys.begin(), kTopKeys.end());
  for (const auto& [key, value] : j.items())
    if (!kTopKeys.count(key)) {
      if (!closest_name(key, names).empty()) check_keys(j, kTopKeys, "", o);
      ignored.push_back(key);
    }
  return ignored;
}

// Every section's values range-checked (those vitsim reads and those it does not: a wrong value is wrong
// either way).
void check_sections(const json& j, const Origin& o) {
  for (const char* key : {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                          "steps_per_print"})
    if (j.contains(key)) int_in(j, key, key, 1, kMaxInt, o, "a positive integer");
  if (j.contains("gradient_clipping"))
    number_in(j, "gradient_clipping", "gradient_clipping", units::non_negative(), o);
  check_fp16(j, o);
  if (j.contains("bf16"))
    for (const auto& k : kBf16Keys)
      if (j.at("bf16").contains(k)) bool_of(j.at("bf16"), k, "bf16." + k, o);
  check_optimizer(j, o);
  check_scheduler(j, o);
  check_zero(j, o);
}

std::vector<std::string> check_key_by_key_sections(const json& j, const Origin& o) {
  // DeepSpeed v0.14.4 reads these sections key by key (get_scalar_param: runtime/config.py for fp16 and
  // bf16, activation_checkpointing/config.py) and ignores the rest: a near miss of a key it reads is a
  // typo, refused; any other key is returned, to be noted as ignored.
  std::vector<std::string> ignored;
  for (const auto& [name, known] : {std::pair{"fp16", &kFp16Keys}, std::pair{"bf16", &kBf16Keys},
                                    std::pair{"activation_checkpointing", &kActivationCheckpointingKeys}}) {
    if (!j.contains(name)) continue;
    const json& a = j.at(name);
    if (!a.is_object()) {
      section(j, name, *known, "", o);  // throws: not an object
      continue;
    }
    const std::vector<std::string> names(known->begin(), known->end());
    for (const auto& [key, value] : a.items())
      if (!known->count(key)) {
        if (!closest_name(key, names).empty()) check_keys(a, *known, std::string(name) + ".", o);
        ignored.push_back(std::string(name) + "." + key);
      }
  }
  return ignored;
}

// Removes every "auto" value (recording its key), refusing one where the integration fills none.
void take_autos(json& j, const std::string& prefix, std::vector<std::string>& autos, const Origin& o) {
  if (!j.is_object()) return;
  for (auto it = j.begin(); it != j.end();) {
    const std::string dotted = prefix + it.key();
    if (it->is_string() && it->get<std::string>() == "auto") {
      if (!auto_allowed(dotted))
        throw Error(
            o,
            fmt::format("DeepSpeed key '{}' cannot be \"auto\": the HF integration fills only batch sizes, "
                        "gradient_clipping, fp16/bf16.enabled, optimizer and scheduler params and ZeRO "
                        "bucket sizes",
                        echo(dotted)));
      autos.push_back(dotted);
      it = j.erase(it);
      continue;
    }
    if (it->is_object()) take_autos(*it, dotted + ".", autos, o);
    ++it;
  }
}

// Settings that change time or memory in ways vitsim does not model: refused, never ignored.
void refuse_unmodelled(const json& j, const Origin& o) {
  auto refuse = [&](const std::string& key, const std::string& why) {
    throw Error(o,
                fmt::format("DeepSpeed key '{}' is not modelled by vitsim ({}); remove it or turn it off to "
                            "predict without it",
                            key, why));
  };
  if (enabled(j, "amp")) refuse("amp.enabled", "NVIDIA apex AMP; use fp16 or bf16");
  if (j.contains("sparse_attention"))
    refuse("sparse_attention", "block-sparse attention changes the attention kernels");
  if (enabled(j, "progressive_layer_drop"))
    refuse("progressive_layer_drop.enabled", "skips layers during training");
  if (j.contains("compression_training")) refuse("compression_training", "quantized or pruned layers");
  if (enabled(j, "curriculum_learning"))
    refuse("curriculum_learning.enabled", "changes the sequence length per step");
  if (j.contains("data_efficiency") && enabled(j.at("data_efficiency"), "enabled"))
    refuse("data_efficiency.enabled", "data sampling and routing change the work per step");
  if (enabled(j, "elasticity")) refuse("elasticity.enabled", "changes the batch and GPU count at run time");
  if (enabled(j, "hybrid_engine")) refuse("hybrid_engine.enabled", "RLHF inference/training switch");
  if (enabled(j, "torch_autocast"))
    refuse("torch_autocast.enabled", "torch.autocast inside DeepSpeed's engine");
  if (j.contains("zero_optimization") && j.at("zero_optimization").is_object()) {
    const json& z = j.at("zero_optimization");
    // offload_optimizer / offload_param to the CPU or NVMe are modelled (read_offload, deepspeed.cpp);
    // ZeRO-Offload++'s partial offload (Twin-Flow, offload_optimizer.ratio < 1) is not.
    if (z.contains("offload_optimizer") && z.at("offload_optimizer").is_object() &&
        z.at("offload_optimizer").contains("ratio") && z.at("offload_optimizer").at("ratio").is_number() &&
        z.at("offload_optimizer").at("ratio").get<double>() < 1)
      refuse("zero_optimization.offload_optimizer.ratio",
             "a ratio below 1 is ZeRO-Offload++'s partial offload (Twin-Flow): part of the step on the GPU");
    for (const char* k :
         {"zero_quantized_weights", "zero_quantized_nontrainable_weights", "zero_quantized_gradients"})
      if (enabled(z, k)) refuse(std::string("zero_optimization.") + k, "ZeRO++ quantized communication");
    if (z.contains("zero_hpz_partition_size") && z.at("zero_hpz_partition_size").is_number() &&
        z.at("zero_hpz_partition_size").get<double>() > 1)
      refuse("zero_optimization.zero_hpz_partition_size", "ZeRO++ hierarchical partitioning");
    if (z.contains("mics_shard_size") && z.at("mics_shard_size").is_number() &&
        z.at("mics_shard_size").get<double>() > 0)
      refuse("zero_optimization.mics_shard_size", "MiCS sharding");
  }
  if (j.contains("activation_checkpointing") && j.at("activation_checkpointing").is_object() &&
      enabled(j.at("activation_checkpointing"), "cpu_checkpointing"))
    refuse("activation_checkpointing.cpu_checkpointing", "checkpoints copied to host memory and back");
}

// Keys present that vitsim neither reads nor needs (see DeepSpeedConfig::unmodelled), dotted.
std::vector<std::string> unmodelled_keys(const json& j) {
  // fp16's loss-scale schedule (window, hysteresis, minimum) changes no step's work; the activation
  // checkpointing options other than cpu_checkpointing change nothing under data parallelism alone
  // (partition_activations splits over the model-parallel group; the others are bookkeeping).
  std::vector<std::string> out;
  for (const auto& [k, v] : j.items()) {
    if (!kTopKeys.count(k)) continue;  // ignored by DeepSpeed itself (check_top_level)
    if (!kReadTopKeys.count(k)) {
      out.push_back(k);
      continue;
    }
    if (k == "zero_optimization" && v.is_object())
      for (const auto& [zk, zv] : v.items())
        if (!kReadZeroKeys.count(zk)) out.push_back("zero_optimization." + zk);
    if (k == "fp16" && v.is_object() && v.contains("auto_cast")) out.push_back("fp16.auto_cast");
    if (k == "fp16" && v.is_object() && v.contains("fp16_master_weights_and_grads"))
      out.push_back("fp16.fp16_master_weights_and_grads");
    if (k == "bf16" && v.is_object())
      for (const auto& [bk, bv] : v.items())
        if (bk != "enabled") out.push_back("bf16." + bk);
    if (k == "optimizer" && v.is_object() && v.contains("legacy_fusion"))
      out.push_back("optimizer.legacy_fusion");
  }
  return out;
}

}  // namespace vitsim::deepspeed
