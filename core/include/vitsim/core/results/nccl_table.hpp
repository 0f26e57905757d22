#pragma once
// nccl-tests' conventions (github.com/NVIDIA/nccl-tests, src/common.cu, src/util.cu and one file per
// collective, read at 2.19.6) as data and arithmetic, without SimGrid: the collectives its *_perf binaries
// time, its -d type names, its sweep of sizes (-b, -e, -f, -i), how each collective turns a size into element
// counts, algbw = size / time and busbw = algbw x the collective's factor (its doc/PERFORMANCE.md), and the
// table it prints. `vitsim collective` (sim/predict/collective_bench.hpp) fills an NcclTable with simulated
// times and prints it here, so that calibrate's nccl-tests reader (calibrate/imports.hpp) reads it as a
// measured log.
#include <string>
#include <vector>

namespace vitsim {

// The tests (collectives) of nccl-tests' all_reduce_perf, reduce_scatter_perf, all_gather_perf, alltoall_perf
// and broadcast_perf, by their binaries' names. Not NCCL's own ncclFunc_t (core/model's tuner, where it
// exists): these are nccl-tests' names and rules, and the tuner's NcclFunc maps from them one to one.
enum class NcclTest { AllReduce, ReduceScatter, AllGather, AllToAll, Broadcast };
std::vector<std::string> nccl_test_names();  // "all_reduce", "reduce_scatter", "all_gather", ...
const char* nccl_test_name(NcclTest f);
NcclTest nccl_test(const std::string& name);  // throws Error listing the valid names
bool nccl_test_reduces(NcclTest f);           // takes a reduction op (-o): all_reduce, reduce_scatter
bool nccl_test_rooted(NcclTest f);            // takes a root (-r): broadcast

// nccl-tests' -d names (NCCL 2.24 and later: with bfloat16 and the two fp8 types) and -o names.
std::vector<std::string> nccl_type_names();
int nccl_type_bytes(const std::string& type);  // throws Error listing the valid names
std::vector<std::string> nccl_redop_names();
void check_nccl_redop(const std::string& op);  // throws Error listing the valid names

// A size as nccl-tests' -b, -e and -i read it: a whole number of bytes with an optional K, M or G (binary:
// 8G = 8 x 2^30). Throws Error("'8X' is not a size: ...") without location.
double parse_nccl_size(const std::string& text);

// The sizes of a run: from min_bytes, times step_factor when it is above 1, else plus step_bytes, while at
// most max_bytes. Throws Error for a sweep that never ends (a factor from 0 bytes, a step of 0) or makes more
// than kMaxNcclSizes sizes.
struct NcclSweep {
  double min_bytes = 8;
  double max_bytes = 8.0 * (1 << 30);
  long long step_factor = 2;
  double step_bytes = 1 << 20;  // nccl-tests' default -i
};
inline constexpr int kMaxNcclSizes = 100000;
std::vector<double> nccl_sizes(const NcclSweep& sweep);

// What nccl-tests prints for a size: `bytes`, the larger of the send and receive buffers (bytes), and
// `count`, the elements of the collective's own count argument (per rank for reduce_scatter and all_gather,
// per peer for alltoall). Where it divides a buffer by the ranks, the count is rounded down to a multiple of
// 16 bytes (nccl-tests since December 2024, commit 29f4114).
struct NcclCounts {
  double bytes = 0;
  long long count = 0;
};
NcclCounts nccl_counts(NcclTest f, double size, int type_bytes, int ranks);

// busbw / algbw: all_reduce 2(n-1)/n, reduce_scatter, all_gather and alltoall (n-1)/n, broadcast 1.
double nccl_bus_factor(NcclTest f, int ranks);

// One row: the printed size and count, the out-of-place and in-place times (seconds).
struct NcclRow {
  double bytes = 0;
  long long count = 0;
  double time_s = 0;
  double in_place_time_s = 0;
};
// One "# Rank" line: rank, the host it runs on (the node), its device index there, a bus id (here the
// platform's host name) and the device's name.
struct NcclDevice {
  int rank = 0;
  std::string host;
  int device = 0;
  std::string bus;
  std::string name;
};
struct NcclTable {
  NcclTest func = NcclTest::AllReduce;
  std::string type = "float";
  std::string redop = "sum";  // printed "none" for the collectives that reduce nothing
  int root = 0;               // printed -1 for the collectives without a root
  int ranks = 0;
  int gpus_per_node = 0;  // nccl-tests' nGpus
  NcclSweep sweep;
  std::vector<std::string> preamble;  // comment lines before nccl-tests' own header (printed after "# ")
  std::vector<NcclDevice> devices;
  std::vector<NcclRow> rows;
  std::vector<std::string> notes;  // comment lines after the footer
};
// nccl-tests' "# Avg bus bandwidth": the mean busbw over the out-of-place and in-place halves of every row
// (GB/s).
double nccl_avg_busbw(const NcclTable& t);
// The text nccl-tests prints (its 2.19 layout without per-iteration or timestamp columns; #wrong "N/A": no
// data is checked).
std::string nccl_table_text(const NcclTable& t);
// The same as JSON, with the keys of nccl-tests' -J output where it has them (times in us, bandwidths in
// GB/s) and "schema": "vitsim.collective/1".
std::string nccl_table_json(const NcclTable& t);

}  // namespace vitsim
