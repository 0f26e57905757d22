#pragma once
// Quantities with units, written as SimGrid writes them ("12GBps", "10Gbps", "5us", "8.1Tf", "16GiB").
// Inside vitsim everything is SI: seconds, bytes, bytes/s, FLOP/s.
#include <string>
#include <string_view>

namespace vitsim::units {

enum class Kind { Time, Bandwidth, Flops, Bytes };

const char* kind_name(Kind kind);
// The units accepted for a kind, for error messages: "s, ms, us, ns, ps, m, h, d, w".
std::string valid_units(Kind kind);

// Parses "<number><unit>". Throws vitsim::Error("bad <kind> '<text>': <reason>; valid units: ...")
// without location; callers prefix file:line by catching and rethrowing with an Origin.
double parse(std::string_view text, Kind kind);

// Human-readable SI/binary forms used in tables: "12.5 GB/s", "3.21 ms", "15.3 GiB", "8.1 TFLOP/s".
std::string format_time(double seconds);
std::string format_bytes(double bytes);  // binary prefixes (GiB)
std::string format_bandwidth(double bytes_per_s);
std::string format_flops(double flops_per_s);

}  // namespace vitsim::units
