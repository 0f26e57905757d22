#include "vitsim/core/formats/scenario.hpp"

#include "vitsim/core/model/framework.hpp"

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

#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/deepspeed.hpp"
#include "vitsim/core/model/dataset.hpp"

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

namespace {

// The schema (element -> attributes), derived from the key table below.
const std::map<std::string, std::vector<std::string>>& schema();

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
  return out;
}

int line_of(const std::string& text, ptrdiff_t offset) {
  if (offset < 0) return 0;
  return 1 + static_cast<int>(
                 std::count(text.begin(), text.begin() + std::min<ptrdiff_t>(offset, text.size()), '\n'));
}

// Typed access to the attribute map, with errors naming where each value came from.
class Reader {
 public:
  Reader(const std::map<std::string, Attribute>& attrs, std::string fallback_file)
      : attrs_(attrs), fallback_{std::move(fallback_file), 0} {}

  bool has(const std::string& key) const { return attrs_.count(key) > 0; }
  const Origin& origin(const std::string& key) const {
    auto it = attrs_.find(key);
    return it == attrs_.end() ? fallback_ : it->second.origin;
  }
  const std::string* raw(const std::string& key) const {
    auto it = attrs_.find(key);
    return it == attrs_.end() ? nullptr : &it->second.value;
  }
  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw Error(origin(key), fmt::format("{}: {}", key, why));
  }

  std::string str(const std::string& key, const std::string& def) const {
    const auto* v = raw(key);
    return v ? *v : def;
  }
  // Whole numbers, through the one strict number reader (units::parse_number: NaN, inf, trailing text
  // refused); "1e5" is 100000, "16.5" is refused.
  long long integer(const std::string& key, long long def, long long min, long long max = (1LL << 53)) const {
    const auto* v = raw(key);
    if (!v) return def;
    double d = 0;
    try {
      d = units::parse_number(*v, units::Range{});
    } catch (const Error&) {
      fail(key, fmt::format("'{}' is not an integer", echo(*v)));
    }
    if (d != std::floor(d)) fail(key, fmt::format("'{}' is not an integer", echo(*v)));
    if (d < static_cast<double>(min) || d > static_cast<double>(max))
      fail(key, fmt::format("{} is out of range (expected {} .. {})", echo(*v), min, max));
    return static_cast<long long>(d);
  }
  double number(const std::string& key, double def, double min, double max) const {
    const auto* v = raw(key);
    if (!v) return def;
    try {
      return units::parse_number(*v, units::closed(min, max));
    } catch (const Error& e) {
      fail(key, e.what());
    }
  }
  bool boolean(const std::string& key, bool def) const {
    const auto* v = raw(key);
    if (!v) return def;
    if (*v == "true" || *v == "on" || *v == "1" || *v == "yes") return true;
    if (*v == "false" || *v == "off" || *v == "0" || *v == "no") return false;
    fail(key, fmt::format("'{}' is not a boolean; valid: true, false, on, off, yes, no, 1, 0", *v));
  }
  std::string choice(const std::string& key, const std::string& def,
                     const std::vector<std::string>& valid) const {
    const auto* v = raw(key);
    if (!v) return def;
    if (std::find(valid.begin(), valid.end(), *v) == valid.end())
      fail(key, fmt::format("unknown value '{}'; valid: {}", *v, join(valid)));
    return *v;
  }
  double quantity(const std::string& key, double def, units::Kind kind,
                  const units::Range& r = units::Range{}) const {
    const auto* v = raw(key);
    if (!v) return def;
    try {
      return units::parse(*v, kind, r);
    } catch (const Error& e) {
      fail(key, e.what());
    }
  }
  // Paths are relative to the file that named them.
  std::string path(const std::string& key) const {
    const auto* v = raw(key);
    if (!v || v->empty()) return "";
    fs::path p(*v);
    if (p.is_absolute()) return p.string();
    const Origin& o = origin(key);
    if (o.line == 0) return p.string();  // a --set value: relative to the working directory
    return (fs::path(o.file).parent_path() / p).lexically_normal().string();
  }

 private:
  const std::map<std::string, Attribute>& attrs_;
  Origin fallback_;
};

// DeepSpeed values become attributes unless the scenario or --set already fixed the key; a scenario
// file value that contradicts the DeepSpeed file is an error, a --set wins (it is the user's what-if).
void merge_deepspeed(std::map<std::string, Attribute>& attrs, const DeepSpeedConfig& ds) {
  auto put = [&](const std::string& key, const std::string& value, const std::string& ds_key) {
    Origin o{ds.path + " (" + ds_key + ")", 0};
    auto it = attrs.find(key);
    if (it == attrs.end()) {
      attrs[key] = Attribute{value, o};
      return;
    }
    if (it->second.origin.file.rfind("--set", 0) == 0) return;
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
  if (ds.activation_checkpointing)
    put("training.activation_checkpointing", "true", "activation_checkpointing");
  if (ds.gradient_clipping)
    put("training.gradient_clipping", fmt::format("{}", *ds.gradient_clipping), "gradient_clipping");
  if (ds.loss_scale) put("training.loss_scale", fmt::format("{}", *ds.loss_scale), "fp16.loss_scale");
  // A DeepSpeed config means the step is DeepSpeed's (its optimizer wrapper and gradient handling).
  put("training.framework", "deepspeed", "its engine");
}

}  // namespace

std::vector<std::string> scenario_keys() {
  std::vector<std::string> keys;
  for (const auto& k : scenario_key_table()) keys.push_back(k.key);
  std::sort(keys.begin(), keys.end());
  return keys;
}

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
  if (value.find(',') != std::string::npos) {
    Sweep s{key, split_list(value, ','), o};
    if (std::any_of(s.values.begin(), s.values.end(), [](auto& v) { return v.empty(); }))
      throw Error(o, "empty value in the comma list");
    f.sweeps.push_back(s);
    f.attrs.erase(key);
  } else {
    f.attrs[key] = Attribute{value, o};
  }
}

namespace {

// --- The scenario's keys, one row each: its type, default, valid values, one line of documentation and
// how it is applied to the Scenario. The schema (element -> attributes), the known-key check, the
// defaults, resolve() and docs/scenarios.md's key table (tests/cli/test_descriptors.cpp) all read this table.
// resolve() applies the rows in table order, so an earlier key's error comes first; checks across an
// element's keys run after its last row (element_checks()).

// deepspeed.config: read the file, merge its values into `attrs` (merge_deepspeed) and warn once per file
// about what it sets that vitsim does not model.
std::optional<DeepSpeedConfig> read_and_merge_deepspeed(std::map<std::string, Attribute>& attrs,
                                                        const std::string& file) {
  std::optional<DeepSpeedConfig> ds;
  Reader r0(attrs, file);
  if (r0.has("deepspeed.config")) {
    std::string p = r0.path("deepspeed.config");
    try {
      ds = read_deepspeed_config(p);
    } catch (const Error& e) {
      throw Error(r0.origin("deepspeed.config"), e.what());
    }
    merge_deepspeed(attrs, *ds);
    // One warning line per config file and process (a sweep resolves the same file at every point).
    static std::mutex warned_mutex;
    static std::set<std::string> warned;
    const std::string line = unmodelled_warning(*ds);
    std::lock_guard<std::mutex> lock(warned_mutex);
    if (!line.empty() && warned.insert(line).second)
      std::fprintf(stderr, "vitsim: warning: %s\n", line.c_str());
  }
  return ds;
}

// What the rows see while resolve applies them: the file, its DeepSpeed config, the point so far.
struct Resolution {
  const Reader& r;
  const ScenarioFile& file;
  const std::optional<DeepSpeedConfig>& ds;
  Scenario& s;
};

using Apply = std::function<void(Resolution&)>;

struct KeyRow {
  ScenarioKeyInfo info;
  Apply apply;
};

std::string range_text(long long min, long long max) {
  return max >= (1LL << 53) ? fmt::format(">= {}", min) : fmt::format("{} .. {}", min, max);
}

// Row makers. A default is a constant, or computed from the point so far (`def`, documented by `def_text`).
using IntDefault = std::function<long long(const Resolution&)>;
using NumDefault = std::function<double(const Resolution&)>;

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

const char* const kPathValid = "a file name, relative to the scenario file";
const std::vector<std::string> kPrecisions{"fp32", "fp16", "bf16"};

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

void apply_hosts(Resolution& x) {
  ClusterSpec& c = x.s.cluster;
  const auto* h = x.r.raw("cluster.hosts");
  if (!h) return;
  std::istringstream in(*h);
  for (std::string w; in >> w;) c.hosts.push_back(w);
  std::set<std::string> uniq(c.hosts.begin(), c.hosts.end());
  if (uniq.size() != c.hosts.size()) x.r.fail("cluster.hosts", "a node is listed twice");
  if (static_cast<int>(c.hosts.size()) < c.nodes)
    x.r.fail("cluster.nodes",
             fmt::format("{} nodes requested but cluster.hosts lists {}", c.nodes, c.hosts.size()));
}

// A preset, then any parameter overriding it.
void apply_preset(Resolution& x) {
  if (x.r.has("model.preset")) {
    try {
      x.s.model = vit_preset(x.r.str("model.preset", ""));
    } catch (const Error& e) {
      x.r.fail("model.preset", e.what());
    }
  } else if (!x.r.has("model.width")) {
    throw Error(Origin{x.file.path, 0},
                "missing <model preset=\"...\"/> or model parameters (width, depth, heads, ...)");
  }
}

// The dataset's published facts (core/model/dataset.hpp), when it has them.
const std::optional<DatasetFacts>& facts(const Resolution& x) {
  return dataset(x.s.dataset.name).facts;
}

void apply_what_ifs(Resolution& x) {
  // What-ifs: ';'-separated edits. Platform edits are applied by core::EditedPlatforms before simulating;
  // a loader edit is a scenario setting and is applied here (a --set of loader.workers wins).
  const auto* e = x.r.raw("whatif.edits");
  if (!e) return;
  for (const auto& edit : split_list(*e, ';')) {
    if (edit.empty()) continue;
    if (edit.rfind("loader:workers=", 0) == 0) {
      const std::string v = edit.substr(15);
      int workers = -1;
      try {
        workers = static_cast<int>(units::parse_integer(v, 0, 1024));
      } catch (const Error&) {
        x.r.fail("whatif.edits",
                 fmt::format("what-if '{}': '{}' is not a worker count (0 .. 1024)", edit, v));
      }
      if (x.r.origin("loader.workers").file.rfind("--set", 0) != 0) x.s.loader.workers = workers;
    }
    x.s.what_ifs.push_back(edit);
  }
}

// Model shape keys: the preset's value (ViT-B/16's without one) unless given.
KeyRow shape_row(std::string key, long long min, long long max, std::string doc, int ViTConfig::*field) {
  return integer_row(
      key, "preset's", [field](const Resolution& x) { return x.s.model.*field; }, min, max, std::move(doc),
      [field](Resolution& x, long long v) { x.s.model.*field = static_cast<int>(v); });
}

using R = Resolution;

// The setter of one field of an element's spec: field(&Scenario::training, &TrainingSpec::micro_batch).
template <class Spec, class T>
auto field(Spec Scenario::*spec, T Spec::*member) {
  return [spec, member](R& x, const auto& v) { (x.s.*spec).*member = static_cast<T>(v); };
}

std::vector<KeyRow> scenario_rows() {
  return {
      custom_row("scenario.name", "text", "the file's name", "any text",
                 "the name reports carry (`<scenario name=...>`)",
                 [](R& x) { x.s.name = x.r.str("scenario.name", x.file.name); }),
  };
}

std::vector<KeyRow> cluster_rows() {
  return {
      custom_row("cluster.platform", "path", "(required)", kPathValid, "SimGrid platform file",
                 [](R& x) { x.s.cluster.platform = x.r.path("cluster.platform"); }),
      integer_row("cluster.nodes", 1, 1, 1 << 20,
                  "nodes used: the first `nodes` of the platform (or of cluster.hosts)",
                  field(&Scenario::cluster, &ClusterSpec::nodes)),
      integer_row("cluster.gpus_per_node", 1, 1, 1024, "GPUs used in each node: its first `gpus_per_node`",
                  field(&Scenario::cluster, &ClusterSpec::gpus_per_node)),
      custom_row("cluster.hosts", "list", "platform order", "space-separated node names, each once",
                 "the nodes (clusters) in the order they are used", apply_hosts),
  };
}

std::vector<KeyRow> model_rows() {
  return {
      custom_row("model.preset", "name", "",
                 join(vit_preset_names()) +
                     ", or any timm name `vit_<tiny|small|base|large|huge|giant>_patch<P>_<image>[.tag]` "
                     "(`vit_large_patch16_384`)",
                 "the ViT's shape; without a preset, model.width and the shape keys below", apply_preset),
      shape_row("model.image_size", 1, 65536, "input image side (px)", &ViTConfig::image_size),
      shape_row("model.patch", 1, 65536, "patch side (px); divides image_size", &ViTConfig::patch),
      shape_row("model.channels", 1, 64, "input channels", &ViTConfig::channels),
      shape_row("model.width", 1, 1 << 20, "hidden size; a multiple of heads", &ViTConfig::width),
      shape_row("model.depth", 1, 4096, "encoder blocks", &ViTConfig::depth),
      shape_row("model.heads", 1, 4096, "attention heads", &ViTConfig::heads),
      number_row(
          "model.mlp_ratio", "preset's", [](const R& x) { return x.s.model.mlp_ratio; }, 1e-3, 1e3,
          "MLP hidden size / width", field(&Scenario::model, &ViTConfig::mlp_ratio)),
      shape_row("model.classes", 1, 1 << 24, "classifier outputs", &ViTConfig::classes),
      number_row(
          "model.dropout", "preset's", [](const R& x) { return x.s.model.dropout; }, 0, 0.999,
          "dropout probability (0: no masks stored)", field(&Scenario::model, &ViTConfig::dropout)),
      choice_row(
          "model.attention", "math", {"math", "fused"},
          "how attention runs: `math` (scores in memory, PyTorch <= 1.13, the study's stack) or `fused` "
          "(scaled_dot_product_attention / flash); see \"The model\"",
          [](R& x, const std::string& v) { x.s.model.attention = parse_attention_path(v); }),
  };
}

std::vector<KeyRow> dataset_rows() {
  return {
      choice_row("dataset.name", "synthetic", dataset_names(),
                 "known sets fill the sizes below (core/src/model/dataset.cpp)",
                 field(&Scenario::dataset, &DatasetSpec::name)),
      integer_row(
          "dataset.train_samples", "per dataset", [](const R& x) { return facts(x) ? facts(x)->train : 0; },
          1, 1LL << 40, "training set size",
          [](R& x, long long v) {
            x.s.dataset.train_samples = v;
            if (v == 0)
              throw Error(x.r.origin("dataset.name"),
                          fmt::format("dataset '{}' needs train_samples", x.s.dataset.name));
          }),
      integer_row(
          "dataset.test_samples", "per dataset", [](const R& x) { return facts(x) ? facts(x)->test : 0; }, 0,
          1LL << 40, "test set size", field(&Scenario::dataset, &DatasetSpec::test_samples)),
      integer_row(
          "dataset.image_size", "per dataset",
          [](const R& x) { return facts(x) ? facts(x)->image : x.s.model.image_size; }, 1, 65536,
          "image side as stored (px)", field(&Scenario::dataset, &DatasetSpec::image_size)),
      integer_row(
          "dataset.channels", "per dataset",
          [](const R& x) { return facts(x) ? facts(x)->channels : x.s.model.channels; }, 1, 64,
          "channels as stored; must equal the model's", field(&Scenario::dataset, &DatasetSpec::channels)),
      integer_row(
          "dataset.resize", "model.image_size", [](const R& x) { return x.s.model.image_size; }, 1, 65536,
          "the side images are resized to; must equal the model's input size",
          [](R& x, long long v) {
            if (v != x.s.model.image_size)
              x.r.fail("dataset.resize",
                       fmt::format("{} px but the model takes {} px images", v, x.s.model.image_size));
          }),
      number_row("dataset.per_gpu_fraction", 0, 0, 1,
                 "weak scaling: each GPU gets this fraction of the set (0: off)",
                 field(&Scenario::dataset, &DatasetSpec::per_gpu_fraction)),
      custom_row("dataset.path", "path", "", "a folder, relative to the scenario file",
                 "where the real trainer reads it",
                 [](R& x) { x.s.dataset.path = x.r.path("dataset.path"); }),
  };
}

std::vector<KeyRow> training_rows() {
  return {
      integer_row("training.micro_batch", 1, 1, 1 << 24, "samples per GPU per micro-batch",
                  field(&Scenario::training, &TrainingSpec::micro_batch)),
      integer_row("training.grad_accum", 1, 1, 1 << 20, "micro-batches per optimizer step",
                  field(&Scenario::training, &TrainingSpec::grad_accum)),
      integer_row("training.epochs", 1, 1, 1 << 20, "epochs",
                  field(&Scenario::training, &TrainingSpec::epochs)),
      choice_row("training.precision", "fp32", kPrecisions, "mixed precision: fp32 master weights",
                 [](R& x, const std::string& v) { x.s.training.precision = parse_precision(v); }),
      choice_row("training.optimizer", "adamw", {"adamw", "adam", "sgd"}, "the optimizer",
                 field(&Scenario::training, &TrainingSpec::optimizer)),
      number_row("training.lr", 1e-4, 0, 1e3, "learning rate", field(&Scenario::training, &TrainingSpec::lr)),
      number_row("training.weight_decay", 0.01, 0, 1e3, "weight decay",
                 field(&Scenario::training, &TrainingSpec::weight_decay)),
      integer_row("training.seed", 1, 0, 1LL << 53,
                  "seed of the real trainer's initialisation and data order",
                  field(&Scenario::training, &TrainingSpec::seed)),
      choice_row("training.framework", "vitsim", {"vitsim", "deepspeed", "ddp"},
                 "whose code runs the step (its fixed per-step work; see \"The model\"); deepspeed with a "
                 "`<deepspeed>` config",
                 [](R& x, const std::string& v) { x.s.training.framework = parse_framework(v); }),
      boolean_row("training.activation_checkpointing", false,
                  "checkpoint every encoder block: only block inputs stay in memory, backward runs each "
                  "block's forward "
                  "again (see \"The model\")",
                  field(&Scenario::training, &TrainingSpec::activation_checkpointing)),
      number_row("training.gradient_clipping", 0, 0, 1e9,
                 "max gradient norm (0: off): a norm reduction and a scale each step",
                 field(&Scenario::training, &TrainingSpec::gradient_clipping)),
      number_row("training.loss_scale", 0, 0, 1e30,
                 "fp16 loss scale (DeepSpeed fp16.loss_scale): 0 dynamic, > 0 static",
                 field(&Scenario::training, &TrainingSpec::loss_scale)),
  };
}

std::vector<KeyRow> parallelism_rows() {
  return {
      integer_row("parallelism.zero", 0, 0, 3, "ZeRO stage", field(&Scenario::parallel, &ParallelSpec::zero)),
      boolean_row("parallelism.overlap", false,
                  "reduce gradient buckets during backward (DeepSpeed overlap_comm)",
                  field(&Scenario::parallel, &ParallelSpec::overlap)),
      bucket_row("parallelism.bucket_size", true,
                 "gradient bucket cap (DeepSpeed reduce_bucket_size, DDP bucket_cap_mb)",
                 field(&Scenario::parallel, &ParallelSpec::bucket_bytes)),
      bucket_row("parallelism.allgather_bucket_size", false,
                 "ZeRO's parameter all-gather bucket (DeepSpeed allgather_bucket_size)",
                 field(&Scenario::parallel, &ParallelSpec::allgather_bucket_bytes)),
      registry_row("parallelism.collective", "ring", "collective",
                   "the all-reduce algorithm (docs/model.md, Collectives)",
                   field(&Scenario::parallel, &ParallelSpec::collective)),
      custom_row("parallelism.comm_dtype", "choice", "gradient dtype", join(kPrecisions),
                 "gradients' dtype on the wire (DeepSpeed communication_data_type)",
                 [](R& x) {
                   if (x.r.has("parallelism.comm_dtype")) x.s.parallel.comm_dtype = comm_dtype(x);
                 }),
      integer_row("parallelism.sequence_parallel", 1, 1, 1 << 20,
                  "patch (sequence) parallelism, DeepSpeed-Ulysses style: groups of this many ranks split "
                  "each image's "
                  "tokens; divides the ranks and the heads (see \"Capacity planning\")",
                  [](R& x, long long v) {
                    Scenario& s = x.s;
                    s.parallel.sequence_parallel = static_cast<int>(v);
                    if (s.ranks() % v != 0)
                      x.r.fail("parallelism.sequence_parallel",
                               fmt::format("{} does not divide the {} ranks ({} nodes x {} GPUs)", v,
                                           s.ranks(), s.cluster.nodes, s.cluster.gpus_per_node));
                    if (s.model.heads % v != 0)
                      x.r.fail(
                          "parallelism.sequence_parallel",
                          fmt::format(
                              "{} does not divide the model's {} heads (Ulysses gives each rank whole heads)",
                              v, s.model.heads));
                  }),
  };
}

std::vector<KeyRow> loader_rows() {
  return {
      integer_row("loader.workers", 2, 0, 1024, "PyTorch DataLoader num_workers per GPU",
                  field(&Scenario::loader, &LoaderSpec::workers)),
      boolean_row("loader.pinned", true, "pin_memory", field(&Scenario::loader, &LoaderSpec::pinned)),
      integer_row("loader.prefetch", 2, 1, 1024, "prefetch_factor: batches each worker keeps ready",
                  field(&Scenario::loader, &LoaderSpec::prefetch)),
  };
}

std::vector<KeyRow> simulation_rows() {
  return {
      integer_row("simulation.steps", 20, 1, 1 << 24, "optimizer steps simulated",
                  field(&Scenario::simulation, &SimulationSpec::steps)),
      integer_row("simulation.warmup", 2, 0, 1 << 24,
                  "first steps excluded from the statistics; fewer than steps",
                  field(&Scenario::simulation, &SimulationSpec::warmup)),
      boolean_row("simulation.full_epoch", false, "simulate every step of one epoch instead of extrapolating",
                  field(&Scenario::simulation, &SimulationSpec::full_epoch)),
      integer_row("simulation.max_steps", kDefaultMaxSteps, 1, 1 << 24,
                  "most steps the steady-state search may simulate (see \"The model\", Epoch time)",
                  field(&Scenario::simulation, &SimulationSpec::max_steps)),
      custom_row("simulation.max_memory", "bytes", "half the memory", "> 0, with a unit (32GiB)",
                 "memory one simulated point may need (see \"Errors\", Limits)",
                 [](R& x) {
                   x.s.simulation.max_memory =
                       x.r.quantity("simulation.max_memory", 0, units::Kind::Bytes, units::positive());
                 }),
      integer_row("simulation.max_routes", kDefaultMaxRoutes, 1, 1LL << 53,
                  "routes a what-if may leave in a Full zone (see \"Errors\", Limits)",
                  field(&Scenario::simulation, &SimulationSpec::max_routes)),
      integer_row("simulation.max_points", kDefaultMaxPoints, 1, 1LL << 53,
                  "sweep points one command may run (see \"Errors\", Limits)",
                  field(&Scenario::simulation, &SimulationSpec::max_points)),
      choice_row("simulation.flows", "auto", {"auto", "always"},
                 "auto: a ring whose transfers share no link is computed without SimGrid flows (same times; "
                 "see \"The model\", Collectives); always: every transfer a flow",
                 field(&Scenario::simulation, &SimulationSpec::flows)),
  };
}

// run: the real trainer's settings (see "The real trainer")
std::vector<KeyRow> run_rows() {
  return {
      choice_row("run.device", "auto", {"auto", "cpu", "cuda"}, "where the real trainer runs",
                 field(&Scenario::run, &RunSpec::device)),
      integer_row("run.max_steps", 0, 0, 1LL << 53,
                  "optimizer steps per epoch the real trainer runs (0: the whole epoch)",
                  field(&Scenario::run, &RunSpec::max_steps)),
      integer_row("run.checkpoint_every", 0, 0, 1 << 30,
                  "optimizer steps between checkpoints (0: only at the end)",
                  field(&Scenario::run, &RunSpec::checkpoint_every)),
      custom_row("run.checkpoint_dir", "path", "", "a folder, relative to the scenario file",
                 "where checkpoints go (none: no checkpoints)",
                 [](R& x) { x.s.run.checkpoint_dir = x.r.path("run.checkpoint_dir"); }),
      custom_row("run.timeout", "duration", "300s", "> 0, with a unit (30s, 5min, 1h30m)",
                 "a collective that does not finish within this fails the run",
                 [](R& x) {
                   x.s.run.timeout_s = x.r.quantity("run.timeout", 300, units::Kind::Time);
                   if (!(x.s.run.timeout_s > 0)) x.r.fail("run.timeout", "must be positive");
                 }),
      integer_row("run.check_every", 50, 0, 1 << 30, "steps between replica checksum comparisons",
                  field(&Scenario::run, &RunSpec::check_every)),
      integer_row("run.threads", 0, 0, 4096, "intra-op threads per rank (0: cores / local ranks)",
                  field(&Scenario::run, &RunSpec::threads)),
      boolean_row("run.augment", true, "random crop and flip", field(&Scenario::run, &RunSpec::augment)),
      integer_row("run.eval_samples", 0, 0, 1LL << 53, "test samples evaluated per epoch (0: all)",
                  field(&Scenario::run, &RunSpec::eval_samples)),
  };
}

std::vector<KeyRow> validation_rows() {
  return {
      number_row("validation.tolerance", 0.10, 0, 100, "relative step-time error `vitsim validate` accepts",
                 field(&Scenario::validation, &ValidationSpec::tolerance)),
  };
}

std::vector<KeyRow> compute_rows() {
  return {
      registry_row(
          "compute.model", "auto", "compute model",
          "how compute time is modelled (docs/model.md, Compute models), as SimGrid's --cfg=cpu/model",
          field(&Scenario::compute, &ComputeSpec::model)),
  };
}

std::vector<KeyRow> whatif_rows() {
  return {
      custom_row("whatif.edits", "list", "", "`;`-separated what-ifs (docs/plan.md, What-ifs)",
                 "platform what-ifs applied before simulating (see \"Capacity planning\")", apply_what_ifs),
  };
}

// deepspeed: merged into the attributes before the rows apply (read_and_merge_deepspeed)
std::vector<KeyRow> deepspeed_rows() {
  return {
      custom_row("deepspeed.config", "path", "", "a DeepSpeed JSON config, relative to the scenario file",
                 "DeepSpeed config whose settings the scenario takes (\"DeepSpeed import\" below)",
                 [](R&) {}),
  };
}

// The table, in resolution order: one function per element, each in the order its keys are applied and
// its attributes listed.
const std::vector<KeyRow>& key_rows() {
  static const std::vector<KeyRow> rows = [] {
    std::vector<KeyRow> all;
    for (auto element :
         {scenario_rows, cluster_rows, model_rows, dataset_rows, training_rows, parallelism_rows, loader_rows,
          simulation_rows, run_rows, validation_rows, compute_rows, whatif_rows, deepspeed_rows}) {
      auto r = element();
      all.insert(all.end(), std::make_move_iterator(r.begin()), std::make_move_iterator(r.end()));
    }
    return all;
  }();
  return rows;
}

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
}
void check_simulation(Resolution& x) {
  const SimulationSpec& sim = x.s.simulation;
  if (sim.warmup >= sim.steps)
    x.r.fail("simulation.warmup",
             fmt::format("{} warm-up steps leave none of the {} steps to measure", sim.warmup, sim.steps));
}
// DeepSpeed requires train_batch_size = micro_batch x accumulation x ranks.
void check_deepspeed_batch(Resolution& x) {
  const Scenario& s = x.s;
  if (x.ds && x.ds->train_batch_size) {
    long long want = *x.ds->train_batch_size;
    if (want != s.global_batch())
      throw Error(
          x.r.origin("deepspeed.config"),
          fmt::format(
              "train_batch_size {} != micro_batch {} x gradient_accumulation_steps {} x ranks {} = {} "
              "(DeepSpeed requires equality)",
              want, s.training.micro_batch, s.training.grad_accum, s.ranks(), s.global_batch()));
  }
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

}  // namespace

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
  const std::optional<DeepSpeedConfig> ds = read_and_merge_deepspeed(attrs, f.path);
  Reader r(attrs, f.path);
  Scenario s;
  s.file = f.path;
  s.params = params;
  for (const auto& [k, a] : attrs) s.origins[k] = a.origin;
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

void for_each_combination(const ScenarioFile& f,
                          const std::function<void(const std::map<std::string, Attribute>&,
                                                   const std::map<std::string, std::string>&)>& fn) {
  check_sweep_size(f);
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
      attrs[s.key] = Attribute{v, s.origin};
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
