#pragma once
// Small helpers shared by the tests: temporary folders, files, running the vitsim binary, and running a
// function in a child process (SimGrid allows one engine per process).
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"

namespace vt {
namespace fs = std::filesystem;

inline std::string source(const std::string& rel) {
  return std::string(VITSIM_SOURCE_DIR) + "/" + rel;
}

// "a, b, c": a registry's names as messages list them.
inline std::string join(const std::vector<std::string>& v, const std::string& sep = ", ") {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : sep) + x;
  return out;
}

// core's TempDir (vitsim/core/base/io.hpp: created, registered, removed with its content) with helpers.
struct TempDir {
  vitsim::TempDir dir{"vitsim-test-"};
  fs::path path{dir.path()};
  std::string file(const std::string& name, const std::string& content) const {
    fs::path p = path / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << content;
    return p.string();
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// The provenance `vitsim train` writes (real/src/trainer/trainer.cpp), for a predicted report a test relabels
// as measured: the report reader refuses a measured report that keeps predict's (its generator and platform
// digests: a prediction relabelled by hand, issue 39 item 29).
inline std::map<std::string, std::string> train_provenance() {
  return {{"host", "test-host"},
          {"date", "2026-01-01T00:00:00Z"},
          {"libtorch", "test"},
          {"ranks", "1"},
          {"command", "vitsim train (a test's relabelled prediction)"}};
}

struct CmdResult {
  int status = -1;
  std::string out;  // stdout + stderr
};

// Runs a shell command, capturing stdout and stderr together.
inline CmdResult run(const std::string& cmd) {
  CmdResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

inline CmdResult vitsim(const std::string& args) {
  return run(std::string(VITSIM_BINARY) + " " + args);
}

// A measuring command (calibrate, train) run at the highest priority this machine allows. As root, where the
// kernel schedules by session (autogroup), the command runs in a session of its own whose group has nice
// -20: this machine's cores are shared with other sessions' builds, and without it their load made single
// runs 2-5x slower and the run-to-run spread 30-120% (measured, docs/benchmarks.md). Elsewhere (CI, a quiet
// machine) the command runs as it is.
inline std::string prioritised(const std::string& cmd) {
  if (geteuid() != 0 || access("/proc/self/autogroup", W_OK) != 0) return cmd;
  return "setsid -w sh -c 'echo -20 > /proc/self/autogroup && exec nice -n -20 " + cmd + "'";
}

// Everything left to read from `fd` (a pipe from a child), then closes it.
inline std::string read_to_end(int fd) {
  std::string out;
  char buf[65536];
  ssize_t got;
  while ((got = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(got));
  close(fd);
  return out;
}

// Runs `fn` in a forked child and returns the doubles it produced (empty if the child failed).
inline std::vector<double> in_child_vector(const std::function<std::vector<double>()>& fn) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::vector<double> v;
    try {
      v = fn();
    } catch (const std::exception& e) {
      fprintf(stderr, "child failed: %s\n", e.what());
    }
    const size_t n = v.size();
    if (write(fds[1], &n, sizeof n) != sizeof n) _exit(3);
    for (double x : v)
      if (write(fds[1], &x, sizeof x) != sizeof x) _exit(3);
    _exit(0);
  }
  close(fds[1]);
  std::vector<double> v;
  size_t n = 0;
  if (read(fds[0], &n, sizeof n) == sizeof n && n < (1u << 24)) {
    v.resize(n);
    for (double& x : v)
      if (read(fds[0], &x, sizeof x) != sizeof x) {
        v.clear();
        break;
      }
  }
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  return v;
}

// Runs `fn` in a forked child and returns the double it produced (NaN if the child failed).
inline double in_child(const std::function<double()>& fn) {
  const std::vector<double> v = in_child_vector([&] { return std::vector<double>{fn()}; });
  return v.size() == 1 ? v[0] : std::numeric_limits<double>::quiet_NaN();
}

// NCCL's view of a test GPU (outside the catalogue, so the file states it): an Ampere data-centre GPU (SM 80)
// on PCIe Gen4 x16 (NCCL rates it 24 GB/s) without NVLink.
inline constexpr const char* kTestGpuNcclProps =
    "<prop id=\"gpu_arch\" value=\"ampere_dc\"/><prop id=\"gpu_link\" value=\"none\"/>"
    "<prop id=\"gpu_host_link\" value=\"pcie4_x16\"/>";

// A GPU's <prop> lines for test platforms: a compute-bound device (huge memory bandwidth, no launch cost).
inline std::string gpu_props(const std::string& model, const std::string& flops,
                             const std::string& extra = "") {
  return fmt::format(
      "<prop id=\"gpu_model\" value=\"{}\"/><prop id=\"gpu_flops_fp32\" value=\"{}\"/>"
      "<prop id=\"gpu_mem_bw\" value=\"1000TBps\"/><prop id=\"gpu_mem\" value=\"80GiB\"/>"
      "<prop id=\"gpu_efficiency\" value=\"1\"/>{}{}",
      model, flops, kTestGpuNcclProps, extra);
}

// Nodes of `gpus` GPUs each (one <cluster> per node), joined by NICs in a Full zone, in the layout
// `vitsim platform` writes. nic_bw[i] is node i's NIC bandwidth.
inline std::string platform_xml(int nodes, int gpus, const std::string& pcie_bw, const std::string& lat,
                                const std::vector<std::string>& nic_bw, const std::vector<std::string>& flops,
                                const std::string& backbone_bw = "1000GBps",
                                const std::string& bb_policy = "FATPIPE") {
  std::string x =
      "<?xml version=\"1.0\"?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
      "<platform version=\"4.1\"><zone id=\"test\" routing=\"Full\">\n";
  for (int i = 0; i < nodes; ++i)
    x += fmt::format(
        "<cluster id=\"n{0}\" prefix=\"n{0}-gpu\" suffix=\"\" radical=\"0-{1}\" speed=\"1Tf\" bw=\"{2}\" "
        "lat=\"{3}\" "
        "sharing_policy=\"SPLITDUPLEX\" bb_bw=\"{4}\" bb_lat=\"0us\" bb_sharing_policy=\"{5}\" "
        "loopback_bw=\"1000GBps\" "
        "loopback_lat=\"0us\" router_id=\"n{0}-router\">{6}</cluster>\n",
        i, gpus - 1, pcie_bw, lat, backbone_bw, bb_policy, gpu_props("G" + flops[i], flops[i]));
  if (nodes > 1)
    for (int i = 0; i < nodes; ++i)
      x += fmt::format(
          "<link id=\"n{}-nic\" bandwidth=\"{}\" latency=\"{}\" sharing_policy=\"SPLITDUPLEX\"/>\n", i,
          nic_bw[i], lat);
  for (int i = 0; i < nodes; ++i)
    for (int j = i + 1; j < nodes; ++j)
      x += fmt::format(
          "<zoneRoute src=\"n{0}\" dst=\"n{1}\" gw_src=\"n{0}-router\" gw_dst=\"n{1}-router\"><link_ctn "
          "id=\"n{0}-nic\" "
          "direction=\"UP\"/><link_ctn id=\"n{1}-nic\" direction=\"DOWN\"/></zoneRoute>\n",
          i, j);
  return x + "</zone></platform>\n";
}

// Generated sections of a hand-written document: the text between "<!-- begin NAME -->\n" and
// "<!-- end NAME -->". Returns the section as the file has it ("" when missing). With VITSIM_UPDATE_DOCS
// set, first rewrites it to `content` (appended at the end when the markers are missing).
inline std::string doc_section(const std::string& path, const std::string& name, const std::string& content) {
  const std::string begin = "<!-- begin " + name + " -->\n", end = "<!-- end " + name + " -->";
  std::ifstream in(path);
  std::string doc{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  size_t b = doc.find(begin), e = b == std::string::npos ? b : doc.find(end, b);
  if (std::getenv("VITSIM_UPDATE_DOCS")) {
    if (b == std::string::npos || e == std::string::npos)
      doc += "\n" + begin + content + end + "\n";
    else
      doc.replace(b + begin.size(), e - b - begin.size(), content);
    std::ofstream(path) << doc;
    return content;
  }
  if (b == std::string::npos || e == std::string::npos) return "";
  return doc.substr(b + begin.size(), e - b - begin.size());
}

// The message of the vitsim::Error that f throws; "" when it throws none.
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const vitsim::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace vt
