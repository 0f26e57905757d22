#pragma once
// Ranges of the platform figures (issue 26 item 2): beside a figure's value, the span it may really take
// and why. One schema, read by the one platform reader (core/platform/platform.hpp) through the property
// table (core/platform/platform_props.hpp), written by `vitsim platform` and `vitsim calibrate
// --emit-platform` through core's one writer (core/platform/platform_writer.hpp):
//
//   <prop id="gpu_flops_fp32" value="8.1Tf"/>
//   <prop id="gpu_flops_fp32.range" value="6.5Tf..8.1Tf; datasheet boost peak; 80% sustained under the cap"/>
//
// The range prop is `KEY.range`, KEY a numeric row of the property table (a quantity, a number or an
// integer), its value `LOW..HIGH; WHY`: both ends in the row's unit and within the row's range, LOW <= HIGH,
// the figure in effect where the range is stated (its own prop, an enclosing one, or the row's constant
// default) within [LOW, HIGH], and WHY not empty (a datasheet, a public spread, "ASSUMPTION: ...", a
// measurement's repeats). docs/platform-properties.md "Ranges of the figures" is the user's page.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vitsim/core/base/error.hpp"

namespace vitsim {

struct PlatformProp;

inline constexpr std::string_view kRangeSuffix = ".range";

struct FigureRange {
  std::string key;      // the property ("gpu_flops_fp32")
  double value = 0;     // the figure in effect where the range is stated (SI)
  double low = 0;       // SI
  double high = 0;      // SI
  std::string raw;      // the range prop's value as written ("6.5Tf..8.1Tf; datasheet ...")
  std::string text;     // the range as written ("6.5Tf..8.1Tf")
  std::string why;      // the reason as written
  std::string element;  // where it is stated: "cluster node-0", "zone AS0", "link n0-nic"
  Origin origin;        // the .range prop's file:line
  // One figure however often it is stated: the same key with the same range prop, LOW..HIGH; WHY, word for
  // word (each cluster of one GPU type, as `vitsim platform` writes it; one assumption stated on every link)
  // is one figure, sampled once for every rank that has it.
  std::string identity() const;
};

// The property a range prop's key names ("gpu_flops_fp32.range" -> "gpu_flops_fp32"); "" when `key` is
// not a range prop.
std::string_view range_base_key(std::string_view key);

// Reads `LOW..HIGH; WHY` for row `p`, the figure in effect being `value` (SI); throws Error at `where`
// naming the prop, the bad text and what was expected (low above high, an end outside the row's range, the
// value outside its own range, no reason, a row that is not a number).
FigureRange parse_figure_range(const PlatformProp& p, std::string_view text, double value,
                               const Origin& where);

// A figure in its row's unit, exactly (17 significant digits, the base unit: "8.1e+12f"): what the
// interval sampler writes, read back to the same double.
std::string exact_prop_value(const PlatformProp& p, double si);
// A figure in its row's unit for people (4 significant digits, a prefix: "6.48Tf", "25GBps", "10us").
std::string readable_prop_value(const PlatformProp& p, double si);
// The writers' range prop: {"KEY.range", "LOW..HIGH; WHY"}; checked as the reader checks it, against
// `value` (throws Error naming the key).
std::pair<std::string, std::string> range_prop(std::string_view key, double value, double low, double high,
                                               std::string_view why);

}  // namespace vitsim
