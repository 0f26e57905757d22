#include "vitsim/sim/process_pool.hpp"
#include "vitsim/sim/simulate.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "vitsim/core/error.hpp"
#include "vitsim/core/io.hpp"

namespace vitsim::sim {

namespace {

// What a child's wait status says about its task: "" when it exited with status 0.
std::string failure_of(int status) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  return WIFSIGNALED(status) ? fmt::format("the simulation process died of signal {}", WTERMSIG(status))
                             : fmt::format("the simulation process exited with status {}", WEXITSTATUS(status));
}

}  // namespace

// Zygotes (run_forked_groups). The parent keeps the control: it decides which task
// runs when (at most `jobs` at once over all groups), counts the ends for the progress line and keeps
// each task's failure. A zygote only forks and reaps: over one SOCK_SEQPACKET socket pair per zygote
// (one message per send, no partial reads; MSG_NOSIGNAL: a peer gone is an error, not SIGPIPE) the parent
// sends "run task i" (ZygoteRun) and the zygote answers "task i ended with wait status S" (ZygoteEnded)
// when it reaps that child. The parent closes its end once the group's tasks have all ended: the zygote
// reads end-of-file and exits. Deaths cascade: a zygote dies with its parent and its children with it
// (child_after_fork: PR_SET_PDEATHSIG). On SIGTERM, SIGINT or SIGHUP (an interruption: the parent's
// handler sends SIGTERM to the registered zygotes, Ctrl-C reaches the whole process group) and on
// end-of-file a zygote kills its children, reaps them and exits, so that no child outlives it writing
// into the parent's temporary folder; while it prepares it has no children, and those signals kill it.
namespace {

using ZygoteRun = uint64_t;
struct ZygoteEnded {
  uint64_t task;
  int32_t fork_errno;  // not 0: the zygote could not fork the task's child
  int32_t status;      // else the child's wait status
};

[[noreturn]] void zygote_main(int sock, size_t first, const std::function<void(size_t)>& prepare,
                              const std::function<void(size_t)>& child) {
  sigset_t chld, all, before;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  all = chld;
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&all, sig);
  // SIGCHLD is blocked before the first fork (no end is missed); the interruptions once there are children.
  sigprocmask(SIG_BLOCK, &chld, &before);
  try {
    prepare(first);
  } catch (...) {
    std::_Exit(5);
  }
  sigprocmask(SIG_BLOCK, &all, nullptr);
  const int sfd = signalfd(-1, &all, SFD_CLOEXEC);
  if (sfd < 0) std::_Exit(6);
  const pid_t self = getpid();
  std::map<pid_t, uint64_t> children;
  auto end_all = [&](int code) {
    for (const auto& [pid, task] : children) kill(pid, SIGKILL);
    for (const auto& [pid, task] : children) waitpid(pid, nullptr, 0);
    std::_Exit(code);
  };
  for (;;) {
    pollfd fds[2] = {{sock, POLLIN, 0}, {sfd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      end_all(7);
    }
    if (fds[1].revents) {
      signalfd_siginfo si{};
      if (read(sfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si) && si.ssi_signo != SIGCHLD)
        end_all(128 + static_cast<int>(si.ssi_signo));
      int status = 0;
      pid_t pid;
      while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        auto it = children.find(pid);
        if (it == children.end()) continue;
        const ZygoteEnded m{it->second, 0, status};
        children.erase(it);
        if (send(sock, &m, sizeof m, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof m)) end_all(8);
      }
    }
    if (fds[0].revents) {
      ZygoteRun task = 0;
      const ssize_t n = recv(sock, &task, sizeof task, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n != static_cast<ssize_t>(sizeof task)) end_all(0);  // the parent closed its end: no more tasks
      std::fflush(nullptr);
      const pid_t pid = fork();
      if (pid < 0) {
        const ZygoteEnded m{task, errno, 0};
        if (send(sock, &m, sizeof m, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof m)) end_all(8);
        continue;
      }
      if (pid == 0) {
        close(sock);
        close(sfd);
        sigprocmask(SIG_SETMASK, &before, nullptr);
        child_after_fork(self);  // dies with the zygote
        try {
          child(task);
        } catch (...) {
        }
        std::_Exit(5);  // child() must not return
      }
      children[pid] = task;
    }
  }
}

}  // namespace

std::vector<std::string> run_forked_groups(size_t count, int jobs, const std::function<std::string(size_t)>& group_of,
                                           const std::function<void(size_t)>& prepare,
                                           const std::function<void(size_t)>& child,
                                           const std::function<void(size_t)>& on_done) {
  struct Group {
    std::vector<size_t> tasks;
    size_t ended = 0;
    pid_t pid = 0;  // its zygote: 0 not started yet, -1 ended
    int sock = -1;  // the parent's end of its socket pair
  };
  std::vector<Group> groups;
  std::vector<size_t> group(count);
  {
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < count; ++i) {
      auto [it, added] = index.emplace(group_of(i), groups.size());
      if (added) groups.emplace_back();
      group[i] = it->second;
      groups[it->second].tasks.push_back(i);
    }
  }
  std::vector<size_t> order;  // group by group: one zygote at a time unless tasks overlap at a group's end
  for (const auto& g : groups) order.insert(order.end(), g.tasks.begin(), g.tasks.end());
  enum State : char { kWaiting, kRunning, kEnded };
  std::vector<State> state(count, kWaiting);
  std::vector<std::string> failures(count);
  size_t next = 0, done = 0;
  int running = 0;
  const pid_t parent = getpid();
  auto reap = [](Group& g) {
    if (g.sock >= 0) close(g.sock);
    g.sock = -1;
    int status = 0;
    while (waitpid(g.pid, &status, 0) < 0 && errno == EINTR) {
    }
    unregister_child(g.pid);
    g.pid = -1;
    return status;
  };
  // An exception (or an interruption) must not leave zygotes running: SIGTERM makes one end its
  // children, reap them and exit (killed at once while it prepares).
  struct Reaper {
    std::vector<Group>& groups;
    std::function<int(Group&)> reap;
    ~Reaper() {
      for (auto& g : groups)
        if (g.pid > 0) {
          kill(g.pid, SIGTERM);
          reap(g);
        }
    }
  } reaper{groups, reap};
  auto end_task = [&](size_t task, std::string failure) {
    if (state[task] == kRunning) --running;
    state[task] = kEnded;
    failures[task] = std::move(failure);
    ++done;
    if (on_done) on_done(done);
  };
  auto start = [&](Group& g, size_t first) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
      throw Error(fmt::format("socketpair failed: {}", std::strerror(errno)));
    std::fflush(nullptr);  // a zygote must not flush the parent's buffered output a second time
    const pid_t pid = fork();
    if (pid < 0) {
      const int err = errno;
      close(sv[0]);
      close(sv[1]);
      throw Error(fmt::format("fork failed: {}", std::strerror(err)));
    }
    if (pid == 0) {
      child_after_fork(parent);  // dies with the parent, even of SIGKILL
      close(sv[0]);
      for (const auto& o : groups)  // the other zygotes must see end-of-file when the parent closes
        if (o.sock >= 0) close(o.sock);
      try {
        zygote_main(sv[1], first, prepare, child);
      } catch (...) {
        // Never unwind into the parent's frames (the Reaper above is the parent's).
      }
      std::_Exit(5);
    }
    register_child(pid);
    close(sv[1]);
    g.pid = pid;
    g.sock = sv[0];
  };
  while (done < count) {
    while (next < count && running < std::max(1, jobs)) {
      const size_t task = order[next++];
      if (state[task] != kWaiting) continue;  // its zygote died
      stop_if_interrupted();
      Group& g = groups[group[task]];
      if (g.pid == 0) start(g, task);
      state[task] = kRunning;
      ++running;
      const ZygoteRun m = task;
      send(g.sock, &m, sizeof m, MSG_NOSIGNAL);  // a zygote gone: its end-of-file below fails the task
    }
    std::vector<pollfd> fds;
    std::vector<Group*> of;
    for (auto& g : groups)
      if (g.sock >= 0) {
        fds.push_back({g.sock, POLLIN, 0});
        of.push_back(&g);
      }
    const int n = poll(fds.data(), fds.size(), -1);
    stop_if_interrupted();  // its zygotes were ended by the interruption, not by a failure
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("poll failed: {}", std::strerror(errno)));
    }
    for (size_t k = 0; k < fds.size(); ++k) {
      if (!fds[k].revents) continue;
      Group& g = *of[k];
      ZygoteEnded m{};
      const ssize_t r = recv(g.sock, &m, sizeof m, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r == static_cast<ssize_t>(sizeof m) && m.task < count && group[m.task] == static_cast<size_t>(&g - groups.data()) &&
          state[m.task] == kRunning) {
        if (m.fork_errno != 0) throw Error(fmt::format("fork failed: {}", std::strerror(m.fork_errno)));
        end_task(m.task, failure_of(m.status));
        if (++g.ended == g.tasks.size()) reap(g);
        stop_if_interrupted();
        continue;
      }
      // End-of-file (or nonsense): the zygote is gone before its tasks ended; they end with it. Unless an
      // interruption ended it: then the watcher ends this process (its tasks must not be reported as failed,
      // which would race the watcher's exit status and last line with an error of their own).
      const int status = reap(g);
      stop_if_interrupted();
      std::string why = failure_of(status);
      if (why.empty()) why = "the simulation process exited before its result";
      for (size_t task : g.tasks)
        if (state[task] != kEnded) {
          end_task(task, why);
          ++g.ended;
        }
    }
  }
  return failures;
}

bool ProgressPace::due(double t, size_t done, size_t total) {
  if (done == 0) return false;
  bool show;
  if (tty) {
    show = t > 1.0 || last_t >= 0;
  } else if (last_t < 0) {
    show = t > 1.0;
  } else {
    const size_t tenth = std::max<size_t>(1, (total + 9) / 10);
    show = done == total || t - last_t >= 10.0 || done / tenth > last_done / tenth;
  }
  if (show) last_t = t, last_done = done;
  return show;
}

ProgressLine::ProgressLine(std::string who, bool enabled)
    : who_(std::move(who)), enabled_(enabled), start_(std::chrono::steady_clock::now()) {
  pace_.tty = isatty(2);
}

ProgressLine::~ProgressLine() {
  if (shown_ && isatty(2)) fmt::print(stderr, "\n");
}

void ProgressLine::update(size_t done, size_t total, const std::string& what) {
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (!enabled_ || !pace_.due(t, done, total)) return;
  const bool tty = pace_.tty;
  fmt::print(stderr, "{}{}: {}/{} {}, {:.1f} s elapsed, ~{:.1f} s left{}", tty ? "\r" : "", who_, done, total, what,
             t, t / done * (total - done), tty ? "   " : "\n");
  shown_ = true;
}

void finish_child(const std::string& out_path, const std::string& payload) {
  try {
    write_file_atomic(out_path, payload);
  } catch (...) {
    std::_Exit(4);
  }
  std::fflush(nullptr);
  std::_Exit(0);
}

std::vector<nlohmann::json> gather_forked(size_t count, const ForkedPoints& how,
                                          const std::function<nlohmann::json(size_t)>& result_of,
                                          const std::function<std::string(size_t)>& name_of) {
  using json = nlohmann::json;
  TempDir tmp(how.prefix);
  auto out_of = [&](size_t i) { return fmt::format("{}/point{}.json", tmp.path(), i); };
  std::vector<std::string> failures;
  {
    ProgressLine progress(how.who, how.progress);
    const int jobs = how.jobs > 0 ? how.jobs : default_jobs();
    auto child = [&](size_t i) {
      json j;
      try {
        j = result_of(i);
      } catch (const std::exception& e) {
        j = json{{"error", e.what()}};
      }
      finish_child(out_of(i), j.dump());
    };
    auto on_done = [&](size_t done) { progress.update(done, count, how.what); };
    failures = run_forked_groups(count, jobs, how.group_of ? how.group_of : [](size_t) { return std::string(); },
                                 how.prepare ? how.prepare : [](size_t) {}, child, on_done);
  }
  std::vector<json> results;
  results.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const std::string out = out_of(i);
    if (!failures[i].empty() || !std::filesystem::exists(out))
      throw Error(fmt::format("{}: {}", name_of(i), failures[i].empty() ? "no result" : failures[i]));
    json j = json::parse(read_file(out));
    if (j.contains("error")) throw Error(j["error"].get<std::string>());
    results.push_back(std::move(j));
  }
  return results;
}

const PlatformFacts& PlatformCache::of(const Scenario& s) {
  auto it = facts_.find(s.cluster.platform);
  if (it == facts_.end()) {
    if (!std::filesystem::exists(s.cluster.platform))
      throw Error(s.origin_of("cluster.platform"), fmt::format("cluster.platform: no such file '{}'", s.cluster.platform));
    PlatformFacts facts = read_platform_facts(s.cluster.platform);
    if (!s.cluster.platform_label.empty()) facts.path = s.cluster.platform_label;  // never the temporary copy's path
    it = facts_.emplace(s.cluster.platform, std::move(facts)).first;
    check_platform_loads(s.cluster.platform, platform_origin(s, it->second));  // once, before the points fork
  }
  return it->second;
}

int default_jobs() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

}  // namespace vitsim::sim
