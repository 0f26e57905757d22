#include "vitsim/core/model/ops.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "vitsim/core/base/enum_names.hpp"
#include "vitsim/core/base/error.hpp"

namespace vitsim {

namespace {
constexpr EnumNames<OpClass, 4> kOpClasses{{{OpClass::Gemm, "gemm"},
                                            {OpClass::AttnMatmul, "attn_matmul"},
                                            {OpClass::Memory, "memory"},
                                            {OpClass::Norm, "norm"}}};
constexpr EnumNames<OpKind, kOpKinds> kKinds{{{OpKind::None, "none"},
                                              {OpKind::Strided, "strided"},
                                              {OpKind::Reduce, "reduce"},
                                              {OpKind::Softmax, "softmax"},
                                              {OpKind::SoftmaxBwd, "softmax_bwd"},
                                              {OpKind::LayerNorm, "layer_norm"},
                                              {OpKind::LayerNormBwd, "layer_norm_bwd"},
                                              {OpKind::Gelu, "gelu"},
                                              {OpKind::GeluBwd, "gelu_bwd"},
                                              {OpKind::Conv, "conv"},
                                              {OpKind::ConvWgrad, "conv_wgrad"}}};
constexpr EnumNames<Pass, 3> kPasses{{{Pass::Fwd, "fwd"}, {Pass::Bwd, "bwd"}, {Pass::Step, "step"}}};
constexpr EnumNames<AttentionPath, 2> kAttentionPaths{
    {{AttentionPath::Math, "math"}, {AttentionPath::Fused, "fused"}}};
}  // namespace

const char* op_class_name(OpClass c) {
  return name_of(kOpClasses, c);
}

OpClass parse_op_class(const std::string& name) {
  return value_of(kOpClasses, name, "op class");
}

const char* op_kind_name(OpKind k) {
  return name_of(kKinds, k);
}

OpKind parse_op_kind(const std::string& name) {
  return value_of(kKinds, name, "op kind");
}

bool is_conv(OpKind k) {
  return k == OpKind::Conv || k == OpKind::ConvWgrad;
}

const char* pass_name(Pass p) {
  return name_of(kPasses, p);
}

const char* attention_path_name(AttentionPath a) {
  return name_of(kAttentionPaths, a);
}

AttentionPath parse_attention_path(const std::string& name) {
  return value_of(kAttentionPaths, name, "attention path");
}

namespace {
// The fields every op has: its name, pass and class.
Op named_op(std::string name, Pass pass, OpClass cls) {
  Op op;
  op.name = std::move(name);
  op.pass = pass;
  op.cls = cls;
  return op;
}
}  // namespace

Op matmul_op(std::string name, Pass pass, OpClass cls, double batch, double m, double n, double k,
             double elem_bytes) {
  Op op = named_op(std::move(name), pass, cls);
  op.batch = batch;
  op.m = m;
  op.n = n;
  op.k = k;
  op.flops = 2 * batch * m * n * k;
  op.bytes = batch * (m * k + k * n + m * n) * elem_bytes;
  return op;
}

Op memory_op(std::string name, Pass pass, double bytes, int kernels, OpClass cls) {
  Op op = named_op(std::move(name), pass, cls);
  op.bytes = bytes;
  op.kernels = kernels;
  return op;
}

namespace {

// Builds one layer's ops. Sizes: R = rows (micro-batch x tokens), d width, h MLP hidden. Element bytes:
// `a` for what the GEMMs read and write (2 under autocast, 4 in fp32), 4 for fp32 tensors (the residual
// stream, LayerNorm in and out, softmax under autocast, gradients of fp32 parameters).
class LayerBuilder {
 public:
  LayerBuilder(const Workload& w, int layer, int b, const OpOptions& o)
      : w_(w),
        l_(layer),
        b_(b),
        half_(o.precision != Precision::FP32),
        fused_(w.model.attention == AttentionPath::Fused) {
    a_ = half_ ? 2 : 4;
    cast_ = half_ && o.autocast;
    f_ = half_ && !o.autocast ? 2 : 4;
  }

  std::vector<Op> build() {
    const LayerCost& lc = w_.layers[l_];
    switch (lc.kind) {
      case LayerKind::PatchEmbed:
        patch_embed();
        break;
      case LayerKind::Attention:
        attention();
        break;
      case LayerKind::Mlp:
        mlp();
        break;
      case LayerKind::Head:
        head();
        break;
    }
    // Backward ops were built in forward order: issue them in reverse.
    std::reverse(bwd_.begin(), bwd_.end());
    std::vector<Op> out = std::move(fwd_);
    out.insert(out.end(), bwd_.begin(), bwd_.end());
    return out;
  }

 private:
  const Workload& w_;
  int l_, b_;
  bool half_, fused_;
  bool cast_ = false;  // autocast: casts to half before GEMMs and back in backward
  double a_ = 4;       // bytes of what GEMMs read and write
  double f_ = 4;  // bytes of LayerNorm in/out, softmax, the residual stream, parameters and their gradients
  std::vector<Op> fwd_, bwd_;

  std::string nm(const std::string& s) const { return w_.layers[l_].name + "." + s; }

  void push(Op op) {
    op.layer = l_;
    (op.pass == Pass::Fwd ? fwd_ : bwd_).push_back(std::move(op));
  }
  void mem(Pass p, OpId id, const std::string& name, double bytes, int kernels = 1,
           OpClass cls = OpClass::Memory, LinearId linear = LinearId::None) {
    Op op = memory_op(nm(name), p, bytes, kernels, cls);
    op.id = id;
    op.linear = linear;
    push(std::move(op));
  }
  // A memory or norm op of a kernel family: its elements and the rows it reduces over.
  void kind_op(Pass p, OpId id, const std::string& name, double bytes, int kernels, OpClass cls, OpKind kind,
               double elems, double rows = 0, LinearId linear = LinearId::None) {
    Op op = memory_op(nm(name), p, bytes, kernels, cls);
    op.id = id;
    op.linear = linear;
    op.kind = kind;
    op.elems = elems;
    op.rows = rows;
    push(std::move(op));
  }
  // C[m, n] = A[m, k] B[k, n], `batch` times; inputs and output in `e` bytes. `bias`: addmm, whose
  // output is first filled with the broadcast bias, then read back by the GEMM (beta = 1).
  void matmul(Pass p, OpClass cls, OpId id, const std::string& name, double batch, double m, double n,
              double k, bool bias = false, OpKind kind = OpKind::None, LinearId linear = LinearId::None) {
    Op op = matmul_op(nm(name), p, cls, batch, m, n, k, a_);
    op.bytes += bias ? 2 * m * n * a_ : 0;
    op.kernels = bias ? 2 : 1;
    op.kind = kind;
    op.id = id;
    op.linear = linear;
    push(std::move(op));
  }
  // A linear layer y[R, out] = x[R, in] W^T + bias, forward and backward, with its weight's autocast
  // cast (forward) and gradient cast + accumulation into the fp32 .grad (backward).
  void linear(LinearId lin, const std::string& name, double rows, double in, double out,
              bool input_needs_grad = true) {
    const double params = in * out + out;
    // fp32 weight, bias -> half (cached per forward)
    if (cast_) mem(Pass::Fwd, OpId::WeightCast, name + ".cast_w", params * (4 + 2), 2, OpClass::Memory, lin);
    matmul(Pass::Fwd, OpClass::Gemm, OpId::Linear, name, 1, rows, out, in, true, OpKind::None, lin);
    // Backward (built in forward order, issued reversed): accumulation last, data gradient first.
    grad_acc(lin, name, params);
    kind_op(Pass::Bwd, OpId::BiasGrad, name + ".bias_grad", rows * out * a_ + out * a_, 1, OpClass::Memory,
            OpKind::Reduce, rows * out, out,
            lin);  // sum over rows: per element read, per output (a reduction's "rows" are its outputs)
    matmul(Pass::Bwd, OpClass::Gemm, OpId::Wgrad, name + ".wgrad", 1, out, in, rows, false, OpKind::None,
           lin);  // dW = dY^T X
    if (input_needs_grad)
      matmul(Pass::Bwd, OpClass::Gemm, OpId::Dgrad, name + ".dgrad", 1, rows, in, out, false, OpKind::None,
             lin);  // dX = dY W
  }
  // The weight gradient accumulated into .grad (an add into the existing gradient), after the autocast
  // cast of the half gradient to the fp32 parameter's dtype.
  void grad_acc(LinearId lin, const std::string& name, double params) {
    mem(Pass::Bwd, OpId::GradAcc, name + ".grad_acc", params * ((cast_ ? 2 + 4 : 0) + 3 * f_), cast_ ? 4 : 2,
        OpClass::Memory, lin);
  }
  // LayerNorm in fp32 (autocast's fp32 list): reads x, writes y and per-row mean and rstd; backward
  // reads x, dy (and the stats), writes dx, and reduces the weight and bias gradients in a second pass.
  void layer_norm(const std::string& name, double rows, double d) {
    kind_op(Pass::Fwd, OpId::LayerNorm, name, rows * d * (f_ + f_) + rows * 2 * 4, 1, OpClass::Norm,
            OpKind::LayerNorm, rows * d, rows);
    mem(Pass::Bwd, OpId::LayerNormGradAcc, name + ".grad_acc", 2 * d * 3 * f_, 2);
    kind_op(Pass::Bwd, OpId::LayerNormBwd, name + ".bwd",
            rows * d * (f_ + f_ + f_) + rows * d * (f_ + f_) + rows * 2 * 4, 2, OpClass::Norm,
            OpKind::LayerNormBwd, rows * d, rows);
  }
  // Autocast's cast of an fp32 activation to half before a GEMM, and its backward (half grad -> fp32).
  void cast_in(const std::string& name, double elems) {
    if (!cast_) return;
    mem(Pass::Fwd, OpId::ActCast, name + ".cast", elems * (4 + 2));
    mem(Pass::Bwd, OpId::ActCastBwd, name + ".cast_bwd", elems * (2 + 4));
  }
  // `fwd` and `bwd`: the site's ids (the embedding's, attention probabilities', a GEMM output's).
  void dropout(OpId fwd, OpId bwd, const std::string& name, double elems, double e) {
    if (w_.model.dropout <= 0) return;
    mem(Pass::Fwd, fwd, name + ".dropout", elems * (e + e + 1));  // x in, y out, 1-byte mask
    mem(Pass::Bwd, bwd, name + ".dropout_bwd", elems * (e + e + 1));
  }
  // x + y into the fp32 residual stream; backward: the two gradient paths meet at the LayerNorm input
  // (an fp32 add), and the branch's half gradient is cast from fp32 under autocast.
  void residual(const std::string& name, double elems) {
    mem(Pass::Fwd, OpId::Residual, name + ".residual", elems * (f_ + a_ + f_));
    mem(Pass::Bwd, OpId::ResidualBwd, name + ".residual_bwd", elems * (f_ + f_ + f_));
    if (cast_) mem(Pass::Bwd, OpId::ResidualCast, name + ".residual_cast", elems * (4 + 2));
  }

  void patch_embed() {
    const ViTConfig& c = w_.model;
    const double N = c.patches(), K = c.class_tokens;
    const double T = c.tokens(), d = c.width, P = static_cast<double>(c.patch) * c.patch * c.channels;
    const double image = static_cast<double>(b_) * c.channels * c.image_size * c.image_size;
    const LinearId conv = LinearId::PatchConv;
    if (cast_) mem(Pass::Fwd, OpId::ImageCast, "cast_image", image * (4 + 2));
    // The convolution with stride = kernel is a GEMM [b N, P] x [P, d] over the image's patches.
    const double params = P * d + d;
    if (cast_) mem(Pass::Fwd, OpId::WeightCast, "conv.cast_w", params * (4 + 2), 2, OpClass::Memory, conv);
    matmul(Pass::Fwd, OpClass::Gemm, OpId::Linear, "conv", 1, b_ * N, d, P, true, OpKind::Conv, conv);
    // The convolution's output [b, d, N] enters the token sequence permuted ([N, b, d], d innermost):
    // the cat gathers it element by element.
    kind_op(Pass::Fwd, OpId::CatClassToken, "cat_class_token", b_ * T * d * (a_ + a_), 1, OpClass::Memory,
            OpKind::Strided, b_ * N * d);
    mem(Pass::Fwd, OpId::PosAdd, "pos_add", b_ * T * d * (a_ + f_) + T * d * f_);
    dropout(OpId::EmbedDropout, OpId::EmbedDropoutBwd, "embed", b_ * T * d, f_);
    // Backward: the position embedding's gradient (a sum over the batch), the class token's, the
    // slice back to the convolution's output, its weight gradient (the image needs none).
    grad_acc(conv, "conv", params);
    kind_op(Pass::Bwd, OpId::BiasGrad, "conv.bias_grad", b_ * N * d * a_ + d * a_, 1, OpClass::Memory,
            OpKind::Reduce, b_ * N * d, d, conv);
    matmul(Pass::Bwd, OpClass::Gemm, OpId::Wgrad, "conv.wgrad", 1, d, P, b_ * N, false, OpKind::ConvWgrad,
           conv);
    kind_op(Pass::Bwd, OpId::CatBwd, "cat_bwd", b_ * N * d * (f_ + a_), 1, OpClass::Memory, OpKind::Strided,
            b_ * N * d);
    mem(Pass::Bwd, OpId::PosGrad, "pos_grad", b_ * T * d * f_ + (T * d + K * d) * 3 * f_, 3);
  }

  void attention() {
    const ViTConfig& c = w_.model;
    const double T = c.tokens(), d = c.width, H = c.heads, hd = d / H, R = static_cast<double>(b_) * T;
    const double S = static_cast<double>(b_) * H * T * T;  // attention scores
    layer_norm("ln1", R, d);
    cast_in("ln1", R * d);
    linear(LinearId::Qkv, "qkv", R, d, 3 * d);
    if (fused_) {
      // scaled_dot_product_attention: one kernel reads Q, K, V and writes O (and the softmax
      // statistics); backward recomputes the scores on chip: reads Q, K, V, O, dO, writes dQ, dK, dV.
      // Its matmuls are QK^T and PV (2 products; backward 4), shaped as QK^T for the wave model.
      Op f = matmul_op(nm("sdpa"), Pass::Fwd, OpClass::AttnMatmul, b_ * H, T, T, hd, 0);
      f.flops *= 2;
      f.bytes = 4 * R * d * a_ + b_ * H * T * 4;
      f.id = OpId::Sdpa;
      Op g = matmul_op(nm("sdpa.bwd"), Pass::Bwd, OpClass::AttnMatmul, b_ * H, T, T, hd, 0);
      g.flops *= 4;
      g.bytes = 8 * R * d * a_ + b_ * H * T * 4;
      g.id = OpId::SdpaBwd;
      push(std::move(f));
      push(std::move(g));
      mem(Pass::Fwd, OpId::QkvSplit, "qkv_split", 3 * R * d * 2 * a_);
      mem(Pass::Bwd, OpId::QkvSplitBwd, "qkv_split_bwd", 3 * R * d * 2 * a_);
    } else {
      // nn.functional.multi_head_attention_forward (1.13), need_weights=False: q, k, v made contiguous
      // [B H, T, hd], q scaled, scores = bmm(q, k^T), softmax (fp32 under autocast: cast in, softmax,
      // cast back for the next bmm), bmm(scores, v), transpose back and made contiguous.
      mem(Pass::Fwd, OpId::QkvSplit, "qkv_split", 3 * R * d * 2 * a_, 3);
      mem(Pass::Fwd, OpId::QScale, "q_scale", R * d * 2 * a_);
      matmul(Pass::Fwd, OpClass::AttnMatmul, OpId::Qk, "qk", b_ * H, T, T, hd);
      if (cast_) mem(Pass::Fwd, OpId::ScoresCast, "scores.cast", S * (2 + 4));
      kind_op(Pass::Fwd, OpId::Softmax, "softmax", S * (f_ + f_), 1, OpClass::Norm, OpKind::Softmax, S,
              S / T);  // fp32 under autocast
      dropout(OpId::ProbsDropout, OpId::ProbsDropoutBwd, "attn", S, f_);
      if (cast_) mem(Pass::Fwd, OpId::ProbsCast, "probs.cast", S * (4 + 2));
      matmul(Pass::Fwd, OpClass::AttnMatmul, OpId::Av, "av", b_ * H, T, hd, T);
      mem(Pass::Fwd, OpId::OutLayout, "out_layout", R * d * 2 * a_);
      // Backward, in forward order (reversed when issued). chunk's backward (SplitBackward) is one cat of
      // the three gradients into [T, b, 3d]; before it, view's backward reshapes the q and v gradients
      // (bmm outputs [B H, T, hd]) to [T, b, d], a transposing copy each, while k's gradient (from
      // bmm(Q^T, dS): [B H, hd, T]) reshapes as a view with T innermost, which the cat reads strided.
      kind_op(Pass::Bwd, OpId::QkvSplitBwd, "qkv_split_bwd", 3 * R * d * 2 * a_, 1, OpClass::Memory,
              OpKind::Strided,
              R * d);  // k's part
      mem(Pass::Bwd, OpId::QvGradLayout, "qv_grad_layout", 2 * R * d * 2 * a_, 2);
      mem(Pass::Bwd, OpId::QScaleBwd, "q_scale_bwd", R * d * 2 * a_);
      matmul(Pass::Bwd, OpClass::AttnMatmul, OpId::QkDq, "qk.dq", b_ * H, T, hd, T);  // dQ = dS K
      matmul(Pass::Bwd, OpClass::AttnMatmul, OpId::QkDk, "qk.dk", b_ * H, T, hd, T);  // dK = dS^T Q
      if (cast_) mem(Pass::Bwd, OpId::ScoresCastBwd, "scores.cast_bwd", S * (4 + 2));
      kind_op(Pass::Bwd, OpId::SoftmaxBwd, "softmax_bwd", S * (f_ + f_ + f_), 1, OpClass::Norm,
              OpKind::SoftmaxBwd, S, S / T);
      if (cast_) mem(Pass::Bwd, OpId::ProbsCastBwd, "probs.cast_bwd", S * (2 + 4));
      matmul(Pass::Bwd, OpClass::AttnMatmul, OpId::AvDprobs, "av.dprobs", b_ * H, T, T, hd);  // dP = dO V^T
      matmul(Pass::Bwd, OpClass::AttnMatmul, OpId::AvDv, "av.dv", b_ * H, T, hd, T);          // dV = P^T dO
      // out_layout's backward is no copy: view, contiguous and transpose pass the gradient on as a
      // transposed view, which the two bmm of AV's backward read as they are.
    }
    linear(LinearId::OutProj, "out_proj", R, d, d);
    dropout(OpId::Dropout, OpId::DropoutBwd, "attn_out", R * d, a_);
    residual("attn", R * d);
  }

  void mlp() {
    const ViTConfig& c = w_.model;
    const double T = c.tokens(), d = c.width, h = c.mlp_hidden(), R = static_cast<double>(b_) * T;
    layer_norm("ln2", R, d);
    cast_in("ln2", R * d);
    linear(LinearId::Fc1, "fc1", R, d, h);
    kind_op(Pass::Fwd, OpId::Gelu, "gelu", R * h * (a_ + a_), 1, OpClass::Norm, OpKind::Gelu, R * h);
    kind_op(Pass::Bwd, OpId::GeluBwd, "gelu_bwd", R * h * (a_ + a_ + a_), 1, OpClass::Norm, OpKind::GeluBwd,
            R * h);
    dropout(OpId::Dropout, OpId::DropoutBwd, "mlp_hidden", R * h, a_);
    linear(LinearId::Fc2, "fc2", R, h, d);
    dropout(OpId::Dropout, OpId::DropoutBwd, "mlp_out", R * d, a_);
    residual("mlp", R * d);
  }

  void head() {
    const ViTConfig& c = w_.model;
    const double T = c.tokens(), d = c.width, C = c.classes, R = static_cast<double>(b_) * T;
    layer_norm("ln", R, d);  // torchvision normalises every token, then takes the class token
    cast_in("cls", b_ * d);
    linear(LinearId::Head, "fc", b_, d, C);
    // Cross-entropy (log_softmax in fp32 under autocast, then nll), and its backward; the class token's
    // gradient is scattered into a zero tensor of every token.
    // log_softmax in fp32 (autocast) then nll
    mem(Pass::Fwd, OpId::Loss, "loss", b_ * C * (a_ + 4 + 4 + 4), 2, OpClass::Norm);
    mem(Pass::Bwd, OpId::LossBwd, "loss_bwd", b_ * C * (4 + 4 + 4 + a_), 2, OpClass::Norm);
    mem(Pass::Bwd, OpId::SelectBwd, "select_bwd", R * d * f_ + b_ * d * f_, 2);
  }
};

}  // namespace

std::vector<Op> layer_ops(const Workload& w, int layer, int micro_batch, const OpOptions& o) {
  if (layer < 0 || layer >= static_cast<int>(w.layers.size()))
    throw Error(fmt::format("internal: layer {} out of range 0..{}", layer, w.layers.size()));
  if (micro_batch < 1) throw Error(fmt::format("micro-batch must be >= 1, got {}", micro_batch));
  return LayerBuilder(w, layer, micro_batch, o).build();
}

std::vector<Op> pass_ops(const Workload& w, int micro_batch, const OpOptions& o) {
  std::vector<Op> fwd, bwd;
  std::vector<std::vector<Op>> per_layer;
  for (int l = 0; l < static_cast<int>(w.layers.size()); ++l)
    per_layer.push_back(layer_ops(w, l, micro_batch, o));
  for (const auto& ops : per_layer)
    for (const auto& op : ops)
      if (op.pass == Pass::Fwd) fwd.push_back(op);
  for (auto it = per_layer.rbegin(); it != per_layer.rend(); ++it)
    for (const auto& op : *it)
      if (op.pass == Pass::Bwd) bwd.push_back(op);
  fwd.insert(fwd.end(), bwd.begin(), bwd.end());
  return fwd;
}

bool is_matmul(const Op& op) {
  return op.cls == OpClass::Gemm || op.cls == OpClass::AttnMatmul;
}

double shape_efficiency(const Op& op, const DeviceFigures& d) {
  if (!is_matmul(op) || !(op.m > 0) || !(op.n > 0) || !(op.k > 0)) return 1.0;
  const double tm = std::max(1, d.tile_m), tn = std::max(1, d.tile_n), sms = std::max(1, d.sm_count);
  const double tiles_m = std::ceil(op.m / tm), tiles_n = std::ceil(op.n / tn);
  const double tiles = tiles_m * tiles_n * op.batch;
  const double fill = (op.m * op.n) / (tiles_m * tm * tiles_n * tn);
  // Split-K when the output tiles leave SMs idle and K is long (cuBLAS does it for such shapes; the
  // weight-gradient GEMMs are the usual case): K slices of at least kMinSplitK go to idle SMs.
  constexpr double kMinSplitK = 256;  // assumption: the shortest K slice worth a split (docs/model.md)
  double split = 1;
  if (tiles < sms) split = std::max(1.0, std::min(std::floor(sms / tiles), std::floor(op.k / kMinSplitK)));
  const double work = tiles * split;
  const double waves = std::ceil(work / sms);
  const double wave_eff = work / (waves * sms);
  const double k_slice = op.k / split;
  const double k_eff = d.gemm_k_half > 0 ? k_slice / (k_slice + d.gemm_k_half) : 1.0;
  const double narrow = std::min(op.m, op.n);
  const double n_eff = d.gemm_n_half > 0 ? narrow / (narrow + d.gemm_n_half) : 1.0;
  return fill * wave_eff * k_eff * n_eff;
}

double kind_compute_time(const Op& op, const DeviceFigures& d) {
  const DeviceFigures::KindFigures& k = d.kinds[static_cast<size_t>(op.kind)];
  return op.elems * k.elem_s + op.rows * k.row_s;
}

double op_device_time(const Op& op, const DeviceFigures& d) {
  const double frac = op.cls == OpClass::Norm && d.norm_efficiency > 0 ? d.norm_efficiency : d.mem_efficiency;
  const double bw = d.mem_bw * frac;
  double t = bw > 0 ? op.bytes / bw : 0;
  if (!is_matmul(op)) t = std::max(t, kind_compute_time(op, d));
  if (is_matmul(op) && op.flops > 0) {
    const double conv_eff = is_conv(op.kind) ? d.kinds[static_cast<size_t>(op.kind)].efficiency : 0;
    const double cls_eff = conv_eff > 0              ? conv_eff
                           : op.cls == OpClass::Gemm ? d.gemm_efficiency
                                                     : d.attn_efficiency;
    const double rate = d.peak_flops * cls_eff * shape_efficiency(op, d);
    if (!(rate > 0))
      throw Error(fmt::format("device {}: no positive GEMM rate for op {}", d.device_type, op.name));
    t = std::max(t, op.flops / rate);
    t += op.batch * d.matrix_s;
  }
  return t + op.kernels * d.kernel_s;
}

Timeline run_ops(const std::vector<Op>& ops, const DeviceFigures& d) {
  Timeline tl;
  tl.op_end_s.reserve(ops.size());
  double issued = 0, end = 0;
  for (const Op& op : ops) {
    const double dev = op_device_time(op, d);
    const double host = op.kernels * d.host_op_s;
    tl.device_s += dev;
    tl.host_s += host;
    if (d.async) {
      issued += host;                     // the host has issued this op
      end = std::max(issued, end) + dev;  // the device runs it once issued and free
      if (op.host_sync) {                 // the host waits for it, then pays the sync itself
        issued = std::max(issued, end) + d.sync_s;
        end = std::max(end, issued);
        tl.host_s += d.sync_s;
      }
    } else {
      end += host + dev + (op.host_sync ? d.sync_s : 0);
      if (op.host_sync) tl.host_s += d.sync_s;
    }
    tl.op_end_s.push_back(end);
  }
  tl.end_s = std::max(end, issued);
  return tl;
}

}  // namespace vitsim
