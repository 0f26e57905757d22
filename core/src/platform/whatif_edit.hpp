#pragma once
// Internal to core's what-ifs (whatif.cpp, whatif_edit.cpp, whatif_nodes.cpp): one edit being applied to a
// platform's XML. PlatformEdit gives the kinds what they share (finding nodes, setting attributes and
// properties, the message of a failure, the list of changes); each kind is a function
// `edit_KIND(PlatformEdit&, rest)` where `rest` is the edit after "KIND:". The kinds' table is in whatif.cpp.
#include <pugixml.hpp>

#include <string>
#include <vector>

#include "vitsim/core/base/units.hpp"
#include "vitsim/core/platform/platform_props.hpp"

namespace vitsim::whatif_detail {

std::string join(const std::vector<std::string>& v, const char* sep = ", ");
// A shell glob (* ?) against a name (fnmatch).
bool glob_match(const std::string& pattern, const std::string& name);

class PlatformEdit {
 public:
  PlatformEdit(pugi::xml_document& doc, std::string edit, std::string base_dir, long long max_routes)
      : doc_(doc), edit_(std::move(edit)), base_dir_(std::move(base_dir)), max_routes_(max_routes) {}

  // Throws Error("what-if '<edit>': <why>").
  [[noreturn]] void fail(const std::string& why) const;

  pugi::xml_document& doc() const { return doc_; }
  const std::string& base_dir() const { return base_dir_; }
  long long max_routes() const { return max_routes_; }

  // The platform's nodes (<cluster> elements) and its top <zone>; the lookups fail naming the valid nodes.
  pugi::xml_node top_zone() const;
  std::vector<pugi::xml_node> clusters() const;
  std::vector<std::string> cluster_names() const;
  std::vector<pugi::xml_node> match_clusters(const std::string& glob) const;  // at least one
  pugi::xml_node cluster(const std::string& name) const;

  // "TARGET:NAME=VALUE" (with_target) or "NAME=VALUE", both sides given; the target holds no ':'.
  struct Assign {
    std::string target, name, value;
  };
  Assign split_assign(const std::string& rest, bool with_target) const;
  // A value with a unit within `range` (a property's row, core/platform/platform_props.hpp); without one, a
  // link's figure: times >= 0, bandwidths > 0 (the range the platform reader applies to a link's attributes).
  void check_unit(const std::string& value, units::Kind kind, const units::Range& range) const;
  void check_unit(const std::string& value, units::Kind kind) const;
  // A plain-number or whole-number property, within its row's range.
  void check_number(const PlatformProp& p, const std::string& value) const;

  // Edits that record what they changed ("<what> <attr>: before -> after").
  void set_attr(pugi::xml_node n, const char* attr, const std::string& value, const std::string& what);
  void set_prop(pugi::xml_node owner, const std::string& key, const std::string& value,
                const std::string& what);
  void note(std::string change) { changes_.push_back(std::move(change)); }
  std::vector<std::string> take_changes() { return std::move(changes_); }

 private:
  pugi::xml_document& doc_;
  std::string edit_;
  std::string base_dir_;
  long long max_routes_;
  std::vector<std::string> changes_;
};

// nodes:remove=GLOB[ GLOB...] | nodes:add=K[:like=NODE] | nodes:count=N (whatif_nodes.cpp).
void edit_nodes(PlatformEdit& e, const std::string& rest);

}  // namespace vitsim::whatif_detail
