#include "vitsim/core/formats/deepspeed.hpp"
// DeepSpeed JSON config import (deepspeed.hpp): the file read and parsed, its deprecated forms and "auto"
// values taken, its checks applied in order (deepspeed_check.cpp), then the values vitsim models taken into
// a DeepSpeedConfig through the config's one mapping (deepspeed_json.cpp).
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "formats/deepspeed_check.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/json_reader.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim {

namespace {
using json = nlohmann::json;

// The file as a JSON object, its top-level keys checked (those DeepSpeed ignores into `ignored`).
json parse_config(const std::string& path, const Origin& o, std::vector<std::string>& ignored) {
  const std::string text = read_input_file(path, "DeepSpeed config");  // regular files only, size-limited
  // A syntax error, and a number too large (fuzzer finding), are one line.
  const json j = detail::parse_json(text, o.str());
  if (!j.is_object()) throw Error(o, "a DeepSpeed config must be a JSON object");
  ignored = deepspeed::check_top_level(j, o);
  return j;
}

// zero_optimization.offload_optimizer / offload_param (.device none, cpu or nvme; zero/offload_config.py
// OffloadDeviceEnum), or the deprecated cpu_offload / cpu_offload_param (true: the cpu device, zero/config.py
// new_param_fn).
void read_offload(const json& j, const Origin& o, DeepSpeedConfig& c) {
  if (!j.contains("zero_optimization") || !j.at("zero_optimization").is_object()) return;
  const json& z = j.at("zero_optimization");
  for (auto [key, old_key, out] : {std::tuple{"offload_optimizer", "cpu_offload", &c.offload_optimizer},
                                   std::tuple{"offload_param", "cpu_offload_param", &c.offload_param}}) {
    if (z.contains(key) && z.at(key).contains("device")) {
      const json& d = z.at(key).at("device");
      const std::string dev = d.is_string() ? d.get<std::string>() : "";
      if (dev != "none" && dev != "cpu" && dev != "nvme")
        throw Error(
            o, fmt::format("DeepSpeed key 'zero_optimization.{}.device' must be none, cpu or nvme, got {}",
                           key, echo(d.dump())));
      if (dev != "none") *out = dev;
    } else if (z.contains(old_key) && z.at(old_key).is_boolean() && z.at(old_key).get<bool>()) {
      *out = "cpu";
    }
  }
}

}  // namespace

std::string unmodelled_warning(const DeepSpeedConfig& c) {
  if (c.unmodelled.empty() && c.ignored.empty()) return "";
  auto join = [](const std::vector<std::string>& keys) {
    std::string names;
    for (const auto& k : keys) names += (names.empty() ? "" : ", ") + echo(k, 200);  // a 5,000-char key cut
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
  // DeepSpeed v0.14.4 reads "bfloat16" as an old name of "bf16" (runtime/constants.py BFLOAT16_OLD;
  // runtime/config.py get_bfloat16_enabled tries "bf16" first, then "bfloat16").
  if (j.contains("bfloat16")) {
    if (j.contains("bf16")) {
      c.ignored.push_back("bfloat16");
      c.notes.push_back("'bfloat16' is ignored: DeepSpeed reads 'bf16' first and takes no second section");
    } else {
      j["bf16"] = j["bfloat16"];
      c.notes.push_back("the 'bfloat16' section is read as 'bf16', DeepSpeed's old name of it");
    }
    j.erase("bfloat16");
  }
  deepspeed::take_autos(j, "", c.auto_keys, o);
  deepspeed::check_sections(j, o);
  for (auto& k : deepspeed::check_key_by_key_sections(j, o)) {
    const size_t dot = k.find('.');
    j.at(k.substr(0, dot)).erase(k.substr(dot + 1));
    c.ignored.push_back(std::move(k));
  }
  deepspeed::refuse_unmodelled(j, o);
  read_offload(j, o, c);
  if (j.contains("activation_checkpointing"))
    c.notes.push_back(
        "the activation_checkpointing section configures deepspeed.checkpointing only; whether the model "
        "checkpoints its blocks is the scenario's training.activation_checkpointing");
  c.unmodelled = deepspeed::unmodelled_keys(j);
  for (const auto& k : c.auto_keys)
    if (k == "zero_optimization.reduce_bucket_size") c.reduce_bucket_auto = true;
  deepspeed::read_deepspeed_fields(j, o, c);
  return c;
}

}  // namespace vitsim
