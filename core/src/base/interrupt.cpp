// Temporary folders and interruptions (io.hpp): the registry of what an interruption removes and ends
// (base/io_registry.hpp), the signal handler and the watcher thread that cleans up and exits. Children live
// in a fixed array of atomics, which the signal handler reads.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "base/io_registry.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"

namespace vitsim {
namespace fs = std::filesystem;

namespace detail {
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: the watcher may use it while the process exits
  return *r;
}

void forget(std::vector<std::string>& v, const std::string& p) {
  for (auto it = v.begin(); it != v.end(); ++it)
    if (*it == p) {
      v.erase(it);
      return;
    }
}
}  // namespace detail

namespace {
using detail::forget, detail::registry, detail::Registry;

std::string reason(int err) {
  return std::strerror(err);
}

constexpr int kMaxChildren = 8192;  // above --jobs' 4096
std::atomic<pid_t> g_children[kMaxChildren];
std::atomic<int> g_signal{0};
int g_pipe[2] = {-1, -1};
const char* g_program = "vitsim";

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "a signal";
  }
}

// Async-signal-safe only: an atomic store, kill(2) and write(2).
void on_signal(int sig) {
  const int saved = errno;
  int expected = 0;
  if (g_signal.compare_exchange_strong(expected, sig)) {
    for (auto& c : g_children) {
      const pid_t pid = c.load();
      if (pid > 0) kill(pid, SIGTERM);
    }
    const unsigned char b = static_cast<unsigned char>(sig);
    [[maybe_unused]] ssize_t n = write(g_pipe[1], &b, 1);
  }
  errno = saved;
}

// Waits up to `seconds` for a child to end; false if it still runs. A child the main thread has reaped
// already (ECHILD) has ended.
bool wait_child(pid_t pid, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    int st = 0;
    const pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void watcher() {
  unsigned char b = 0;
  while (read(g_pipe[0], &b, 1) != 1)
    if (errno != EINTR) return;
  const int sig = g_signal.load();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);  // held until _exit: no new folder appears meanwhile
  // Folders first, at once: whoever sent the signal may follow it with SIGKILL soon (mpirun after 1 s).
  // A child still running finds its folder gone and cannot write into it.
  size_t removed = 0;
  std::error_code ec;
  auto remove_all = [&] {
    for (const auto& f : r.files) fs::remove(f, ec);
    for (const auto& d : r.dirs) removed += fs::remove_all(d, ec) > 0;
  };
  remove_all();
  // Then the children (sent SIGTERM by the handler; they clean up their own folders), SIGKILL after 5 s.
  for (auto& c : g_children) {
    const pid_t pid = c.load();
    if (pid <= 0) continue;
    if (!wait_child(pid, 5.0)) {
      kill(pid, SIGKILL);
      wait_child(pid, 5.0);
    }
  }
  remove_all();
  std::fflush(stdout);
  // What the command was doing (vitsim train: the step, what was saved); nullopt: say nothing.
  std::optional<std::string> note = std::string();
  if (r.note) try {
      note = r.note();
    } catch (const std::exception&) {
    }
  const std::string line =
      fmt::format("{}: interrupted by {}{}{}\n", g_program, signal_name(sig), note ? *note : std::string(),
                  removed ? fmt::format(": removed {} temporary folder{}", removed, removed == 1 ? "" : "s")
                          : std::string());
  if (note) {
    [[maybe_unused]] ssize_t n = write(2, line.data(), line.size());
  }
  _exit(128 + sig);
}
}  // namespace

TempDir::TempDir(const std::string& prefix) {
  std::string tmpl = (fs::temp_directory_path() / (prefix + "XXXXXX")).string();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(
      r.mu);  // created and registered at once: an interruption sees both or neither
  if (!mkdtemp(tmpl.data()))
    throw Error(fmt::format("cannot create a temporary directory: {}", reason(errno)));
  path_ = tmpl;
  r.dirs.push_back(path_);
}

TempDir::~TempDir() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  forget(r.dirs, path_);
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void install_interrupt_cleanup(const char* program) {
  static std::once_flag once;
  std::call_once(once, [program] {
    g_program = program;
    if (pipe2(g_pipe, O_CLOEXEC) != 0) throw Error(fmt::format("cannot create a pipe: {}", reason(errno)));
    std::thread(watcher).detach();
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  });
}

void set_interrupt_note(std::function<std::optional<std::string>()> note) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.note = std::move(note);
}

int interrupted() {
  return g_signal.load();
}

void stop_if_interrupted() {
  if (g_signal.load() == 0) return;
  for (;;) pause();  // the watcher ends the process
}

void register_child(pid_t pid) {
  for (auto& c : g_children) {
    pid_t empty = 0;
    if (c.compare_exchange_strong(empty, pid)) break;
  }
  // Registered after the handler ran (a fork racing the signal): end it here.
  if (g_signal.load() != 0) kill(pid, SIGTERM);
}

void unregister_child(pid_t pid) {
  for (auto& c : g_children) {
    pid_t p = pid;
    if (c.compare_exchange_strong(p, 0)) return;
  }
}

void child_after_fork(pid_t parent) {
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(128 + SIGKILL);  // the parent died before prctl: follow it
  // The parent's registry is the parent's to clean; this copy must not remove its folders.
  Registry& r = registry();
  r.dirs.clear();
  r.files.clear();
}

}  // namespace vitsim
