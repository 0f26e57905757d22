#pragma once
// `vitsim collective`: what nccl-tests' *_perf binaries would print on a platform, predicted. Every size of
// the sweep runs one collective over the placed ranks as SimGrid transfers over the platform's links (the
// registry's algorithm for all_reduce, reduce_scatter and all_gather: collective.hpp), one size after the
// other in one engine; its time is from the instant every rank is there to the last rank's end. The table
// and its arithmetic (counts, algbw, busbw) are core's (core/results/nccl_table.hpp).
#include <string>
#include <vector>

#include "vitsim/core/results/nccl_table.hpp"

namespace vitsim::sim {

// What one host thread spends launching one GPU's NCCL call (enqueue and kernel launch), which nccl-tests'
// timed loop pays per GPU it drives: with -g G in one thread (src/common.cu: every iteration is one
// ncclGroupStart, a call per GPU, ncclGroupEnd) an iteration takes at least G of these, whatever the size;
// with a process per GPU (-g 1) one. Public measurement: NVIDIA/nccl-tests#123 (DGX A100, NCCL_ALGO=Ring,
// NCCL_MAX_NCHANNELS=1, 8-128 B, all_reduce_perf -g N in one process): 16.88, 20.8, 25.2, 29.5, 33.7 us for
// N = 4 ... 8, i.e. 4.2 us per GPU (NCCL's own latency grows 1.2 us a GPU there). Range 3.4-6.1 us: the
// corpus's -g 8 and -g 2 runs flat over their small sizes (Azure ND H100 v5 27 us / 8, ND H200 v5 30.5 / 8,
// ND A100 v4 43 / 8, a 2080 Ti pair 12.2 / 2; docs/sources.md "A host thread's launch of an NCCL call").
// The host's CPU and driver set it: --launch-cost states another machine's.
constexpr double kNcclLaunchPerGpuS = 4.2e-6;

struct CollectiveBench {
  std::string platform;            // SimGrid platform file
  int nodes = 0;                   // nodes used; 0: every node of the platform (or of `hosts`)
  int gpus_per_node = 0;           // GPUs used on each node; 0: every GPU of the first node used
  std::vector<std::string> hosts;  // node names in the order ranks fill them; empty: the platform's order
  NcclTest func = NcclTest::AllReduce;
  std::string type = "float";      // nccl-tests' -d name
  std::string redop = "sum";       // nccl-tests' -o name (no effect on the time)
  int root = 0;                    // broadcast's root rank
  std::string algorithm = "auto";  // a collective of the registry (collective_names())
  std::string nccl_version;        // "auto": NCCL's tuner tables (nccl_versions()); "" = the newest
  std::string nccl_algo;           // "auto": NCCL_ALGO's syntax; "" = NCCL's default
  std::string nccl_proto;          // "auto": NCCL_PROTO's syntax
  int nccl_min_channels = 0;       // "auto": NCCL_MIN_NCHANNELS; 0 = NCCL's default
  int nccl_max_channels = 0;       // "auto": NCCL_MAX_NCHANNELS
  NcclSweep sweep;
  // The GPUs one host thread drives (nccl-tests' -g with -t 1): each size takes at least gpus_per_thread x
  // launch_cost_s (kNcclLaunchPerGpuS's comment). 1: a process per GPU, as mpirun ... -g 1 and training.
  int gpus_per_thread = 1;
  double launch_cost_s = kNcclLaunchPerGpuS;
  double max_memory = 0;  // bytes the simulation may take (--max-memory); 0: half of this machine's memory
  bool progress = true;   // a progress line on stderr for runs longer than a second
};

// What the bench will take, estimated before anything is built (issue 39 item 2: alltoall on 4,096 ranks ran
// into std::bad_alloc): the transfers one size keeps in flight at once (alltoall: every ordered pair; the
// others a few per rank), the simulation's memory at the largest of them and its CPU time over the sizes.
struct BenchCost {
  double flows = 0;         // transfers in flight at once, at most
  double memory_bytes = 0;  // the simulation's memory
  double cpu_s = 0;         // the simulation's CPU time, all sizes (about c x flows^2 a size)
};
BenchCost estimated_bench_cost(NcclTest func, int ranks, int platform_hosts, size_t sizes);

// Checks the bench against its platform (nodes, GPUs per node, hosts, root, algorithm, sizes) and simulates
// it. Throws Error; messages name the flags of `vitsim collective` (--nodes, -g, --hosts, -r, --collective).
NcclTable run_collective_bench(const CollectiveBench& b);

}  // namespace vitsim::sim
