#pragma once
// The nesting depth of a JSON text, checked before any parser sees it. nlohmann's serializer (dump, used
// to echo a bad value) and vitsim's own walks recurse once per level, so a file nested 100,000 deep (200
// KB) overflowed the stack and crashed instead of getting a line (issue 27). A linear scan that skips
// strings counts the depth without recursing; every JSON reader of vitsim calls it first.
#include <cstddef>
#include <string>

namespace vitsim {

// Deeper than any file vitsim reads (reports, plans, calibrations, DeepSpeed configs, platform specs,
// PyTorch profiler traces nest fewer than 10 levels) and far below what recursion on an 8 MiB stack takes.
inline constexpr int kMaxJsonDepth = 64;

// "" when `text` nests at most `limit` arrays and objects; otherwise "JSON nested deeper than LIMIT
// levels at line N (...)", for the caller to prefix with its file.
std::string json_depth_problem(const std::string& text, int limit = kMaxJsonDepth);

}  // namespace vitsim
