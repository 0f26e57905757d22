#include "vitsim/core/formats/deepspeed.hpp"
// DeepSpeed JSON config import (deepspeed.hpp): the file read and parsed, its checks applied in order
// (deepspeed_check.cpp), then the values vitsim models taken into a DeepSpeedConfig.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <string>

#include "formats/deepspeed_check.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/json_reader.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim {

namespace {
using json = nlohmann::json;

long long get_int(const json& j, const std::string& key, const Origin& o) {
  const json& v = j.at(key);
  if (v.is_number_integer()) return v.get<long long>();
  if (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<long long>(v.get<double>())))
    return static_cast<long long>(v.get<double>());
  throw Error(o, fmt::format("DeepSpeed key '{}' must be an integer, got {}", key, echo(v.dump())));
}

double get_number(const json& j, const std::string& key, const Origin& o) {
  const json& v = j.at(key);
  if (!v.is_number())
    throw Error(o, fmt::format("DeepSpeed key '{}' must be a number, got {}", key, echo(v.dump())));
  return v.get<double>();
}

bool get_bool(const json& j, const std::string& key, const Origin& o) {
  const json& v = j.at(key);
  if (!v.is_boolean())
    throw Error(o, fmt::format("DeepSpeed key '{}' must be true or false, got {}", key, echo(v.dump())));
  return v.get<bool>();
}

// The file as a JSON object, its top-level keys checked (those DeepSpeed ignores into `ignored`).
json parse_config(const std::string& path, const Origin& o, std::vector<std::string>& ignored) {
  const std::string text = read_input_file(path, "DeepSpeed config");  // regular files only, size-limited
  // A syntax error, and a number too large (fuzzer finding), are one line.
  const json j = detail::parse_json(text, o.str());
  if (!j.is_object()) throw Error(o, "a DeepSpeed config must be a JSON object");
  ignored = deepspeed::check_top_level(j, o);
  return j;
}

// The values with no section of their own: "auto" reduce bucket, activation checkpointing, clipping,
// the fp16 loss scale, fp32_allreduce.
void read_basics(const json& j, const Origin& o, DeepSpeedConfig& c) {
  for (const auto& k : c.auto_keys)
    if (k == "zero_optimization.reduce_bucket_size") c.reduce_bucket_auto = true;
  if (j.contains("activation_checkpointing")) c.activation_checkpointing = true;
  if (j.contains("gradient_clipping")) c.gradient_clipping = j.at("gradient_clipping").get<double>();
  if (j.contains("fp16") && j.at("fp16").contains("loss_scale"))
    c.loss_scale = j.at("fp16").at("loss_scale").get<double>();
  if (j.contains("fp32_allreduce") && !j.contains("communication_data_type")) {
    if (!j.at("fp32_allreduce").is_boolean())
      throw Error(o, fmt::format("DeepSpeed key 'fp32_allreduce' must be true or false, got {}",
                                 echo(j.at("fp32_allreduce").dump())));
    if (j.at("fp32_allreduce").get<bool>()) c.comm_dtype = "fp32";
  }
}

// The batch: train_batch_size, the micro-batch per GPU, the accumulation steps.
void read_batch(const json& j, const Origin& o, DeepSpeedConfig& c) {
  if (j.contains("train_batch_size")) c.train_batch_size = get_int(j, "train_batch_size", o);
  if (j.contains("train_micro_batch_size_per_gpu"))
    c.micro_batch = get_int(j, "train_micro_batch_size_per_gpu", o);
  if (j.contains("gradient_accumulation_steps")) c.grad_accum = get_int(j, "gradient_accumulation_steps", o);
}

// zero_optimization: the stage, overlap and the bucket sizes.
void read_zero(const json& j, const Origin& o, DeepSpeedConfig& c) {
  if (j.contains("zero_optimization")) {
    const json& z = j.at("zero_optimization");
    if (z.contains("stage")) {
      long long s = get_int(z, "stage", o);
      if (s < 0 || s > 3) throw Error(o, fmt::format("zero_optimization.stage must be 0..3, got {}", s));
      c.zero_stage = static_cast<int>(s);
    }
    if (z.contains("overlap_comm")) c.overlap_comm = get_bool(z, "overlap_comm", o);
    if (z.contains("reduce_bucket_size")) c.reduce_bucket_elements = get_number(z, "reduce_bucket_size", o);
    if (z.contains("allgather_bucket_size"))
      c.allgather_bucket_elements = get_number(z, "allgather_bucket_size", o);
  }
}

// fp16 or bf16, one of them at most.
void read_precision(const json& j, const Origin& o, DeepSpeedConfig& c) {
  for (const char* p : {"fp16", "bf16"}) {
    if (!j.contains(p)) continue;
    const json& s = j.at(p);
    if (!s.is_object()) throw Error(o, fmt::format("DeepSpeed key '{}' must be an object", p));
    if (s.contains("enabled") && get_bool(s, "enabled", o)) {
      if (c.precision) throw Error(o, "fp16 and bf16 are both enabled; DeepSpeed allows one");
      c.precision = p;
    }
  }
}

// communication_data_type, by any of the names DeepSpeed takes.
void read_comm_dtype(const json& j, const Origin& o, DeepSpeedConfig& c) {
  if (j.contains("communication_data_type")) {
    const json& v = j.at("communication_data_type");
    std::string s = v.is_string() ? v.get<std::string>() : "";
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
    if (s == "fp32" || s == "float" || s == "float32")
      s = "fp32";
    else if (s == "fp16" || s == "half" || s == "float16")
      s = "fp16";
    else if (s == "bf16" || s == "bfloat16")
      s = "bf16";
    else
      throw Error(o, fmt::format("communication_data_type {} is not one of fp32, fp16, bf16", v.dump()));
    // Both given: fp32_allreduce was silently dropped for communication_data_type (issue 27).
    if (j.contains("fp32_allreduce")) {
      if (!j.at("fp32_allreduce").is_boolean())
        throw Error(o, fmt::format("DeepSpeed key 'fp32_allreduce' must be true or false, got {}",
                                   echo(j.at("fp32_allreduce").dump())));
      if (j.at("fp32_allreduce").get<bool>() && s != "fp32")
        throw Error(o,
                    fmt::format("DeepSpeed keys 'fp32_allreduce': true and 'communication_data_type': {} "
                                "contradict each other (one all-reduces in fp32, the other in {}); give one",
                                echo(v.dump()), s));
    }
    c.comm_dtype = s;
  }
}

// optimizer: its type, lower-cased, its lr and weight decay.
void read_optimizer(const json& j, const Origin& o, DeepSpeedConfig& c) {
  if (j.contains("optimizer")) {
    const json& opt = j.at("optimizer");
    if (!opt.is_object() || !opt.contains("type") || !opt["type"].is_string())
      throw Error(o, "DeepSpeed key 'optimizer' must be an object with a string 'type'");
    std::string t = opt["type"].get<std::string>();
    std::transform(t.begin(), t.end(), t.begin(), [](unsigned char ch) { return std::tolower(ch); });
    c.optimizer = t;
    if (opt.contains("params") && opt["params"].is_object() && opt["params"].contains("lr"))
      c.lr = get_number(opt["params"], "lr", o);
    if (opt.contains("params") && opt["params"].is_object() && opt["params"].contains("weight_decay"))
      c.weight_decay = get_number(opt["params"], "weight_decay", o);
  }
}

}  // namespace

std::string unmodelled_warning(const DeepSpeedConfig& c) {
  if (c.unmodelled.empty() && c.ignored.empty()) return "";
  auto join = [](const std::vector<std::string>& keys) {
    std::string names;
    for (const auto& k : keys) names += (names.empty() ? "" : ", ") + k;
    return names;
  };
  std::string out = c.path + ": ";
  if (!c.unmodelled.empty())
    out += "DeepSpeed keys vitsim does not model (no effect on the prediction): " + join(c.unmodelled);
  if (!c.ignored.empty())
    out +=
        std::string(c.unmodelled.empty() ? "" : "; ") + "keys DeepSpeed itself ignores: " + join(c.ignored);
  return out;
}

DeepSpeedConfig read_deepspeed_config(const std::string& path) {
  const Origin o{path, 0};
  DeepSpeedConfig c;
  json j = parse_config(path, o, c.ignored);
  for (const auto& k : c.ignored) j.erase(k);
  c.path = path;
  // "zero_optimization": true|false is the deprecated form DeepSpeed still reads as stage 1|0, with the
  // top-level allgather_size as its bucket (zero/config.py read_zero_config_deprecated).
  if (j.contains("zero_optimization") && j.at("zero_optimization").is_boolean()) {
    json z{{"stage", j.at("zero_optimization").get<bool>() ? 1 : 0}};
    if (j.contains("allgather_size")) z["allgather_bucket_size"] = j.at("allgather_size");
    j.erase("allgather_size");
    j["zero_optimization"] = z;
  }
  // DeepSpeed reads "bfloat16" as another name of "bf16" (runtime/config.py get_bfloat16_config).
  if (j.contains("bfloat16")) {
    if (j.contains("bf16")) throw Error(o, "both 'bf16' and 'bfloat16' are given; DeepSpeed reads one");
    j["bf16"] = j["bfloat16"];
    j.erase("bfloat16");
  }
  deepspeed::take_autos(j, "", c.auto_keys, o);
  deepspeed::check_sections(j, o);
  for (auto& k : deepspeed::check_activation_checkpointing(j, o)) c.ignored.push_back(std::move(k));
  deepspeed::refuse_unmodelled(j, o);
  c.unmodelled = deepspeed::unmodelled_keys(j);
  read_basics(j, o, c);
  read_batch(j, o, c);
  read_zero(j, o, c);
  read_precision(j, o, c);
  read_comm_dtype(j, o, c);
  read_optimizer(j, o, c);
  return c;
}

}  // namespace vitsim
