#include "vitsim/core/scenario.hpp"

#include "vitsim/core/framework.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <functional>
#include <pugixml.hpp>
#include <cstdio>
#include <mutex>
#include <set>
#include <sstream>

#include "vitsim/core/dataset.hpp"
#include "vitsim/core/deepspeed.hpp"
#include "vitsim/core/io.hpp"
#include "vitsim/core/units.hpp"
#include "vitsim/core/whatif.hpp"

namespace vitsim {
namespace fs = std::filesystem;

long long DatasetSpec::effective_train_samples(int ranks) const {
  if (per_gpu_fraction <= 0) return train_samples;
  return std::min(train_samples * static_cast<long long>(ranks),
                  static_cast<long long>(std::llround(per_gpu_fraction * static_cast<double>(train_samples) * ranks)));
}

namespace {

// The schema: element -> its attributes. Anything else in a file is an error.
const std::map<std::string, std::vector<std::string>>& schema() {
  static const std::map<std::string, std::vector<std::string>> s{
      {"cluster", {"platform", "nodes", "gpus_per_node", "hosts"}},
      {"model",
       {"preset", "image_size", "patch", "channels", "width", "depth", "heads", "mlp_ratio", "classes", "dropout", "attention"}},
      {"dataset", {"name", "train_samples", "test_samples", "image_size", "channels", "resize", "per_gpu_fraction", "path"}},
      {"training",
       {"micro_batch", "grad_accum", "epochs", "precision", "optimizer", "lr", "weight_decay", "seed", "framework",
        "activation_checkpointing", "gradient_clipping", "loss_scale"}},
      {"parallelism",
       {"zero", "overlap", "bucket_size", "allgather_bucket_size", "collective", "comm_dtype", "sequence_parallel"}},
      {"loader", {"workers", "pinned", "prefetch"}},
      {"simulation", {"steps", "warmup", "full_epoch", "max_steps", "max_memory", "max_routes", "max_points"}},
      {"run", {"device", "max_steps", "checkpoint_every", "checkpoint_dir", "timeout", "check_every", "threads",
               "augment", "eval_samples"}},
      {"validation", {"tolerance"}},
      {"deepspeed", {"config"}},
      {"whatif", {"edits"}},
  };
  return s;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
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

int line_of(const std::string& text, ptrdiff_t offset) {
  if (offset < 0) return 0;
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + std::min<ptrdiff_t>(offset, text.size()), '\n'));
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
  std::string choice(const std::string& key, const std::string& def, const std::vector<std::string>& valid) const {
    const auto* v = raw(key);
    if (!v) return def;
    if (std::find(valid.begin(), valid.end(), *v) == valid.end())
      fail(key, fmt::format("unknown value '{}'; valid: {}", *v, join(valid)));
    return *v;
  }
  double quantity(const std::string& key, double def, units::Kind kind, const units::Range& r = units::Range{}) const {
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
      throw Error(it->second.origin, fmt::format("{}={} contradicts {} {}={}", key, it->second.value, ds.path, ds_key, value));
  };
  if (ds.micro_batch) put("training.micro_batch", std::to_string(*ds.micro_batch), "train_micro_batch_size_per_gpu");
  if (ds.grad_accum) put("training.grad_accum", std::to_string(*ds.grad_accum), "gradient_accumulation_steps");
  if (ds.zero_stage) put("parallelism.zero", std::to_string(*ds.zero_stage), "zero_optimization.stage");
  if (ds.overlap_comm) put("parallelism.overlap", *ds.overlap_comm ? "true" : "false", "zero_optimization.overlap_comm");
  if (ds.precision) put("training.precision", *ds.precision, ds.precision == std::string("fp16") ? "fp16.enabled" : "bf16.enabled");
  if (ds.comm_dtype) put("parallelism.comm_dtype", *ds.comm_dtype, "communication_data_type");
  if (ds.optimizer) put("training.optimizer", *ds.optimizer, "optimizer.type");
  if (ds.lr) put("training.lr", fmt::format("{}", *ds.lr), "optimizer.params.lr");
  if (ds.weight_decay) put("training.weight_decay", fmt::format("{}", *ds.weight_decay), "optimizer.params.weight_decay");
  if (ds.activation_checkpointing) put("training.activation_checkpointing", "true", "activation_checkpointing");
  if (ds.gradient_clipping) put("training.gradient_clipping", fmt::format("{}", *ds.gradient_clipping), "gradient_clipping");
  if (ds.loss_scale) put("training.loss_scale", fmt::format("{}", *ds.loss_scale), "fp16.loss_scale");
  // A DeepSpeed config means the step is DeepSpeed's (its optimizer wrapper and gradient handling).
  put("training.framework", "deepspeed", "its engine");
}

}  // namespace

std::vector<std::string> scenario_keys() {
  std::vector<std::string> keys;
  for (const auto& [el, attrs] : schema())
    for (const auto& a : attrs) keys.push_back(el + "." + a);
  keys.push_back("scenario.name");
  std::sort(keys.begin(), keys.end());
  return keys;
}

ScenarioFile read_scenario_file(const std::string& path) {
  ScenarioFile f;
  f.path = path;
  const std::string text = read_input_file(path, "scenario file");  // regular files only, size-limited
  pugi::xml_document doc;
  auto res = doc.load_buffer(text.data(), text.size(), pugi::parse_default | pugi::parse_ws_pcdata_single);
  if (!res) throw Error(Origin{path, line_of(text, res.offset)}, fmt::format("malformed XML: {}", res.description()));
  auto where = [&](const pugi::xml_node& n) { return Origin{path, line_of(text, n.offset_debug())}; };
  auto root = doc.document_element();
  if (std::string(root.name()) != "scenario")
    throw Error(where(root), fmt::format("root element is <{}>, expected <scenario>", root.name()));
  for (auto a : root.attributes()) {
    if (std::string(a.name()) == "name") f.name = a.value();
    else throw Error(where(root), fmt::format("unknown attribute '{}' on <scenario>; valid: name", a.name()));
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
        if (an == "param") s.key = a.value();
        else if (an == "values") s.values = split(a.value(), ',');
        else throw Error(s.origin, fmt::format("unknown attribute '{}' on <sweep>; valid: param, values", an));
      }
      auto keys = scenario_keys();
      if (std::find(keys.begin(), keys.end(), s.key) == keys.end())
        throw Error(s.origin, fmt::format("<sweep param='{}'>: unknown key; valid: {}", s.key, join(keys)));
      if (s.values.empty() || std::any_of(s.values.begin(), s.values.end(), [](auto& v) { return v.empty(); }))
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
        throw Error(where(el), fmt::format("unknown attribute '{}' on <{}>; valid: {}", a.name(), name, join(valid)));
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
    Sweep s{key, split(value, ','), o};
    if (std::any_of(s.values.begin(), s.values.end(), [](auto& v) { return v.empty(); }))
      throw Error(o, "empty value in the comma list");
    f.sweeps.push_back(s);
    f.attrs.erase(key);
  } else {
    f.attrs[key] = Attribute{value, o};
  }
}

namespace {

// --- resolve, one step per element of the scenario; each reads its keys in the order the messages
// rely on (an earlier key's error first).

// deepspeed.config: read the file, merge its values into `attrs` (merge_deepspeed) and warn once per file
// about what it sets that vitsim does not model.
std::optional<DeepSpeedConfig> read_and_merge_deepspeed(std::map<std::string, Attribute>& attrs, const std::string& file) {
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
    if (!line.empty() && warned.insert(line).second) std::fprintf(stderr, "vitsim: warning: %s\n", line.c_str());
  }
  return ds;
}

void resolve_cluster(const Reader& r, Scenario& s) {
  s.cluster.platform = r.path("cluster.platform");
  s.cluster.nodes = static_cast<int>(r.integer("cluster.nodes", 1, 1, 1 << 20));
  s.cluster.gpus_per_node = static_cast<int>(r.integer("cluster.gpus_per_node", 1, 1, 1024));
  if (const auto* h = r.raw("cluster.hosts")) {
    std::istringstream in(*h);
    std::string w;
    while (in >> w) s.cluster.hosts.push_back(w);
    std::set<std::string> uniq(s.cluster.hosts.begin(), s.cluster.hosts.end());
    if (uniq.size() != s.cluster.hosts.size()) r.fail("cluster.hosts", "a node is listed twice");
    if (static_cast<int>(s.cluster.hosts.size()) < s.cluster.nodes)
      r.fail("cluster.nodes", fmt::format("{} nodes requested but cluster.hosts lists {}", s.cluster.nodes, s.cluster.hosts.size()));
  }
}

// A preset, then any parameter overriding it.
void resolve_model(const Reader& r, const ScenarioFile& f, Scenario& s) {
  if (r.has("model.preset")) {
    try {
      s.model = vit_preset(r.str("model.preset", ""));
    } catch (const Error& e) {
      r.fail("model.preset", e.what());
    }
  } else if (!r.has("model.width")) {
    throw Error(Origin{f.path, 0}, "missing <model preset=\"...\"/> or model parameters (width, depth, heads, ...)");
  }
  ViTConfig& m = s.model;
  m.image_size = static_cast<int>(r.integer("model.image_size", m.image_size, 1, 65536));
  m.patch = static_cast<int>(r.integer("model.patch", m.patch, 1, 65536));
  m.channels = static_cast<int>(r.integer("model.channels", m.channels, 1, 64));
  m.width = static_cast<int>(r.integer("model.width", m.width, 1, 1 << 20));
  m.depth = static_cast<int>(r.integer("model.depth", m.depth, 1, 4096));
  m.heads = static_cast<int>(r.integer("model.heads", m.heads, 1, 4096));
  m.mlp_ratio = r.number("model.mlp_ratio", m.mlp_ratio, 1e-3, 1e3);
  m.classes = static_cast<int>(r.integer("model.classes", m.classes, 1, 1 << 24));
  m.dropout = r.number("model.dropout", m.dropout, 0, 0.999);
  m.attention = parse_attention_path(r.choice("model.attention", "math", {"math", "fused"}));
  try {
    m.validate();
  } catch (const Error& e) {
    throw Error(r.origin(r.has("model.preset") ? "model.preset" : "model.width"), e.what());
  }
}

// The dataset's published facts (core/dataset.hpp) fill what the scenario leaves out.
void resolve_dataset(const Reader& r, Scenario& s) {
  const ViTConfig& m = s.model;
  DatasetSpec& d = s.dataset;
  d.name = r.choice("dataset.name", "synthetic", dataset_names());
  const auto& def = dataset(d.name).facts;  // published facts (core/dataset.hpp), if any
  d.train_samples = r.integer("dataset.train_samples", def ? def->train : 0, 1, 1LL << 40);
  if (d.train_samples == 0) throw Error(r.origin("dataset.name"), fmt::format("dataset '{}' needs train_samples", d.name));
  d.test_samples = r.integer("dataset.test_samples", def ? def->test : 0, 0, 1LL << 40);
  d.image_size = static_cast<int>(r.integer("dataset.image_size", def ? def->image : m.image_size, 1, 65536));
  d.channels = static_cast<int>(r.integer("dataset.channels", def ? def->channels : m.channels, 1, 64));
  d.per_gpu_fraction = r.number("dataset.per_gpu_fraction", 0, 0, 1);
  d.path = r.path("dataset.path");
  int resize = static_cast<int>(r.integer("dataset.resize", m.image_size, 1, 65536));
  if (resize != m.image_size)
    r.fail("dataset.resize", fmt::format("{} px but the model takes {} px images", resize, m.image_size));
  if (d.channels != m.channels)
    r.fail("dataset.name", fmt::format("dataset has {} channels but the model takes {}", d.channels, m.channels));
}

void resolve_training(const Reader& r, Scenario& s) {
  TrainingSpec& t = s.training;
  t.micro_batch = static_cast<int>(r.integer("training.micro_batch", 1, 1, 1 << 24));
  t.grad_accum = static_cast<int>(r.integer("training.grad_accum", 1, 1, 1 << 20));
  t.epochs = static_cast<int>(r.integer("training.epochs", 1, 1, 1 << 20));
  t.precision = parse_precision(r.choice("training.precision", "fp32", {"fp32", "fp16", "bf16"}));
  t.optimizer = r.choice("training.optimizer", "adamw", {"adamw", "adam", "sgd"});
  t.lr = r.number("training.lr", 1e-4, 0, 1e3);
  t.weight_decay = r.number("training.weight_decay", 0.01, 0, 1e3);
  t.seed = static_cast<unsigned long long>(r.integer("training.seed", 1, 0));
  t.framework = parse_framework(r.choice("training.framework", "vitsim", {"vitsim", "deepspeed", "ddp"}));
  t.activation_checkpointing = r.boolean("training.activation_checkpointing", false);
  t.gradient_clipping = r.number("training.gradient_clipping", 0, 0, 1e9);
  t.loss_scale = r.number("training.loss_scale", 0, 0, 1e30);
  if (t.loss_scale > 0 && t.precision != Precision::FP16)
    r.fail("training.loss_scale", fmt::format("a loss scale applies to fp16 training, not {}", precision_name(t.precision)));
}

// A bucket written in bits ("25Mb": 3.1 MB) is almost surely megabytes mistyped: DDP's bucket_cap_mb
// and DeepSpeed's bucket sizes are bytes and elements. One warning line per key and value.
void warn_buckets_in_bits(const Reader& r, const ParallelSpec& p) {
  for (const char* key : {"parallelism.bucket_size", "parallelism.allgather_bucket_size"})
    if (const auto* v = r.raw(key)) {
      const size_t u = v->find_first_not_of("0123456789.+-eE ");
      const std::string unit = u == std::string::npos ? "" : v->substr(u);
      if (!unit.empty() && unit.back() == 'b') {
        const double bytes = key == std::string("parallelism.bucket_size") ? p.bucket_bytes : p.allgather_bucket_bytes;
        static std::mutex mb_mutex;
        static std::set<std::string> mb_warned;
        const std::string line = fmt::format(
            "{}: {}={} is in bits: {} ({}); if bytes were meant, write {}B", r.origin(key).str(), key, *v,
            units::format_bytes(bytes), bytes < 1e6 ? "under 1 MB, too small for a communication bucket" : "a bucket in bits is unusual",
            v->substr(0, u) + unit.substr(0, unit.size() - 1));
        std::lock_guard<std::mutex> lock(mb_mutex);
        if (mb_warned.insert(line).second) std::fprintf(stderr, "vitsim: warning: %s\n", line.c_str());
      }
    }
}

// Bucket defaults follow DeepSpeed's config where there is one.
void resolve_parallelism(const Reader& r, const std::optional<DeepSpeedConfig>& ds, Scenario& s) {
  const ViTConfig& m = s.model;
  const TrainingSpec& t = s.training;
  ParallelSpec& p = s.parallel;
  p.zero = static_cast<int>(r.integer("parallelism.zero", 0, 0, 3));
  p.overlap = r.boolean("parallelism.overlap", false);
  p.collective = r.str("parallelism.collective", "ring");
  if (r.has("parallelism.comm_dtype"))
    p.comm_dtype = parse_precision(r.choice("parallelism.comm_dtype", "fp32", {"fp32", "fp16", "bf16"}));
  const double grad_elem = precision_bytes(p.comm_dtype ? *p.comm_dtype : t.precision);
  // DeepSpeed sizes buckets in elements; the scenario in bytes.
  // reduce_bucket_size "auto": hidden_size x hidden_size elements, as the HF integration fills it.
  double bucket_default = (ds && ds->reduce_bucket_elements ? *ds->reduce_bucket_elements
                           : ds && ds->reduce_bucket_auto ? static_cast<double>(m.width) * m.width
                                                          : 5e8) * grad_elem;
  double ag_default = (ds && ds->allgather_bucket_elements ? *ds->allgather_bucket_elements : 5e8) * grad_elem;
  p.bucket_bytes = r.quantity("parallelism.bucket_size", bucket_default, units::Kind::Bytes);
  p.allgather_bucket_bytes = r.quantity("parallelism.allgather_bucket_size", ag_default, units::Kind::Bytes);
  warn_buckets_in_bits(r, p);
  if (!(p.bucket_bytes > 0)) r.fail("parallelism.bucket_size", "must be positive");
  if (!(p.allgather_bucket_bytes > 0)) r.fail("parallelism.allgather_bucket_size", "must be positive");

  p.sequence_parallel = static_cast<int>(r.integer("parallelism.sequence_parallel", 1, 1, 1 << 20));
  if (s.ranks() % p.sequence_parallel != 0)
    r.fail("parallelism.sequence_parallel", fmt::format("{} does not divide the {} ranks ({} nodes x {} GPUs)",
                                                        p.sequence_parallel, s.ranks(), s.cluster.nodes,
                                                        s.cluster.gpus_per_node));
  if (m.heads % p.sequence_parallel != 0)
    r.fail("parallelism.sequence_parallel",
           fmt::format("{} does not divide the model's {} heads (Ulysses gives each rank whole heads)",
                       p.sequence_parallel, m.heads));
}

void resolve_loader(const Reader& r, Scenario& s) {
  s.loader.workers = static_cast<int>(r.integer("loader.workers", 2, 0, 1024));
  s.loader.pinned = r.boolean("loader.pinned", true);
  s.loader.prefetch = static_cast<int>(r.integer("loader.prefetch", 2, 1, 1024));
}

void resolve_simulation(const Reader& r, Scenario& s) {
  s.simulation.steps = static_cast<int>(r.integer("simulation.steps", 20, 1, 1 << 24));
  s.simulation.warmup = static_cast<int>(r.integer("simulation.warmup", 2, 0, 1 << 24));
  s.simulation.full_epoch = r.boolean("simulation.full_epoch", false);
  s.simulation.max_steps = static_cast<int>(r.integer("simulation.max_steps", kDefaultMaxSteps, 1, 1 << 24));
  s.simulation.max_memory = r.quantity("simulation.max_memory", 0, units::Kind::Bytes, units::positive());
  s.simulation.max_routes = r.integer("simulation.max_routes", kDefaultMaxRoutes, 1);
  s.simulation.max_points = r.integer("simulation.max_points", kDefaultMaxPoints, 1);
  if (s.simulation.warmup >= s.simulation.steps)
    r.fail("simulation.warmup", fmt::format("{} warm-up steps leave none of the {} steps to measure",
                                            s.simulation.warmup, s.simulation.steps));
}

void resolve_run(const Reader& r, Scenario& s) {
  RunSpec& run = s.run;
  run.device = r.choice("run.device", "auto", {"auto", "cpu", "cuda"});
  run.max_steps = r.integer("run.max_steps", 0, 0);
  run.checkpoint_every = static_cast<int>(r.integer("run.checkpoint_every", 0, 0, 1 << 30));
  run.checkpoint_dir = r.path("run.checkpoint_dir");
  run.timeout_s = r.quantity("run.timeout", 300, units::Kind::Time);
  if (!(run.timeout_s > 0)) r.fail("run.timeout", "must be positive");
  run.check_every = static_cast<int>(r.integer("run.check_every", 50, 0, 1 << 30));
  run.threads = static_cast<int>(r.integer("run.threads", 0, 0, 4096));
  run.augment = r.boolean("run.augment", true);
  run.eval_samples = r.integer("run.eval_samples", 0, 0);

  s.validation.tolerance = r.number("validation.tolerance", 0.10, 0, 100);
}

void resolve_what_ifs(const Reader& r, Scenario& s) {
  // What-ifs: ';'-separated edits. Platform edits are applied by core::EditedPlatforms before simulating;
  // a loader edit is a scenario setting and is applied here (a --set of loader.workers wins).
  if (const auto* e = r.raw("whatif.edits")) {
    for (const auto& edit : split(*e, ';')) {
      if (edit.empty()) continue;
      if (edit.rfind("loader:workers=", 0) == 0) {
        const std::string v = edit.substr(15);
        int workers = -1;
        try {
          workers = static_cast<int>(units::parse_integer(v, 0, 1024));
        } catch (const Error&) {
          r.fail("whatif.edits", fmt::format("what-if '{}': '{}' is not a worker count (0 .. 1024)", edit, v));
        }
        if (r.origin("loader.workers").file.rfind("--set", 0) != 0) s.loader.workers = workers;
      }
      s.what_ifs.push_back(edit);
    }
  }
}

// DeepSpeed requires train_batch_size = micro_batch x accumulation x ranks.
void check_deepspeed_batch(const Reader& r, const std::optional<DeepSpeedConfig>& ds, const Scenario& s) {
  const TrainingSpec& t = s.training;
  if (ds && ds->train_batch_size) {
    long long want = *ds->train_batch_size;
    if (want != s.global_batch())
      throw Error(r.origin("deepspeed.config"),
                  fmt::format("train_batch_size {} != micro_batch {} x gradient_accumulation_steps {} x ranks {} = {} "
                              "(DeepSpeed requires equality)",
                              want, t.micro_batch, t.grad_accum, s.ranks(), s.global_batch()));
  }
}

}  // namespace

Scenario resolve(const ScenarioFile& f, const std::map<std::string, Attribute>& given,
                 const std::map<std::string, std::string>& params) {
  std::map<std::string, Attribute> attrs = given;
  const std::optional<DeepSpeedConfig> ds = read_and_merge_deepspeed(attrs, f.path);
  Reader r(attrs, f.path);
  Scenario s;
  s.file = f.path;
  s.name = r.str("scenario.name", f.name);
  s.params = params;
  for (const auto& [k, a] : attrs) s.origins[k] = a.origin;

  resolve_cluster(r, s);
  resolve_model(r, f, s);
  resolve_dataset(r, s);
  resolve_training(r, s);
  resolve_parallelism(r, ds, s);
  resolve_loader(r, s);
  resolve_simulation(r, s);
  resolve_run(r, s);
  resolve_what_ifs(r, s);
  check_deepspeed_batch(r, ds, s);
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
  throw Error(f.sweeps.front().origin,
              fmt::format("the sweeps make {} points ({} values of {}), above the limit of {} points (each point is "
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
  for_each_combination(f, [&](const auto& attrs, const auto& params) { out.push_back(resolve(f, attrs, params)); });
  return out;
}

std::vector<NamedPath> scenario_inputs(const ScenarioFile& f) {
  std::vector<NamedPath> out{{f.path, "the scenario"}};
  // Each value once, given or swept: the number of combinations does not matter here.
  auto add = [&](const std::string& key, const std::string& value, const Origin& o) {
    if (value.empty()) return;
    auto path = [&] {  // as Reader::path resolves it
      fs::path p(value);
      if (p.is_absolute() || o.line == 0) return p.string();
      return (fs::path(o.file).parent_path() / p).lexically_normal().string();
    };
    if (key == "cluster.platform") out.push_back({path(), "the platform"});
    else if (key == "deepspeed.config") out.push_back({path(), "the DeepSpeed config"});
    else if (key == "whatif.edits")
      for (const auto& file : what_if_files(split(value, ';'), fs::path(f.path).parent_path().string()))
        out.push_back({file, "the what-if spec"});
  };
  for (const auto& [key, a] : f.attrs) add(key, a.value, a.origin);
  for (const auto& s : f.sweeps)
    for (const auto& v : s.values) add(s.key, v, s.origin);
  return out;
}

}  // namespace vitsim
