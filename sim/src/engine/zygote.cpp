// Zygotes (run_forked_groups, sim/engine/process_pool.hpp). The parent keeps the control: it decides which
// task runs when (at most `jobs` at once over all groups), counts the ends for the progress line and keeps
// each task's failure. A zygote only forks and reaps: over one SOCK_SEQPACKET socket pair per zygote
// (one message per send, no partial reads; MSG_NOSIGNAL: a peer gone is an error, not SIGPIPE) the parent
// sends "run task i" (ZygoteRun) and the zygote answers "task i ended with wait status S" (ZygoteEnded)
// when it reaps that child. The parent closes its end once the group's tasks have all ended: the zygote
// reads end-of-file and exits. Deaths cascade: a zygote dies with its parent and its children with it
// (child_after_fork: PR_SET_PDEATHSIG). On SIGTERM, SIGINT or SIGHUP (an interruption: the parent's
// handler sends SIGTERM to the registered zygotes, Ctrl-C reaches the whole process group) and on
// end-of-file a zygote kills its children, reaps them and exits, so that no child outlives it writing
// into the parent's temporary folder; while it prepares it has no children, and those signals kill it.
// A group of one task forks nothing more: its zygote runs the task after preparing (one fork, and no copy
// of the prepared platform's pages on write, fewer for a single large point), and its exit is the task's.
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
#include <map>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/sim/engine/process_pool.hpp"

namespace vitsim::sim {
namespace {

// What a child's wait status says about its task: "" when it exited with status 0.
std::string failure_of(int status) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  // SIGKILL is what the kernel's out-of-memory killer sends: say so, since nothing else is printed.
  return WIFSIGNALED(status)
             ? fmt::format(
                   "the simulation process died of signal {}{}", WTERMSIG(status),
                   WTERMSIG(status) == SIGKILL ? " (killed: out of memory, or by another process)" : "")
             : fmt::format("the simulation process exited with status {}", WEXITSTATUS(status));
}

using ZygoteRun = uint64_t;
struct ZygoteEnded {
  uint64_t task;
  int32_t fork_errno;  // not 0: the zygote could not fork the task's child
  int32_t status;      // else the child's wait status
};

// A zygote's loop after prepare: forks a child per task the parent sends, reports each child's end, and ends
// its children and itself on an interruption (signalfd `sfd`) or the parent's end-of-file.
[[noreturn]] void zygote_loop(int sock, int sfd, const sigset_t& before,
                              const std::function<void(size_t)>& child) {
  const pid_t self = getpid();
  std::map<pid_t, uint64_t> children;
  auto end_all = [&](int code) {
    for (const auto& [pid, task] : children) kill(pid, SIGKILL);
    for (const auto& [pid, task] : children) waitpid(pid, nullptr, 0);
    std::_Exit(code);
  };
  auto report = [&](const ZygoteEnded& m) {
    if (send(sock, &m, sizeof m, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof m)) end_all(8);
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
        report(m);
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
        report(ZygoteEnded{task, errno, 0});
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

// `solo`: the group's only task, run by the zygote itself after prepare (no child to fork: its exit status is
// the task's, read by the parent when the socket closes); else the loop forks a child per task.
[[noreturn]] void zygote_main(int sock, size_t first, bool solo, const std::function<void(size_t)>& prepare,
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
  if (solo) {
    sigprocmask(SIG_SETMASK, &before, nullptr);
    try {
      child(first);
    } catch (...) {
    }
    std::_Exit(5);  // child() must not return
  }
  sigprocmask(SIG_BLOCK, &all, nullptr);
  const int sfd = signalfd(-1, &all, SFD_CLOEXEC);
  if (sfd < 0) std::_Exit(6);
  zygote_loop(sock, sfd, before, child);
}

// The parent's side: the groups, their zygotes and the tasks' states. Its destructor ends any zygote still
// running: an exception (or an interruption) must not leave zygotes behind (SIGTERM makes one end its
// children, reap them and exit; killed at once while it prepares).
class ZygotePool {
 public:
  ZygotePool(size_t count, int jobs, const std::function<std::string(size_t)>& group_of,
             const std::function<void(size_t)>& prepare, const std::function<void(size_t)>& child,
             const std::function<void(size_t)>& on_done)
      : count_(count),
        jobs_(jobs),
        prepare_(prepare),
        child_(child),
        on_done_(on_done),
        group_(count),
        state_(count, kWaiting),
        failures_(count),
        parent_(getpid()) {
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < count; ++i) {
      auto [it, added] = index.emplace(group_of(i), groups_.size());
      if (added) groups_.emplace_back();
      group_[i] = it->second;
      groups_[it->second].tasks.push_back(i);
    }
    // Group by group: one zygote at a time unless tasks overlap at a group's end.
    for (const auto& g : groups_) order_.insert(order_.end(), g.tasks.begin(), g.tasks.end());
  }
  ~ZygotePool() {
    for (auto& g : groups_)
      if (g.pid > 0) {
        kill(g.pid, SIGTERM);
        reap(g);
      }
  }
  ZygotePool(const ZygotePool&) = delete;
  ZygotePool& operator=(const ZygotePool&) = delete;

  std::vector<std::string> run() {
    while (done_ < count_) {
      dispatch();
      wait_for_ends();
    }
    return failures_;
  }

 private:
  struct Group {
    std::vector<size_t> tasks;
    size_t ended = 0;
    pid_t pid = 0;  // its zygote: 0 not started yet, -1 ended
    int sock = -1;  // the parent's end of its socket pair
  };
  enum State : char { kWaiting, kRunning, kEnded };

  size_t count_;
  int jobs_;
  const std::function<void(size_t)>& prepare_;
  const std::function<void(size_t)>& child_;
  const std::function<void(size_t)>& on_done_;
  std::vector<Group> groups_;
  std::vector<size_t> group_;  // per task: its group
  std::vector<size_t> order_;  // the tasks in the order they start
  std::vector<State> state_;
  std::vector<std::string> failures_;
  size_t next_ = 0, done_ = 0;
  int running_ = 0;
  const pid_t parent_;

  static int reap(Group& g) {
    if (g.sock >= 0) close(g.sock);
    g.sock = -1;
    int status = 0;
    while (waitpid(g.pid, &status, 0) < 0 && errno == EINTR) {
    }
    unregister_child(g.pid);
    g.pid = -1;
    return status;
  }

  void end_task(size_t task, std::string failure) {
    if (state_[task] == kRunning) --running_;
    state_[task] = kEnded;
    failures_[task] = std::move(failure);
    ++done_;
    if (on_done_) on_done_(done_);
  }

  // Forks the group's zygote, which prepares for task `first`.
  void start(Group& g, size_t first) {
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
      child_after_fork(parent_);  // dies with the parent, even of SIGKILL
      close(sv[0]);
      for (const auto& o : groups_)  // the other zygotes must see end-of-file when the parent closes
        if (o.sock >= 0) close(o.sock);
      try {
        zygote_main(sv[1], first, g.tasks.size() == 1, prepare_, child_);
      } catch (...) {
        // Never unwind into the parent's frames (the ZygotePool's destructor is the parent's).
      }
      std::_Exit(5);
    }
    register_child(pid);
    close(sv[1]);
    g.pid = pid;
    g.sock = sv[0];
  }

  // Starts tasks (and their groups' zygotes) while fewer than `jobs` run.
  void dispatch() {
    while (next_ < count_ && running_ < std::max(1, jobs_)) {
      const size_t task = order_[next_++];
      if (state_[task] != kWaiting) continue;  // its zygote died
      stop_if_interrupted();
      Group& g = groups_[group_[task]];
      if (g.pid == 0) start(g, task);
      state_[task] = kRunning;
      ++running_;
      const ZygoteRun m = task;
      send(g.sock, &m, sizeof m, MSG_NOSIGNAL);  // a zygote gone: its end-of-file below fails the task
    }
  }

  // Waits for the zygotes' next messages and handles them.
  void wait_for_ends() {
    std::vector<pollfd> fds;
    std::vector<Group*> of;
    for (auto& g : groups_)
      if (g.sock >= 0) {
        fds.push_back({g.sock, POLLIN, 0});
        of.push_back(&g);
      }
    const int n = poll(fds.data(), fds.size(), -1);
    stop_if_interrupted();  // its zygotes were ended by the interruption, not by a failure
    if (n < 0) {
      if (errno == EINTR) return;
      throw Error(fmt::format("poll failed: {}", std::strerror(errno)));
    }
    for (size_t k = 0; k < fds.size(); ++k)
      if (fds[k].revents) receive(*of[k]);
  }

  // One message of g's zygote: a task's end, or end-of-file.
  void receive(Group& g) {
    ZygoteEnded m{};
    const ssize_t r = recv(g.sock, &m, sizeof m, 0);
    if (r < 0 && errno == EINTR) return;
    if (r == static_cast<ssize_t>(sizeof m) && m.task < count_ &&
        group_[m.task] == static_cast<size_t>(&g - groups_.data()) && state_[m.task] == kRunning) {
      if (m.fork_errno != 0) throw Error(fmt::format("fork failed: {}", std::strerror(m.fork_errno)));
      end_task(m.task, failure_of(m.status));
      if (++g.ended == g.tasks.size()) reap(g);
      stop_if_interrupted();
      return;
    }
    // End-of-file (or nonsense): the zygote is gone before its tasks ended; they end with it. Unless an
    // interruption ended it: then the watcher ends this process (its tasks must not be reported as failed,
    // which would race the watcher's exit status and last line with an error of their own).
    const int status = reap(g);
    stop_if_interrupted();
    std::string why = failure_of(status);
    // A group of one task ran it in its zygote (zygote_main's `solo`): its exit is the task's end.
    if (g.tasks.size() == 1 && state_[g.tasks[0]] == kRunning) {
      end_task(g.tasks[0], why);
      ++g.ended;
      return;
    }
    if (why.empty()) why = "the simulation process exited before its result";
    for (size_t task : g.tasks)
      if (state_[task] != kEnded) {
        end_task(task, why);
        ++g.ended;
      }
  }
};

}  // namespace

std::vector<std::string> run_forked_groups(size_t count, int jobs,
                                           const std::function<std::string(size_t)>& group_of,
                                           const std::function<void(size_t)>& prepare,
                                           const std::function<void(size_t)>& child,
                                           const std::function<void(size_t)>& on_done) {
  ZygotePool pool(count, jobs, group_of, prepare, child, on_done);
  return pool.run();
}

}  // namespace vitsim::sim
