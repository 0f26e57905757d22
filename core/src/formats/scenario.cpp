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

namespace vitsim {
namespace fs = std::filesystem;

std::vector<std::string> split_list(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) {
    auto b = cur.find_first_not_of(" \t\n");
    auto e = cur.find_last_not_of(" \t\n");
    out.push_back(b == std::string::npos ? "" : cur.substr(b, e - b + 1));
  }
  return out;
}

long long DatasetSpec::effective_train_samples(int ranks) const {
  if (per_gpu_fraction <= 0) return train_samples;
  return std::min(
      train_samples * static_cast<long long>(ranks),
      static_cast<long long>(std::llround(per_gpu_fraction * static_cast<double>(train_samples) * ranks)));
}

namespace scenario_detail {
namespace {

std::string range_text(long long min, long long max) {
  return max >= (1LL << 53) ? fmt::format(">= {}", min) : fmt::format("{} .. {}", min, max);
}

}  // namespace

KeyRow integer_row(std::string key, std::string def_text, IntDefault def, long long min, long long max,
                   std::string doc, std::function<void(Resolution&, long long)> set) {
  ScenarioKeyInfo info{key, "integer", std::move(def_text), range_text(min, max), "", std::move(doc)};
  return {info, [key, def, min, max, set](Resolution& x) { set(x, x.r.integer(key, def(x), min, max)); }};
}
KeyRow integer_row(std::string key, long long def, long long min, long long max, std::string doc,
                   std::function<void(Resolution&, long long)> set) {
  return integer_row(
      key, std::to_string(def), [def](const Resolution&) { return def; }, min, max, std::move(doc),
      std::move(set));
}
KeyRow number_row(std::string key, std::string def_text, NumDefault def, double min, double max,
                  std::string doc, std::function<void(Resolution&, double)> set) {
  ScenarioKeyInfo info{key, "number",      std::move(def_text), fmt::format("{} .. {}", min, max),
                       "",  std::move(doc)};
  return {info, [key, def, min, max, set](Resolution& x) { set(x, x.r.number(key, def(x), min, max)); }};
}
KeyRow number_row(std::string key, double def, double min, double max, std::string doc,
                  std::function<void(Resolution&, double)> set) {
  return number_row(
      key, fmt::format("{}", def), [def](const Resolution&) { return def; }, min, max, std::move(doc),
      std::move(set));
}
KeyRow boolean_row(std::string key, bool def, std::string doc, std::function<void(Resolution&, bool)> set) {
  ScenarioKeyInfo info{key, "boolean",     def ? "true" : "false", "true, false (or on, off, yes, no, 1, 0)",
                       "",  std::move(doc)};
  return {info, [key, def, set](Resolution& x) { set(x, x.r.boolean(key, def)); }};
}
KeyRow choice_row(std::string key, std::string def, std::vector<std::string> valid, std::string doc,
                  std::function<void(Resolution&, const std::string&)> set) {
  ScenarioKeyInfo info{key, "choice", def, join(valid), "", std::move(doc)};
  return {info, [key, def, valid, set](Resolution& x) { set(x, x.r.choice(key, def, valid)); }};
}
// Anything else: the row says its type and valid values in words and applies itself.
KeyRow custom_row(std::string key, std::string type, std::string def_text, std::string valid, std::string doc,
                  Apply apply) {
  return {ScenarioKeyInfo{std::move(key), std::move(type), std::move(def_text), std::move(valid), "",
                          std::move(doc)},
          std::move(apply)};
}
// A name checked by a registry outside core (sim's collectives and compute models): read as text here.
KeyRow registry_row(std::string key, std::string def, std::string registry, std::string doc,
                    std::function<void(Resolution&, const std::string&)> set) {
  ScenarioKeyInfo info{key, "name", def, "", std::move(registry), std::move(doc)};
  return {info, [key, def, set](Resolution& x) { set(x, x.r.str(key, def)); }};
}

namespace {

// A bucket written in bits ("25Mb": 3.1 MB) is almost surely megabytes mistyped: DDP's bucket_cap_mb
// and DeepSpeed's bucket sizes are bytes and elements. One warning line per key and value.
void warn_bucket_in_bits(const Reader& r, const std::string& key, double bytes) {
  const auto* v = r.raw(key);
  if (!v) return;
  const size_t u = v->find_first_not_of("0123456789.+-eE ");
  const std::string unit = u == std::string::npos ? "" : v->substr(u);
  if (unit.empty() || unit.back() != 'b') return;
  static std::mutex mb_mutex;
  static std::set<std::string> mb_warned;
  const std::string line = fmt::format(
      "{}: {}={} is in bits: {} ({}); if bytes were meant, write {}B", r.origin(key).str(), key, *v,
      units::format_bytes(bytes),
      bytes < 1e6 ? "under 1 MB, too small for a communication bucket" : "a bucket in bits is unusual",
      v->substr(0, u) + unit.substr(0, unit.size() - 1));
  std::lock_guard<std::mutex> lock(mb_mutex);
  if (mb_warned.insert(line).second) std::fprintf(stderr, "vitsim: warning: %s\n", line.c_str());
}

}  // namespace

// The gradients' dtype on the wire: parallelism.comm_dtype, else the training precision.
Precision comm_dtype(const Resolution& x) {
  if (!x.r.has("parallelism.comm_dtype")) return x.s.training.precision;
  return parse_precision(x.r.choice("parallelism.comm_dtype", "fp32", kPrecisions));
}

// A gradient bucket in bytes. DeepSpeed sizes buckets in elements, the scenario in bytes; the default
// follows DeepSpeed's config where there is one (reduce_bucket_size "auto": hidden_size x hidden_size
// elements, as the HF integration fills it), else DeepSpeed's 5e8 elements.
KeyRow bucket_row(std::string key, bool reduce, std::string doc,
                  std::function<void(Resolution&, double)> set) {
  Apply apply = [key, reduce, set](Resolution& x) {
    const auto& ds = x.ds;
    const double elems =
        reduce ? (ds && ds->reduce_bucket_elements ? *ds->reduce_bucket_elements
                  : ds && ds->reduce_bucket_auto   ? static_cast<double>(x.s.model.width) * x.s.model.width
                                                   : 5e8)
               : (ds && ds->allgather_bucket_elements ? *ds->allgather_bucket_elements : 5e8);
    const double bytes = x.r.quantity(key, elems * precision_bytes(comm_dtype(x)), units::Kind::Bytes);
    warn_bucket_in_bits(x.r, key, bytes);
    if (!(bytes > 0)) x.r.fail(key, "must be positive");
    set(x, bytes);
  };
  return custom_row(std::move(key), "bytes", "5e8 elements x gradient bytes (DeepSpeed's, or its config's)",
                    "> 0, with a unit (25MB)", std::move(doc), std::move(apply));
}

namespace {

// Checks across an element's keys, run after its last row.
void check_model(Resolution& x) {
  try {
    x.s.model.validate();
  } catch (const Error& e) {
    throw Error(x.r.origin(x.r.has("model.preset") ? "model.preset" : "model.width"), e.what());
  }
}
void check_dataset(Resolution& x) {
  if (x.s.dataset.channels != x.s.model.channels)
    x.r.fail("dataset.name", fmt::format("dataset has {} channels but the model takes {}",
                                         x.s.dataset.channels, x.s.model.channels));
}
void check_training(Resolution& x) {
  const TrainingSpec& t = x.s.training;
  if (t.loss_scale > 0 && t.precision != Precision::FP16)
    x.r.fail("training.loss_scale",
             fmt::format("a loss scale applies to fp16 training, not {}", precision_name(t.precision)));
  // training.cast: `module` converts the model to half, so it needs fp16 or bf16; DeepSpeed's engine converts
  // the module itself (engine.py _configure_distributed_model: module.half() or .bfloat16(); its
  // fp16.auto_cast is not modelled), so it runs `module` only.
  if (t.cast == HalfCast::Module && t.precision == Precision::FP32)
    x.r.fail("training.cast",
             "module converts the model to half but training.precision is fp32 (nothing to convert): set "
             "training.precision=fp16 or bf16, or leave training.cast out");
  if (t.cast == HalfCast::Autocast && t.framework == Framework::DeepSpeed)
    x.r.fail("training.cast",
             "autocast, but DeepSpeed's engine converts the module itself (module.half() or .bfloat16()): "
             "training.framework=deepspeed runs module");
}
void check_simulation(Resolution& x) {
  const SimulationSpec& sim = x.s.simulation;
  if (sim.warmup >= sim.steps)
    x.r.fail("simulation.warmup",
             fmt::format("{} warm-up steps leave none of the {} steps to measure", sim.warmup, sim.steps));
}
// DeepSpeed's batch rule (derive_deepspeed_batch): with a train_batch_size in the config, the micro-batch
// and accumulation the scenario, --set or the config give count as given, the others are derived as
// DeepSpeed derives them over the data-parallel ranks, and the three must agree.
void check_deepspeed_batch(Resolution& x) {
  Scenario& s = x.s;
  if (!x.ds || !x.ds->train_batch_size) return;
  auto given = [&](const char* key, int value) {
    return x.r.has(key) ? std::optional<long long>(value) : std::nullopt;
  };
  DeepSpeedBatch b;
  try {
    b = derive_deepspeed_batch(x.ds->train_batch_size, given("training.micro_batch", s.training.micro_batch),
                               given("training.grad_accum", s.training.grad_accum), s.dp_ranks());
  } catch (const Error& e) {
    throw Error(x.r.origin("deepspeed.config"), e.what());
  }
  s.training.micro_batch = static_cast<int>(b.micro_batch);
  s.training.grad_accum = static_cast<int>(b.grad_accum);
  s.deepspeed_train_batch = b.train_batch;
}
const std::map<std::string, Apply>& element_checks() {
  static const std::map<std::string, Apply> c{{"model", check_model},
                                              {"dataset", check_dataset},
                                              {"training", check_training},
                                              {"simulation", check_simulation},
                                              {"deepspeed", check_deepspeed_batch}};
  return c;
}

std::string element_of(const std::string& key) {
  return key.substr(0, key.find('.'));
}

}  // namespace

// The schema: element -> its attributes, in table order. Anything else in a file is an error. The root's
// own attributes (scenario.name) are not an element.
const std::map<std::string, std::vector<std::string>>& schema() {
  static const std::map<std::string, std::vector<std::string>> s = [] {
    std::map<std::string, std::vector<std::string>> out;
    for (const auto& row : key_rows()) {
      const std::string el = element_of(row.info.key);
      if (el != "scenario") out[el].push_back(row.info.key.substr(el.size() + 1));
    }
    return out;
  }();
  return s;
}

}  // namespace scenario_detail

using namespace scenario_detail;

const std::vector<ScenarioKeyInfo>& scenario_key_table() {
  static const std::vector<ScenarioKeyInfo> t = [] {
    std::vector<ScenarioKeyInfo> out;
    for (const auto& row : key_rows()) out.push_back(row.info);
    return out;
  }();
  return t;
}

Scenario resolve(const ScenarioFile& f, const std::map<std::string, Attribute>& given,
                 const std::map<std::string, std::string>& params) {
  std::map<std::string, Attribute> attrs = given;
  std::string replaced;
  std::vector<std::string> overrides;
  const std::optional<DeepSpeedConfig> ds =
      read_and_merge_deepspeed(attrs, f.path, f.global_batch, &replaced, &overrides);
  Reader r(attrs, f.path);
  Scenario s;
  s.deepspeed_batch_replaced = replaced;
  s.deepspeed_overrides = overrides;
  s.file = f.path;
  s.params = params;
  for (const auto& [k, a] : attrs) s.origins[k] = a.origin;
  if (ds) s.deepspeed_config = ds->path;
  Resolution x{r, f, ds, s};
  const auto& rows = key_rows();
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].apply(x);
    const std::string el = element_of(rows[i].info.key);
    const bool last_of_element = i + 1 == rows.size() || element_of(rows[i + 1].info.key) != el;
    if (auto c = element_checks().find(el); last_of_element && c != element_checks().end()) c->second(x);
  }
  return s;
}

// The number of points before any is built: a sweep of 10^9 points would run until memory runs out.
long long sweep_points(const ScenarioFile& f) {
  double n = 1;
  for (const auto& s : f.sweeps) n *= static_cast<double>(s.values.size());
  return n > 9e18 ? std::numeric_limits<long long>::max() : static_cast<long long>(n);
}

void check_sweep_size(const ScenarioFile& f) {
  long long limit = kDefaultMaxPoints;
  if (auto it = f.attrs.find("simulation.max_points"); it != f.attrs.end()) {
    try {
      limit = units::parse_integer(it->second.value, 1, std::numeric_limits<long long>::max());
    } catch (const Error& e) {
      throw Error(it->second.origin, fmt::format("simulation.max_points: {}", e.what()));
    }
  }
  const long long n = sweep_points(f);
  if (n <= limit) return;
  std::string sizes, keys;
  for (const auto& s : f.sweeps) {
    sizes += (sizes.empty() ? "" : " x ") + std::to_string(s.values.size());
    keys += (keys.empty() ? "" : ", ") + s.key;
  }
  throw Error(
      f.sweeps.front().origin,
      fmt::format(
          "the sweeps make {} points ({} values of {}), above the limit of {} points (each point is "
          "one simulation); sweep fewer values or raise the limit with --set simulation.max_points=N",
          n == std::numeric_limits<long long>::max() ? std::string("more than 9e18") : std::to_string(n),
          sizes, keys, limit));
}

// A file's value under a key that a sweep of the same key overrides is still the file's: checked by its row,
// as if no sweep replaced it (gpus_per_node="nan" beside a gpus_per_node sweep was accepted: issue 27). The
// rows before it run first, since a row may read what they set; their own errors are not this check's.
void check_shadowed_values(const ScenarioFile& f) {
  for (const auto& sweep : f.sweeps) {
    auto given = f.attrs.find(sweep.key);
    if (given == f.attrs.end() || given->second.origin.file.rfind("--set", 0) == 0) continue;
    std::map<std::string, Attribute> attrs = f.attrs;
    std::optional<DeepSpeedConfig> ds;
    try {
      ds = read_and_merge_deepspeed(attrs, f.path, f.global_batch);
    } catch (const Error&) {
    }
    Reader r(attrs, f.path);
    Scenario s;
    Resolution x{r, f, ds, s};
    for (const auto& row : key_rows()) {
      try {
        row.apply(x);
      } catch (const Error& e) {
        if (row.info.key == sweep.key)
          throw Error(
              fmt::format("{} (the sweep at {} replaces it, but a value given is read: correct it "
                          "or remove it)",
                          e.what(), sweep.origin.str()));
      }
      if (row.info.key == sweep.key) break;
    }
  }
}

void for_each_combination(const ScenarioFile& f,
                          const std::function<void(const std::map<std::string, Attribute>&,
                                                   const std::map<std::string, std::string>&)>& fn) {
  check_sweep_size(f);
  check_shadowed_values(f);
  std::map<std::string, Attribute> attrs = f.attrs;
  std::map<std::string, std::string> params;
  for (const auto& [k, a] : f.attrs)
    if (a.origin.file.rfind("--set", 0) == 0) params[k] = a.value;
  std::function<void(size_t)> rec = [&](size_t i) {
    if (i == f.sweeps.size()) {
      fn(attrs, params);
      return;
    }
    const Sweep& s = f.sweeps[i];
    std::optional<Attribute> saved;
    if (auto it = attrs.find(s.key); it != attrs.end()) saved = it->second;
    for (const auto& v : s.values) {
      attrs[s.key] = Attribute{v, s.origin, true};
      params[s.key] = v;
      rec(i + 1);
    }
    attrs.erase(s.key);
    params.erase(s.key);
    if (saved) attrs[s.key] = *saved;
  };
  rec(0);
}

std::vector<Scenario> expand(const ScenarioFile& f) {
  std::vector<Scenario> out;
  for_each_combination(
      f, [&](const auto& attrs, const auto& params) { out.push_back(resolve(f, attrs, params)); });
  return out;
}

}  // namespace vitsim
