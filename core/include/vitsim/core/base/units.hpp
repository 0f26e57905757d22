#pragma once
// Quantities with units, written as SimGrid writes them ("12GBps", "10Gbps", "5us", "8.1Tf", "16GiB").
// Inside vitsim everything is SI: seconds, bytes, bytes/s, FLOP/s.
#include <limits>
#include <string>
#include <string_view>

namespace vitsim {

// A value from the user as it goes into a message: at most `max` characters, the rest cut to "..."
// (with how many characters were cut), so a 10 MB attribute or a 400-digit number does not flood the
// terminal. Every message that echoes user input goes through this.
std::string echo(std::string_view value, size_t max = 40);

}  // namespace vitsim

namespace vitsim::units {

// An interval a figure must lie in; its text form goes into messages ("> 0", ">= 0", "in (0, 1]").
struct Range {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;
  bool contains(double x) const;
  std::string str() const;
};
Range positive();                    // (0, inf)
Range non_negative();                // [0, inf)
Range closed(double lo, double hi);  // [lo, hi]
Range fraction();                    // (0, 1]

// The one strict reader of plain numbers: the whole text is a finite decimal number (NaN, inf, hex,
// trailing text refused) within `r`. Throws Error("'<text>' is not a number" / "<text> is out of range:
// expected <r>") without location.
double parse_number(std::string_view text, const Range& r);
// A whole number (digits, optional sign; "16.0" and "1e3" refused) within [lo, hi].
long long parse_integer(std::string_view text, long long lo, long long hi);

enum class Kind { Time, Bandwidth, Flops, Bytes };

const char* kind_name(Kind kind);
// The units accepted for a kind, for error messages: "w, d, h, min, m, s, ms, us, ns, ps".
std::string valid_units(Kind kind);

// Parses "<number><unit>"; a duration may be compound, largest unit first ("1h30m", "2d12h", "1m30s").
// Throws vitsim::Error("bad <kind> '<text>': <reason>; valid units: ...")
// without location; callers prefix file:line by catching and rethrowing with an Origin.
double parse(std::string_view text, Kind kind);
// The same, then range-checked: "bad bandwidth '0GBps': out of range, expected > 0; ...".
double parse(std::string_view text, Kind kind, const Range& r);

// The plausible span of a figure of each kind: one bound per kind, applied alike to a platform's values and
// the ends of its KEY.range, a calibration's figures, a fit's results and a merged plan shard's (issue 39;
// issue 27 found 1e-300 bandwidths giving 1e300 s steps with exit 0). Beyond either end a figure is a wrong
// file, a wrong unit or a wrong exponent, not hardware; a zero, where a figure may be zero (a latency, an
// overhead), is the reader's range to judge, not this one. Each end, with why:
// - time 1ps .. 1d: 1 ps is below one cycle of any processor's clock (5 GHz ticks every 200 ps) and the
//   finest unit vitsim writes; no latency, overhead, kernel or training step vitsim models takes a day.
// - bandwidth 1kBps .. 1PBps: below it one ViT-B/16 gradient (344 MB) takes four days; over 100 times the
//   fastest memory in the catalogue (B200 HBM3e, 8 TB/s).
// - FLOP/s 1Gf .. 1Ef: one core of a 2005 CPU (a Pentium 4 at 3 GHz with SSE2 peaks at 6 GFLOP/s); 1 EFLOP/s
//   is over 400 times the densest peak in the catalogue (B200, 2.25 PFLOP/s fp16).
// - bytes 1B .. 16TiB: the report reader's limit on one device's memory (core/results/report.hpp).
// - factors x0.001 .. x1000 (a measured span, an occupancy factor, an efficiency): a figure a thousand
//   times off the one it scales is a wrong file, not a spread.
Range plausible(Kind kind);
std::string plausible_text(Kind kind);  // "1kBps .. 1PBps"
Range plausible_factor();               // [1e-3, 1e3]
inline constexpr std::string_view kPlausibleFactorText = "x0.001 .. x1000";
// True for 0 and for a value inside plausible(kind).
bool is_plausible(double si, Kind kind);
// Throws Error("<value> is not a plausible <kind> (expected <span>)"), without location, for a nonzero value
// outside plausible(kind).
void check_plausible(double si, Kind kind);

// Human-readable SI/binary forms used in tables: "12.5 GB/s", "3.21 ms", "15.3 GiB", "8.1 TFLOP/s".
std::string format_time(double seconds);
std::string format_bytes(double bytes);  // binary prefixes (GiB)
std::string format_bandwidth(double bytes_per_s);
std::string format_flops(double flops_per_s);

}  // namespace vitsim::units
