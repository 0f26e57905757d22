// KernelMaker (kernel_maker.hpp): which kernel stands for an op, by its identity, and the device sweep's
// kernels (calibrate.hpp op_benchmarks: GEMMs, batched matmuls, copies and adds, the kernel families).
#include "bench/kernel_maker.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "vitsim/core/base/error.hpp"

namespace vitsim::calibrate {

Dims dims_of(const ViTConfig& m, int b) {
  Dims d;
  d.b = b;
  d.T = m.tokens();
  d.N = m.patches();
  d.K = m.class_tokens;
  d.d = m.width;
  d.h = m.mlp_hidden();
  d.H = m.heads;
  d.hd = m.width / m.heads;
  d.P = static_cast<int64_t>(m.patch) * m.patch * m.channels;
  d.C = m.classes;
  d.R = d.b * d.T;
  return d;
}

KernelMaker::KernelMaker(const Scenario& s, const torch::Device& dev)
    : m_(s.model), dev_(dev), half_(s.training.precision != Precision::FP32) {
  act_ = !half_ ? at::kFloat : s.training.precision == Precision::FP16 ? at::kHalf : at::kBFloat16;
}

torch::Tensor KernelMaker::rnd(at::IntArrayRef shape, at::ScalarType t) {
  const auto f32 = torch::TensorOptions().dtype(at::kFloat).device(dev_);
  if (dev_.is_cuda()) return torch::randn(shape, f32).to(t);
  if (!pool_.defined()) pool_ = torch::randn({kPool}, f32);
  torch::Tensor out = torch::empty(shape, f32);
  torch::Tensor flat = out.view({-1});
  const int64_t n = flat.numel();
  for (int64_t off = 0; off < n; off += kPool) {
    const int64_t len = std::min(kPool, n - off);
    flat.narrow(0, off, len).copy_(pool_.narrow(0, 0, len));
  }
  return out.to(t);
}

Kernel KernelMaker::make(const OpBenchmark& ob, std::string& how) {
  const Op& op = ob.op;
  switch (op.id) {
    case OpId::SweepGemm:
    case OpId::SweepBmmQk:
    case OpId::SweepBmmAv:
    case OpId::SweepCopy:
    case OpId::SweepAdd:
    case OpId::SweepKind:
      return sweep(op, how);
    default:
      break;
  }
  const Dims D = dims_of(m_, ob.micro_batch);
  if (is_conv(op.kind)) return conv(op, D, how);  // the patch embedding's convolution and its weight gradient
  if (is_matmul(op)) return matmul(op, how);
  return memory(op, D, how);  // data movement and norm ops
}

// A kernel-family sweep op (OpId::SweepKind, op_benchmarks.cpp), outputs allocated as the
// model's ops do and kept (Retained), operands cold like the model's ops (measure_ops' input sets).
Kernel KernelMaker::kind_sweep(const Op& op, std::string& how) {
  const at::ScalarType f32 = at::kFloat;
  auto keep = retained_;
  const int64_t e = static_cast<int64_t>(std::llround(op.elems));
  const int64_t rows = static_cast<int64_t>(std::llround(op.rows)), len = rows > 0 ? e / rows : 0;
  how = op_kind_name(op.kind);
  switch (op.kind) {
    case OpKind::Softmax: {
      auto x = rnd({rows, len}, f32);
      return [x, keep] { keep->keep(at::_softmax(x, -1, false)); };
    }
    case OpKind::SoftmaxBwd: {
      auto y = at::_softmax(rnd({rows, len}, f32), -1, false), g = rnd({rows, len}, f32);
      return [y, g, keep] { keep->keep(at::_softmax_backward_data(g, y, -1, at::kFloat)); };
    }
    case OpKind::LayerNorm: {
      auto x = rnd({rows, len}, f32), w = rnd({len}, f32), b = rnd({len}, f32);
      return [x, w, b, len, keep] { keep->keep(std::get<0>(at::native_layer_norm(x, {len}, w, b, 1e-6))); };
    }
    case OpKind::LayerNormBwd: {
      auto x = rnd({rows, len}, f32), w = rnd({len}, f32), b = rnd({len}, f32), dy = rnd({rows, len}, f32);
      auto fwd = at::native_layer_norm(x, {len}, w, b, 1e-6);
      auto mean = std::get<1>(fwd), rstd = std::get<2>(fwd);
      return [x, w, b, dy, mean, rstd, len, keep] {
        keep->keep(
            std::get<0>(at::native_layer_norm_backward(dy, x, {len}, mean, rstd, w, b, {true, true, true})));
      };
    }
    case OpKind::Gelu: {
      auto x = rnd({e}, f32);
      return [x, keep] { keep->keep(at::gelu(x)); };
    }
    case OpKind::GeluBwd: {
      auto x = rnd({e}, f32), g = rnd({e}, f32);
      return [x, g, keep] { keep->keep(at::gelu_backward(g, x)); };
    }
    case OpKind::Reduce: {  // a bias gradient's sum over rows: the op's rows are its outputs (core/ops)
      if (rows <= 0) break;
      auto g = rnd({e / rows, rows}, f32);
      return [g, keep] { keep->keep(g.sum(0)); };
    }
    case OpKind::Strided: {  // [B, D, N] gathered into [N, B, D]: B, D, N the op's batch, m and n
                             // (op_benchmarks.cpp)
      const int64_t b = std::llround(op.batch), d = std::llround(op.m), n = std::llround(op.n);
      if (b <= 0 || d <= 0 || n <= 0) break;
      auto x = rnd({b, d, n}, f32);
      return [x, keep] { keep->keep(x.permute({2, 0, 1}).contiguous()); };
    }
    default:
      break;
  }
  throw Error(fmt::format("internal: no kernel for sweep op {}", op.name));
}

// Sweep ops write into preallocated outputs: the device's throughput, no allocator in the way.
Kernel KernelMaker::sweep(const Op& op, std::string& how) {
  if (op.id == OpId::SweepKind) return kind_sweep(op, how);
  const at::ScalarType e = op.cls == OpClass::Memory ? at::kFloat : act_;
  const int64_t m = static_cast<int64_t>(op.m), n = static_cast<int64_t>(op.n),
                k = static_cast<int64_t>(op.k);
  if (op.id == OpId::SweepGemm) {
    how = "mm_out";
    auto a = rnd({m, k}, e), b = rnd({k, n}, e), c = empty({m, n}, e);
    return [a, b, c]() mutable { at::mm_out(c, a, b); };
  }
  if (op.id == OpId::SweepBmmQk || op.id == OpId::SweepBmmAv) {
    // In the layouts multi-head attention gives them: the [B H, T, hd] operand a transposed view of a
    // contiguous [T, B H, hd] (bmm_qk: Q K^T, bmm_av: P V), the scores contiguous.
    const int64_t bt = static_cast<int64_t>(op.batch);
    auto c = empty({bt, m, n}, e);
    if (op.id == OpId::SweepBmmQk) {
      how = "bmm_out(Q, K^T) strided";
      auto q = rnd({m, bt, k}, e).transpose(0, 1), kt = rnd({n, bt, k}, e).transpose(0, 1).transpose(1, 2);
      return [q, kt, c]() mutable { at::bmm_out(c, q, kt); };
    }
    how = "bmm_out(P, V) strided";
    auto p = rnd({bt, m, k}, e), v = rnd({k, bt, n}, e).transpose(0, 1);
    return [p, v, c]() mutable { at::bmm_out(c, p, v); };
  }
  const bool add = op.id == OpId::SweepAdd;  // else SweepCopy
  const int64_t elems = static_cast<int64_t>(op.bytes / (add ? 3 : 2) / 4);
  auto x = rnd({elems}, at::kFloat), y = rnd({elems}, at::kFloat), z = empty({elems}, at::kFloat);
  if (add) {
    how = "add_out";
    return [x, y, z]() mutable { at::add_out(z, x, y); };
  }
  how = "copy_";
  return [x, z]() mutable { z.copy_(x); };
}

}  // namespace vitsim::calibrate
