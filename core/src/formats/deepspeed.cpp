#include "vitsim/core/formats/deepspeed.hpp"
// DeepSpeed JSON config import (deepspeed.hpp): the file read and parsed, its deprecated forms and "auto"
// values taken, its checks applied in order (deepspeed_check.cpp), then the values vitsim models taken into
// a DeepSpeedConfig through the config's one mapping (deepspeed_json.cpp).
#include <nlohmann/json.hpp>
#include <string>

#include "formats/deepspeed_check.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/json_reader.hpp"

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
  for (const auto& k : c.auto_keys)
    if (k == "zero_optimization.reduce_bucket_size") c.reduce_bucket_auto = true;
  deepspeed::read_deepspeed_fields(j, o, c);
  return c;
}

}  // namespace vitsim
