// KernelMaker's data-movement and norm kernels (kernel_maker.hpp), one group of ops each: LayerNorm, a
// parameter's own ops, autocast's casts, the patch embedding's tokens, dropout, attention's layouts and
// softmax, the blocks' residual adds and GELU, the head's loss.
#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "bench/kernel_maker.hpp"

namespace vitsim::calibrate {

// Data movement and norm ops of the model, by their identity: the group that knows the op makes its
// kernel; anything else is a copy of as many fp32 elements as its bytes move (read + write).
Kernel KernelMaker::memory(const Op& op, const Dims& D, std::string& how) {
  Kernel k;
  switch (op.id) {
    case OpId::LayerNorm:
    case OpId::LayerNormBwd:
      k = layer_norm_kernel(op, D, how);
      break;
    case OpId::LayerNormGradAcc:
    case OpId::GradAcc:
    case OpId::BiasGrad:
    case OpId::WeightCast:
      k = parameter_kernel(op, D, how);
      break;
    case OpId::ImageCast:
    case OpId::ActCast:
    case OpId::ActCastBwd:
    case OpId::ScoresCast:
    case OpId::ScoresCastBwd:
    case OpId::ProbsCast:
    case OpId::ProbsCastBwd:
    case OpId::ResidualCast:
      k = cast_kernel(op, how);
      break;
    case OpId::CatClassToken:
    case OpId::PosAdd:
    case OpId::CatBwd:
    case OpId::PosGrad:
      k = embedding_kernel(op, D, how);
      break;
    case OpId::EmbedDropout:
    case OpId::EmbedDropoutBwd:
    case OpId::ProbsDropout:
    case OpId::ProbsDropoutBwd:
    case OpId::Dropout:
    case OpId::DropoutBwd:
      k = dropout_kernel(op, how);
      break;
    case OpId::QkvSplit:
    case OpId::QkvSplitBwd:
    case OpId::QvGradLayout:
    case OpId::QScale:
    case OpId::QScaleBwd:
    case OpId::Softmax:
    case OpId::SoftmaxBwd:
    case OpId::OutLayout:
      k = attention_kernel(op, D, how);
      break;
    case OpId::Residual:
    case OpId::ResidualBwd:
    case OpId::Gelu:
    case OpId::GeluBwd:
      k = block_kernel(op, D, how);
      break;
    case OpId::Loss:
    case OpId::LossBwd:
    case OpId::SelectBwd:
      k = loss_kernel(op, D, how);
      break;
    default:
      break;
  }
  if (k) return k;
  how = "copy (generic)";
  auto x = rnd({std::max<int64_t>(1, static_cast<int64_t>(op.bytes / 8))}, at::kFloat);
  return [x] { (void)x.clone(); };
}

// LayerNorm over the width and its backward, rows from the op's bytes (rows (d (4 + 4) + 2 x 4)
// forward, rows (d 20 + 8) backward).
Kernel KernelMaker::layer_norm_kernel(const Op& op, const Dims& D, std::string& how) {
  const at::ScalarType f32 = at::kFloat;
  const int64_t d = D.d;
  if (op.id == OpId::LayerNorm) {
    how = "native_layer_norm";
    const int64_t rows = static_cast<int64_t>(std::llround(op.bytes / (8.0 * D.d + 8)));
    auto x = rnd({rows, D.d}, f32), w = rnd({D.d}, f32), b = rnd({D.d}, f32);
    return [x, w, b, d] { (void)at::native_layer_norm(x, {d}, w, b, 1e-6); };
  }
  if (op.id == OpId::LayerNormBwd) {
    how = "native_layer_norm_backward";
    const int64_t rows = static_cast<int64_t>(std::llround(op.bytes / (20.0 * D.d + 8)));
    auto x = rnd({rows, D.d}, f32), w = rnd({D.d}, f32), b = rnd({D.d}, f32), dy = rnd({rows, D.d}, f32);
    auto fwd = at::native_layer_norm(x, {D.d}, w, b, 1e-6);
    auto mean = std::get<1>(fwd), rstd = std::get<2>(fwd);
    return [x, w, b, dy, mean, rstd, d] {
      (void)at::native_layer_norm_backward(dy, x, {d}, mean, rstd, w, b, {true, true, true});
    };
  }
  return nullptr;
}

// A parameter's own ops: gradient accumulation into the fp32 .grad (in place, after a cast of a half
// gradient), a bias gradient's sum over rows, the weights cast to half for the forward.
Kernel KernelMaker::parameter_kernel(const Op& op, const Dims& D, std::string& how) {
  const at::ScalarType f32 = at::kFloat;
  const auto [in, out] = linear_shape(op.linear, D);
  const bool is_ln = op.id == OpId::LayerNormGradAcc;  // its weight and bias, fp32 whatever the precision
  if (op.id == OpId::GradAcc || is_ln) {
    std::vector<int64_t> sizes;
    if (is_ln)
      sizes = {D.d, D.d};
    else if (in > 0)
      sizes = {in * out, out};
    if (!sizes.empty()) {
      std::vector<torch::Tensor> grads, news;
      const bool cast = half_ && !is_ln;
      for (int64_t n : sizes) {
        grads.push_back(rnd({n}, f32));
        news.push_back(rnd({n}, cast ? act_ : f32));
      }
      how = cast ? "to(float) + add_" : "add_";
      return [grads, news, cast]() mutable {
        for (size_t i = 0; i < grads.size(); ++i) grads[i].add_(cast ? news[i].to(at::kFloat) : news[i]);
      };
    }
  }
  if (op.id == OpId::BiasGrad && in > 0) {
    how = "sum(0)";
    auto g = rnd({linear_rows(op.linear, D), out}, act_);
    return [g] { (void)g.sum(0); };
  }
  if (op.id == OpId::WeightCast && in > 0) {
    how = "to(half) x2";
    auto w = rnd({out, in}, f32), b = rnd({out}, f32);
    const auto t = act_;
    return [w, b, t] {
      (void)w.to(t);
      (void)b.to(t);
    };
  }
  return nullptr;
}

// Casts of activations and their gradients (6 bytes an element): fp32 -> half, or half -> fp32.
Kernel KernelMaker::cast_kernel(const Op& op, std::string& how) {
  // From half: the scores to fp32 for the softmax, and the gradients of what was cast to half (an
  // activation before a GEMM, the probabilities); the others from fp32 to half.
  const bool from_half =
      op.id == OpId::ScoresCast || op.id == OpId::ProbsCastBwd || op.id == OpId::ActCastBwd;
  const int64_t elems = static_cast<int64_t>(std::llround(op.bytes / 6));
  auto x = rnd({elems}, from_half ? act_ : at::kFloat);
  const auto t = from_half ? at::kFloat : act_;
  how = from_half ? "to(float)" : "to(half)";
  return [x, t] { (void)x.to(t); };
}

// The patch embedding's tokens: the class token joined, the position embedding added, and their
// backward.
Kernel KernelMaker::embedding_kernel(const Op& op, const Dims& D, std::string& how) {
  const at::ScalarType f32 = at::kFloat;
  if (op.id ==
      OpId::CatClassToken) {  // cat(class token expanded, conv output [b, d, N] permuted to [N, b, d])
    how = "cat";
    auto cls = rnd({D.K, 1, D.d}, act_), x = rnd({D.b, D.d, D.N}, act_);
    const int64_t b = D.b, d = D.d, k = D.K;
    return [cls, x, b, d, k] { (void)torch::cat({cls.expand({k, b, d}), x.permute({2, 0, 1})}, 0); };
  }
  if (op.id == OpId::PosAdd) {  // [T, b, d] + [T, 1, d] (fp32 parameter)
    how = "add (broadcast)";
    auto x = rnd({D.T, D.b, D.d}, act_), pos = rnd({D.T, 1, D.d}, f32);
    return [x, pos] { (void)at::add(x, pos); };
  }
  if (op.id == OpId::CatBwd) {  // the patches' gradient slice [N, b, d] back to the convolution's [b, d, N]
    how = "copy (permuted)";
    auto g = rnd({D.T, D.b, D.d}, f32);
    const int64_t N = D.N, K = D.K;
    const auto t = act_;
    return [g, N, K, t] { (void)g.narrow(0, K, N).permute({1, 2, 0}).to(t).contiguous(); };
  }
  if (op.id == OpId::PosGrad) {  // sum over the batch, accumulation into the position and class-token grads
    how = "sum(1) + add_ x2";
    auto g = rnd({D.T, D.b, D.d}, f32), pos = rnd({D.T, 1, D.d}, f32), cls = rnd({D.K, 1, D.d}, f32),
         cls_new = rnd({D.K, 1, D.d}, f32);
    return [g, pos, cls, cls_new]() mutable {
      pos.add_(g.sum(1, true));
      cls.add_(cls_new);
    };
  }
  return nullptr;
}

// Dropout and its backward: elements from the op's bytes (each read and written in its dtype, plus a
// one-byte mask); fp32 in the embedding and on attention's probabilities.
Kernel KernelMaker::dropout_kernel(const Op& op, std::string& how) {
  const double a = half_ ? 2 : 4;
  const bool fp32 = op.id == OpId::EmbedDropout || op.id == OpId::EmbedDropoutBwd ||
                    op.id == OpId::ProbsDropout || op.id == OpId::ProbsDropoutBwd;
  const double e = fp32 ? 4 : a;
  const int64_t elems = static_cast<int64_t>(std::llround(op.bytes / (2 * e + 1)));
  const double p = m_.dropout;
  auto x = rnd({elems}, e == 4 ? at::kFloat : act_);
  if (op.id == OpId::EmbedDropout || op.id == OpId::ProbsDropout || op.id == OpId::Dropout) {
    how = "native_dropout";
    return [x, p] { (void)at::native_dropout(x, p, true); };
  }
  how = "native_dropout_backward";
  auto mask = std::get<1>(at::native_dropout(x, p, true));
  return [x, mask, p] { (void)at::native_dropout_backward(x, mask, 1.0 / (1.0 - p)); };
}

// Multi-head attention's layouts, scaling and softmax (real/src/model/model.cpp, core/src/model/ops.cpp).
Kernel KernelMaker::attention_kernel(const Op& op, const Dims& D, std::string& how) {
  const at::ScalarType f32 = at::kFloat;
  if (op.id ==
      OpId::QkvSplit) {  // q, k, v: three [T, b, d] slices of the [T, b, 3d] projection made contiguous
    how = "contiguous x3";
    auto qkv = rnd({D.T, D.b, 3 * D.d}, act_);
    const int64_t d = D.d;
    return [qkv, d] {
      for (int i = 0; i < 3; ++i) (void)qkv.narrow(2, i * d, d).contiguous();
    };
  }
  if (op.id == OpId::QkvSplitBwd) {  // chunk's backward (SplitBackward): the three gradients concatenated,
    // q's and v's contiguous, k's a [T, b, d] view of a [b, d, T] tensor (T innermost), as autograd
    // hands them over (core/src/model/ops.cpp)
    how = "cat (SplitBackward, k's gradient T-innermost)";
    auto g0 = rnd({D.T, D.b, D.d}, act_), g1 = rnd({D.b, D.d, D.T}, act_).permute({2, 0, 1}),
         g2 = rnd({D.T, D.b, D.d}, act_);
    return [g0, g1, g2] { (void)torch::cat({g0, g1, g2}, -1); };
  }
  if (op.id ==
      OpId::QvGradLayout) {  // view's backward for q and v: [B H, T, hd] -> [T, B H, hd] contiguous, x2
    how = "transpose.contiguous x2";
    auto gq = rnd({D.b * D.H, D.T, D.hd}, act_), gv = rnd({D.b * D.H, D.T, D.hd}, act_);
    return [gq, gv] {
      (void)gq.transpose(0, 1).contiguous();
      (void)gv.transpose(0, 1).contiguous();
    };
  }
  if (op.id == OpId::QScale || op.id == OpId::QScaleBwd) {  // q [B H, T, hd] (a transposed view) / sqrt(hd)
    how = "div";
    auto q = rnd({D.T, D.b * D.H, D.hd}, act_).transpose(0, 1);
    const double sc = std::sqrt(static_cast<double>(D.hd));
    return [q, sc] { (void)at::div(q, sc); };
  }
  if (op.id == OpId::Softmax) {
    how = "_softmax";
    auto x = rnd({D.b * D.H, D.T, D.T}, f32);
    return [x] { (void)at::_softmax(x, -1, false); };
  }
  if (op.id == OpId::SoftmaxBwd) {
    how = "_softmax_backward_data";
    auto y = at::_softmax(rnd({D.b * D.H, D.T, D.T}, f32), -1, false), g = rnd({D.b * D.H, D.T, D.T}, f32);
    return [y, g] { (void)at::_softmax_backward_data(g, y, -1, at::kFloat); };
  }
  if (op.id == OpId::OutLayout) {  // [B H, T, hd] -> [T, B H, hd] contiguous
    how = "transpose.contiguous";
    auto o = rnd({D.b * D.H, D.T, D.hd}, act_);
    return [o] { (void)o.transpose(0, 1).contiguous(); };
  }
  return nullptr;
}

// A block's residual adds and the MLP's GELU, forward and backward.
Kernel KernelMaker::block_kernel(const Op& op, const Dims& D, std::string& how) {
  const at::ScalarType f32 = at::kFloat;
  if (op.id == OpId::Residual) {  // fp32 stream + branch output
    how = "add";
    auto x = rnd({D.R, D.d}, f32), y = rnd({D.R, D.d}, act_);
    return [x, y] { (void)at::add(x, y); };
  }
  if (op.id == OpId::ResidualBwd) {  // the two gradient paths meeting, fp32
    how = "add";
    auto x = rnd({D.R, D.d}, f32), y = rnd({D.R, D.d}, f32);
    return [x, y] { (void)at::add(x, y); };
  }
  if (op.id == OpId::Gelu) {
    how = "gelu";
    auto x = rnd({D.R, D.h}, act_);
    return [x] { (void)at::gelu(x); };
  }
  if (op.id == OpId::GeluBwd) {
    how = "gelu_backward";
    auto x = rnd({D.R, D.h}, act_), g = rnd({D.R, D.h}, act_);
    return [x, g] { (void)at::gelu_backward(g, x); };
  }
  return nullptr;
}

// The head's loss and its backward, and the class token's gradient scattered back into every token's.
Kernel KernelMaker::loss_kernel(const Op& op, const Dims& D, std::string& how) {
  const at::ScalarType f32 = at::kFloat;
  if (op.id == OpId::Loss) {  // log_softmax (fp32) + nll_loss
    how = "cross_entropy_loss";
    auto logits = rnd({D.b, D.C}, act_);
    auto y = torch::randint(0, D.C, {D.b}, torch::TensorOptions().dtype(at::kLong).device(dev_));
    return [logits, y] { (void)at::cross_entropy_loss(logits.to(at::kFloat), y); };
  }
  if (op.id == OpId::LossBwd) {  // nll_loss_backward + _log_softmax_backward_data
    how = "nll_loss_backward + _log_softmax_backward_data";
    auto logp = at::log_softmax(rnd({D.b, D.C}, f32), 1);
    auto y = torch::randint(0, D.C, {D.b}, torch::TensorOptions().dtype(at::kLong).device(dev_));
    auto go = torch::ones({}, torch::TensorOptions().dtype(f32).device(dev_));
    auto total = torch::tensor(static_cast<float>(D.b), torch::TensorOptions().dtype(f32).device(dev_));
    return [logp, y, go, total] {
      auto g = at::nll_loss_backward(go, logp, y, {}, at::Reduction::Mean, -100, total);
      (void)at::_log_softmax_backward_data(g, logp, 1, at::kFloat);
    };
  }
  if (op.id == OpId::SelectBwd) {  // the class token's gradient into zeros of every token
    how = "zeros + copy_";
    auto g = rnd({D.b, D.d}, f32);
    const int64_t T = D.T, b = D.b, d = D.d;
    const auto dev = dev_;
    return [g, T, b, d, dev] {
      auto z = torch::zeros({T, b, d}, torch::TensorOptions().dtype(at::kFloat).device(dev));
      z.select(0, 0).copy_(g);
    };
  }
  return nullptr;
}

// The (in, out) features of a linear layer.
std::pair<int64_t, int64_t> KernelMaker::linear_shape(LinearId lin, const Dims& D) const {
  switch (lin) {
    case LinearId::Qkv:
      return {D.d, 3 * D.d};
    case LinearId::OutProj:
      return {D.d, D.d};
    case LinearId::Fc1:
      return {D.d, D.h};
    case LinearId::Fc2:
      return {D.h, D.d};
    case LinearId::Head:
      return {D.d, D.C};
    case LinearId::PatchConv:
      return {D.P, D.d};
    case LinearId::None:
      break;
  }
  return {0, 0};
}

int64_t KernelMaker::linear_rows(LinearId lin, const Dims& D) const {
  return lin == LinearId::PatchConv ? D.b * D.N : lin == LinearId::Head ? D.b : D.R;
}

}  // namespace vitsim::calibrate
