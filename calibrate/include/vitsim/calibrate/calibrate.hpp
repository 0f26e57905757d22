#pragma once
// `vitsim calibrate`: micro-benchmarks on real nodes that become a calibration file (schema
// vitsim.calibration/2, core/formats/calibration.hpp) and, on request, a platform file for the machines
// measured.
//
// Measured in the manner of nccl-tests: every quantity gets warm-up runs that are thrown away, then
// repeated timed runs; the printed table and the details file show the median and the spread. For
// compute the file keeps the mean over the timed iterations (as nccl-tests' average over its loop):
// the trainer reports mean phase times, and on a shared machine the delays are one-sided (a rank is
// only ever slowed down), so the median would sit below the mean a training run measures.
// All-reduce and copies keep the median (their per-size fit should not follow single outliers).
// - compute: forward and backward of the scenario's ViT, whole and layer by layer, and the optimizer
//   step, at several micro-batch sizes, with LibTorch on the rank's device (wall clock on CPU, the
//   device synchronised before each clock read on CUDA), all ranks at once as in training;
// - all-reduce: time against message size with the trainer's own communicator (MPI on CPU ranks),
//   as algbw = S / t and busbw = algbw * 2(n-1)/n, fitted to t = 2(n-1) a + 2(n-1)/n S / B;
// - host-to-device copies (on CPU: a memcpy into a freshly allocated tensor, pinned = pageable);
// - loader throughput of one worker for the scenario's dataset and resize;
// - the op model (core/model/ops.hpp): every op of one layer of each kind at the calibration micro-batches
// and a
//   device sweep, each timed alone with the LibTorch kernel that stands for it, all ranks at once; per
//   device type the efficiencies per op class, host time per op, GEMM tile and k_half fitted to them
//   (fit_op_model), stored as Calibration::op_models so one calibration carries to other ViT shapes.
// This header has no Torch and no MPI: app/ and the tests include it.
#include <functional>
#include <string>
#include <vector>

#include "vitsim/core/formats/calibration.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/platform/platform_writer.hpp"

namespace vitsim::calibrate {

// ---- statistics and fits (pure; unit-tested) ----

// Mean, median and spread of repeated timings. Throws Error on an empty sample.
struct Spread {
  double mean = 0, median = 0, min = 0, max = 0, p25 = 0, p75 = 0;
  int count = 0;
  double rel_iqr() const { return median > 0 ? (p75 - p25) / median : 0; }  // (p75 - p25) / median
};
Spread spread_of(std::vector<double> values);

// nccl-tests conventions (docs/sources.md "Collectives", nccl-tests bandwidths): algbw = S / t;
// all-reduce busbw = algbw * 2(n-1)/n.
double algbw(double bytes, double seconds);
double busbw_allreduce(double bytes, double seconds, int ranks);

struct AllreduceSample {
  double bytes = 0;
  double seconds = 0;  // median time of one all-reduce
};
struct RingFit {
  double latency_s = 0;         // a: per ring step
  double bandwidth = 0;         // B: bytes/s of one ring edge
  double max_rel_residual = 0;  // largest |fit - measured| / measured over the samples
};
// Least squares on t = 2(n-1) a + 2(n-1)/n S / B, each sample weighted by 1/t^2 (relative residuals,
// so a 4 KiB sample counts as much as a 64 MiB one). A negative latency intercept (possible when small
// messages take a faster protocol) is clamped to 0 and B refitted through the origin. Needs n >= 2
// and two distinct sizes; throws Error otherwise.
RingFit fit_ring_allreduce(const std::vector<AllreduceSample>& samples, int ranks);
// The fit's prediction for S bytes.
double ring_allreduce_time(const RingFit& f, double bytes, int ranks);

// ---- the op model's fit (core/model/ops.hpp) ----

// One op of the op model and its measured time on a device (mean of the timed runs, pooled over ranks).
struct OpSample {
  vitsim::Op op;
  double seconds = 0;
};
// The ops `vitsim calibrate` times for the fit. First the scenario's model at each micro-batch:
// layer_ops of the patch embedding, the first attention layer, the first MLP layer and the head (the
// blocks repeat), tagged with their micro-batch. Then a device sweep (micro_batch 0) so the fit sees
// more shapes than one ViT has: GEMMs C[m, n] = A[m, k] B[k, n] with m in {sweep_rows, 256, 1024, 4096}
// and n, k in {32, 64, ..., 2048} (every other (n, k) in a checkerboard, at most 2^32 FLOPs each),
// batched matmuls [B H, T, hd] x [B H, hd, T] and [B H, T, T] x [B H, T, hd] for hd in {16, 32, 64},
// T in {17, 65, 197}, B H in {64, 256}, and copies ("sweep.copy.<bytes>": one tensor read, one written)
// and adds ("sweep.add.<bytes>": two read, one written) of 64 KiB per tensor upwards, x4 apart, up to
// the first size of at least 64 MiB and twice `llc_bytes` (the last-level cache; 0 = unknown), so that
// the largest copies move at least 4x the cache: the reference bandwidth is taken from those. Last the
// kernel-family sweeps (core/model/ops.hpp OpKind), operands cold and each output a fresh block (earlier
// outputs kept alive, as a pass keeps its activations): softmax and its backward at row
// lengths 17, 65, 197, LayerNorm and its backward at widths 64-1024, GELU and its backward, sums over rows
// ("reduce") at widths 64-1024 and permuted gathers ("strided": [B, D, N] read, [N, B, D] written; B, D
// and N in the op's batch, m and n), each at about 2^18 and 2^20 elements.
// GEMM tensors in the precision's matmul dtype (2 bytes under fp16/bf16), the copies in fp32.
struct OpBenchmark {
  vitsim::Op op;
  int micro_batch = 0;  // 0: the device sweep
};
std::vector<OpBenchmark> op_benchmarks(const Workload& w, const std::vector<int>& micro_batches, Precision p,
                                       int sweep_rows, double llc_bytes = 0);
// A cache size as /sys/devices/system/cpu/cpu0/cache/index*/size writes it ("32768K", "2M", "512"):
// bytes; 0 when it cannot be read.
double parse_cache_size(const std::string& text);
// What the fit predicts for one op measured alone: run_ops({op}, f).end_s, i.e. host_op_s x kernels
// + op_device_time(op, f) (+ sync_s after an op that syncs).
double op_sample_time(const vitsim::Op& op, const DeviceFigures& f);
// Fits a device's op-model figures to measured op times (stage 1 of the op model's calibration). First
// each kernel family's elem_s and row_s from its sweeps (least squares on relative errors, both >= 0);
// then, with those fixed, on the other samples (the convolutions' efficiencies among them):
// gemm_efficiency, attn_efficiency, mem_efficiency and norm_efficiency (each in (0, 1], relative to
// start.peak_flops and start.mem_bw, which stay), host_op_s (the per-kernel fixed cost; kernel_s stays
// start.kernel_s: one op timed alone on a synchronous CPU device cannot tell the two apart, so pass 0
// there), matrix_s (the fixed cost per matrix of a batched matmul, fitted when some matmul sample has
// batch > 1, else start's; a CPU's bmm loops over its matrices, one GEMM call each), gemm_k_half on a grid
// (0, 8, 16, ..., 1024) and the square GEMM tile on a grid (8, 16, 32, 64, 128; sm_count stays
// start.sm_count: the rank's threads on a CPU). It minimises the weighted sum over samples of
// ln(predicted / measured)^2: Levenberg-Marquardt on the logarithms of the six continuous figures for
// each grid point, the best grid point kept (the first on ties: deterministic). Weights: 1 per sample
// (relative errors: a 10 us op counts as much as a 10 ms one), or with weight_by_time each sample's
// measured time (an op's error then counts as much as it adds to a pass). A class without samples keeps
// start's efficiency (norm: start's norm_efficiency, 0 = mem_efficiency); without matmul samples the tile
// and k_half stay start's. Fills samples and the median and largest |predicted - measured| / measured.
// Throws Error on no sample, a non-positive time, or a missing peak_flops (matmul samples) / mem_bw.
struct OpFitOptions {
  bool weight_by_time = false;
  bool square_tiles = true;  // false: tile_m and tile_n on the grid independently
};
OpModelCalibration fit_op_model(const std::vector<OpSample>& samples, DeviceFigures start,
                                const OpFitOptions& options = {});

// Stage 2: the host time per kernel from whole passes. With stage 1's device figures fixed, the
// host_op_s that makes run_ops(pass_ops(w, b)) match the measured forward + backward of the calibration
// shape at each micro-batch b, in the least-squares sense on relative errors. Inside a real pass each op
// costs the framework more than when it is timed alone (autograd nodes for views and reshapes, the
// backward engine, gradient accumulation hooks): stage 1 sees none of it. On a synchronous device (a
// CPU) a pass is device + h x kernels; the passes and the ops are timed at different moments and a
// shared machine's speed drifts in between, so the fit is measured = s x device + h x kernels over the
// micro-batches, s the passes' speed relative to the ops' (reported, not kept: the prediction uses the
// ops' device times), h the host time per kernel; with one pass, or where that gives h < 0, s = 1 and h
// = sum(a_b (1 - device_b / measured_b)) / sum(a_b^2), a_b = kernels_b / measured_b. On an asynchronous
// device a golden-section search over h (s = 1). Clamped at 0. Throws Error on no pass or a non-positive
// time.
struct PassSample {
  int micro_batch = 0;
  double seconds = 0;  // measured forward + backward (mean)
};
struct HostFitPoint {
  int micro_batch = 0;
  double measured_s = 0, device_s = 0, kernels = 0;
  double implied_host_op_s = 0;  // (measured - device) / kernels: this pass alone, s = 1
  double predicted_s = 0;        // run_ops with the fitted host_op_s (s = 1: what a prediction gives)
  double residual = 0;           // (s x device + h x kernels) / measured - 1: the fit's own
};
struct HostFit {
  double host_op_s = 0;
  double speed = 1;             // s: the passes' speed factor against the ops' device times
  double max_rel_residual = 0;  // largest |residual|
  std::vector<HostFitPoint> points;
};
HostFit fit_host_op(const Workload& w, const std::vector<PassSample>& passes, const DeviceFigures& stage1,
                    const OpOptions& o);

// ---- rounds over time (issue 37 item 4; docs/calibrate-validate.md "Noisy rounds") ----

// The round spread beyond which calibrate repeats a phase: 0.10. ASSUMPTION: issue 37 holds an
// uncalibrated point to a median |error| of 10%; rounds of one figure further apart than that leave the
// figure kept (the median round's) uncertain by as much as the model's whole error budget, so the
// calibration adds nothing a catalogue figure would not give. Sensible range 0.05..0.20 (on this shared
// 2-core machine compute rounds spread 15-30% in a quiet spell, issue 37); what would replace it: the rounds'
// spread on a quiet machine measured over many calibrations (bench/validate_local.sh's runs).
inline constexpr double kRoundSpreadLimit = 0.10;
// Rounds added to a phase whose spread exceeds the limit, at most: 2. ASSUMPTION: it bounds a noisy
// calibration's cost at 5/3 of its 3 rounds, and with 4 or 5 rounds the spread around the median round
// (round_spread) leaves out one slow round (a slow spell of seconds spoils one round); what would replace
// it: how long the slow spells of the machine last, against a round's length.
inline constexpr int kMaxRoundRepeats = 2;

// The spread of one figure's rounds about the round kept: with the rounds sorted and the kept one the
// median (index k = (n - 1) / 2, as the phases keep it), (x[k+1] - x[k-1]) / x[k], each neighbour clamped
// to the ends (with 2 rounds (x[1] - x[0]) / x[0], with 3 the whole range over the middle); 0 with fewer
// than 2 rounds. Extra rounds leave a lone slow (or fast) round outside the spread: a phase repeated
// after one slow spell becomes steady, one the machine keeps disturbing does not.
double round_spread(std::vector<double> rounds);
// The step-to-step coefficient of variation of a repeated identical step, from rounds of its times: per
// round the sample standard deviation over the mean (rounds of fewer than 2 steps left out), pooled over
// the rounds as the root mean square; 0 when no round has 2 steps. Within rounds: the rounds run at
// different times, and what the machine's speed does between them moves every rank at once (no rank
// waits for another for it).
double step_cv_of(const std::vector<std::vector<double>>& rounds);
// A device type's step cv (calib.json "step_cv") from its ranks' and micro-batches' step_cv_of: the median,
// and their least and most as its measured spread (issue 37 item 2: what predict --interval samples), each
// capped at 0.999 (the file holds a cv in [0, 1)); low <= value <= high. Throws Error on none.
struct StepCvFigure {
  double value = 0, low = 0, high = 0;
};
StepCvFigure step_cv_figure(const std::vector<double>& cvs);

// The sync span (calib.json spans.sync; docs/calibrate-validate.md "Measured spans"): how far one whole round
// of the step phase puts the gradient sync's rest from the fitted figures predict scales. rests[r][i]: round
// r's rest at calibration micro-batch i (the exposed sync beyond the fitted all-reduce and the compute
// difference; below zero counts as none, as the fit takes it); fitted[i]: the sync fit's rest there
// (fixed_s + per_compute x forward + backward). Per round the ratio of sums, sum_i rest / sum_i fitted: the
// scale of the fitted figures that round alone measures (least squares through the origin, weights 1 /
// fitted), so a micro-batch whose rest is near zero weighs by its size, not as a denominator (the rest is a
// difference of two noisy times of a few ms). low..high: the least and most over the rounds, 1 within them,
// low floored at 0.01 and high capped at 100 (the file's bounds); `rounds` every round's factor. Empty
// (`rounds` empty) with fewer than 2 rounds or nothing fitted (sum of fitted <= 0).
struct SyncSpanFigure {
  double low = 1, high = 1;
  std::vector<double> rounds;
};
SyncSpanFigure sync_span_of(const std::vector<std::vector<double>>& rests, const std::vector<double>& fitted);

// A phase measured in rounds: measure_round() measures one more round (every rank calls it at once);
// spread() the spread of all its rounds so far, the same on every rank (the worst over the ranks and
// micro-batches: every rank then repeats alike).
struct RoundedPhase {
  std::string name;
  std::function<void()> measure_round;
  std::function<double()> spread;
};
struct RoundRules {
  int rounds = 3;  // first rounds of every phase
  int max_repeats = kMaxRoundRepeats;
  double limit = kRoundSpreadLimit;
};
// Runs `rules.rounds` rounds of the phases interleaved over time (round 1 of each phase in turn, then round
// 2, ...), so that a slow spell of the machine spoils one round of a phase, not all of them; then, while a
// phase's spread exceeds the limit and it has repeats left, one more round of each such phase, interleaved
// alike. `say` gets a line for every repeat and for every phase still over the limit after its repeats.
// One check per phase, in order (RoundCheck: rounds, repeats, the last spread, the limit, noisy).
std::vector<RoundCheck> run_rounds(const std::vector<RoundedPhase>& phases, const RoundRules& rules,
                                   const std::function<void(const std::string&)>& say);

// ---- platform file for the machines measured ----

struct PlatformDevice {   // one rank's device as the platform describes it
  std::string gpu_model;  // equals the calibration's device_type
  double flops = 0;       // gpu_flops_fp32: the best measured GEMM rate (FLOP/s), the peak MFU is against
  double mem_bw = 0;      // gpu_mem_bw
  double mem_bytes = 0;   // gpu_mem
  bool cpu = false;       // device_kind cpu: LibTorch runs each op on the issuing host thread
  // The spread of the measured rate over its repeats (and ranks), written as gpu_flops_fp32.range
  // (core/platform/figure_range.hpp) with `flops_why`; 0 = no range written.
  double flops_low = 0, flops_high = 0;
  std::string flops_why{};
  // gpu_efficiency: the measured ViT training rate over `flops` (the roofline fallback runs at that rate).
  double efficiency = 1;
};
struct PlatformNode {
  std::string id;  // cluster id; hosts are <id>-dev0..N-1
  int cpu_cores = 1;
  std::vector<PlatformDevice> devices;  // consecutive devices of one gpu_model form one cluster
  double link_bw = 0, link_lat = 0;     // fitted intra-node ring edge (bytes/s, s)
  double h2d_bw = 0;                    // loopback (host-to-device copy) bandwidth
  // The spread of the measured copy bandwidth over its repeats, written as h2d_pageable_bw.range with
  // `h2d_why`; 0 = no range written.
  double h2d_bw_low = 0, h2d_bw_high = 0;
  std::string h2d_why;
  double loader_image_overhead = 0;  // s per image of one loader worker (0: not stated)
};
struct PlatformText {
  std::string name;  // zone id
  std::vector<PlatformNode> nodes;
  double nic_bw = 0, nic_lat = 0;  // inter-node edge, when nodes > 1
  std::string provenance;          // written into the header comment, one figure per line
};
// The machines as a PlatformSpec (calibrate/src/emit/emit_platform.cpp: one <cluster> per node and device
// type, private links carrying the fitted ring edge, NIC links between clusters), and that spec written by
// core's one writer of the platform format (core/platform/platform_writer.hpp): what `calibrate
// --emit-platform` writes.
PlatformSpec calibrated_platform_spec(const PlatformText& p);
std::string calibrated_platform_xml(const PlatformText& p);

// ---- the measurement run ----

struct Options {
  std::string out;            // calibration JSON (required)
  bool force = false;         // overwrite out / emit_platform
  bool append = false;        // merge into an existing out: replace entries measured again
  std::string emit_platform;  // platform XML ("" = none)
  std::string details;        // every measurement with its spread, JSON ("" = none)
  // The device's name (a platform's gpu_model): one for every rank, or one per rank (ranks that share a
  // name are pooled into one device entry; different names give one entry each, e.g. a slow rank).
  std::vector<std::string> device_types{"cpu"};
  double peak_flops = 0, mem_bw = 0;  // stated datasheet figures for cross-device scaling (0 = unknown)
  int platform_devices = 0;           // devices per node in the emitted platform (0 = the cores)
  std::string link_class;             // "" = intra_node on one host, inter_node across hosts
  std::vector<int> micro_batches;     // empty = the scenario's micro-batch / 2, x1, x2
  std::vector<double> sizes;          // all-reduce message sizes in bytes; empty = 4 KiB..64 MiB x4
  // Largest size the fit uses (0 = what the scenario's trainer reduces per step: the whole fp32
  // gradient). Larger sizes are measured and shown, not fitted: a communicator switches protocols with
  // the size, and one alpha-beta line cannot follow every regime.
  double fit_max_bytes = 0;
  int warmup = 3, iters = 10;  // compute and copies (and the op benchmarks: at least these)
  bool op_model = true;        // time the op benchmarks and fit the op model (Calibration::op_models)
  bool step_phase = true;      // train a few steps per micro-batch: the sync figures (SyncCalibration)
  int loader_batches = 0;      // 0 = enough for ~2048 images
  std::string command;         // for the provenance
  bool verbose = true;
};

// Runs every benchmark on all the ranks of the current MPI job (each rank one device, as `vitsim train`
// places them), writes the files on rank 0 and returns the calibration (complete on every rank).
// Refuses (Error) to overwrite `out` or `emit_platform` without `force`, before measuring anything.
Calibration run(const Scenario& scenario, const Options& options);

}  // namespace vitsim::calibrate
