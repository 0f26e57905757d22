#pragma once
// Internal to core's platform writer (platform_writer.hpp), shared by its rooms: the catalogue
// (platform_catalogue.cpp), the JSON spec (platform_spec.cpp, platform_spec_check.cpp), the header comment
// (platform_comment.cpp) and the XML itself (platform_writer.cpp). Small text helpers, the JSON reader of the
// catalogue and the spec files, and what the comment and the XML both say about a node's links.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/json_reader.hpp"
#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/platform/platform_props.hpp"
#include "vitsim/core/platform/platform_writer.hpp"

namespace vitsim::platform_detail {

using ojson = nlohmann::ordered_json;

inline std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The closest of `names` (canonical) whose own name or an alias is near `typed`; empty when none is close.
// Aliases and normalised names are the catalogue's own; the distance is core/suggest's edit_distance.
inline std::string closest(const std::string& typed,
                           const std::vector<std::pair<std::string, std::vector<std::string>>>& names) {
  const std::string t = normalise_name(typed);
  std::string best;
  size_t best_d = std::string::npos;
  for (const auto& [name, aliases] : names) {
    std::vector<std::string> all = aliases;
    all.push_back(name);
    for (const auto& a : all) {
      const std::string n = normalise_name(a);
      size_t d = edit_distance(t, n);
      // A typed prefix of a name ("h100" of "h100sxm") is close whatever its length.
      if (!t.empty() && n.rfind(t, 0) == 0) d = std::min<size_t>(d, 1);
      if (d < best_d) best_d = d, best = name;
    }
  }
  return best_d <= std::max<size_t>(2, t.size() / 3) ? best : std::string();
}

inline std::string xml_attr(const std::string& v) {
  std::string out = "\"";
  for (char c : v) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out + "\"";
}

inline std::string props_xml(const Props& props, const std::string& indent) {
  std::string out;
  for (const auto& [k, v] : props)
    out += indent + "<prop id=" + xml_attr(k) + " value=" + xml_attr(v) + "/>\n";
  return out;
}

// Sets `key` in place when present, else appends it.
inline void set_prop(Props& props, const std::string& key, const std::string& value) {
  for (auto& [k, v] : props)
    if (k == key) {
      v = value;
      return;
    }
  props.emplace_back(key, value);
}

inline const std::string* find_prop(const Props& props, const std::string& key) {
  for (const auto& [k, v] : props)
    if (k == key) return &v;
  return nullptr;
}

// Bandwidth with its unit, written as a decimal GBps figure ("400GBps", "3.125GBps").
inline std::string gbps_text(double bytes_per_s) {
  return fmt::format("{:g}GBps", bytes_per_s / 1e9);
}

// The JSON of the catalogue and of spec files, read through core's one field reader
// (vitsim/core/base/json_reader.hpp): one-line errors naming the file and the dotted path ("spec.json:
// nodes[0].gpus: expected an integer, found a string ("8")").
using OField = detail::BasicJsonField<ojson>;
struct Json {
  const std::string& file;
  // The value `j` at the dotted path `where` ("" for the whole file).
  OField field(const ojson& j, const std::string& where) const {
    return OField(j, file, where, detail::JsonPath::Dotted);
  }
  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    static const ojson none;
    field(none, where).fail(what);
  }
  // The file's JSON, its key order kept; malformed JSON fails naming the file.
  ojson parse(const std::string& text) const { return detail::parse_json<ojson>(text, file); }
  void keys(const ojson& j, const std::string& where, const std::vector<std::string>& valid) const {
    const OField f = field(j, where);
    if (!j.is_object()) f.mismatch("an object");
    for (auto it = j.begin(); it != j.end(); ++it)
      if (std::find(valid.begin(), valid.end(), it.key()) == valid.end())
        f.at(it.key()).fail(fmt::format("unknown key; valid: {}", join(valid)));
  }
  // A string, or a number written back as its shortest text (0.35 -> "0.35", 32 -> "32").
  std::string text(const ojson& j, const std::string& where) const {
    if (j.is_string()) return j.get<std::string>();
    if (j.is_number_integer()) return std::to_string(j.get<long long>());
    if (j.is_number()) return fmt::format("{}", j.get<double>());
    field(j, where).mismatch("a string or a number");
  }
  std::string quantity(const ojson& j, const std::string& where, units::Kind kind) const {
    std::string t = text(j, where);
    double v = 0;
    try {
      v = units::parse(t, kind);
    } catch (const Error& e) {
      fail(where, e.what());
    }
    // Times may be zero; bandwidths, rates and sizes must be positive.
    if (!std::isfinite(v) || v < 0 || (v == 0 && kind != units::Kind::Time))
      fail(where, fmt::format("'{}' must be {}", t, kind == units::Kind::Time ? "non-negative" : "positive"));
    if (kind == units::Kind::Bandwidth && !plausible_bandwidth().contains(v))
      fail(where, fmt::format("'{}' is not a plausible bandwidth (expected {})", t, kPlausibleBandwidthText));
    return t;
  }
  int integer(const ojson& j, const std::string& where, int lo, int hi) const {
    return static_cast<int>(field(j, where).integer(lo, hi));
  }
  Props props(const ojson& j, const std::string& where) const {
    if (!j.is_object()) field(j, where).mismatch("an object of property: value");
    Props out;
    for (auto it = j.begin(); it != j.end(); ++it) {
      out.emplace_back(it.key(), text(it.value(), where + "." + it.key()));
      check_prop(it.key(), out.back().second, where + "." + it.key());
    }
    return out;
  }
  // A property vitsim reads, checked by its row of the property table (its unit and range, the reader's
  // own check): gpu_mem "-1GB" was written and then refused by predict (issue 27). The other kinds (choices,
  // tiles, power) are checked when the written platform is read back (write_platform_xml).
  void check_prop(const std::string& key, const std::string& value, const std::string& where) const {
    const PlatformProp* p = find_platform_prop(key);
    if (!p) return;
    try {
      if (p->type == PropType::Quantity)
        units::parse(value, p->unit, p->range);
      else if (p->type == PropType::Number)
        units::parse_number(value, p->range);
      else if (p->type == PropType::Integer)
        units::parse_integer(value, p->int_low(), p->int_high());
    } catch (const Error& e) {
      fail(where, e.what());
    }
  }
};

// The links of one node: its GPU lanes and backbone as written, and the props that state the backbone's
// transport.
struct NodeLinks {
  std::string lane_bw, bb_bw, bb_lat;
  Props fabric_props;  // intranode_transport, staging_bw
};
NodeLinks node_links(const PlatformSpec& spec, const NodeSpec& n);
// The bandwidth of a node's NIC link: count x speed (NCCL spreads its channels over every NIC).
std::string nic_bw(const NicSpec& nic);
// The header comment of a platform written without one (platform_comment.cpp): a sketch of the topology and
// every figure with its source.
std::string default_comment(const PlatformSpec& spec, Layout layout);

}  // namespace vitsim::platform_detail
