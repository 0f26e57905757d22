#pragma once
// The platform properties: every <prop> vitsim reads from a platform file, one row each (key, owner, kind of
// value, value range, default, source, meaning). The row is the one place a property is known: the platform
// reader (core/platform/platform.hpp, core/platform/platform_flat.hpp) takes its unit, range and default from
// it, the what-ifs (core/formats/whatif.hpp) check an edited value against the same range, `vitsim platform`
// (core/platform/platform_writer.hpp) and `vitsim calibrate --emit-platform` write it by its unit and
// default, and docs/platform-properties.md is generated from the rows (tests/core/test_platform_props.cpp,
// VITSIM_UPDATE_DOCS=1 rewrites it).
//
// Adding a property is a row of platform_props() (core/src/platform/platform_props.cpp) plus the code that
// uses its value. The message texts stay with each consumer; the row supplies what they say (unit, range,
// choices).
#include <string>
#include <string_view>
#include <vector>

#include "vitsim/core/base/units.hpp"

namespace vitsim {

// Whose <prop> it is. Gpu: a GPU host's (on the <host>, its <cluster> or an enclosing <zone>); Node: a node's
// (its <cluster>); Link: a link's transport setting (on the <link>, an enclosing <zone>, or the <cluster> for
// its backbone); Zone: the top <zone>'s.
enum class PropOwner { Gpu, Node, Link, Zone };

// What its value is. Quantity: a number with its unit (`unit`), within `range`; Number: a plain number within
// `range`; Integer: a whole number within `range` (closed); Choice: one of `choices`; Tile: "MxN"; Power:
// watts
// ("700W", "1.2kW"; core/model/energy.hpp); Text: any text.
enum class PropType { Text, Choice, Quantity, Number, Integer, Tile, Power };

struct PlatformProp {
  std::string_view key;
  PropOwner owner;
  PropType type;
  units::Kind unit = units::Kind::Time;  // Quantity only
  units::Range range{};      // the values a present property may take (Quantity, Number, Integer, Power;
                             // Tile: each side); a platform file's ranges of
                             // uncertainty are its own props (core/platform/figure_range.hpp)
  bool required = false;     // a GPU host without it is an error
  double default_value = 0;  // when absent (SI units); see default_text for defaults that are not constants
  std::string_view
      default_text{};          // as the reference shows it ("1", "2GBps", "(required)", "= gpu_flops_fp32")
  std::string_view choices{};  // Choice: "gpu, cpu"
  std::string_view transports{};  // Link: the transports that read it ("tcp"), in the order written
  std::string_view spec{};        // where a `vitsim platform` spec states it ("node", "gpu_types.props", ...)
  std::string_view source{};      // where its default comes from (docs/sources.md section, or ASSUMPTION)
  std::string_view doc{};         // one line: what it means
  std::string_view measure{};     // the command that measures it on the user's machines (a prediction's
                                  // sensitivity section names it: "what to measure first"); "" = none

  long long int_low() const { return static_cast<long long>(range.lo); }  // Integer: [int_low, int_high]
  long long int_high() const { return static_cast<long long>(range.hi); }
};

// The plausible bandwidth of any link, copy or loader vitsim is given, set or measured (issue 27: a NIC of
// 1e-300Gbps, a calibration's copy at 1e-300 B/s gave predictions of 1e300 s with exit 0). 1 kB/s: below it
// one ViT-B/16 gradient (344 MB) takes four days a step, no training run; 1 PB/s: over 100 times the fastest
// memory in the catalogue (B200 HBM3e, 8 TB/s). The writer (`vitsim platform`) and the calibration reader
// refuse figures outside it.
units::Range plausible_bandwidth();  // [1e3, 1e15] B/s
inline constexpr std::string_view kPlausibleBandwidthText = "1kBps .. 1PBps";
// A row's value (or an end of its KEY.range) against the plausible span of its kind (core/base/units.hpp
// units::plausible): a quantity by its unit, a fraction (the efficiencies) as a factor. Throws Error, without
// location, naming the value and the span.
void check_prop_plausible(const PlatformProp& p, double value);

// Every property, grouped by owner (GPU, node, link, zone), each group in the order the writer states them.
const std::vector<PlatformProp>& platform_props();
// The row of `key`; nullptr when the table has none (a <prop> vitsim does not read).
const PlatformProp* find_platform_prop(std::string_view key);
// The row of `key`, which must exist (a consumer naming its own property): throws Error otherwise.
const PlatformProp& platform_prop(std::string_view key);

// True when a Link row's `transports` names `transport` ("tcp", "ib", "pcie_host").
bool prop_applies_to(const PlatformProp& p, std::string_view transport);

const char* prop_owner_name(PropOwner owner);  // "GPU", "node", "link", "zone"
// The kind of value in words, for the reference: "bandwidth", "integer", "one of: gpu, cpu", ...
std::string prop_type_text(const PlatformProp& p);
// The range in words: "> 0", "in (0, 1]", "1 .. 1048576"; "" when the type has none.
std::string prop_range_text(const PlatformProp& p);

// The reference of docs/platform-properties.md (its generated section): one table per owner.
std::string platform_props_markdown();

}  // namespace vitsim
