#pragma once
// The real trainer's entry point, without Torch: app/ calls this and never sees LibTorch.
#include <string>
#include <vector>

#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/results/report.hpp"

namespace vitsim::real {

// A deliberate failure, for the tests of the fault paths: after optimizer step `step` (counted over
// the whole run, after that step's checkpoint), rank `rank` (-1: every rank) is killed (SIGKILL),
// hangs (sleeps forever) or exits with status 17; "nan" instead makes rank `rank`'s loss NaN in step
// `step` (before its backward), as a diverging run would.
struct FaultInjection {
  std::string kind;  // "", "kill", "hang", "exit", "nan"
  long long step = 0;
  int rank = -1;
};
FaultInjection parse_fault(const std::string& text);  // "kill:STEP[:RANK]"; throws Error

// Intra-op threads of one rank. requested > 0 is taken as given; 0 means the node's cores / its local
// ranks, but no more than the CPUs this process may run on (mpirun binds each rank to one core when it
// starts two or fewer, so 1 rank x 2 threads would share one core). warning is non-empty when the
// threads exceed those CPUs or the binding leaves cores of the rank's share unused.
struct ThreadPlan {
  int threads = 1, allowed_cpus = 1, share = 1;  // share: cores / local ranks
  std::string warning;
};
ThreadPlan plan_threads(int requested, int local_size);

struct TrainOptions {
  std::string report_path;  // report JSON, written by rank 0 (temp file + rename); "" = none
  std::string trace_path;   // Chrome trace JSON (core/results/trace.hpp; rank 0 writes it); "" = none
  std::string trace_ranks;  // --trace-ranks LIST (core's parse_rank_list); "" = the first 64 ranks
  bool resume = false;      // continue from run.checkpoint_dir's checkpoint
  // Each rank writes its final parameters as raw little-endian fp32 in parameter order to
  // PREFIX.rank<R>.bin: the tests compare replicas and runs with it. "" = none.
  std::string save_params;
  FaultInjection fault;
  std::string command;  // the command line, for the report's provenance
  bool verbose = true;  // rank 0 prints one line per epoch
};

// Trains every point (one after another) on the processes of the current MPI job and returns the
// measured report (complete on every rank). Throws Error on bad input; a rank that dies or hangs
// makes the others abort the job after run.timeout.
Report train(const std::vector<Scenario>& points, const std::string& scenario_name,
             const TrainOptions& options);

class World;  // vitsim/real/comm.hpp
// One scenario point trained on the ranks of `world` (what `train` does per point, without the report file,
// the trace or the sweep's lines): `vitsim calibrate` measures the trainer's own step with it (its step
// phase). Every rank calls it; every rank gets the point.
ReportPoint train_point_on(World& world, const Scenario& s, const TrainOptions& options);

// Makes glibc's malloc keep the memory this process frees instead of handing it back to the kernel
// (mallopt: M_MMAP_THRESHOLD, M_TRIM_THRESHOLD and M_TOP_PAD at 1 GiB). PyTorch's CPU allocator takes
// every tensor from malloc and frees it at once, so with glibc's defaults each training step maps its
// activations afresh and faults every page in again. Called once at the start of `vitsim train` (train
// below) and `vitsim calibrate`, before any tensor exists. Returns false if glibc refused a setting.
bool keep_freed_memory();

// On two cores LibTorch's OpenMP pool (libgomp) and OpenBLAS's own pthread pool take turns: libgomp's
// default lets its idle threads spin (GOMP_SPINCOUNT) while OpenBLAS's threads wait for the cores, and
// a training step took 0.99 s instead of 0.42 s (docs/benchmarks.md). OMP_WAIT_POLICY=PASSIVE makes them
// sleep. libgomp reads the variable only as the program loads, so when it is unset this sets it and
// re-executes the process (/proc/self/exe with the same arguments); it does not return then. A value
// the user set is kept (OMP_WAIT_POLICY=ACTIVE measures the old behaviour). Called first thing by
// `vitsim train` and `vitsim calibrate`, before MPI or any thread starts. Returns false when it did
// nothing (already set, or the exec failed).
bool ensure_passive_openmp();

// Reads a file written through TrainOptions::save_params.
std::vector<float> read_saved_params(const std::string& path);

}  // namespace vitsim::real
