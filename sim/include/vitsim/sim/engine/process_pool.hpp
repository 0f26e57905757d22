#pragma once
// SimGrid allows one engine per process: predict and plan run every point in a forked child, up to
// `jobs` at once. This is the pool they share, with its gather (gather_forked), progress line and the
// platforms of the points.
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/platform/platform.hpp"

namespace vitsim::sim {

// Runs tasks 0..count-1, task i in a child process that calls child(i) and must end with std::_Exit.
// Returns, per task, "" when its child exited with status 0, else what happened to it ("the simulation
// process died of signal N", "... exited with status N"); `on_done(done)` runs in the parent after each task
// ends (for progress lines). Tasks that share preparations (predict's and plan's points of one platform
// file) share a group: the tasks with the same group_of(i) run in children of one zygote process, forked
// from the parent when the group's first task is due, which calls prepare(first task of the group) once and
// then forks child(i) for each task of the group; a child inherits what prepare built (a loaded SimGrid
// platform). Groups run in the order of their first task, tasks in order within a group; at most `jobs`
// tasks run at once over all groups (a zygote preparing is not a task). A zygote that dies fails its tasks
// not yet ended with its own death. prepare must not throw (its zygote exits with status 5, failing its
// tasks).
std::vector<std::string> run_forked_groups(size_t count, int jobs,
                                           const std::function<std::string(size_t)>& group_of,
                                           const std::function<void(size_t)>& prepare,
                                           const std::function<void(size_t)>& child,
                                           const std::function<void(size_t)>& on_done);

// When a progress line is due. On a terminal every update redraws one line (after the first second).
// Elsewhere (a log file, a CI job's pipe) each update is a new line, so they are rate-limited: the first
// after one second, then at most one per 10 s unless another tenth of the work is done, and always the
// last one (done == total) once any was shown or the work took over a second.
struct ProgressPace {
  bool tty = false;
  double last_t = -1;                             // seconds when the last line was printed (-1: none yet)
  size_t last_done = 0;                           // its count
  bool due(double t, size_t done, size_t total);  // updates last_* when it answers true
};

// The progress line on stderr: silent for the first second, then "WHO: done/total WHAT, elapsed, left"
// (paced by ProgressPace).
class ProgressLine {
 public:
  ProgressLine(std::string who, bool enabled);
  ~ProgressLine();  // ends the line on a terminal
  void update(size_t done, size_t total, const std::string& what = "points");

 private:
  std::string who_;
  bool enabled_, shown_ = false;
  ProgressPace pace_;
  std::chrono::steady_clock::time_point start_;
};

int default_jobs();  // the machine's cores

// The platforms of predict's and plan's points, each read once, when a point first needs it; a missing
// file is an error at the scenario's cluster.platform.
class PlatformCache {
 public:
  const PlatformFacts& of(const Scenario& s);
  const std::map<std::string, PlatformFacts>& all() const { return facts_; }

 private:
  std::map<std::string, PlatformFacts> facts_;
};

// The one fork/gather of predict and plan. How the points run: up to `jobs` children at once (0: the
// machine's cores), a progress line "WHO: done/total WHAT" when `progress`, results in a TempDir of `prefix`.
struct ForkedPoints {
  std::string who;
  std::string what = "points";
  bool progress = true;
  int jobs = 0;
  std::string prefix = "vitsim-";
  // Zygotes (run_forked_groups): the points with the same group_of(i) (their platform file) share one
  // prepare(i), made in a zygote process before their children fork from it. Empty: one group, nothing
  // prepared.
  std::function<std::string(size_t)> group_of;
  std::function<void(size_t)> prepare;
};

// What one forked point handed back: its result, or why it has none (`error` not empty).
struct ForkedResult {
  nlohmann::json result;
  std::string error;  // result_of's Error message, or what happened to its process ("the simulation ...")
  bool process_failed = false;  // the process died or wrote nothing (error does not name the point)
  bool ok() const { return error.empty(); }
};

// Runs result_of(i) for i in 0..count-1, each in a forked child, and returns what each returned or why it
// failed, in order: one point that throws or whose process is killed (an out-of-memory kill) fails alone,
// the others' results are kept. The children of a group fork from its zygote (run_forked_groups).
std::vector<ForkedResult> gather_forked_each(size_t count, const ForkedPoints& how,
                                             const std::function<nlohmann::json(size_t)>& result_of);
// gather_forked_each, all or nothing: the first failure is thrown as an Error, result_of's own message or
// "NAME: the simulation process ..." with name_of(i).
std::vector<nlohmann::json> gather_forked(size_t count, const ForkedPoints& how,
                                          const std::function<nlohmann::json(size_t)>& result_of,
                                          const std::function<std::string(size_t)>& name_of);
// The one-line error of a failed point, as gather_forked throws it.
std::string forked_error(const ForkedResult& r, const std::string& name);

// Ends a child of run_forked_groups: writes `payload` to `out_path` atomically, then exits (status 4 when the
// file cannot be written, 0 otherwise).
[[noreturn]] void finish_child(const std::string& out_path, const std::string& payload);

}  // namespace vitsim::sim
