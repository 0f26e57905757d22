#pragma once
// The measurement harness of `vitsim calibrate`, in the manner of nccl-tests' common.cu: every quantity gets
// warm-up runs that are thrown away, then repeated timed runs, summarised by their median and spread
// (spread_of, calibrate.hpp); the environment of the run is recorded once (Environment). No Torch, no MPI:
// both the LibTorch benchmarks (bench_*.cpp) and the phases (phase_*.cpp) time through it.
#include <array>
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace vitsim::calibrate {

using Clock = std::chrono::steady_clock;

// How often one quantity is run: `warmup` runs thrown away, then `iters` timed.
struct Repeats {
  int warmup = 0, iters = 0;
};

// Runs `once(timed)` warmup + iters times, `timed` false for the warm-up runs.
template <class Once>
void repeat_runs(const Repeats& r, Once&& once) {
  for (int it = 0; it < r.warmup + r.iters; ++it) once(it >= r.warmup);
}

// Runs `once()` warmup + iters times; each run measures N phases (a training step: forward, backward,
// optimizer) and returns them. The timed runs' values, per phase.
template <size_t N, class Once>
std::array<std::vector<double>, N> timed_phases(const Repeats& r, Once&& once) {
  std::array<std::vector<double>, N> out;
  repeat_runs(r, [&](bool timed) {
    const std::array<double, N> v = once();
    if (timed)
      for (size_t p = 0; p < N; ++p) out[p].push_back(v[p]);
  });
  return out;
}

// Runs `once()` warmup + iters times; the timed runs' values (seconds, or a rate).
template <class Once>
std::vector<double> timed_runs(const Repeats& r, Once&& once) {
  return timed_phases<1>(r, [&] { return std::array<double, 1>{once()}; })[0];
}

// What a run records of the machine it measured on, read once when it starts.
struct Environment {
  std::string cpu;              // /proc/cpuinfo's model name ("unknown")
  double mem_total_bytes = 0;   // /proc/meminfo's MemTotal (0: unknown)
  double last_level_cache = 0;  // the largest data or unified cache of CPU 0, bytes (0: sysfs does not say)
  std::string mpi;              // the MPI library's version line
  std::string torch;            // the LibTorch version
};

}  // namespace vitsim::calibrate
