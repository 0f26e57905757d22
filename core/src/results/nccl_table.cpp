// nccl-tests' conventions and table (vitsim/core/results/nccl_table.hpp). Each rule says where in nccl-tests
// 2.19.6 it comes from.
#include "vitsim/core/results/nccl_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <utility>

#include "vitsim/core/base/enum_names.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim {

namespace {

constexpr EnumNames<NcclTest, 5> kTests{{{NcclTest::AllReduce, "all_reduce"},
                                         {NcclTest::ReduceScatter, "reduce_scatter"},
                                         {NcclTest::AllGather, "all_gather"},
                                         {NcclTest::AllToAll, "alltoall"},
                                         {NcclTest::Broadcast, "broadcast"}}};

struct TypeName {
  const char* name;
  int bytes;
};
// src/common.cu test_typenames, in its order.
constexpr std::array<TypeName, 12> kTypes{{{"int8", 1},
                                           {"uint8", 1},
                                           {"int32", 4},
                                           {"uint32", 4},
                                           {"int64", 8},
                                           {"uint64", 8},
                                           {"half", 2},
                                           {"float", 4},
                                           {"double", 8},
                                           {"bfloat16", 2},
                                           {"f8e4m3", 1},
                                           {"f8e5m2", 1}}};
// src/common.cu test_opnames.
const std::vector<std::string> kRedops{"sum", "prod", "max", "min", "avg", "mulsum"};

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// src/util.cu getFloatStr: two decimals, else one, else none, else exponent, within `width` characters.
std::string float_str(double value, int width) {
  for (const char* f : {"{:{}.2f}", "{:{}.1f}", "{:{}.0f}"}) {
    std::string s = fmt::format(fmt::runtime(f), value, width);
    if (static_cast<int>(s.size()) <= width) return s;
  }
  // printf's %e writes at least two exponent digits, as fmt's {:e} does.
  return fmt::format(fmt::runtime(width >= 7 ? "{:{}.1e}" : "{:{}.0e}"), value, width);
}

// src/util.cu writeResultFooter's %g.
std::string g_str(double v) {
  return fmt::format("{:g}", v);
}

double alg_gbps(double bytes, double time_s) {
  return time_s > 0 ? bytes / time_s / 1e9 : 0.0;
}

// Bytes as nccl-tests' JSON writes them (size_t): whole numbers.
unsigned long long whole(double bytes) {
  return static_cast<unsigned long long>(bytes);
}

std::string program_name(NcclTest f) {
  return std::string(nccl_test_name(f)) + "_perf";
}

std::string printed_redop(const NcclTable& t) {
  return nccl_test_reduces(t.func) ? t.redop : "none";
}
int printed_root(const NcclTable& t) {
  return nccl_test_rooted(t.func) ? t.root : -1;
}

}  // namespace

std::vector<std::string> nccl_test_names() {
  std::vector<std::string> out;
  for (const auto& f : kTests) out.push_back(f.name);
  return out;
}
const char* nccl_test_name(NcclTest f) {
  return name_of(kTests, f);
}
NcclTest nccl_test(const std::string& name) {
  return value_of(kTests, name, "collective function");
}
bool nccl_test_reduces(NcclTest f) {
  return f == NcclTest::AllReduce || f == NcclTest::ReduceScatter;
}
bool nccl_test_rooted(NcclTest f) {
  return f == NcclTest::Broadcast;
}

std::vector<std::string> nccl_type_names() {
  std::vector<std::string> out;
  for (const auto& t : kTypes) out.push_back(t.name);
  return out;
}
int nccl_type_bytes(const std::string& type) {
  for (const auto& t : kTypes)
    if (type == t.name) return t.bytes;
  throw Error(fmt::format("unknown datatype '{}'; valid: {}", echo(type), joined(nccl_type_names())));
}
std::vector<std::string> nccl_redop_names() {
  return kRedops;
}
void check_nccl_redop(const std::string& op) {
  if (std::find(kRedops.begin(), kRedops.end(), op) == kRedops.end())
    throw Error(fmt::format("unknown reduction op '{}'; valid: {}", echo(op), joined(kRedops)));
}

// src/common.cu parsesize: a number and an optional K, M or G (binary).
double parse_nccl_size(const std::string& text) {
  std::string number = text;
  double unit = 1;
  if (!number.empty()) {
    switch (number.back()) {
      case 'K':
      case 'k':
        unit = 1024.0;
        break;
      case 'M':
      case 'm':
        unit = 1024.0 * 1024;
        break;
      case 'G':
      case 'g':
        unit = 1024.0 * 1024 * 1024;
        break;
      default:
        break;
    }
    if (unit > 1) number.pop_back();
  }
  double v = 0;
  try {
    v = units::parse_number(number, units::non_negative()) * unit;
  } catch (const Error&) {
    throw Error(
        fmt::format("'{}' is not a size: expected bytes with an optional K, M or G (binary, as "
                    "nccl-tests: 8G = 8 x 2^30 B)",
                    echo(text)));
  }
  if (v != std::floor(v) || v > 1e18)
    throw Error(fmt::format("'{}' is {} B: expected a whole number of bytes up to 10^18", echo(text), v));
  return v;
}

std::vector<double> nccl_sizes(const NcclSweep& s) {
  if (s.min_bytes > s.max_bytes)
    throw Error(fmt::format("invalid sizes for minbytes and maxbytes: {} > {}", s.min_bytes, s.max_bytes));
  if (s.step_factor < 1) throw Error(fmt::format("step factor {}: expected 1 or more", s.step_factor));
  if (s.step_factor > 1 && s.min_bytes == 0 && s.max_bytes > 0)
    throw Error(fmt::format(
        "minbytes 0 times step factor {} stays 0 and never reaches maxbytes {}: start at 1 or more",
        s.step_factor, s.max_bytes));
  if (s.step_factor == 1 && s.step_bytes <= 0 && s.max_bytes > s.min_bytes)
    throw Error("step bytes 0 with step factor 1 never reaches maxbytes: give -i 1 or more, or -f 2 or more");
  std::vector<double> out;
  // nccl-tests' loop in size_t (src/common.cu TimeTest), here in exact integers below 2^63.
  for (uint64_t size = static_cast<uint64_t>(s.min_bytes); static_cast<double>(size) <= s.max_bytes;) {
    if (out.size() >= static_cast<size_t>(kMaxNcclSizes))
      throw Error(fmt::format("the sweep from {} to {} B makes more than {} sizes: raise -f or -i",
                              s.min_bytes, s.max_bytes, kMaxNcclSizes));
    out.push_back(static_cast<double>(size));
    const uint64_t next = s.step_factor > 1 ? size * static_cast<uint64_t>(s.step_factor)
                                            : size + static_cast<uint64_t>(s.step_bytes);
    if (next <= size || static_cast<double>(next) > 9.2e18) break;  // no wrap-around past 2^63
    if (s.step_factor > 1 && size > (uint64_t{1} << 62) / static_cast<uint64_t>(s.step_factor)) break;
    size = next;
  }
  return out;
}

// src/<collective>.cu *GetCollByteCount, with src/common.cu setupArgs and TimeTest's preamble: the printed
// size is max(send, receive) bytes, the printed count the collective's count argument.
NcclCounts nccl_counts(NcclTest f, double size, int type_bytes, int ranks) {
  const uint64_t count = static_cast<uint64_t>(size) / static_cast<uint64_t>(type_bytes);
  const uint64_t n = static_cast<uint64_t>(std::max(ranks, 1));
  // Divided by the ranks and rounded down to 16 bytes: (count / n) & ~(16 / eltSize - 1).
  const uint64_t per_rank = (count / n) & ~(static_cast<uint64_t>(16 / type_bytes) - 1);
  uint64_t send = count, recv = count, param = count;
  switch (f) {
    case NcclTest::AllReduce:
    case NcclTest::Broadcast:
      break;
    case NcclTest::ReduceScatter:
      send = per_rank * n, recv = per_rank, param = per_rank;
      break;
    case NcclTest::AllGather:
      send = per_rank, recv = per_rank * n, param = per_rank;
      break;
    case NcclTest::AllToAll:
      send = recv = per_rank * n, param = per_rank;
      break;
  }
  return {static_cast<double>(std::max(send, recv) * static_cast<uint64_t>(type_bytes)),
          static_cast<long long>(param)};
}

// src/<collective>.cu *GetBw (doc/PERFORMANCE.md derives each factor).
double nccl_bus_factor(NcclTest f, int ranks) {
  const double n = ranks;
  switch (f) {
    case NcclTest::AllReduce:
      return 2 * (n - 1) / n;
    case NcclTest::ReduceScatter:
    case NcclTest::AllGather:
    case NcclTest::AllToAll:
      return (n - 1) / n;
    case NcclTest::Broadcast:
      return 1;
  }
  return 1;
}

double nccl_avg_busbw(const NcclTable& t) {
  double sum = 0;
  int halves = 0;
  const double factor = nccl_bus_factor(t.func, t.ranks);
  for (const auto& r : t.rows) {
    sum += alg_gbps(r.bytes, r.time_s) * factor + alg_gbps(r.bytes, r.in_place_time_s) * factor;
    halves += 2;
  }
  return halves ? sum / halves : 0.0;
}

std::string nccl_table_text(const NcclTable& t) {
  std::string out;
  for (const auto& line : t.preamble) out += "# " + line + "\n";
  const bool factor = t.sweep.step_factor > 1;
  out += fmt::format("# Collective test starting: {}\n", program_name(t.func));
  out += fmt::format(
      "# nThread 1 nGpus {} minBytes {:.0f} maxBytes {:.0f} step: {:.0f}({}) warmup iters: 0 iters: 1 agg "
      "iters: 1 validation: 0 graph: 0 unalign: 0\n#\n# Using devices\n",
      t.gpus_per_node, t.sweep.min_bytes, t.sweep.max_bytes,
      factor ? static_cast<double>(t.sweep.step_factor) : t.sweep.step_bytes, factor ? "factor" : "bytes");
  for (const auto& d : t.devices)
    out += fmt::format("#  Rank {:2d} Group  0 Pid {:6d} on {:>10} device {:2d} [{}] {}\n", d.rank, 0, d.host,
                       d.device, d.bus, d.name);
  out += "#\n# in-place equals out-of-place: the model moves the same bytes over the same links either way\n";
  // src/util.cu writeResultHeader without per-iteration timing or timestamps (its "%*s" of width 0 leaves
  // each line's trailing space).
  out += fmt::format(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       "
      "in-place          \n",
      "", "", "", "", "");
  out += fmt::format(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6} \n",
      "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
      "#wrong");
  out += fmt::format(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6} \n",
      "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  const double bus = nccl_bus_factor(t.func, t.ranks);
  for (const auto& r : t.rows) {
    out += fmt::format("{:12.0f}  {:12d}  {:>8}  {:>6}  {:6d}", r.bytes, r.count, t.type, printed_redop(t),
                       printed_root(t));
    for (double s : {r.time_s, r.in_place_time_s}) {
      const double alg = alg_gbps(r.bytes, s);
      out += fmt::format("  {:>7}  {:>6}  {:>6}    N/A", float_str(s * 1e6, 7), float_str(alg, 6),
                         float_str(alg * bus, 6));
    }
    out += "\n";
  }
  out += fmt::format("# {:<20} : {} {}\n", "Out of bounds values", 0, "OK");
  out += fmt::format("# {:<20} : {} \n", "Avg bus bandwidth", g_str(nccl_avg_busbw(t)));
  out += fmt::format("#\n# Collective test concluded: {}\n", program_name(t.func));
  for (const auto& n : t.notes) out += "# " + n + "\n";
  return out;
}

std::string nccl_table_json(const NcclTable& t) {
  using json = nlohmann::ordered_json;
  json config{{"nthreads", 1},
              {"ngpus", t.gpus_per_node},
              {"ranks", t.ranks},
              {"minimum_bytes", whole(t.sweep.min_bytes)},
              {"maximum_bytes", whole(t.sweep.max_bytes)}};
  if (t.sweep.step_factor > 1)
    config["step_factor"] = t.sweep.step_factor;
  else
    config["step_bytes"] = whole(t.sweep.step_bytes);
  config["warmup_iters"] = 0;
  config["iterations"] = 1;
  config["validation"] = 0;
  json devices = json::array();
  for (const auto& d : t.devices)
    devices.push_back(json{{"rank", d.rank},
                           {"hostname", d.host},
                           {"device", d.device},
                           {"platform_host", d.bus},
                           {"device_info", d.name}});
  const double bus = nccl_bus_factor(t.func, t.ranks);
  json results = json::array();
  for (const auto& r : t.rows) {
    json row{{"size", whole(r.bytes)},
             {"count", r.count},
             {"type", t.type},
             {"redop", printed_redop(t)},
             {"root", printed_root(t)}};
    for (const auto& [key, s] : {std::pair{"out_of_place", r.time_s}, {"in_place", r.in_place_time_s}}) {
      const double alg = alg_gbps(r.bytes, s);
      row[key] = json{{"time", s * 1e6}, {"alg_bw", alg}, {"bus_bw", alg * bus}, {"nwrong", nullptr}};
    }
    results.push_back(row);
  }
  json out{{"schema", "vitsim.collective/1"},
           {"test", program_name(t.func)},
           {"predicted", true},
           {"preamble", t.preamble},
           {"config", config},
           {"devices", devices},
           {"results", results},
           {"out_of_bounds", json{{"count", 0}, {"okay", true}}},
           {"average_bus_bandwidth", json{{"bandwidth", nccl_avg_busbw(t)}, {"okay", "unchecked"}}},
           {"notes", t.notes}};
  return out.dump(2) + "\n";
}

}  // namespace vitsim
