// What-ifs' PlatformEdit (whatif_edit.hpp): what every kind of edit shares (finding nodes, checking values
// against the property table's ranges, setting attributes and properties, recording the changes).
#include <fmt/format.h>
#include <fnmatch.h>

#include <pugixml.hpp>

#include "platform/whatif_edit.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/platform/platform_props.hpp"

namespace vitsim::whatif_detail {

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : sep) + x;
  return out;
}

// PlatformEdit: what the kinds share.

void PlatformEdit::fail(const std::string& why) const {
  throw Error(fmt::format("what-if '{}': {}", echo(edit_, 60), why));
}

pugi::xml_node PlatformEdit::top_zone() const {
  auto z = doc_.document_element().child("zone");
  if (!z) fail("the platform has no <zone>");
  return z;
}

std::vector<pugi::xml_node> PlatformEdit::clusters() const {
  std::vector<pugi::xml_node> out;
  for (auto x : doc_.select_nodes("//cluster")) out.push_back(x.node());
  return out;
}

std::vector<std::string> PlatformEdit::cluster_names() const {
  std::vector<std::string> out;
  for (auto c : clusters()) out.push_back(c.attribute("id").value());
  return out;
}

bool glob_match(const std::string& pattern, const std::string& name) {
  return fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

std::vector<pugi::xml_node> PlatformEdit::match_clusters(const std::string& glob) const {
  std::vector<pugi::xml_node> out;
  for (auto c : clusters())
    if (glob_match(glob, c.attribute("id").value())) out.push_back(c);
  if (out.empty()) fail(fmt::format("no node matches '{}'; nodes: {}", glob, join(cluster_names())));
  return out;
}

pugi::xml_node PlatformEdit::cluster(const std::string& name) const {
  for (auto c : clusters())
    if (name == c.attribute("id").value()) return c;
  fail(fmt::format("no node '{}'; nodes: {}", name, join(cluster_names())));
}

PlatformEdit::Assign PlatformEdit::split_assign(const std::string& rest, bool with_target) const {
  const auto eq = rest.find('=');
  if (eq == std::string::npos) fail("expected NAME=VALUE");
  Assign a;
  a.value = rest.substr(eq + 1);
  std::string left = rest.substr(0, eq);
  if (with_target) {
    const auto c = left.rfind(':');
    if (c == std::string::npos || c == 0) fail("expected TARGET:NAME=VALUE");
    a.target = left.substr(0, c);
    a.name = left.substr(c + 1);
  } else {
    a.name = left;
  }
  if (a.name.empty() || a.value.empty()) fail("expected NAME=VALUE with both given");
  return a;
}

void PlatformEdit::check_unit(const std::string& value, units::Kind kind, const units::Range& range) const {
  try {
    units::check_plausible(units::parse(value, kind, range), kind);
  } catch (const Error& e) {
    fail(e.what());
  }
}

void PlatformEdit::check_unit(const std::string& value, units::Kind kind) const {
  check_unit(value, kind, kind == units::Kind::Time ? units::non_negative() : units::positive());
}

void PlatformEdit::check_number(const PlatformProp& p, const std::string& value) const {
  try {
    if (p.type == PropType::Integer)
      units::parse_integer(value, p.int_low(), p.int_high());
    else
      check_prop_plausible(p, units::parse_number(value, p.range));
  } catch (const Error& e) {
    fail(fmt::format("{}: {}", p.key, e.what()));
  }
}

void PlatformEdit::set_attr(pugi::xml_node n, const char* attr, const std::string& value,
                            const std::string& what) {
  auto a = n.attribute(attr);
  const std::string before = a ? a.value() : "(unset)";
  if (!a) a = n.append_attribute(attr);
  a.set_value(value.c_str());
  note(fmt::format("{} {}: {} -> {}", what, attr, before, value));
}

void PlatformEdit::set_prop(pugi::xml_node owner, const std::string& key, const std::string& value,
                            const std::string& what) {
  pugi::xml_node p = owner.find_child_by_attribute("prop", "id", key.c_str());
  std::string before = "(unset)";
  if (p) {
    before = p.attribute("value").value();
  } else {
    pugi::xml_node last;
    for (auto q : owner.children("prop")) last = q;
    p = last ? owner.insert_child_after("prop", last) : owner.prepend_child("prop");
    p.append_attribute("id") = key.c_str();
    p.append_attribute("value");
  }
  p.attribute("value").set_value(value.c_str());
  note(fmt::format("{} prop {}: {} -> {}", what, key, before, value));
}

}  // namespace vitsim::whatif_detail
