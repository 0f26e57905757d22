#pragma once
// The scenario reader's internals (internal to core/: scenario.cpp, scenario_file.cpp, scenario_keys.cpp):
// typed access to a point's attributes (Reader), the key table's rows and what they see while resolve()
// applies them.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/deepspeed.hpp"
#include "vitsim/core/formats/scenario.hpp"

namespace vitsim::scenario_detail {
namespace fs = std::filesystem;

inline std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
  return out;
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

// The schema (element -> attributes), derived from the key table (scenario.cpp).
const std::map<std::string, std::vector<std::string>>& schema();

// deepspeed.config: read the file, merge its values into `attrs` (merge_deepspeed) and warn once per file
// about what it sets that vitsim does not model. With `global_batch` (plan --global-batch,
// ScenarioFile::global_batch) the plan's batch wins: the config's train_batch_size becomes it and its
// gradient_accumulation_steps is dropped (DeepSpeed then derives the accumulation); `replaced`, when given,
// gets what was replaced in words ("" when nothing was); `overrides`, one line per --set or <sweep> that
// replaced a value the config gives.
std::optional<DeepSpeedConfig> read_and_merge_deepspeed(std::map<std::string, Attribute>& attrs,
                                                        const std::string& file,
                                                        std::optional<long long> global_batch = std::nullopt,
                                                        std::string* replaced = nullptr,
                                                        std::vector<std::string>* overrides = nullptr);

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

// The table, in resolution order (scenario_keys.cpp).
const std::vector<KeyRow>& key_rows();

// Row makers (scenario.cpp). A default is a constant, or computed from the point so far (`def`, documented
// by `def_text`).
using IntDefault = std::function<long long(const Resolution&)>;
using NumDefault = std::function<double(const Resolution&)>;

KeyRow integer_row(std::string key, std::string def_text, IntDefault def, long long min, long long max,
                   std::string doc, std::function<void(Resolution&, long long)> set);
KeyRow integer_row(std::string key, long long def, long long min, long long max, std::string doc,
                   std::function<void(Resolution&, long long)> set);
KeyRow number_row(std::string key, std::string def_text, NumDefault def, double min, double max,
                  std::string doc, std::function<void(Resolution&, double)> set);
KeyRow number_row(std::string key, double def, double min, double max, std::string doc,
                  std::function<void(Resolution&, double)> set);
KeyRow boolean_row(std::string key, bool def, std::string doc, std::function<void(Resolution&, bool)> set);
KeyRow choice_row(std::string key, std::string def, std::vector<std::string> valid, std::string doc,
                  std::function<void(Resolution&, const std::string&)> set);
// Anything else: the row says its type and valid values in words and applies itself.
KeyRow custom_row(std::string key, std::string type, std::string def_text, std::string valid, std::string doc,
                  Apply apply);
// A name checked by a registry outside core (sim's collectives and compute models): read as text here.
KeyRow registry_row(std::string key, std::string def, std::string registry, std::string doc,
                    std::function<void(Resolution&, const std::string&)> set);

const std::vector<std::string> kPrecisions{"fp32", "fp16", "bf16"};  // training.precision's values

// The gradients' dtype on the wire: parallelism.comm_dtype, else the training precision.
Precision comm_dtype(const Resolution& x);

// A gradient bucket in bytes (parallelism.bucket_size, parallelism.allgather_bucket_size).
KeyRow bucket_row(std::string key, bool reduce, std::string doc,
                  std::function<void(Resolution&, double)> set);

}  // namespace vitsim::scenario_detail
