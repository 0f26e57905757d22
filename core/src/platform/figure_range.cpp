// Ranges of the platform figures (core/platform/figure_range.hpp): the one parser of `LOW..HIGH; WHY`, the
// exact and readable forms of a figure in its row's unit, and the writers' range prop.
#include "vitsim/core/platform/figure_range.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>

#include "vitsim/core/base/units.hpp"
#include "vitsim/core/platform/platform_props.hpp"

namespace vitsim {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool has_range(const PlatformProp& p) {
  return p.type == PropType::Quantity || p.type == PropType::Number || p.type == PropType::Integer;
}

// One end of a range, read as the row reads its value.
// One end of a range, read as the row reads its value, and plausible as its value must be (issue 39 item
// 13: an end of 1e300s printed a 300-digit p10).
double end_value(const PlatformProp& p, std::string_view text) {
  if (p.type == PropType::Integer)
    return static_cast<double>(units::parse_integer(text, p.int_low(), p.int_high()));
  const double x =
      p.type == PropType::Quantity ? units::parse(text, p.unit, p.range) : units::parse_number(text, p.range);
  check_prop_plausible(p, x);
  return x;
}

const char* base_unit(units::Kind k) {
  switch (k) {
    case units::Kind::Time:
      return "s";
    case units::Kind::Bandwidth:
      return "Bps";
    case units::Kind::Flops:
      return "f";
    case units::Kind::Bytes:
      return "B";
  }
  return "";
}

}  // namespace

std::string FigureRange::identity() const {
  return fmt::format("{}{}={}", key, kRangeSuffix, raw);
}

std::string_view range_base_key(std::string_view key) {
  if (key.size() <= kRangeSuffix.size() || key.substr(key.size() - kRangeSuffix.size()) != kRangeSuffix)
    return {};
  return key.substr(0, key.size() - kRangeSuffix.size());
}

FigureRange parse_figure_range(const PlatformProp& p, std::string_view text, double value,
                               const Origin& where) {
  const std::string name = fmt::format("{}{}", p.key, kRangeSuffix);
  auto fail = [&](const std::string& what) {
    throw Error(where, fmt::format("property {}: {}", name, what));
  };
  if (!has_range(p))
    fail(fmt::format("{} is {}, not a figure with a range (ranges go on quantities, numbers and integers)",
                     p.key, prop_type_text(p)));
  const size_t semi = text.find(';');
  const std::string_view span = trim(text.substr(0, semi));
  const std::string_view why =
      semi == std::string_view::npos ? std::string_view{} : trim(text.substr(semi + 1));
  const size_t dots = span.find("..");
  if (dots == std::string_view::npos || why.empty())
    fail(fmt::format("'{}' is not LOW..HIGH; WHY (e.g. \"6.5Tf..8.1Tf; datasheet boost, 80% sustained\")",
                     echo(text)));
  FigureRange r;
  r.key = std::string(p.key);
  r.value = value;
  r.raw = std::string(text);
  r.text = std::string(span);
  r.why = std::string(why);
  r.origin = where;
  // One separator, two dots: "4us...10us" read its high as ".10us" and blamed the order (issue 39 item 18).
  if (span.find("..", dots + 2) != std::string_view::npos || span.substr(dots + 2).starts_with("."))
    fail(fmt::format("'{}' has more than one '..' (or '...'): write LOW..HIGH with two dots, e.g. 4us..10us",
                     echo(span)));
  const std::string_view low_text = trim(span.substr(0, dots)), high_text = trim(span.substr(dots + 2));
  try {
    r.low = end_value(p, low_text);
    r.high = end_value(p, high_text);
  } catch (const Error& e) {
    fail(fmt::format("'{}': {}", echo(span), e.what()));
  }
  if (r.low > r.high) fail(fmt::format("low {} is above high {}", echo(low_text), echo(high_text)));
  if (value < r.low || value > r.high)
    fail(fmt::format("the value {} is outside its own range {}", readable_prop_value(p, value), echo(span)));
  return r;
}

std::string exact_prop_value(const PlatformProp& p, double si) {
  if (p.type == PropType::Integer) return fmt::format("{}", std::llround(si));
  if (p.type != PropType::Quantity) return fmt::format("{:.17g}", si);
  return fmt::format("{:.17g}{}", si, base_unit(p.unit));
}

std::string readable_prop_value(const PlatformProp& p, double si) {
  if (p.type == PropType::Integer) return fmt::format("{}", std::llround(si));
  if (p.type != PropType::Quantity) return fmt::format("{:.4g}", si);
  using P = std::pair<double, const char*>;
  std::array<P, 5> prefixes{};
  switch (p.unit) {
    case units::Kind::Time:
      prefixes = {P{1, "s"}, P{1e-3, "ms"}, P{1e-6, "us"}, P{1e-9, "ns"}, P{1e-12, "ps"}};
      break;
    case units::Kind::Bandwidth:
      prefixes = {P{1e12, "TBps"}, P{1e9, "GBps"}, P{1e6, "MBps"}, P{1e3, "kBps"}, P{1, "Bps"}};
      break;
    case units::Kind::Flops:
      prefixes = {P{1e15, "Pf"}, P{1e12, "Tf"}, P{1e9, "Gf"}, P{1e6, "Mf"}, P{1, "f"}};
      break;
    case units::Kind::Bytes:
      prefixes = {P{1e12, "TB"}, P{1e9, "GB"}, P{1e6, "MB"}, P{1e3, "kB"}, P{1, "B"}};
      break;
  }
  for (const auto& [scale, unit] : prefixes)
    if (std::fabs(si) >= scale) return fmt::format("{:.4g}{}", si / scale, unit);
  return fmt::format("{:.4g}{}", si / prefixes.back().first, prefixes.back().second);
}

std::pair<std::string, std::string> range_prop(std::string_view key, double value, double low, double high,
                                               std::string_view why) {
  const PlatformProp& p = platform_prop(key);
  const Origin where{fmt::format("range of {}", key), 0};
  // The readable forms when the reader takes them as meant (a value on an end may round out of them), else
  // the exact ones; either way checked as the reader checks them.
  std::string text =
      fmt::format("{}..{}; {}", readable_prop_value(p, low), readable_prop_value(p, high), why);
  const FigureRange exact = parse_figure_range(
      p, fmt::format("{}..{}; {}", exact_prop_value(p, low), exact_prop_value(p, high), why), value, where);
  try {
    (void)parse_figure_range(p, text, value, where);
  } catch (const Error&) {
    text = fmt::format("{}..{}; {}", exact.text.substr(0, exact.text.find("..")),
                       exact.text.substr(exact.text.find("..") + 2), why);
  }
  return {fmt::format("{}{}", key, kRangeSuffix), text};
}

}  // namespace vitsim
