// The measurement harness's run-time half (harness.hpp, phases.hpp): the environment recorded once, the
// terminal, the spread as the details file writes it.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>

#include "harness/phases.hpp"

namespace vitsim::calibrate {

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto c = line.find(':');
      return c == std::string::npos ? line : line.substr(c + 2);
    }
  return "unknown";
}

double mem_total_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  while (in >> key >> kib) {
    if (key == "MemTotal:") return kib * 1024.0;
    in.ignore(256, '\n');
  }
  return 0;
}

std::string mpi_version() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  if (MPI_Get_library_version(buf, &len) != MPI_SUCCESS) return "unknown";
  std::string s(buf, static_cast<size_t>(len));
  auto nl = s.find_first_of("\n,");
  return nl == std::string::npos ? s : s.substr(0, nl);
}

// The largest data or unified cache of CPU 0 (/sys/devices/system/cpu/cpu0/cache/index*/size): bytes,
// 0 when sysfs does not say.
double last_level_cache_bytes() {
  double best = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", i);
    std::ifstream size(dir + "size"), type(dir + "type");
    std::string text, kind;
    if (!std::getline(size, text)) continue;
    if (std::getline(type, kind) && kind == "Instruction") continue;
    best = std::max(best, parse_cache_size(text));
  }
  return best;
}

}  // namespace

Environment record_environment() {
  Environment e;
  e.cpu = cpu_model();
  e.mem_total_bytes = mem_total_bytes();
  e.last_level_cache = last_level_cache_bytes();
  e.mpi = mpi_version();
  e.torch = torch_version();
  return e;
}

void RunContext::say(const std::string& text) const {
  if (root && o.verbose) {
    fmt::print("{}", text);
    std::fflush(stdout);
  }
}

std::vector<int> RunContext::members(const std::string& type) const {
  std::vector<int> out;
  for (int r = 0; r < nranks; ++r)
    if (devices[r] == type) out.push_back(r);
  return out;
}

json spread_json(const Spread& s) {
  return {{"mean", s.mean}, {"median", s.median}, {"min", s.min},    {"max", s.max},
          {"p25", s.p25},   {"p75", s.p75},       {"count", s.count}};
}

std::string pct(double x) {
  return fmt::format("{:.1f}%", 100 * x);
}

double median_of(std::vector<double> v) {
  return spread_of(std::move(v)).median;
}

}  // namespace vitsim::calibrate
