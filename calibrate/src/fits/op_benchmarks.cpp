// The ops `vitsim calibrate` times for the op model's fit: the scenario's model and a device sweep.
// Pure functions, no Torch, no MPI.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "vitsim/calibrate/calibrate.hpp"

namespace vitsim::calibrate {

namespace {

// The model: one layer of each kind (the first attention and MLP blocks stand for all of them), its ops
// at each micro-batch.
void model_benchmarks(const Workload& w, const std::vector<int>& micro_batches, Precision p,
                      std::vector<OpBenchmark>& out) {
  std::vector<int> layers;
  for (LayerKind kind : {LayerKind::PatchEmbed, LayerKind::Attention, LayerKind::Mlp, LayerKind::Head})
    for (int l = 0; l < static_cast<int>(w.layers.size()); ++l)
      if (w.layers[l].kind == kind) {
        layers.push_back(l);
        break;
      }
  for (int b : micro_batches)
    for (int l : layers)
      for (const Op& op : layer_ops(w, l, b, OpOptions{p})) out.push_back({op, b});
}

// GEMMs on a checkerboard of shapes and the attention's batched matmuls, in the matmul dtype.
void matmul_sweep(Precision p, int sweep_rows, std::vector<OpBenchmark>& out) {
  const double e = p == Precision::FP32 ? 4 : 2;
  auto matmul = [&](OpClass cls, OpId id, const std::string& name, double batch, double m, double n,
                    double k) {
    Op op = matmul_op(name, Pass::Fwd, cls, batch, m, n, k, e);
    op.id = id;
    out.push_back({op, 0});
  };
  const int dims[] = {32, 64, 128, 256, 512, 1024, 2048};
  std::vector<int> ms{sweep_rows, 256, 1024, 4096};
  for (size_t im = 0; im < ms.size(); ++im)
    for (int in = 0; in < 7; ++in)
      for (int ik = 0; ik < 7; ++ik) {
        const double m = ms[im], n = dims[in], k = dims[ik];
        if ((in + ik + static_cast<int>(im)) % 2 != 0 || 2 * m * n * k > 4294967296.0) continue;
        matmul(OpClass::Gemm, OpId::SweepGemm,
               fmt::format("sweep.gemm.m{}.n{}.k{}", ms[im], dims[in], dims[ik]), 1, m, n, k);
      }
  for (int bh : {64, 256})
    for (int t : {17, 65, 197})
      for (int hd : {16, 32, 64}) {
        matmul(OpClass::AttnMatmul, OpId::SweepBmmQk, fmt::format("sweep.bmm_qk.b{}.t{}.hd{}", bh, t, hd), bh,
               t, t, hd);
        matmul(OpClass::AttnMatmul, OpId::SweepBmmAv, fmt::format("sweep.bmm_av.b{}.t{}.hd{}", bh, t, hd), bh,
               t, hd, t);
      }
}

// Kernel families (core/model/ops.hpp OpKind) at several row lengths, operands in the cache: the cost per
// element and per row that bounds them below the bandwidth. Elements about 2^18 and 2^20 (fp32).
void family_sweep(std::vector<OpBenchmark>& out) {
  auto kind = [&](OpKind k, OpClass cls, const std::string& name, double elems, double rows,
                  double bytes) -> Op& {
    Op op = memory_op(name, Pass::Fwd, bytes, 1, cls);
    op.id = OpId::SweepKind;
    op.kind = k;
    op.elems = elems;
    op.rows = rows;
    out.push_back({op, 0});
    return out.back().op;
  };
  for (double target : {262144.0, 1048576.0}) {
    for (int t : {17, 65, 197}) {
      const double rows = std::round(target / t), e = rows * t;
      kind(OpKind::Softmax, OpClass::Norm, fmt::format("sweep.softmax.t{}.r{:.0f}", t, rows), e, rows, 8 * e);
      kind(OpKind::SoftmaxBwd, OpClass::Norm, fmt::format("sweep.softmax_bwd.t{}.r{:.0f}", t, rows), e, rows,
           12 * e);
    }
    for (int d : {64, 192, 512, 1024}) {
      const double rows = std::round(target / d), e = rows * d;
      kind(OpKind::LayerNorm, OpClass::Norm, fmt::format("sweep.layer_norm.d{}.r{:.0f}", d, rows), e, rows,
           8 * e + 8 * rows);
      kind(OpKind::LayerNormBwd, OpClass::Norm, fmt::format("sweep.layer_norm_bwd.d{}.r{:.0f}", d, rows), e,
           rows, 20 * e + 8 * rows);
    }
    kind(OpKind::Gelu, OpClass::Norm, fmt::format("sweep.gelu.e{:.0f}", target), target, 0, 8 * target);
    kind(OpKind::GeluBwd, OpClass::Norm, fmt::format("sweep.gelu_bwd.e{:.0f}", target), target, 0,
         12 * target);
    for (int n : {64, 256, 1024}) {
      const double rows = std::round(target / n), e = rows * n;
      kind(OpKind::Reduce, OpClass::Memory, fmt::format("sweep.reduce.n{}.r{:.0f}", n, rows), e, n,
           4 * e + 4 * n);
    }
    for (int d : {64, 256})
      for (int n : {16, 64}) {
        const double b = std::round(target / (d * n)), e = b * d * n;
        Op& gather = kind(OpKind::Strided, OpClass::Memory,
                          fmt::format("sweep.strided.d{}.n{}.b{:.0f}", d, n, b), e, 0, 8 * e);
        // The gather's shape for its kernel (compute.cpp): [B, D, N] read as batch B of [m, n] = [D, N],
        // written as [N, B, D]. A memory op's batch, m and n enter no prediction (core/model/ops.cpp: matmuls
        // only).
        gather.batch = b;
        gather.m = d;
        gather.n = n;
      }
  }
}

// Copies and adds of 64 KiB per tensor upwards, x4 apart, up to the first size of at least 64 MiB and
// twice the last-level cache.
void copy_sweep(double llc_bytes, std::vector<OpBenchmark>& out) {
  const double largest = std::max(64.0 * 1024 * 1024, 2 * llc_bytes);
  for (double size = 64.0 * 1024;; size *= 4) {
    for (int reads : {1, 2}) {
      Op op = memory_op(fmt::format("sweep.{}.{:.0f}", reads == 1 ? "copy" : "add", size), Pass::Fwd,
                        size * (reads + 1));
      op.id = reads == 1 ? OpId::SweepCopy : OpId::SweepAdd;
      out.push_back({op, 0});
    }
    if (size >= largest) break;
  }
}

}  // namespace

std::vector<OpBenchmark> op_benchmarks(const Workload& w, const std::vector<int>& micro_batches, Precision p,
                                       int sweep_rows, double llc_bytes) {
  std::vector<OpBenchmark> out;
  model_benchmarks(w, micro_batches, p, out);
  matmul_sweep(p, sweep_rows, out);
  family_sweep(out);
  copy_sweep(llc_bytes, out);
  return out;
}

double op_sample_time(const vitsim::Op& op, const DeviceFigures& f) {
  return run_ops({op}, f).end_s;
}

}  // namespace vitsim::calibrate
