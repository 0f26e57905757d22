#pragma once
// The kernels a ViT training step launches, and how long each takes on a device: the operator-level
// compute model (docs/model.md). Pure arithmetic, no SimGrid, no Torch: the simulator, the
// calibration fit and the tests share it.
//
// Each layer of core's layer table (vit.hpp) is decomposed into the operators PyTorch runs for it
// (torchvision's ViT on PyTorch <= 1.13, the math attention path by default): GEMMs (qkv, out-projection,
// fc1, fc2, the patch embedding as a GEMM, the head), the attention batched matmuls (QK^T, AV), and the
// memory-bound ops (LayerNorm, softmax, GELU, scale, layout copies, casts under autocast, residual adds,
// bias-gradient reductions, dropout when on). Backward is its real kernels: a data-gradient and a
// weight-gradient GEMM per linear, softmax/LayerNorm/GELU backward, gradient accumulation.
//
// Time of one op on a device:  max(FLOPs / (peak x efficiency(shape)), bytes / (bandwidth x fraction))
//                              + the device's fixed cost per kernel.
// A pass is the host issuing ops one after another (host_op_s each) and the device running them in
// order: on an asynchronous device (a GPU) op i starts at max(issued_i, end_{i-1}), so the step is
// max(device time, host time) where either dominates (launch-bound small models); on a synchronous
// device (a CPU running LibTorch) the host runs each op itself: host_op_s + device time, summed.
#include <array>
#include <string>
#include <vector>

#include "vitsim/core/model/vit.hpp"

namespace vitsim {

// The op classes calibration fits one efficiency for: GEMMs, the attention batched matmuls, data
// movement (copies, casts, adds, sums, gradient accumulation, the optimizer's elementwise kernels), and
// normalisation/activation (LayerNorm, softmax, GELU, the loss, and their backward), which do arithmetic
// per element (exp, erf, row reductions) that can bound them below the bandwidth on a CPU.
enum class OpClass { Gemm, AttnMatmul, Memory, Norm };
const char* op_class_name(OpClass c);             // "gemm", "attn_matmul", "memory", "norm"
OpClass parse_op_class(const std::string& name);  // throws Error listing the valid names

// The kernel family of an op, where its cost is not its bytes at the bandwidth alone: on a CPU the
// row-wise ops (softmax, LayerNorm) pay per element (exp, erf, division) and per row (the reduction's
// set-up and tail), gathers through a permuted layout pay per element, and the patch embedding runs as a
// convolution kernel (mkldnn, cuDNN), not as the GEMM its arithmetic equals. `vitsim calibrate` measures
// each family's cost on the device (DeviceFigures::kinds); a family without figures costs its bytes.
enum class OpKind {
  None,
  Strided,
  Reduce,
  Softmax,
  SoftmaxBwd,
  LayerNorm,
  LayerNormBwd,
  Gelu,
  GeluBwd,
  Conv,
  ConvWgrad
};
constexpr int kOpKinds = 11;
const char* op_kind_name(OpKind k);             // "none", "strided", "reduce", "softmax", ..., "conv_wgrad"
OpKind parse_op_kind(const std::string& name);  // throws Error listing the valid names
bool is_conv(OpKind k);                         // Conv, ConvWgrad: matmul-shaped kinds

// What an op is, whatever its layer and its printed name: `vitsim calibrate` rebuilds each op's LibTorch
// kernel from it (calibrate/src/bench/kernel_maker.hpp), so renaming an op cannot break calibration. The ops
// of a linear layer (its weight cast, GEMMs, bias and weight gradients) also say which layer (LinearId).
enum class OpId {
  Other,  // built outside the layer table: the step's optimizer and framework ops (core/model/framework.cpp),
          // tests'
  // a linear layer, the patch embedding's convolution among them: "<linear>.cast_w", "<linear>",
  // "<linear>.grad_acc", "<linear>.bias_grad", "<linear>.wgrad", "<linear>.dgrad"
  WeightCast,
  Linear,
  GradAcc,
  BiasGrad,
  Wgrad,
  Dgrad,
  // LayerNorm: "<ln>", "<ln>.bwd", "<ln>.grad_acc"
  LayerNorm,
  LayerNormBwd,
  LayerNormGradAcc,
  // autocast's casts: "cast_image"; an activation before a GEMM "<x>.cast" and its gradient "<x>.cast_bwd";
  // attention's "scores.cast", "scores.cast_bwd", "probs.cast", "probs.cast_bwd"; "<x>.residual_cast"
  ImageCast,
  ActCast,
  ActCastBwd,
  ScoresCast,
  ScoresCastBwd,
  ProbsCast,
  ProbsCastBwd,
  ResidualCast,
  // dropout of the embedding ("embed.dropout"), of attention's probabilities ("attn.dropout"), of a GEMM's
  // output ("attn_out.dropout", "mlp_hidden.dropout", "mlp_out.dropout"); each with its "_bwd"
  EmbedDropout,
  EmbedDropoutBwd,
  ProbsDropout,
  ProbsDropoutBwd,
  Dropout,
  DropoutBwd,
  // the patch embedding's tokens: "cat_class_token", "pos_add", "cat_bwd", "pos_grad"
  CatClassToken,
  PosAdd,
  CatBwd,
  PosGrad,
  // attention: "qkv_split", "qkv_split_bwd", "qv_grad_layout", "q_scale", "q_scale_bwd", "qk", "qk.dq",
  // "qk.dk", "softmax", "softmax_bwd", "av", "av.dprobs", "av.dv", "out_layout", "sdpa", "sdpa.bwd"
  QkvSplit,
  QkvSplitBwd,
  QvGradLayout,
  QScale,
  QScaleBwd,
  Qk,
  QkDq,
  QkDk,
  Softmax,
  SoftmaxBwd,
  Av,
  AvDprobs,
  AvDv,
  OutLayout,
  Sdpa,
  SdpaBwd,
  // "<x>.residual", "<x>.residual_bwd", the MLP's "gelu", "gelu_bwd"
  Residual,
  ResidualBwd,
  Gelu,
  GeluBwd,
  // the head: "loss", "loss_bwd", "select_bwd"
  Loss,
  LossBwd,
  SelectBwd,
  // calibrate's device sweep (calibrate.hpp op_benchmarks): "sweep.gemm.*", "sweep.bmm_qk.*",
  // "sweep.bmm_av.*", "sweep.copy.*", "sweep.add.*", and the kernel-family sweeps (their OpKind says which)
  SweepGemm,
  SweepBmmQk,
  SweepBmmAv,
  SweepCopy,
  SweepAdd,
  SweepKind,
};
// The linear layer an op of a linear belongs to: "qkv", "out_proj", "fc1", "fc2", the head's "fc", the
// patch embedding's "conv".
enum class LinearId { None, Qkv, OutProj, Fc1, Fc2, Head, PatchConv };

enum class Pass { Fwd, Bwd, Step };
const char* pass_name(Pass p);  // "fwd", "bwd", "step"

struct Op {
  std::string name;  // "block3.attn.qkv", "block3.attn.qkv.dgrad", "step.adamw"
  int layer = -1;    // index into Workload::layers; -1 for step-level ops (optimizer, framework)
  Pass pass = Pass::Fwd;
  OpClass cls = OpClass::Memory;
  // GEMM shape (Gemm, AttnMatmul): `batch` independent products C[m, n] = A[m, k] B[k, n].
  double batch = 1, m = 0, n = 0, k = 0;
  double flops = 0;  // whole micro-batch; 2 m n k batch for matmuls, 0 for memory ops
  double bytes = 0;  // bytes read + written, each tensor in the dtype the op runs in
  int kernels = 1;   // kernel launches (and host dispatches) the op stands for
  OpKind kind = OpKind::None;
  double elems = 0;  // elements the kernel computes (output elements; a reduction's input)
  double rows = 0;   // rows a row-wise kernel reduces (softmax, LayerNorm); a sum over rows: its outputs
  bool host_sync = false;            // the host waits for the device after it (.item(), float(tensor))
  OpId id = OpId::Other;             // what it is (never recognised by `name`)
  LinearId linear = LinearId::None;  // its linear layer, for the ops of one
};

// The two kinds of op, built in one place: `batch` products C[m, n] = A[m, k] B[k, n] whose operands
// and result are `elem_bytes` each (flops 2 batch m n k), and a bandwidth-bound op of `bytes`.
Op matmul_op(std::string name, Pass pass, OpClass cls, double batch, double m, double n, double k,
             double elem_bytes);
Op memory_op(std::string name, Pass pass, double bytes, int kernels = 1, OpClass cls = OpClass::Memory);

struct OpOptions {
  Precision precision = Precision::FP32;  // fp16/bf16: see `autocast`
  // With fp16/bf16: true = torch.autocast (fp32 weights cast to half before each GEMM, LayerNorm,
  // softmax and the residual stream in fp32, casts in both passes: vitsim's trainer, DDP with AMP);
  // false = the model itself in half (DeepSpeed fp16/bf16: module.half(), every activation and gradient
  // in 2 bytes, no casts; the fp32 master weights live in the optimizer, core/model/framework.cpp).
  bool autocast = true;
  // The attention path is the model's (ViTConfig::attention).
};

// Forward then backward ops of one layer at this micro-batch, in issue order (backward in reverse).
std::vector<Op> layer_ops(const Workload& w, int layer, int micro_batch, const OpOptions& o);
// Every op of one micro-batch's forward (all layers, in order) then backward (all layers, reverse).
std::vector<Op> pass_ops(const Workload& w, int micro_batch, const OpOptions& o);

// A device's figures for the op model. From a platform file (device_figures below), or fitted by
// `vitsim calibrate` (calibration schema 2, "op_models").
struct DeviceFigures {
  std::string device_type;  // a platform's gpu_model
  double peak_flops = 0;    // FLOP/s of the GEMM dtype (tensor cores for fp16/bf16 where the GPU has them)
  double mem_bw = 0;        // bytes/s, datasheet peak
  int sm_count = 1;         // streaming multiprocessors (GPU) or threads (CPU): a wave's width
  int tile_m = 128, tile_n = 128;  // the GEMM output tile one SM computes at a time
  double gemm_efficiency = 1;      // fraction of peak a GEMM reaches when its tiles fill every wave, K long
  double gemm_k_half = 0;      // K at which a GEMM reaches half its efficiency (short-K penalty; 0 = none)
  double gemm_n_half = 0;      // the same for the smaller of M and N (narrow outputs; 0 = none)
  double attn_efficiency = 1;  // the same for the attention batched matmuls
  double mem_efficiency = 1;   // fraction of mem_bw that data-movement ops reach
  double norm_efficiency = 0;  // the same for normalisation/activation ops (0 = mem_efficiency)
  double matrix_s = 0;  // fixed cost per matrix of a batched matmul (a CPU's bmm loops over them; 0 on a GPU)
  double kernel_s = 0;  // device-side fixed cost per kernel
  double host_op_s = 0;  // host time to issue one op (framework dispatch + launch)
  double sync_s = 0;     // extra cost of one host<-device synchronisation (a D2H copy's latency)
  // Per kernel family (index: OpKind), measured by `vitsim calibrate` (0 = not measured: the op's bytes
  // at the bandwidth alone, a convolution as a GEMM). A memory or norm op of a family costs
  // max(bytes / (bandwidth x fraction), elems x elem_s + rows x row_s); a convolution runs at
  // `efficiency` x the GEMM rate of its shape.
  struct KindFigures {
    double elem_s = 0, row_s = 0, efficiency = 0;
    bool operator==(const KindFigures&) const = default;
  };
  std::array<KindFigures, kOpKinds> kinds{};
  bool async = true;  // host issues ahead of the device (GPU); false: host runs each op (CPU)
};

bool is_matmul(const Op& op);  // Gemm or AttnMatmul

// Shape efficiency of a matmul op on a device, in (0, 1]: output tiles (ceil(m/tile_m) x ceil(n/tile_n)
// x batch) spread over sm_count SMs in waves, the last wave partial (tiles / (waves x SMs)); padding of
// partial tiles (m n / (tiles' area)); short K (k / (k + gemm_k_half)); a narrow output (min(m, n) /
// (min(m, n) + gemm_n_half): a CPU's BLAS packs and streams a panel per few output columns). When the tiles
// fill less than one wave and K is long, the K dimension is split over idle SMs (cuBLAS split-K;
// weight-gradient GEMMs have small m x n and long k), up to k / 256 slices.
double shape_efficiency(const Op& op, const DeviceFigures& d);
// The kernel family's own cost of a memory or norm op: elems x elem_s + rows x row_s (0 without figures).
double kind_compute_time(const Op& op, const DeviceFigures& d);
// Device time of one op (without host issue cost).
double op_device_time(const Op& op, const DeviceFigures& d);

// The timeline of a list of ops issued by one host to one device, starting idle.
struct Timeline {
  double device_s = 0;           // sum of device times
  double host_s = 0;             // sum of host issue times (+ sync costs)
  double end_s = 0;              // when the last op ends (async: the recurrence; sync: host + device)
  std::vector<double> op_end_s;  // end of each op
};
Timeline run_ops(const std::vector<Op>& ops, const DeviceFigures& d);

// Optimizer + framework ops of one step (Pass::Step), see framework.hpp.
}  // namespace vitsim
