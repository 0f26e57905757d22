// `vitsim plan --emit-ds-config` from the user's own DeepSpeed config (deepspeed.hpp deepspeed_config_edit):
// the file as written, its key order kept, with only the keys the plan chose changed.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "formats/deepspeed_check.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/deepspeed.hpp"
#include "vitsim/core/formats/scenario.hpp"

namespace vitsim {

namespace {
using ojson = nlohmann::ordered_json;

// DeepSpeed v0.14.4's defaults of the planned keys (runtime/constants.py GRADIENT_ACCUMULATION_STEPS_DEFAULT;
// zero/config.py DeepSpeedZeroConfig: stage 0, reduce_bucket_size and allgather_bucket_size 5e8, overlap_comm
// None -> True at stage 3, False below: overlap_comm_valid).
constexpr double kDefaultBucketElements = 5e8;

bool is_auto(const ojson& v) {
  return v.is_string() && v.get<std::string>() == "auto";
}

bool same(const ojson& a, const ojson& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  return a == b;
}

class Editor {
 public:
  explicit Editor(DeepSpeedEdit& out) : out_(out) {}

  // `obj[key]` becomes `value` unless it reads "auto" (kept: `hf` says how HF's Trainer fills it) or
  // already holds it; an absent key is added only where DeepSpeed's default (`def`) is not the value.
  void set(ojson& obj, const std::string& key, const std::string& dotted, const ojson& value,
           const std::optional<ojson>& def, const std::string& hf = "") {
    if (obj.contains(key) && is_auto(obj[key])) {
      out_.notes.push_back(fmt::format("{} stays \"auto\"{}; the pick is {}", dotted,
                                       hf.empty() ? "" : " (HF's Trainer fills it from " + hf + ")",
                                       value.dump()));
      return;
    }
    if (obj.contains(key)) {
      if (same(obj[key], value)) return;
      out_.changes.push_back(fmt::format("{}: {} -> {}", dotted, obj[key].dump(), value.dump()));
      obj[key] = value;
      return;
    }
    if (def && same(*def, value)) return;
    out_.changes.push_back(fmt::format("{}: (not given) -> {}", dotted, value.dump()));
    obj[key] = value;
  }
  void erase(ojson& obj, const std::string& key, const std::string& why) {
    if (!obj.contains(key) || is_auto(obj[key])) return;
    out_.changes.push_back(fmt::format("{}: {} -> (left out: {})", key, obj[key].dump(), why));
    obj.erase(key);
  }

 private:
  DeepSpeedEdit& out_;
};

// The indentation of the file's first indented line (2 when none): the edit is written as the user wrote.
int indent_of(const std::string& text) {
  const size_t nl = text.find('\n');
  if (nl == std::string::npos) return 2;
  size_t i = nl + 1;
  while (i < text.size() && text[i] == ' ') ++i;
  return i > nl + 1 ? static_cast<int>(i - nl - 1) : 2;
}

// fp16.enabled / bf16.enabled for the pick's precision ("bfloat16" edited where the file names the section
// so); an enabled section of the other precision is turned off.
void set_precision(Editor& ed, ojson& j, const std::optional<std::string>& precision) {
  const std::string bf = j.contains("bf16") || !j.contains("bfloat16") ? "bf16" : "bfloat16";
  for (const std::string& sec : {std::string("fp16"), bf}) {
    const bool want = precision == (sec == "fp16" ? "fp16" : "bf16");
    const bool has = j.contains(sec) && j[sec].is_object();
    if (!has && !want) continue;
    if (!has) j[sec] = ojson::object();
    ed.set(j[sec], "enabled", sec + ".enabled", want, false, sec == "fp16" ? "--fp16" : "--bf16");
  }
}

}  // namespace

DeepSpeedEdit deepspeed_config_edit(const Scenario& s) {
  DeepSpeedEdit out;
  const std::string text = read_input_file(s.deepspeed_config, "DeepSpeed config");
  ojson j;
  try {
    j = ojson::parse(text);
  } catch (const std::exception& e) {
    throw Error(Origin{s.deepspeed_config, 0}, fmt::format("malformed JSON: {}", e.what()));
  }
  const DeepSpeedConfig pick = deepspeed::settings_of(s);
  Editor ed(out);
  ed.set(j, "train_micro_batch_size_per_gpu", "train_micro_batch_size_per_gpu", *pick.micro_batch,
         std::nullopt, "--per_device_train_batch_size");
  ed.set(j, "gradient_accumulation_steps", "gradient_accumulation_steps", *pick.grad_accum, 1,
         "--gradient_accumulation_steps");
  if (s.parallel.sequence_parallel > 1) {
    ed.erase(j, "train_batch_size",
             fmt::format("DeepSpeed derives micro x accumulation x its data-parallel world: {} with "
                         "Ulysses' mpu over {} ranks in groups of {}",
                         s.global_batch(), s.ranks(), s.parallel.sequence_parallel));
  } else if (j.contains("train_batch_size")) {
    ed.set(j, "train_batch_size", "train_batch_size", *pick.train_batch_size, std::nullopt,
           "world x micro x accumulation");
  }
  // zero_optimization: the deprecated boolean form becomes the section it stands for.
  if (j.contains("zero_optimization") && j["zero_optimization"].is_boolean()) {
    const bool on = j["zero_optimization"].get<bool>();
    j["zero_optimization"] = ojson{{"stage", on ? 1 : 0}};
    out.notes.push_back("the deprecated \"zero_optimization\": true|false is written as its section");
  }
  const int stage = *pick.zero_stage;
  const bool overlap_default = stage == 3;
  const long long reduce = std::llround(*pick.reduce_bucket_elements);
  const long long gather = std::llround(*pick.allgather_bucket_elements);
  const bool zero_needed = stage != 0 || *pick.overlap_comm != overlap_default ||
                           reduce != kDefaultBucketElements || gather != kDefaultBucketElements;
  if (!j.contains("zero_optimization") && zero_needed) j["zero_optimization"] = ojson::object();
  if (j.contains("zero_optimization")) {
    ojson& z = j["zero_optimization"];
    ed.set(z, "stage", "zero_optimization.stage", stage, 0);
    ed.set(z, "overlap_comm", "zero_optimization.overlap_comm", *pick.overlap_comm, overlap_default);
    ed.set(z, "reduce_bucket_size", "zero_optimization.reduce_bucket_size", reduce, kDefaultBucketElements,
           "the model's hidden_size^2");
    ed.set(z, "allgather_bucket_size", "zero_optimization.allgather_bucket_size", gather,
           kDefaultBucketElements);
  }
  set_precision(ed, j, pick.precision);
  out.text = j.dump(indent_of(text)) + "\n";
  return out;
}

}  // namespace vitsim
