#pragma once
// One table of names per enum: the name of a value, and the value of a name, whose error lists the valid
// names ("unknown precision 'fp64'; valid: fp32, fp16, bf16"). Each enum's file holds its table instead of
// a switch for the name and a chain of ifs for the parse.
#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "vitsim/core/base/error.hpp"

namespace vitsim {

template <typename E>
struct EnumName {
  E value;
  const char* name;
};

// Listed in the enum's order, a value's name is found at once; any order works.
template <typename E, std::size_t N>
using EnumNames = std::array<EnumName<E>, N>;

namespace detail {
// The value of a table entry: EnumName's `value`, or `kind` for tables of kinds (plot's KindName).
template <typename Entry>
constexpr auto entry_value(const Entry& e) -> decltype(e.value) {
  return e.value;
}
template <typename Entry>
constexpr auto entry_value(const Entry& e) -> decltype(e.kind) {
  return e.kind;
}
}  // namespace detail

// The name of `value` in `names` (an EnumNames, or any list of entries with a name), "?" when absent.
template <typename Names, typename E>
constexpr const char* name_of(const Names& names, E value) {
  const auto i = static_cast<std::size_t>(value);
  if (i < names.size() && detail::entry_value(names[i]) == value) return names[i].name;
  for (const auto& n : names)
    if (detail::entry_value(n) == value) return n.name;
  return "?";
}

// "a, b, c": the names in the table's order, for messages.
template <typename Names>
std::string valid_names(const Names& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + std::string(n.name);
  return out;
}

// The value named `name`; else Error "unknown WHAT 'NAME'; valid: ...".
template <typename Names>
auto value_of(const Names& names, std::string_view name, std::string_view what) {
  for (const auto& n : names)
    if (name == n.name) return detail::entry_value(n);
  throw Error(fmt::format("unknown {} '{}'; valid: {}", what, name, valid_names(names)));
}

}  // namespace vitsim
