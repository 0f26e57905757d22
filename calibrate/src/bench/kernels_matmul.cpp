// KernelMaker's matmul-shaped kernels (kernel_maker.hpp): the patch embedding's convolution, the linear
// layers' GEMMs and attention's batched matmuls, each in the layouts the trainer's model runs them in.
#include "bench/kernel_maker.hpp"

namespace vitsim::calibrate {

// The patch embedding as the trainer's Conv2d runs it (stride = kernel = patch): the convolution
// forward with its bias, and its backward for the weight and bias (the images need no gradient).
Kernel KernelMaker::conv(const Op& op, const Dims& D, std::string& how) {
  const int64_t p = m_.patch, c = m_.channels, s = m_.image_size, g = s / p;
  auto x = rnd({D.b, c, s, s}, act_), w = rnd({D.d, c, p, p}, act_), bias = rnd({D.d}, act_);
  if (op.kind == OpKind::Conv) {
    how = "conv2d";
    return [x, w, bias, p] { (void)at::conv2d(x, w, bias, {p, p}); };
  }
  how = "convolution_backward (weight, bias)";
  auto dy = rnd({D.b, D.d, g, g}, act_);
  const int64_t d = D.d;
  return [dy, x, w, p, d] {
    (void)at::convolution_backward(dy, x, w, at::IntArrayRef{d}, {p, p}, {0, 0}, {1, 1}, false, {0, 0}, 1,
                                   {false, true, true});
  };
}

// Attention's matmuls ("qk", "av" and their gradients); a fused attention op has none.
Kernel KernelMaker::attention_matmul(const Op& op, std::string& how) {
  const int64_t m = static_cast<int64_t>(op.m), n = static_cast<int64_t>(op.n),
                k = static_cast<int64_t>(op.k);
  if (op.id == OpId::Sdpa || op.id == OpId::SdpaBwd)
    return nullptr;  // fused attention: no stand-in on this LibTorch
  // bmm in the layouts of multi-head attention (real/src/model/model.cpp, torch 1.13's
  // multi_head_attention_forward) and of its autograd backward: q, k, v and the output's gradient
  // are transposed views [B H, T, hd] of contiguous [T, B H, hd] tensors; scores and probabilities
  // [B H, T, T] are contiguous.
  const int64_t bt = static_cast<int64_t>(op.batch);
  auto heads = [&](int64_t t, int64_t hd) { return rnd({t, bt, hd}, act_).transpose(0, 1); };  // [BH, t, hd]
  auto square = [&](int64_t t) { return rnd({bt, t, t}, act_); };
  switch (op.id) {
    case OpId::Qk: {  // S = Q K^T: m = n = T, k = hd
      how = "bmm(Q, K^T)";
      auto q = heads(m, k), kk = heads(n, k);
      return [q, kk] { (void)at::bmm(q, kk.transpose(1, 2)); };
    }
    case OpId::Av: {  // O = P V: m = T, n = hd, k = T
      how = "bmm(P, V)";
      auto p = square(m), v = heads(k, n);
      return [p, v] { (void)at::bmm(p, v); };
    }
    case OpId::QkDq: {  // dQ = dS K
      how = "bmm(dS, K)";
      auto ds = square(m), kk = heads(k, n);
      return [ds, kk] { (void)at::bmm(ds, kk); };
    }
    case OpId::QkDk: {  // dK^T = Q^T dS ([B H, hd, T], as autograd computes the second operand's gradient)
      how = "bmm(Q^T, dS)";
      auto q = heads(k, n), ds = square(k);
      return [q, ds] { (void)at::bmm(q.transpose(1, 2), ds); };
    }
    case OpId::AvDprobs: {  // dP = dO V^T
      how = "bmm(dO, V^T)";
      auto dout = heads(m, k), v = heads(n, k);
      return [dout, v] { (void)at::bmm(dout, v.transpose(1, 2)); };
    }
    case OpId::AvDv: {  // dV = P^T dO
      how = "bmm(P^T, dO)";
      auto p = square(m), dout = heads(k, n);
      return [p, dout] { (void)at::bmm(p.transpose(1, 2), dout); };
    }
    default:
      break;
  }
  how = "bmm";
  auto a = rnd({bt, m, k}, act_), b = rnd({bt, k, n}, act_);
  return [a, b] { (void)at::bmm(a, b); };
}

// GEMMs as the trainer's linear layers run them; attention matmuls as bmm.
Kernel KernelMaker::matmul(const Op& op, std::string& how) {
  if (op.cls == OpClass::AttnMatmul) return attention_matmul(op, how);
  const int64_t m = static_cast<int64_t>(op.m), n = static_cast<int64_t>(op.n),
                k = static_cast<int64_t>(op.k);
  if (op.id == OpId::Wgrad) {  // dW[out, in] = dY^T X: dY [rows, out] read transposed
    how = "mm(dY^T, X)";
    auto dy = rnd({k, m}, act_), x = rnd({k, n}, act_);
    return [dy, x] { (void)at::mm(dy.t(), x); };
  }
  if (op.id == OpId::Dgrad || op.kernels == 1) {  // dX[rows, in] = dY[rows, out] W[out, in]
    how = "mm";
    auto a = rnd({m, k}, act_), b = rnd({k, n}, act_);
    return [a, b] { (void)at::mm(a, b); };
  }
  // y[rows, out] = x[rows, in] W[out, in]^T + bias. As torch 1.13's linear runs it: on the blocks' 3-D
  // [T, b, in] input, matmul's mm then an in-place bias add; on a 2-D input (the head) and as the stand-in
  // for the patch embedding's convolution, addmm (the bias broadcast into the output, then the GEMM).
  auto bias = rnd({n}, act_), x = rnd({m, k}, act_), w = rnd({n, k}, act_);
  const bool block = op.linear == LinearId::Qkv || op.linear == LinearId::OutProj ||
                     op.linear == LinearId::Fc1 || op.linear == LinearId::Fc2;
  if (block) {
    how = "mm + add_(bias)";
    return [bias, x, w] { at::mm(x, w.t()).add_(bias); };
  }
  how = "addmm";
  return [bias, x, w] { (void)at::addmm(bias, x, w.t()); };
}

}  // namespace vitsim::calibrate
