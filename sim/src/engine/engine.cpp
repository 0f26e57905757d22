// SimGrid's engine: its configuration and command line, the throwaway child that checks a platform loads, and
// the engine a zygote prepares for the points of one platform.
#include "vitsim/sim/engine/engine.hpp"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <simgrid/s4u.hpp>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <regex>
#include <set>
#include <sstream>

#include "collectives/nccl_comm.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/sim/fabric/latency_model.hpp"
#include "vitsim/sim/fabric/platform_build.hpp"

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {

void configure_engine(sg4::Engine& e) {
  // The exact alpha-beta recipe (docs/sources.md "Software and machine facts", SimGrid network model):
  // CM02 with unit factors, no cross-traffic, no TCP window cap, plain max-min sharing.
  e.set_config("network/model:CM02");
  e.set_config("network/crosstraffic:0");
  e.set_config("network/TCP-gamma:0");
  e.set_config("network/latency-factor:1");
  e.set_config("network/bandwidth-factor:1");
  e.set_config("network/weight-S:0");
  e.set_config(fmt::format("contexts/stack-size:{}", kActorStackKiB));
  e.set_config("contexts/guard-size:0");
}

Origin platform_origin(const Scenario& s, const PlatformFacts& facts) {
  return s.what_ifs.empty()
             ? Origin{facts.path, 0}
             : Origin{s.origin_of("whatif.edits").str() + ": the platform as edited by the what-ifs", 0};
}

namespace {

// SimGrid's last words as one line: "[0.000000] ./src/x.cpp:69: [root/CRITICAL] The route ... exists." ->
// "The route ... exists."; backtrace lines are skipped.
std::string simgrid_reason(const std::string& out) {
  std::istringstream in(out);
  std::string line;
  static const std::regex prefix(R"(^(\[[^\]]*\] )?(\S+:\d+: )?(\[[^\]]*\] )?)");
  while (std::getline(in, line)) {
    if (line.empty() || line.rfind("Backtrace", 0) == 0 || line.rfind("  ->", 0) == 0) continue;
    line = std::regex_replace(line, prefix, "", std::regex_constants::format_first_only);
    if (!line.empty()) return line;
  }
  return "";
}

// A SimGrid engine's command line: quiet logs; under AddressSanitizer, which cannot follow SimGrid's raw
// context switches (false reports), thread contexts (the factory is chosen when the engine starts).
std::vector<std::string> engine_args() {
  std::vector<std::string> args{"vitsim", "--log=root.thres:critical"};
#if defined(__SANITIZE_ADDRESS__)
  args.push_back("--cfg=contexts/factory:thread");
#endif
  return args;
}
// argv over `args` (which must outlive it), null-terminated.
std::vector<char*> argv_of(std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return argv;
}

// The child of check_platform_loads: loads the platform in SimGrid, its output on the pipe; never returns.
[[noreturn]] void load_in_child(const std::string& path, int fds[2], pid_t parent) {
  child_after_fork(parent);  // ends with vitsim (core/base/io.hpp)
  close(fds[0]);
  dup2(fds[1], 1);
  dup2(fds[1], 2);
  std::signal(SIGPIPE, SIG_DFL);
  try {
    std::vector<std::string> args = engine_args();
    std::vector<char*> argv = argv_of(args);
    int argc = static_cast<int>(args.size());
    sg4::Engine e(&argc, argv.data());
    e.load_platform(path);  // not a flat-star file (check_platform_loads)
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "%s\n", ex.what());
    std::fflush(stderr);
    std::_Exit(2);
  }
  std::fflush(nullptr);
  std::_Exit(0);
}

// Runs load_in_child and waits for it: "" when it loaded the platform, else why not.
std::string load_in_throwaway_child(const std::string& path) {
  int fds[2];
  if (pipe(fds) != 0) throw Error("pipe failed");
  std::fflush(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw Error("fork failed");
  if (pid == 0) load_in_child(path, fds, parent);
  register_child(pid);  // ended by an interruption (core/base/io.hpp)
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t got;
  while ((got = read(fds[0], buf, sizeof buf)) > 0)
    if (out.size() < (1 << 16)) out.append(buf, static_cast<size_t>(got));
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  unregister_child(pid);
  stop_if_interrupted();
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  std::string reason = simgrid_reason(out);
  if (WIFSIGNALED(status))
    reason =
        fmt::format("it crashed ({}){}{}", strsignal(WTERMSIG(status)), reason.empty() ? "" : ": ", reason);
  if (reason.empty()) reason = fmt::format("its loader exited with status {}", WEXITSTATUS(status));
  return reason;
}

}  // namespace

std::shared_ptr<const FlatPlatform> check_platform_loads(const std::string& path, const PlatformFacts& facts,
                                                         const Origin& where) {
  static std::set<std::string> loaded;  // paths checked by this process (or its parent before the fork)
  if (loaded.count(path)) return facts.flat;
  // A flat-star file is checked by its reader (core/platform/platform_flat.hpp) and built by vitsim's own
  // code.
  if (facts.flat_layout) {
    auto flat = facts.flat ? facts.flat : std::make_shared<const FlatPlatform>(read_flat_platform_file(path));
    loaded.insert(path);
    return flat;
  }
  const std::string reason = load_in_throwaway_child(path);
  if (reason.empty()) {
    loaded.insert(path);
    return nullptr;
  }
  throw Error(where, fmt::format("SimGrid cannot load the platform: {}", echo(reason, 200)));
}

PreparedEngine::PreparedEngine() = default;
PreparedEngine::~PreparedEngine() = default;

std::unique_ptr<PreparedEngine> prepare_engine(const Scenario& s, const PlatformFacts& facts) {
  auto pe = std::make_unique<PreparedEngine>();
  pe->platform = s.cluster.platform;
  pe->args = engine_args();
  pe->argv = argv_of(pe->args);
  int argc = static_cast<int>(pe->args.size());
  try {
    // What SimGrid would abort on is checked in core (read_platform_facts); anything left is contained here.
    std::shared_ptr<const FlatPlatform> flat =
        check_platform_loads(s.cluster.platform, facts, platform_origin(s, facts));
    pe->engine = std::make_unique<sg4::Engine>(&argc, pe->argv.data());
    configure_engine(*pe->engine);
    load_platform(*pe->engine, s.cluster.platform, facts, flat.get());  // flat-star files built in code
    // The socket transport's connections: the channels NCCL runs over each NIC (nccl_platform.cpp).
    const std::vector<int> connections = nccl_net_connections(facts, s.nccl);
    pe->notes = apply_link_transports(*pe->engine, facts, connections);  // before LatencyModel
    pe->latency = std::make_unique<LatencyModel>(*pe->engine);
  } catch (...) {
    pe->error = std::current_exception();
  }
  return pe;
}

}  // namespace vitsim::sim
