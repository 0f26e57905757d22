#include "vitsim/core/formats/scenario.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <mutex>
#include <optional>
#include <pugixml.hpp>
#include <set>
#include <sstream>

#include "formats/scenario_detail.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/deepspeed.hpp"
#include "vitsim/core/model/dataset.hpp"
#include "vitsim/core/model/framework.hpp"

// The scenario file: its XML read against the schema, --set overrides and the DeepSpeed config merged in.
namespace vitsim {
namespace scenario_detail {
namespace {

int line_of(const std::string& text, ptrdiff_t offset) {
  if (offset < 0) return 0;
  return 1 + static_cast<int>(
                 std::count(text.begin(), text.begin() + std::min<ptrdiff_t>(offset, text.size()), '\n'));
}

// DeepSpeed values become attributes unless the scenario or --set already fixed the key; a scenario
// file value that contradicts the DeepSpeed file is an error, a --set or a <sweep> wins (it is the user's
// what-if, or the search the user asked for: the one-line form saves its search as sweeps).
// `wins` gets one line per --set that replaced a different value of the config (issue 39 item 21: which wins
// is said, not left to guess).
void merge_deepspeed(std::map<std::string, Attribute>& attrs, const DeepSpeedConfig& ds,
                     std::vector<std::string>& wins) {
  auto put = [&](const std::string& key, const std::string& value, const std::string& ds_key) {
    Origin o{ds.path + " (" + ds_key + ")", 0};
    auto it = attrs.find(key);
    if (it == attrs.end()) {
      attrs[key] = Attribute{value, o};
      return;
    }
    if (it->second.swept || it->second.origin.file.rfind("--set", 0) == 0) {
      // The one-line form's search says what it replaced in its own lines (sim/predict/plan_search.cpp).
      const std::string by = it->second.origin.file.rfind("--set", 0) == 0
                                 ? it->second.origin.file
                                 : fmt::format("the <sweep> at {}", it->second.origin.str());
      if (it->second.value != value && by.find("(the one-line search)") == std::string::npos)
        wins.push_back(
            fmt::format("{} wins over {}'s {} {} (a --set or a <sweep> replaces the DeepSpeed "
                        "config's value)",
                        by, ds.path, ds_key, value));
      return;
    }
    if (it->second.value != value)
      throw Error(it->second.origin,
                  fmt::format("{}={} contradicts {} {}={}", key, it->second.value, ds.path, ds_key, value));
  };
  if (ds.micro_batch)
    put("training.micro_batch", std::to_string(*ds.micro_batch), "train_micro_batch_size_per_gpu");
  if (ds.grad_accum)
    put("training.grad_accum", std::to_string(*ds.grad_accum), "gradient_accumulation_steps");
  if (ds.zero_stage) put("parallelism.zero", std::to_string(*ds.zero_stage), "zero_optimization.stage");
  if (ds.overlap_comm)
    put("parallelism.overlap", *ds.overlap_comm ? "true" : "false", "zero_optimization.overlap_comm");
  if (ds.precision)
    put("training.precision", *ds.precision,
        ds.precision == std::string("fp16") ? "fp16.enabled" : "bf16.enabled");
  if (ds.comm_dtype) put("parallelism.comm_dtype", *ds.comm_dtype, "communication_data_type");
  if (ds.optimizer) put("training.optimizer", *ds.optimizer, "optimizer.type");
  if (ds.lr) put("training.lr", fmt::format("{}", *ds.lr), "optimizer.params.lr");
  if (ds.weight_decay)
    put("training.weight_decay", fmt::format("{}", *ds.weight_decay), "optimizer.params.weight_decay");
  // ds.activation_checkpointing: not a model's choice to checkpoint (DeepSpeedConfig; a note says so).
  if (ds.offload_optimizer)
    put("parallelism.offload_optimizer", *ds.offload_optimizer, "zero_optimization.offload_optimizer");
  if (ds.offload_param)
    put("parallelism.offload_param", *ds.offload_param, "zero_optimization.offload_param");
  if (ds.gradient_clipping)
    put("training.gradient_clipping", fmt::format("{}", *ds.gradient_clipping), "gradient_clipping");
  if (ds.loss_scale) put("training.loss_scale", fmt::format("{}", *ds.loss_scale), "fp16.loss_scale");
  // "auto" micro-batch: HF's Trainer fills it from per_device_train_batch_size, default 8; the scenario's or
  // a sweep's micro-batch is that argument when given.
  const bool micro_auto = std::find(ds.auto_keys.begin(), ds.auto_keys.end(),
                                    "train_micro_batch_size_per_gpu") != ds.auto_keys.end();
  if (micro_auto && !ds.micro_batch && !ds.train_batch_size && !attrs.count("training.micro_batch"))
    put("training.micro_batch", std::to_string(kHfDefaultMicroBatch),
        "train_micro_batch_size_per_gpu \"auto\": HF's per_device_train_batch_size default");
  // A DeepSpeed config means the step is DeepSpeed's (its optimizer wrapper and gradient handling).
  put("training.framework", "deepspeed", "its engine");
}

// plan --global-batch N wins over the config's batch (issue 38 item 2): train_batch_size becomes N and
// gradient_accumulation_steps is dropped, so that DeepSpeed's own rule (derive_deepspeed_batch) derives the
// accumulation from N, the micro-batch and the ranks, as DeepSpeed would from the config the plan emits.
void replace_deepspeed_batch(DeepSpeedConfig& ds, long long global_batch, std::string* replaced) {
  std::string was;
  if (ds.train_batch_size && *ds.train_batch_size != global_batch)
    was = fmt::format("train_batch_size {}", *ds.train_batch_size);
  if (ds.grad_accum)
    was += fmt::format("{}gradient_accumulation_steps {}", was.empty() ? "" : " and ", *ds.grad_accum);
  ds.train_batch_size = global_batch;
  ds.grad_accum.reset();
  if (replaced && !was.empty())
    *replaced = fmt::format(
        "--global-batch {} replaces {}'s {} (the accumulation follows: {} / (micro-batch x replicas), as "
        "DeepSpeed derives it from train_batch_size)",
        global_batch, ds.path, was, global_batch);
}

}  // namespace

// deepspeed.config: read the file, merge its values into `attrs` (merge_deepspeed) and warn once per file
// about what it sets that vitsim does not model.
std::optional<DeepSpeedConfig> read_and_merge_deepspeed(std::map<std::string, Attribute>& attrs,
                                                        const std::string& file,
                                                        std::optional<long long> global_batch,
                                                        std::string* replaced,
                                                        std::vector<std::string>* overrides) {
  std::optional<DeepSpeedConfig> ds;
  Reader r0(attrs, file);
  if (r0.has("deepspeed.config")) {
    std::string p = r0.path("deepspeed.config");
    try {
      ds = read_deepspeed_config(p);
    } catch (const Error& e) {
      throw Error(r0.origin("deepspeed.config"), e.what());
    }
    const bool micro_given = attrs.count("training.micro_batch") > 0;
    if (global_batch) replace_deepspeed_batch(*ds, *global_batch, replaced);
    std::vector<std::string> wins;
    merge_deepspeed(attrs, *ds, wins);
    std::vector<std::string> notes = ds->notes;
    if (!micro_given && attrs.count("training.micro_batch") && !ds->micro_batch && !ds->train_batch_size)
      notes.push_back(fmt::format(
          "train_micro_batch_size_per_gpu \"auto\" is {}, HF's Trainer default (TrainingArguments."
          "per_device_train_batch_size); set training.micro_batch, or let `vitsim plan` search it",
          kHfDefaultMicroBatch));
    // One warning line per config file and process (a sweep resolves the same file at every point); what a
    // --set or <sweep> replaced goes to the point (Scenario::deepspeed_overrides: its notes, the plan's
    // head).
    static std::mutex warned_mutex;
    static std::set<std::string> warned;
    const std::string line = unmodelled_warning(*ds);
    std::lock_guard<std::mutex> lock(warned_mutex);
    if (!line.empty() && warned.insert(line).second)
      std::fprintf(stderr, "vitsim: warning: %s\n", line.c_str());
    for (const auto& n : notes)
      if (const std::string note = ds->path + ": " + n; warned.insert(note).second)
        std::fprintf(stderr, "vitsim: note: %s\n", note.c_str());
    if (overrides) *overrides = std::move(wins);
  }
  return ds;
}

}  // namespace scenario_detail

using namespace scenario_detail;

std::vector<std::string> scenario_keys() {
  std::vector<std::string> keys;
  for (const auto& k : scenario_key_table()) keys.push_back(k.key);
  std::sort(keys.begin(), keys.end());
  return keys;
}

namespace {
// A sweep's values are its points: one given twice was simulated twice (issue 27). scenario.name names the
// whole report and is not swept.
void check_sweep_values(const Sweep& s, const std::string& where) {
  if (s.key == "scenario.name")
    throw Error(s.origin, fmt::format("{}: scenario.name names the whole report; it is not swept", where));
  std::set<std::string> seen;
  for (const auto& v : s.values)
    if (!seen.insert(v).second)
      throw Error(s.origin, fmt::format("{}: value '{}' given twice (each value is a point, simulated once); "
                                        "give it once",
                                        where, echo(v)));
}
}  // namespace

ScenarioFile read_scenario_file(const std::string& path) {
  ScenarioFile f;
  f.path = path;
  const std::string text = read_input_file(path, "scenario file");  // regular files only, size-limited
  pugi::xml_document doc;
  auto res = doc.load_buffer(text.data(), text.size(), pugi::parse_default | pugi::parse_ws_pcdata_single);
  if (!res)
    throw Error(Origin{path, line_of(text, res.offset)}, fmt::format("malformed XML: {}", res.description()));
  auto where = [&](const pugi::xml_node& n) { return Origin{path, line_of(text, n.offset_debug())}; };
  auto root = doc.document_element();
  if (std::string(root.name()) != "scenario")
    throw Error(where(root), fmt::format("root element is <{}>, expected <scenario>", root.name()));
  for (auto a : root.attributes()) {
    if (std::string(a.name()) == "name")
      f.name = a.value();
    else
      throw Error(where(root), fmt::format("unknown attribute '{}' on <scenario>; valid: name", a.name()));
  }
  if (f.name.empty()) f.name = fs::path(path).stem().string();
  std::set<std::string> seen;
  for (auto el : root.children()) {
    if (el.type() != pugi::node_element) continue;
    std::string name = el.name();
    if (name == "sweep") {
      Sweep s;
      s.origin = where(el);
      for (auto a : el.attributes()) {
        std::string an = a.name();
        if (an == "param")
          s.key = a.value();
        else if (an == "values")
          s.values = split_list(a.value(), ',');
        else
          throw Error(s.origin, fmt::format("unknown attribute '{}' on <sweep>; valid: param, values", an));
      }
      auto keys = scenario_keys();
      if (std::find(keys.begin(), keys.end(), s.key) == keys.end())
        throw Error(s.origin, fmt::format("<sweep param='{}'>: unknown key; valid: {}", s.key, join(keys)));
      if (s.values.empty() ||
          std::any_of(s.values.begin(), s.values.end(), [](auto& v) { return v.empty(); }))
        throw Error(s.origin, "<sweep> needs a non-empty comma-separated 'values'");
      for (const auto& other : f.sweeps)
        if (other.key == s.key) throw Error(s.origin, fmt::format("second <sweep> over '{}'", s.key));
      check_sweep_values(s, "<sweep param='" + s.key + "'>");
      f.sweeps.push_back(s);
      continue;
    }
    auto it = schema().find(name);
    if (it == schema().end()) {
      std::vector<std::string> valid;
      for (const auto& [k, v] : schema()) valid.push_back(k);
      valid.push_back("sweep");
      throw Error(where(el), fmt::format("unknown element <{}>; valid: {}", name, join(valid)));
    }
    if (!seen.insert(name).second) throw Error(where(el), fmt::format("element <{}> appears twice", name));
    for (auto child : el.children())
      if (child.type() == pugi::node_element)
        throw Error(where(child), fmt::format("unexpected element <{}> inside <{}>", child.name(), name));
    for (auto a : el.attributes()) {
      const auto& valid = it->second;
      if (std::find(valid.begin(), valid.end(), a.name()) == valid.end())
        throw Error(where(el),
                    fmt::format("unknown attribute '{}' on <{}>; valid: {}", a.name(), name, join(valid)));
      f.attrs[name + "." + a.name()] = Attribute{a.value(), where(el)};
    }
  }
  if (!f.attrs.count("cluster.platform"))
    throw Error(Origin{path, line_of(text, root.offset_debug())}, "missing <cluster platform=\"...\"/>");
  return f;
}

void apply_override(ScenarioFile& f, const std::string& assignment) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Error(fmt::format("--set '{}': expected KEY=VALUE, e.g. training.micro_batch=32", assignment));
  std::string key = assignment.substr(0, eq);
  std::string value = assignment.substr(eq + 1);
  auto keys = scenario_keys();
  if (std::find(keys.begin(), keys.end(), key) == keys.end())
    throw Error(fmt::format("--set {}: unknown key; valid: {}", key, join(keys)));
  Origin o{"--set " + key, 0};
  std::erase_if(f.sweeps, [&](const Sweep& s) { return s.key == key; });
  if (key == "scenario.name") {  // the report's name, one for the whole run (a comma is part of it)
    f.name = value;
    f.attrs[key] = Attribute{value, o};
    return;
  }
  if (value.find(',') != std::string::npos) {
    Sweep s{key, split_list(value, ','), o};
    if (std::any_of(s.values.begin(), s.values.end(), [](auto& v) { return v.empty(); }))
      throw Error(o, "empty value in the comma list");
    check_sweep_values(s, "--set " + key);
    f.sweeps.push_back(s);
    f.attrs.erase(key);
  } else {
    f.attrs[key] = Attribute{value, o};
  }
}

}  // namespace vitsim
