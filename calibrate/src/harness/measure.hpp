#pragma once
// The Torch side of calibration (bench_*.cpp, kernels_*.cpp), behind a header without Torch: the LibTorch
// benchmarks the phases (phases.hpp) run, timed through the harness (harness.hpp).
#include <string>
#include <vector>

#include "harness/harness.hpp"
#include "vitsim/calibrate/calibrate.hpp"

namespace vitsim::calibrate {

struct LayerSpread {
  std::string name;  // core's layer names: patch_embed, block<i>.attn, block<i>.mlp, head
  Spread fwd, bwd;
};
struct ComputeSample {
  int micro_batch = 0;
  Spread fwd, bwd, optimizer;       // whole model, as the trainer times its phases (loss in fwd)
  std::vector<double> step_s;       // forward + backward of each timed iteration, in order (step_cv_of)
  std::vector<LayerSpread> layers;  // layer by layer (each layer's input detached; shares only)
};
struct CopySample {
  double bytes = 0;
  Spread pinned_s, pageable_s;  // seconds per copy
  bool on_cpu = true;           // a memcpy into a fresh tensor: no device
};
struct DeviceInfo {
  std::string device;    // "cpu" or "cuda:<i>"
  std::string name;      // CUDA device name, or "cpu"
  int threads = 0;       // intra-op threads
  double mem_bytes = 0;  // device memory (CUDA), else 0
  int sm_count = 0;      // CUDA multiprocessors (cudaDeviceGetAttribute when the runtime is loaded), else 0
};
// One op benchmark timed: the mean (kept, as the compute phase keeps means) and the spread of its
// timed runs. `how` says which LibTorch kernel stood for it ("addmm", "bmm", "native_layer_norm", ...;
// "copy (generic)" for an op name without its own kernel here); `skipped` when none can (a fused
// attention op on a LibTorch without scaled_dot_product_attention).
struct OpTiming {
  Spread seconds;
  std::string how;
  bool skipped = false;
  int copies = 1;           // input sets run in turn (cold operands)
  double round_median = 0;  // the median over the rounds of each round's mean: the op's time
  int rounds = 0;
};

// Opens the scenario's device (run.device), sets the intra-op threads (run.threads, else cores / local
// ranks; OpenBLAS's to the same number) and seeds Torch.
DeviceInfo open_device(const Scenario& s, int local_rank, int local_size);
// `ranks` is the world size: the optimizer phase divides the gradients by it, as the trainer does.
ComputeSample measure_compute(const Scenario& s, const DeviceInfo& device, int micro_batch,
                              const Repeats& repeats, int ranks);
// Times every op of `list` (calibrate.hpp op_benchmarks) alone with real LibTorch kernels on the device,
// with the threads open_device set, in `rounds` passes over the whole list (each op's inputs made anew
// each round): per op and round `repeats.warmup` runs thrown away, then timed runs (in all at least
// `repeats.iters`, more for ops under 1 ms so each gets ~20 ms of runs, fewer for slow ones so each takes
// at most ~0.25 s, never under 3 a round), each run between two clock reads (on CUDA the device synchronised
// at both). An op's time is the median over the rounds of each round's mean: a shared machine slows down for
// seconds at a time (memory bandwidth seen from 18 to 48 GB/s within minutes), and a slow spell then
// spoils one round of the ops it covers, not their figure. Model ops allocate their outputs as the
// trainer's ops do; sweep ops write into preallocated outputs (the device's own throughput). With
// cold_bytes > 0 (on a CPU device) each op gets ceil(cold_bytes / its bytes) sets of inputs (at most 64),
// run in turn, so that its operands come from memory as inside a training pass (docs/calibrate-validate.md);
// warm-up covers every set once. Same order as `list`.
std::vector<OpTiming> measure_ops(const Scenario& s, const DeviceInfo& device,
                                  const std::vector<OpBenchmark>& list, const Repeats& repeats,
                                  double cold_bytes = 0, int rounds = 1);
// The best rate (FLOP/s) of a 1024 x 1024 x 1024 GEMM (LibTorch's mm, in the precision's matmul dtype on a
// GPU, fp32 on a CPU) over the timed runs: the peak the emitted platform states (a training step's rate,
// which includes every non-GEMM op, sits below it, and a measured run's MFU against it stays under 1).
double measure_gemm_rate(const DeviceInfo& device, Precision p, const Repeats& repeats);
CopySample measure_copy(const DeviceInfo& device, double bytes, const Repeats& repeats);
std::string torch_version();

}  // namespace vitsim::calibrate
