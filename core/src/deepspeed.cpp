#include "vitsim/core/deepspeed.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "vitsim/core/error.hpp"

namespace vitsim {

namespace {
using json = nlohmann::json;

std::string join(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

void check_keys(const json& obj, const std::set<std::string>& known, const std::string& where, const Origin& o) {
  for (const auto& [key, value] : obj.items())
    if (!known.count(key))
      throw Error(o, fmt::format("unknown DeepSpeed key '{}{}'; known: {}", where, key, join(known)));
}

long long get_int(const json& j, const std::string& key, const Origin& o) {
  const json& v = j.at(key);
  if (v.is_number_integer()) return v.get<long long>();
  if (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<long long>(v.get<double>())))
    return static_cast<long long>(v.get<double>());
  throw Error(o, fmt::format("DeepSpeed key '{}' must be an integer, got {}", key, v.dump()));
}

double get_number(const json& j, const std::string& key, const Origin& o) {
  const json& v = j.at(key);
  if (!v.is_number()) throw Error(o, fmt::format("DeepSpeed key '{}' must be a number, got {}", key, v.dump()));
  return v.get<double>();
}

bool get_bool(const json& j, const std::string& key, const Origin& o) {
  const json& v = j.at(key);
  if (!v.is_boolean()) throw Error(o, fmt::format("DeepSpeed key '{}' must be true or false, got {}", key, v.dump()));
  return v.get<bool>();
}
}  // namespace

DeepSpeedConfig read_deepspeed_config(const std::string& path) {
  const Origin o{path, 0};
  std::ifstream in(path);
  if (!in) throw Error(o, "cannot open DeepSpeed config");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers too large (fuzzer finding)
    throw Error(o, fmt::format("malformed JSON: {}", e.what()));
  }
  if (!j.is_object()) throw Error(o, "a DeepSpeed config must be a JSON object");
  // Keys vitsim reads, and keys DeepSpeed users commonly set that do not change the performance model.
  static const std::set<std::string> top{"train_batch_size", "train_micro_batch_size_per_gpu",
                                         "gradient_accumulation_steps", "zero_optimization", "fp16", "bf16",
                                         "communication_data_type", "optimizer", "scheduler", "steps_per_print",
                                         "wall_clock_breakdown", "gradient_clipping", "prescale_gradients",
                                         "zero_allow_untested_optimizer", "dump_state", "amp",
                                         "gradient_predivide_factor", "sparse_gradients", "flops_profiler",
                                         "tensorboard", "comms_logger", "seed"};
  check_keys(j, top, "", o);
  DeepSpeedConfig c;
  c.path = path;
  if (j.contains("train_batch_size")) c.train_batch_size = get_int(j, "train_batch_size", o);
  if (j.contains("train_micro_batch_size_per_gpu"))
    c.micro_batch = get_int(j, "train_micro_batch_size_per_gpu", o);
  if (j.contains("gradient_accumulation_steps")) c.grad_accum = get_int(j, "gradient_accumulation_steps", o);
  if (j.contains("zero_optimization")) {
    const json& z = j["zero_optimization"];
    if (!z.is_object()) throw Error(o, "DeepSpeed key 'zero_optimization' must be an object");
    static const std::set<std::string> zkeys{"stage", "overlap_comm", "reduce_bucket_size", "allgather_bucket_size",
                                             "contiguous_gradients", "reduce_scatter", "allgather_partitions",
                                             "round_robin_gradients", "offload_optimizer", "offload_param",
                                             "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold",
                                             "stage3_max_live_parameters", "stage3_max_reuse_distance"};
    check_keys(z, zkeys, "zero_optimization.", o);
    if (z.contains("stage")) {
      long long s = get_int(z, "stage", o);
      if (s < 0 || s > 3) throw Error(o, fmt::format("zero_optimization.stage must be 0..3, got {}", s));
      c.zero_stage = static_cast<int>(s);
    }
    if (z.contains("overlap_comm")) c.overlap_comm = get_bool(z, "overlap_comm", o);
    if (z.contains("reduce_bucket_size")) c.reduce_bucket_elements = get_number(z, "reduce_bucket_size", o);
    if (z.contains("allgather_bucket_size")) c.allgather_bucket_elements = get_number(z, "allgather_bucket_size", o);
  }
  for (const char* p : {"fp16", "bf16"}) {
    if (!j.contains(p)) continue;
    const json& s = j[p];
    if (!s.is_object()) throw Error(o, fmt::format("DeepSpeed key '{}' must be an object", p));
    if (s.contains("enabled") && get_bool(s, "enabled", o)) {
      if (c.precision) throw Error(o, "fp16 and bf16 are both enabled; DeepSpeed allows one");
      c.precision = p;
    }
  }
  if (j.contains("communication_data_type")) {
    const json& v = j["communication_data_type"];
    std::string s = v.is_string() ? v.get<std::string>() : "";
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
    if (s == "fp32" || s == "float" || s == "float32") s = "fp32";
    else if (s == "fp16" || s == "half" || s == "float16") s = "fp16";
    else if (s == "bf16" || s == "bfloat16") s = "bf16";
    else throw Error(o, fmt::format("communication_data_type {} is not one of fp32, fp16, bf16", v.dump()));
    c.comm_dtype = s;
  }
  if (j.contains("optimizer")) {
    const json& opt = j["optimizer"];
    if (!opt.is_object() || !opt.contains("type") || !opt["type"].is_string())
      throw Error(o, "DeepSpeed key 'optimizer' must be an object with a string 'type'");
    std::string t = opt["type"].get<std::string>();
    std::transform(t.begin(), t.end(), t.begin(), [](unsigned char ch) { return std::tolower(ch); });
    c.optimizer = t;
    if (opt.contains("params") && opt["params"].is_object() && opt["params"].contains("lr"))
      c.lr = get_number(opt["params"], "lr", o);
  }
  return c;
}

}  // namespace vitsim
