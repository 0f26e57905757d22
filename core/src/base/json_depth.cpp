#include "vitsim/core/base/json_depth.hpp"
// json_depth.hpp: one pass over the text, strings skipped (a bracket inside a string is not nesting).
#include <fmt/format.h>

namespace vitsim {

std::string json_depth_problem(const std::string& text, int limit) {
  int depth = 0;
  size_t line = 1;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character cannot end the string
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit)
        return fmt::format(
            "JSON nested deeper than {} levels at line {} (vitsim's JSON files nest a few levels; deeper "
            "nesting would overflow the reader's stack)",
            limit, line);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return "";
}

}  // namespace vitsim
