#pragma once
// SimGrid's engine as vitsim runs it, and the hand-off of a loaded platform to forked children. SimGrid
// allows one engine per process: simulate_point (simulate.hpp) makes one per call; predict and plan make one
// per platform in a zygote process (process_pool.hpp, ForkedPoints::prepare) and simulate each point on it in
// a child forked from the zygote (simulate_prepared).
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/platform/platform.hpp"

namespace simgrid::s4u {
class Engine;
}

namespace vitsim::sim {

class LatencyModel;  // sim/fabric/latency_model.hpp

// Each actor's stack (SimGrid contexts/stack-size, KiB). Measured: every shipped scenario runs in 8 KiB
// stacks with a guard page (where an overflow faults); 128 KiB leaves a margin of 16.
inline constexpr int kActorStackKiB = 128;

// SimGrid's engine as vitsim runs it (the network model's alpha-beta recipe, actor stacks): for every engine
// that simulates (simulate_point, the tests of collectives and platforms).
void configure_engine(simgrid::s4u::Engine& e);

// Loads the platform at `path` (the file `facts` were read from) with SimGrid in a throwaway child process:
// SimGrid 3.32 aborts with a backtrace (or segfaults) on some faults instead of throwing. A death becomes
// Error("<where>: SimGrid cannot load the platform: <its one-line reason>"). A flat-star file
// (facts.flat_layout) is checked by its reader instead, in this process, and its description returned (to
// keep in facts.flat: nothing reads the file again; facts.flat itself when the caller read it already, as
// PlatformCache does from the text its facts came from); null otherwise. Once per path in a process and the
// children it forks afterwards (predict's and plan's PlatformCache check each platform in the parent, before
// the points fork): a path checked before returns facts.flat.
std::shared_ptr<const FlatPlatform> check_platform_loads(const std::string& path, const PlatformFacts& facts,
                                                         const Origin& where);
// Where a platform that does not load is reported: the platform file, or the what-ifs that edited it.
Origin platform_origin(const Scenario& s, const PlatformFacts& facts);

// A SimGrid engine with the platform loaded (configure_engine, load_platform, apply_link_transports:
// sim/fabric/platform_build.hpp), made once in a zygote, each point simulated on it in a child forked from
// the zygote (simulate_prepared), which inherits the loaded platform instead of parsing and building it
// again. An engine runs one point (SimGrid runs an engine once): each child has its own copy.
struct PreparedEngine {
  PreparedEngine();
  ~PreparedEngine();
  PreparedEngine(const PreparedEngine&) = delete;
  PreparedEngine& operator=(const PreparedEngine&) = delete;

  std::string platform;            // the cluster.platform it loaded
  std::vector<std::string> notes;  // apply_link_transports's: the first notes of each point
  std::exception_ptr error;        // what loading threw: each point rethrows it after its own checks
  std::vector<std::string> args;   // the engine's command line, kept with the engine
  std::vector<char*> argv;
  std::unique_ptr<simgrid::s4u::Engine> engine;  // null when `error`
  // The links' latencies taken over by vitsim (sim/fabric/latency_model.hpp), after the transports: made
  // once with the engine, so that each child forked from a zygote inherits it instead of walking every link
  // again (docs/benchmarks.md "Prediction intervals (issue 26)"); null when `error`.
  std::unique_ptr<LatencyModel> latency;
  bool used = false;  // it ran a point
};
// Never throws for the platform: a platform that fails to load is kept in `error` (each point of it then
// fails with what simulate_point would have thrown). `s` is any point of the platform (its origin for
// errors).
std::unique_ptr<PreparedEngine> prepare_engine(const Scenario& s, const PlatformFacts& facts);

}  // namespace vitsim::sim
