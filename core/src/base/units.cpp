#include "vitsim/core/base/units.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <utility>

#include "vitsim/core/base/error.hpp"

namespace vitsim {

std::string echo(std::string_view v, size_t max) {
  if (v.size() <= max) return std::string(v);
  return fmt::format("{}... ({} characters)", v.substr(0, max), v.size());
}

}  // namespace vitsim

namespace vitsim::units {
namespace {

using Table = std::initializer_list<std::pair<std::string_view, double>>;

// Same spellings as SimGrid's surf_parse_get_{time,bandwidth,speed,size}; "K" is accepted beside "k".
constexpr double kKi = 1024.0;
const Table& table(Kind kind) {
  // "min" beside SimGrid's "m": users write 90min; compound durations ("1h30m") are read by parse().
  static const Table time{{"w", 7 * 86400.0}, {"d", 86400.0}, {"h", 3600.0}, {"min", 60.0}, {"m", 60.0},
                          {"s", 1.0},         {"ms", 1e-3},   {"us", 1e-6},  {"ns", 1e-9},  {"ps", 1e-12}};
  static const Table bandwidth{{"Bps", 1.0},
                               {"kBps", 1e3},
                               {"KBps", 1e3},
                               {"MBps", 1e6},
                               {"GBps", 1e9},
                               {"TBps", 1e12},
                               {"KiBps", kKi},
                               {"MiBps", kKi * kKi},
                               {"GiBps", kKi * kKi * kKi},
                               {"TiBps", kKi * kKi * kKi * kKi},
                               {"bps", 0.125},
                               {"kbps", 125.0},
                               {"Kbps", 125.0},
                               {"Mbps", 125e3},
                               {"Gbps", 125e6},
                               {"Tbps", 125e9},
                               {"Kibps", kKi / 8},
                               {"Mibps", kKi * kKi / 8},
                               {"Gibps", kKi * kKi * kKi / 8}};
  static const Table flops{{"f", 1.0},  {"kf", 1e3},  {"Kf", 1e3},  {"Mf", 1e6},
                           {"Gf", 1e9}, {"Tf", 1e12}, {"Pf", 1e15}, {"Ef", 1e18}};
  static const Table bytes{{"B", 1.0},
                           {"kB", 1e3},
                           {"KB", 1e3},
                           {"MB", 1e6},
                           {"GB", 1e9},
                           {"TB", 1e12},
                           {"KiB", kKi},
                           {"MiB", kKi * kKi},
                           {"GiB", kKi * kKi * kKi},
                           {"TiB", kKi * kKi * kKi * kKi},
                           {"b", 0.125},
                           {"kb", 125.0},
                           {"Kb", 125.0},
                           {"Mb", 125e3},
                           {"Gb", 125e6}};
  switch (kind) {
    case Kind::Time:
      return time;
    case Kind::Bandwidth:
      return bandwidth;
    case Kind::Flops:
      return flops;
    case Kind::Bytes:
      return bytes;
  }
  return time;
}

}  // namespace

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::Time:
      return "time";
    case Kind::Bandwidth:
      return "bandwidth";
    case Kind::Flops:
      return "speed";
    case Kind::Bytes:
      return "size";
  }
  return "quantity";
}

std::string valid_units(Kind kind) {
  std::string out;
  for (const auto& [name, factor] : table(kind)) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

bool Range::contains(double x) const {
  if (!std::isfinite(x)) return false;
  if (lo_open ? !(x > lo) : !(x >= lo)) return false;
  if (hi_open ? !(x < hi) : !(x <= hi)) return false;
  return true;
}

std::string Range::str() const {
  const bool has_lo = std::isfinite(lo), has_hi = std::isfinite(hi);
  const std::string low = fmt::format("{} {}", lo_open ? ">" : ">=", lo),
                    high = fmt::format("{} {}", hi_open ? "<" : "<=", hi);
  if (has_lo && has_hi && !lo_open && !hi_open) return fmt::format("{} .. {}", lo, hi);
  if (has_lo && has_hi) return low + " and " + high;
  if (has_lo) return low;
  if (has_hi) return high;
  return "a finite number";
}

Range positive() {
  return Range{0, std::numeric_limits<double>::infinity(), true, false};
}
Range non_negative() {
  return Range{0, std::numeric_limits<double>::infinity(), false, false};
}
Range closed(double lo, double hi) {
  return Range{lo, hi, false, false};
}
Range fraction() {
  return Range{0, 1, true, false};
}

Range plausible(Kind kind) {
  switch (kind) {
    case Kind::Time:
      return closed(1e-12, 86400);
    case Kind::Bandwidth:
      return closed(1e3, 1e15);
    case Kind::Flops:
      return closed(1e9, 1e18);
    case Kind::Bytes:
      return closed(1, 16.0 * 1024 * 1024 * 1024 * 1024);
  }
  return Range{};
}

std::string plausible_text(Kind kind) {
  switch (kind) {
    case Kind::Time:
      return "1ps .. 1d";
    case Kind::Bandwidth:
      return "1kBps .. 1PBps";
    case Kind::Flops:
      return "1Gf .. 1Ef";
    case Kind::Bytes:
      return "1B .. 16TiB";
  }
  return "";
}

Range plausible_factor() {
  return closed(1e-3, 1e3);
}

bool is_plausible(double si, Kind kind) {
  return si == 0 || plausible(kind).contains(si);
}

void check_plausible(double si, Kind kind) {
  static constexpr std::array<const char*, 4> si_unit{"s", "B/s", "FLOP/s", "B"};  // by Kind
  if (!is_plausible(si, kind))
    throw Error(fmt::format("{:.4g} {} is not a plausible {} (expected {})", si,
                            si_unit.at(static_cast<size_t>(kind)), kind_name(kind), plausible_text(kind)));
}

namespace {
// The whole of `s` (spaces trimmed) as a finite decimal number; nullopt otherwise. from_chars takes no
// leading '+', no hex without "0x"; "nan" and "inf" parse but are refused here.
bool whole_number(std::string_view s, double& out, const char** end_out = nullptr) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (end_out) *end_out = end;
  if (ec == std::errc::result_out_of_range) return false;
  if (ec != std::errc() || end == s.data()) return false;
  if (!end_out && end != s.data() + s.size()) return false;
  return std::isfinite(out);
}
}  // namespace

double parse_number(std::string_view text, const Range& r) {
  double x = 0;
  if (!whole_number(text, x))
    throw Error(fmt::format("'{}' is not a number (expected {})", echo(text), r.str()));
  if (!r.contains(x)) throw Error(fmt::format("{} is out of range (expected {})", echo(text), r.str()));
  return x;
}

long long parse_integer(std::string_view text, long long lo, long long hi) {
  std::string_view s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  long long x = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (s.empty() || ec == std::errc::invalid_argument || end != s.data() + s.size())
    throw Error(fmt::format("'{}' is not an integer in {} .. {}", echo(text), lo, hi));
  if (ec == std::errc::result_out_of_range || x < lo || x > hi)
    throw Error(fmt::format("{} is out of range (expected {} .. {})", echo(text), lo, hi));
  return x;
}

double parse(std::string_view text, Kind kind, const Range& r) {
  const double x = parse(text, kind);
  if (!r.contains(x))
    throw Error(fmt::format("bad {} '{}': out of range (expected {})", kind_name(kind), echo(text), r.str()));
  return x;
}

double parse(std::string_view text, Kind kind) {
  auto fail = [&](const std::string& why) -> Error {
    return Error(
        fmt::format("bad {} '{}': {}; valid units: {}", kind_name(kind), echo(text), why, valid_units(kind)));
  };
  std::string_view s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.empty()) throw fail("empty value");
  double value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec == std::errc::result_out_of_range) throw fail("not a finite number");
  if (ec != std::errc() || end == s.data()) throw fail("no number");
  std::string_view rest(end, static_cast<size_t>(s.data() + s.size() - end));
  if (!std::isfinite(value)) throw fail("not a finite number");
  // The unit: the letters after the number. A duration may go on with more number+unit parts, largest
  // unit first, each unit once ("1h30m", "2d12h", "1m30s", "1h30min"); other kinds take one unit.
  // The unit runs to the next digit, so that "5 parsecs" names ' parsecs' as the unknown unit.
  auto unit_of = [&](std::string_view& r) {
    size_t n = 0;
    while (n < r.size() && !std::isdigit(static_cast<unsigned char>(r[n])) && r[n] != '.') ++n;
    std::string_view u = r.substr(0, n);
    r.remove_prefix(n);
    return u;
  };
  auto factor_of = [&](std::string_view unit) -> double {
    if (unit.empty()) throw fail("missing unit");
    for (const auto& [name, factor] : table(kind))
      if (name == unit) return factor;
    throw fail(fmt::format("unknown unit '{}'", echo(unit, 16)));
  };
  std::string_view unit = rest;
  if (kind == Kind::Time)
    unit = unit_of(rest);
  else
    rest = {};
  double factor = factor_of(unit);
  double total = value * factor;
  if (!std::isfinite(total)) throw fail("not a finite number");
  while (!rest.empty()) {  // only durations get here
    double part = 0;
    auto [e, ec2] = std::from_chars(rest.data(), rest.data() + rest.size(), part);
    if (ec2 != std::errc() || e == rest.data() || !(part >= 0) || !std::isfinite(part))
      throw fail(fmt::format("'{}' after '{}' is not a number and unit", echo(rest, 16), unit));
    if (value < 0) throw fail("a compound duration cannot be negative");
    rest.remove_prefix(static_cast<size_t>(e - rest.data()));
    const std::string_view next = unit_of(rest);
    const double next_factor = factor_of(next);
    if (!(next_factor < factor))
      throw fail(fmt::format(
          "in a compound duration each unit is smaller than the one before ('{}' after '{}')", next, unit));
    unit = next;
    factor = next_factor;
    total += part * factor;
    if (!std::isfinite(total)) throw fail("not a finite number");
  }
  return total;
}

std::string format_time(double s) {
  double a = std::fabs(s);
  if (a >= 3600) return fmt::format("{:.2f} h", s / 3600);
  if (a >= 60) return fmt::format("{:.2f} min", s / 60);
  if (a >= 1) return fmt::format("{:.3f} s", s);
  if (a >= 1e-3) return fmt::format("{:.2f} ms", s * 1e3);
  if (a >= 1e-6) return fmt::format("{:.2f} us", s * 1e6);
  return fmt::format("{:.0f} ns", s * 1e9);
}

std::string format_bytes(double b) {
  const char* names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int i = 0;
  while (std::fabs(b) >= 1024 && i < 5) {
    b /= 1024;
    ++i;
  }
  return i == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.2f} {}", b, names[i]);
}

static std::string si(double v, const char* suffix) {
  const char* names[] = {"", "k", "M", "G", "T", "P", "E"};
  int i = 0;
  while (std::fabs(v) >= 1000 && i < 6) {
    v /= 1000;
    ++i;
  }
  return fmt::format("{:.3g} {}{}", v, names[i], suffix);
}

std::string format_bandwidth(double bps) {
  return si(bps, "B/s");
}
std::string format_flops(double f) {
  return si(f, "FLOP/s");
}

}  // namespace vitsim::units
