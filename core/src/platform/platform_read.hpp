#pragma once
// Internal to core's platform reader (platform.hpp): what its rooms share. platform.cpp walks the zones into
// PlatformFacts; platform_props_read.cpp reads a GPU's, a node's and a link's <prop>s by the property table
// (core/platform/platform_props.hpp); platform_structure.cpp checks what SimGrid's own parser would abort on.
#include <pugixml.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/platform/transport.hpp"

namespace vitsim::platform_read {

// The most hosts and routers a platform file may declare: 2,097,152, 16x the 131,072 GPUs vitsim aims at.
// The writer (platform_spec_check.cpp) refuses a spec past it before writing (issue 39: a million nodes were
// written as 15 million lines, 30 s of CPU, and then refused by this reader).
inline constexpr size_t kMaxNetpoints = size_t{1} << 21;

// The <prop>s in effect at an element: key -> (value, where it was stated).
using Props = std::map<std::string, std::pair<std::string, Origin>>;

// The file being read, with line numbers for its nodes.
struct Ctx {
  std::string path;
  std::string text;
  const std::vector<FigureValue>* values = nullptr;  // figures read at other values (PlatformDocument)
  std::vector<size_t> newlines;                      // offsets of '\n', for line numbers in O(log n)
  void index() {
    for (size_t i = 0; i < text.size(); ++i)
      if (text[i] == '\n') newlines.push_back(i);
  }
  int line_of(ptrdiff_t off) const {
    if (off < 0) return 0;
    return 1 + static_cast<int>(std::lower_bound(newlines.begin(), newlines.end(), static_cast<size_t>(off)) -
                                newlines.begin());
  }
  Origin at(const pugi::xml_node& n) const { return Origin{path, line_of(n.offset_debug())}; }
};

// "0-7", "0-3,8": the radicals of a <cluster> (at most 10,000,000 hosts); Error at `o` otherwise.
std::vector<long> parse_radical(const std::string& r, const Origin& o);

// The figures of one GPU host and one node from the props in effect there (platform_props_read.cpp).
GpuFacts gpu_facts(const Props& p, const Origin& where);
void node_facts(NodeFacts& n, const Props& p);
// The transport settings of one link (its own props over its zones'); `line` and `lat` as written.
LinkFacts link_facts(const Props& p, const Origin& where, std::string id, std::string what, Transport t,
                     double line, double lat, bool split_duplex);

// The ranges stated among an element's own props (core/platform/figure_range.hpp), each checked against the
// figure in effect there (`in_effect`: its own props over its enclosing ones); appended to `out`.
void figure_ranges(const Props& own, const Props& in_effect, const Origin& where, const std::string& element,
                   std::vector<FigureRange>& out);

// What SimGrid 3.32's parser aborts on instead of reporting, checked first (platform_structure.cpp).
void check_structure(const Ctx& c, const pugi::xml_node& root);

}  // namespace vitsim::platform_read
