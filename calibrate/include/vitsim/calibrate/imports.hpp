#pragma once
// Measurements users already have, as calibration inputs (`vitsim calibrate --from-nccl-tests FILE`,
// `--from-torch-profile FILE`): the output of nccl-tests' all_reduce_perf and a PyTorch profiler Chrome
// trace of one training step. Pure parsers and fits: no Torch, no MPI (they build without LibTorch).
#include <string>
#include <vector>

#include "vitsim/calibrate/calibrate.hpp"
#include "vitsim/core/formats/calibration.hpp"
#include "vitsim/core/model/ops.hpp"

namespace vitsim::calibrate {

// ---- nccl-tests all_reduce_perf ----

// One row of the table (nccl-tests prints time in us and bandwidths in GB/s = 1e9 B/s).
struct NcclTestsRow {
  int line = 0;
  double bytes = 0;     // size (B)
  long long count = 0;  // elements
  std::string type, redop;
  double oop_time_s = 0, oop_algbw = 0, oop_busbw = 0;  // out-of-place; bandwidths in bytes/s
  double ip_time_s = 0, ip_algbw = 0, ip_busbw = 0;     // in-place
};
struct NcclTestsLog {
  std::string path;
  int ranks = 0;                   // the "#  Rank N ... on HOST device D [...] NAME" lines
  std::vector<std::string> hosts;  // distinct hosts of those lines, first-seen order
  std::string device;              // the device name of rank 0's line ("" when absent)
  std::vector<NcclTestsRow> rows;
  double avg_busbw = 0;  // "# Avg bus bandwidth    : X" (bytes/s)
};
// Parses the text of an all_reduce_perf log. Header and summary lines start with '#'; the column header
// ("# size count type redop [root] time algbw busbw #wrong|error time algbw busbw #wrong|error": 13
// columns in nccl-tests 2.x, 12 before `root` was added) fixes how many columns every row has. Lines
// before the table and NCCL_DEBUG lines ("... NCCL INFO ...", "... NCCL WARN ...") are skipped. Throws
// Error "PATH:LINE: what" on: no column header, a row whose column count differs, a value that is not a
// number, a row with wrong results (#wrong > 0), busbw that is not algbw x 2(n-1)/n (another
// collective's log), no data rows, or a table that stops without the closing "# Avg bus bandwidth"
// line (truncated). The rank count comes from the "# Rank" lines, else from busbw / algbw.
NcclTestsLog parse_nccl_tests(const std::string& path, const std::string& text);

struct NcclImport {
  LinkCalibration link;
  RingFit fit;
  int fitted = 0;           // rows the fit used
  double fitted_up_to = 0;  // bytes of the largest of them
};
// The calibration's link entry from the log, as calibrate's own all-reduce measurement makes it: the
// out-of-place times of the rows up to fit_max_bytes (0 = all rows; at least the two smallest sizes)
// fitted to t = 2(n-1) a + 2(n-1)/n S / B (fit_ring_allreduce). link_class "" = intra_node when every
// rank line names one host, inter_node otherwise (and an Error when the log has no rank lines).
NcclImport import_nccl_tests(const NcclTestsLog& log, double fit_max_bytes, const std::string& link_class);

// ---- PyTorch profiler trace ----

// One training step of a PyTorch profiler trace (torch.profiler's export_chrome_trace, Kineto's JSON).
// Op classes (core/model/ops.hpp): aten::addmm/mm/linear/matmul/conv → gemm, aten::bmm/baddbmm and
// scaled-dot-product attention → attn_matmul (aten::matmul that runs a bmm too), softmax, layer_norm,
// gelu and their backward → norm, every other aten:: op → memory. Only outermost aten:: ops count (an
// aten::linear's inner aten::addmm is not counted twice). With device kernels in the trace (cat "kernel",
// "gpu_memcpy", "gpu_memset"), the times are the kernels' (each classed by the outermost aten:: op that
// launched it, through "External id"; NCCL kernels left out: communication); else the CPU ops'.
struct TorchProfile {
  std::string path;
  bool device = false;               // times from device kernels
  double step_s = 0;                 // the ProfilerStep#N span, else the extent of the ops
  double class_s[4] = {0, 0, 0, 0};  // by OpClass: gemm, attn_matmul, memory, norm (the enum's order)
  double fwd_s = 0, bwd_s = 0, optimizer_s = 0;  // each phase's extent: first op start to last op end
  int ops = 0;                                   // outermost aten:: ops counted
  int kernels = 0;                               // device kernels counted
  double cls(OpClass c) const { return class_s[static_cast<int>(c)]; }
};
// Phases: an op inside "autograd::engine::evaluate_function: ..." is backward, inside "Optimizer.step"
// or "Optimizer.zero_grad" optimizer, inside "enumerate(DataLoader)..." data (left out), else forward.
// Throws Error "PATH: what" on malformed JSON, no "traceEvents" array, several ProfilerStep# spans (one
// training step only), no aten:: op, no forward or no backward.
TorchProfile parse_torch_profile(const std::string& path, const std::string& text);
OpClass torch_op_class(const std::string& aten_name);  // "aten::addmm" → Gemm, ...

// The profile as a measured compute point of `device_type` for the scenario's model and precision at
// its micro-batch (fwd, bwd, optimizer), merged into `d` (a point of the same micro-batch replaced).
void add_torch_profile_point(DeviceCalibration& d, const TorchProfile& p, int micro_batch);

// ---- a GEMM table (bench/gpu/gemm_shapes.py) ----

// The schema bench/gpu/gemm_shapes.py writes: {"schema", "device": {"name", "kind", "sm_count", "torch",
// "cuda", ...}, "timing", "dtypes", "shapes": [{"op", "class", "pass", "model", "tokens", "micro_batch",
// "batch", "m", "n", "k", "dtype", "strides", "median_s", ...}]} (docs/calibrate-validate.md "A GEMM table").
inline constexpr const char* kGemmTableSchema = "vitsim.gemm_table/1";
struct GemmTableRow {
  int index = 0;                // in "shapes"
  std::string op;               // the op model's name of the GEMM ("qkv.wgrad", "qk", "square")
  OpClass cls = OpClass::Gemm;  // gemm or attn_matmul
  Pass pass = Pass::Fwd;
  std::string model;                      // the ViT preset ("" for a square)
  int tokens = 0, micro_batch = 0;        // 0 for a square
  double batch = 1, m = 0, n = 0, k = 0;  // batch products C[m, n] = A[m, k] B[k, n]
  std::string dtype;                      // fp16, bf16, fp32 (TF32 off), tf32
  double median_s = 0;
};
struct GemmTable {
  std::string path;
  std::string device_name, device_kind;  // "NVIDIA H100 80GB HBM3", "cuda"
  int sm_count = 0;                      // as torch reports it (a CPU: its threads); 0 = not stated
  std::string torch, cuda;
  std::vector<GemmTableRow> rows;
};
// Parses the table. Throws Error "PATH: /shapes/3/median_s: what" on malformed JSON, another file (a vitsim
// report, a calibration: named), another schema, no shape, a class, pass or dtype not known (the valid ones
// listed), a dimension that is not a positive integer, a time that is not a positive number of seconds.
GemmTable parse_gemm_table(const std::string& path, const std::string& text);
// The table's dtype a precision's GEMMs run in: fp16, bf16, fp32 (TF32 off: PyTorch's default, and the
// gpu_flops_fp32 peak); tf32 rows are never fitted.
const char* gemm_table_dtype(Precision p);
// The rows of that dtype as op samples (matmul_op: no bias, one kernel each). Throws Error naming the
// dtypes the table has when none is of it.
std::vector<OpSample> gemm_table_samples(const GemmTable& t, Precision p);

struct GemmImport {
  std::vector<OpSample> samples;
  DeviceFigures platform;          // where the fit started: the platform's figures of the device
  DeviceFigures fitted;            // fit_op_model's figures, its per-kernel time (host_op_s) included
  OpModelCalibration calibration;  // what the file gets: fitted, host_op_s the platform's
};
// fit_op_model on the table's rows of the precision, started from the platform's figures: the GEMM and
// attention efficiencies, the tile, gemm_k_half, gemm_n_half and matrix_s fitted; peak, bandwidth, SMs,
// kernel_s, sync_s, the memory-bound figures and host_op_s stay the platform's (a table of GEMMs timed back
// to back measures none of them; the fit's per-kernel time is a nuisance figure, `fitted.host_op_s`).
GemmImport import_gemm_table(const GemmTable& t, Precision p, const DeviceFigures& platform);
// Per row: measured, the fit's time (op_sample_time with `fitted`) and the platform's device time.
struct GemmFitLine {
  std::string name;
  Op op;
  double measured_s = 0, fitted_s = 0, platform_s = 0;
};
std::vector<GemmFitLine> gemm_fit_lines(const GemmImport& imp);
std::string describe(const GemmTable& t, const GemmImport& imp);

// One line for the calibration's provenance and the terminal: the step, the classes and the phases.
std::string describe(const TorchProfile& p);
std::string describe(const NcclTestsLog& log, const NcclImport& imp);

}  // namespace vitsim::calibrate

namespace vitsim::calibrate {

// `vitsim calibrate SCENARIO --from-nccl-tests FILE --from-torch-profile FILE --from-gemm-table FILE --out
// CALIB.json`: no measurement; the files become a link entry, a measured compute point and an op model
// (the device's entry of op_models at the scenario's precision, replaced) of the calibration file.
struct ImportOptions {
  std::string out;  // calibration JSON (required)
  bool force = false, append = false;
  std::string nccl_tests, torch_profile, gemm_table;  // paths, "" = none (at least one)
  std::string device_type;   // "" = the gpu_model of the scenario platform's first GPU used
  std::string link_class;    // "" = from the log's hosts
  double fit_max_bytes = 0;  // 0 = the scenario's whole fp32 gradient (as calibrate's own fit)
  double peak_flops = 0, mem_bw = 0;
  std::string command;  // for the provenance
  bool verbose = true;  // one line per import on stdout
};
// Merges into `out` (with append; else refuses an existing `out` without force) and writes it; the file
// is read back before it replaces `out`, so a merge the calibration reader would refuse is never written.
Calibration import_measurements(const Scenario& s, const ImportOptions& o);

}  // namespace vitsim::calibrate
