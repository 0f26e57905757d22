// The platform-property table (platform_props.hpp): one row per <prop> vitsim reads, and the reference
// generated from it (docs/platform-properties.md).
#include "vitsim/core/platform/platform_props.hpp"

#include <fmt/format.h>

#include <unordered_map>

#include "vitsim/core/base/error.hpp"

namespace vitsim {

namespace platform_props_table {
std::vector<PlatformProp> gpu_rows();
std::vector<PlatformProp> gpu_efficiency_rows();
std::vector<PlatformProp> gpu_cost_rows();
std::vector<PlatformProp> node_rows();
std::vector<PlatformProp> link_rows();
std::vector<PlatformProp> cloud_link_rows();
std::vector<PlatformProp> zone_rows();
}  // namespace platform_props_table

namespace {

// The rows, by owner (platform_props_table.cpp).
const std::vector<PlatformProp>& rows() {
  static const std::vector<PlatformProp> r = [] {
    std::vector<PlatformProp> all;
    for (auto group : {platform_props_table::gpu_rows, platform_props_table::gpu_efficiency_rows,
                       platform_props_table::gpu_cost_rows, platform_props_table::node_rows,
                       platform_props_table::link_rows, platform_props_table::cloud_link_rows,
                       platform_props_table::zone_rows}) {
      auto g = group();
      all.insert(all.end(), g.begin(), g.end());
    }
    return all;
  }();
  return r;
}

std::string cell(std::string_view s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out.empty() ? "-" : out;
}

}  // namespace

units::Range plausible_bandwidth() {
  return units::plausible(units::Kind::Bandwidth);
}

void check_prop_plausible(const PlatformProp& p, double value) {
  if (p.type == PropType::Quantity) units::check_plausible(value, p.unit);
  const bool factor = p.type == PropType::Number && p.range.lo == 0 && p.range.lo_open && p.range.hi == 1;
  if (factor && !units::plausible_factor().contains(value))
    throw Error(
        fmt::format("{:.4g} is not a plausible factor (expected {})", value, units::kPlausibleFactorText));
}

const std::vector<PlatformProp>& platform_props() {
  return rows();
}

const PlatformProp* find_platform_prop(std::string_view key) {
  // Indexed: the reader looks rows up for every GPU host of a platform (131,072 in the largest).
  static const std::unordered_map<std::string_view, const PlatformProp*> index = [] {
    std::unordered_map<std::string_view, const PlatformProp*> out;
    for (const auto& p : rows()) out.emplace(p.key, &p);
    return out;
  }();
  const auto it = index.find(key);
  return it == index.end() ? nullptr : it->second;
}

const PlatformProp& platform_prop(std::string_view key) {
  if (const PlatformProp* p = find_platform_prop(key)) return *p;
  throw Error(fmt::format(
      "internal: no platform property '{}' in the table (core/src/platform/platform_props.cpp)", key));
}

bool prop_applies_to(const PlatformProp& p, std::string_view transport) {
  std::string_view rest = p.transports;
  while (!rest.empty()) {
    const size_t comma = rest.find(", ");
    if (rest.substr(0, comma) == transport) return true;
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 2);
  }
  return false;
}

const char* prop_owner_name(PropOwner owner) {
  switch (owner) {
    case PropOwner::Gpu:
      return "GPU";
    case PropOwner::Node:
      return "node";
    case PropOwner::Link:
      return "link";
    case PropOwner::Zone:
      return "zone";
  }
  return "?";
}

std::string prop_type_text(const PlatformProp& p) {
  switch (p.type) {
    case PropType::Text:
      return "text";
    case PropType::Choice:
      return "one of: " + std::string(p.choices);
    case PropType::Quantity:
      return units::kind_name(p.unit);
    case PropType::Number:
      return "number";
    case PropType::Integer:
      return "integer";
    case PropType::Tile:
      return "MxN";
    case PropType::Power:
      return "power (W, kW)";
  }
  return "?";
}

std::string prop_range_text(const PlatformProp& p) {
  switch (p.type) {
    case PropType::Quantity:
    case PropType::Number:
    case PropType::Power:
      return p.range.str();
    case PropType::Integer:
    case PropType::Tile:
      return fmt::format("{} .. {}", p.int_low(), p.int_high());
    default:
      return "";
  }
}

std::string platform_props_markdown() {
  const std::pair<PropOwner, const char*> groups[] = {
      {PropOwner::Gpu,
       "GPU figures: a `<prop>` of the `<cluster>` (every GPU of the node), of an enclosing `<zone>`, "
       "or of a lone `<host>` (its own props win)."},
      {PropOwner::Node, "Node figures: a `<prop>` of the `<cluster>` (or an enclosing `<zone>`)."},
      {PropOwner::Link,
       "Link transport settings: a `<prop>` of the `<link>` or of an enclosing `<zone>` (named per "
       "transport, so a zone can carry them all); on a `<cluster>` they apply to its backbone."},
      {PropOwner::Zone, "Zone figures: a `<prop>` of the top `<zone>`."},
  };
  std::string md;
  for (const auto& [owner, intro] : groups) {
    md += fmt::format("### {} properties\n\n{}\n\n", prop_owner_name(owner), intro);
    md += "| property | value | range | default | in a spec | source | meaning | measured by |\n";
    md += "| --- | --- | --- | --- | --- | --- | --- | --- |\n";
    for (const auto& p : rows()) {
      if (p.owner != owner) continue;
      std::string doc(p.doc);
      if (!p.transports.empty()) doc += fmt::format(" ({})", p.transports);
      md += fmt::format("| `{}` | {} | {} | {} | {} | {} | {} | {} |\n", p.key, cell(prop_type_text(p)),
                        cell(prop_range_text(p)), cell(p.default_text), cell(p.spec), cell(p.source),
                        cell(doc), cell(p.measure));
    }
    md += "\n";
  }
  return md;
}

}  // namespace vitsim
