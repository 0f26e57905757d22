#include "vitsim/sim/process_pool.hpp"
#include "vitsim/sim/simulate.hpp"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "vitsim/core/error.hpp"
#include "vitsim/core/io.hpp"

namespace vitsim::sim {

std::vector<std::string> run_forked(size_t count, int jobs, const std::function<void(size_t)>& child,
                                    const std::function<void(size_t)>& on_done) {
  std::vector<std::string> failures(count);
  std::map<pid_t, size_t> running;
  size_t next = 0, done = 0;
  std::fflush(nullptr);  // a child must not flush the parent's buffered output a second time
  const pid_t parent = getpid();
  // An exception (or an interruption) must not leave children running: end and reap them.
  struct Reaper {
    std::map<pid_t, size_t>& running;
    ~Reaper() {
      for (const auto& [pid, idx] : running) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        unregister_child(pid);
      }
    }
  } reaper{running};
  while (done < count) {
    while (next < count && static_cast<int>(running.size()) < std::max(1, jobs)) {
      stop_if_interrupted();
      pid_t pid = fork();
      if (pid < 0) throw Error(fmt::format("fork failed: {}", std::strerror(errno)));
      if (pid == 0) {
        child_after_fork(parent);  // dies with the parent, even of SIGKILL
        try {
          child(next);
        } catch (...) {
          // Never unwind into the parent's frames: their destructors (a TempDir) are the parent's.
        }
        std::_Exit(5);  // child() must not return
      }
      register_child(pid);
      running[pid] = next++;
    }
    int status = 0;
    pid_t pid = waitpid(-1, &status, 0);
    stop_if_interrupted();  // its children were ended by the interruption, not by a failure
    if (pid < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("waitpid failed: {}", std::strerror(errno)));
    }
    unregister_child(pid);
    auto it = running.find(pid);
    if (it == running.end()) continue;
    const size_t idx = it->second;
    running.erase(it);
    ++done;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      failures[idx] = WIFSIGNALED(status) ? fmt::format("the simulation process died of signal {}", WTERMSIG(status))
                                          : fmt::format("the simulation process exited with status {}", WEXITSTATUS(status));
    if (on_done) on_done(done);
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
    failures = run_forked(
        count, how.jobs > 0 ? how.jobs : default_jobs(),
        [&](size_t i) {
          json j;
          try {
            j = result_of(i);
          } catch (const std::exception& e) {
            j = json{{"error", e.what()}};
          }
          finish_child(out_of(i), j.dump());
        },
        [&](size_t done) { progress.update(done, count, how.what); });
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
