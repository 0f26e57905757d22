// libFuzzer harnesses for issue 39's new surfaces (bench/fuzz.sh builds and runs them):
//   VITSIM_FUZZ_SURFACE 1, `plan_flags`: `vitsim plan`'s one-line form and interval flags as the command
//     parses them (app's own definitions: add_one_line_options, --set, add_interval_options), the one-line
//     form's platform and scenario written and read back as the command reads them.
//   VITSIM_FUZZ_SURFACE 2, `collective`: `vitsim collective`'s sizes (-b, -e, -f, -i as nccl-tests reads
//     them), its -d, -o and --func names and NCCL_ALGO / NCCL_PROTO, and the table it prints, read back by
//     calibrate's nccl-tests reader (`vitsim calibrate --from-nccl-tests`).
// A reader may reject any input with vitsim::Error (CLI11's ParseError where the command line is CLI11's);
// anything else escaping, a crash, a sanitizer report, a hang or a broken invariant below is a finding.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/units.hpp"

#if VITSIM_FUZZ_SURFACE == 1
#include "commands.hpp"
#include "interval_option.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/platform/platform.hpp"
#else
#include "vitsim/calibrate/imports.hpp"
#include "vitsim/core/model/nccl_tuning.hpp"
#include "vitsim/core/results/nccl_table.hpp"
#endif

namespace {

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "finding: %s\n", what.c_str());
  std::abort();
}

// The bytes as command-line tokens: split at '\n' and NUL (which no argument holds), at most 24.
std::vector<std::string> tokens(const uint8_t* data, size_t size) {
  std::vector<std::string> out(1);
  for (size_t i = 0; i < size && out.size() <= 24; ++i) {
    if (data[i] == '\n' || data[i] == 0)
      out.emplace_back();
    else
      out.back() += static_cast<char>(data[i]);
  }
  return out;
}

#if VITSIM_FUZZ_SURFACE == 1
using namespace vitsim;

// A folder standing for the one-line form's temporary one, emptied for every input.
const std::string& folder() {
  static const std::string dir = "/tmp/vitsim-fuzz-plan-" + std::to_string(getpid());
  return dir;
}

void interval_invariants(const app::IntervalFlags& flags, const sim::IntervalOptions& o) {
  if (!(o.p_low > 0 && o.p_low < o.p_high && o.p_high < 1))
    finding(fmt::format("quantiles {} {} accepted", o.p_low, o.p_high));
  if (o.seed > static_cast<std::uint64_t>(std::numeric_limits<long long>::max()))
    finding(fmt::format("seed {} accepted (written as a signed 64-bit integer)", o.seed));
  const bool shaped = std::any_of(flags.shaping.begin(), flags.shaping.end(),
                                  [](const CLI::Option* x) { return x->count() > 0; });
  if ((flags.on || shaped || flags.samples > 0 || !o.runs.empty()) != (o.samples > 0))
    finding("an interval flag given and no interval, or an interval without one");
  if (o.samples != 0 && (o.samples < 2 || o.samples > 4096)) finding(fmt::format("{} samples", o.samples));
}

void fuzz_plan_flags(const uint8_t* data, size_t size) {
  std::vector<std::string> args = tokens(data, size);
  CLI::App cli{"plan"};
  app::OneLinePlan q;
  std::vector<std::string> sets;
  app::IntervalFlags flags;
  sim::IntervalOptions interval;
  app::add_one_line_options(&cli, q);
  cli.add_option("--set", sets);
  app::add_interval_options(&cli, flags, interval, "for the top candidates,");
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  try {
    cli.parse(args);
  } catch (const CLI::ParseError&) {
    return;  // the command line refused as CLI11 (and `vitsim plan`, exit 2) refuses it
  }
  app::resolve_interval(flags, interval);
  interval_invariants(flags, interval);
  if (q.gpu.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::remove_all(folder(), ec);
  fs::create_directories(folder());
  try {
    const std::string scenario = app::write_one_line_scenario(q, folder(), nullptr);
    // What the form writes, the platform reader takes (write_platform_xml read it back before writing).
    try {
      read_platform_facts((fs::path(folder()) / "platform.xml").string());
    } catch (const Error& e) {
      finding(std::string("the one-line form wrote a platform its reader refuses: ") + e.what());
    }
    ScenarioFile f = read_scenario_file(scenario);
    app::name_one_line_origins(f);
    app::apply_sets(f, sets);
    size_t points = 1;
    for (const Sweep& s : f.sweeps) points *= std::max<size_t>(1, s.values.size());
    if (points <= 16) expand(f);
  } catch (const Error& e) {
    // The command names the folder's files by their flags (name_one_line_files): nothing else of the
    // folder, which is gone when the command ends, may reach the message (issue 39 item 21).
    const std::string shown = app::name_one_line_files(e.what(), folder(), q);
    if (shown.find(folder()) != std::string::npos)
      finding(std::string("a message names the one-line form's temporary folder: ") + shown);
  }
}
#else
using namespace vitsim;

void fuzz_collective(const uint8_t* data, size_t size) {
  // tokens: -b -e -f -i -d -o --func NCCL_ALGO NCCL_PROTO, then times for the rows (as text)
  const std::vector<std::string> t = tokens(data, size);
  const auto at = [&t](size_t i) { return i < t.size() ? t[i] : std::string(); };
  NcclSweep s;
  try {
    s.min_bytes = parse_nccl_size(at(0));
    s.max_bytes = parse_nccl_size(at(1));
    for (double b : {s.min_bytes, s.max_bytes})
      if (!(b >= 0 && std::floor(b) == b && b < 1e30)) finding(fmt::format("size {} accepted", b));
    s.step_factor =
        at(2).empty() ? 2 : units::parse_integer(at(2), 1, 1 << 20);  // -f as the command reads it
    if (!at(3).empty()) {
      s.step_factor = 1;
      s.step_bytes = parse_nccl_size(at(3));
    }
  } catch (const Error&) {
    return;
  }
  std::vector<double> sizes;
  try {
    sizes = nccl_sizes(s);
  } catch (const Error&) {
    return;
  }
  if (sizes.empty() || sizes.size() > static_cast<size_t>(kMaxNcclSizes)) finding("sizes count");
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] < s.min_bytes || sizes[i] > s.max_bytes || (i > 0 && !(sizes[i] > sizes[i - 1])))
      finding(fmt::format("size {} of -b {} -e {}", sizes[i], s.min_bytes, s.max_bytes));
  NcclTable table;
  try {
    table.type = at(4).empty() ? "float" : at(4);
    const int type_bytes = nccl_type_bytes(table.type);
    if (!at(5).empty()) check_nccl_redop(table.redop = at(5));
    table.func = nccl_test(at(6).empty() ? "all_reduce" : at(6));
    NcclOverrides o;
    o.algo = at(7);
    o.proto = at(8);
    for (const NcclVersion& v : nccl_versions()) {
      try {
        nccl_enable(o, v);
      } catch (const Error&) {
      }
    }
    // The table of 4 ranks on 2 nodes, times from the bytes (microseconds, as nccl-tests prints them).
    table.ranks = 4;
    table.gpus_per_node = 2;
    table.sweep = s;
    for (int r = 0; r < 4; ++r)
      table.devices.push_back(
          {r, fmt::format("node{}", r / 2), r % 2, fmt::format("node{}-gpu{}", r / 2, r % 2), "T4"});
    for (size_t i = 0; i < sizes.size() && i < 64; ++i) {
      const NcclCounts c = nccl_counts(table.func, sizes[i], type_bytes, table.ranks);
      if (!(c.bytes >= 0) || c.count < 0) finding("negative counts");
      const double us = 1 + static_cast<double>(at(9 + i % 8).size() * 7 + i);  // any positive time
      table.rows.push_back({c.bytes, c.count, us * 1e-6, us * 1.01e-6});
    }
  } catch (const Error&) {
    return;
  }
  const std::string text = nccl_table_text(table);
  (void)nccl_table_json(table);
  // What vitsim collective prints, calibrate's reader takes back for all_reduce (the one collective it
  // fits), rows and sizes as printed.
  if (table.func != NcclTest::AllReduce) return;
  try {
    const calibrate::NcclTestsLog log = calibrate::parse_nccl_tests("collective.txt", text);
    if (log.rows.size() != table.rows.size() || log.ranks != table.ranks)
      finding(fmt::format("{} rows of {} ranks read back from {} of {}", log.rows.size(), log.ranks,
                          table.rows.size(), table.ranks));
    for (size_t i = 0; i < log.rows.size(); ++i)
      if (log.rows[i].bytes != table.rows[i].bytes) finding("a size read back as another");
  } catch (const Error& e) {
    finding(std::string("vitsim collective's table refused by the nccl-tests reader: ") + e.what() + "\n" +
            text);
  }
}
#endif

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
#if VITSIM_FUZZ_SURFACE == 1
    fuzz_plan_flags(data, size);
#else
    fuzz_collective(data, size);
#endif
  } catch (const vitsim::Error&) {
    // A clean rejection.
  }
  return 0;
}
