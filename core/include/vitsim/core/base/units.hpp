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

// Human-readable SI/binary forms used in tables: "12.5 GB/s", "3.21 ms", "15.3 GiB", "8.1 TFLOP/s".
std::string format_time(double seconds);
std::string format_bytes(double bytes);  // binary prefixes (GiB)
std::string format_bandwidth(double bytes_per_s);
std::string format_flops(double flops_per_s);

}  // namespace vitsim::units
