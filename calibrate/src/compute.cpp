// Compute and copy micro-benchmarks with LibTorch: the only Torch translation unit of calibrate/.
#include <ATen/autocast_mode.h>
#include <dlfcn.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <chrono>
#include <deque>
#include <memory>
#include <cmath>
#include <cstdio>
#include <functional>
#include <thread>

#include <fmt/format.h>

#include "measure.hpp"
#include "vitsim/real/autocast.hpp"
#include "vitsim/core/error.hpp"
#include "vitsim/core/system.hpp"
#include "vitsim/real/model.hpp"
#include "vitsim/real/optim.hpp"
#include "vitsim/real/train.hpp"

namespace vitsim::calibrate {
namespace {
using Clock = std::chrono::steady_clock;

torch::Device device_of(const DeviceInfo& info) {
  return info.device == "cpu" ? torch::Device(torch::kCPU) : torch::Device(info.device);
}

// The clock at a phase boundary; on CUDA after the device finished the phase's kernels.
Clock::time_point mark(const torch::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize(d.index());
  return Clock::now();
}

using real::Autocast;  // vitsim/real/autocast.hpp

}  // namespace

std::string torch_version() { return TORCH_VERSION; }

DeviceInfo open_device(const Scenario& s, int local_rank, int local_size) {
  DeviceInfo info;
  std::string name = s.run.device;
  if (name == "auto") name = torch::cuda::is_available() ? "cuda" : "cpu";
  if (name == "cuda" && !torch::cuda::is_available())
    throw Error("run.device = cuda but this LibTorch has no usable CUDA device (build against a CUDA LibTorch via Torch_DIR)");
  if (s.training.precision == Precision::FP16 && name != "cuda")
    throw Error("training.precision fp16 needs run.device cuda (LibTorch's CPU autocast runs bf16 only)");
  info.device = name == "cuda" ? fmt::format("cuda:{}", local_rank % torch::cuda::device_count()) : "cpu";
  info.name = "cpu";
  // Threads as the trainer sets them: ranks x threads never exceeds the cores
  // (docs/sources.md "Software and machine facts", threads per rank).
  const real::ThreadPlan plan = real::plan_threads(s.run.threads, local_size);
  info.threads = plan.threads;
  if (!plan.warning.empty()) fmt::print(stderr, "vitsim calibrate: warning: {}\n", plan.warning);
  torch::set_num_threads(info.threads);
  using SetFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) fn(info.threads);
  if (name == "cuda") {
    // The multiprocessor count (cudaDevAttrMultiProcessorCount = 16) from the CUDA runtime LibTorch loaded.
    using AttrFn = int (*)(int*, int, int);
    if (auto fn = reinterpret_cast<AttrFn>(dlsym(RTLD_DEFAULT, "cudaDeviceGetAttribute"))) {
      int v = 0;
      if (fn(&v, 16, local_rank % static_cast<int>(torch::cuda::device_count())) == 0 && v > 0) info.sm_count = v;
    }
  }
  return info;
}

namespace {

// The scenario's model on the device, trained as the trainer trains it: parameters and gradients in flat
// buffers and the flat optimizer (its phase divides and zeroes the gradient buffer), one micro-batch of
// random images and labels.
struct ModelBench {
  real::VisionTransformer model{nullptr};
  torch::Tensor flat_grad;
  std::unique_ptr<real::FlatOptimizer> optimizer;
  torch::Tensor x, y;
  bool cuda = false;
  Precision prec = Precision::FP32;
};

ModelBench model_bench(const Scenario& s, const torch::Device& dev, int micro_batch) {
  ModelBench mb;
  mb.cuda = dev.is_cuda();
  mb.prec = s.training.precision;
  torch::manual_seed(s.training.seed);
  mb.model = real::VisionTransformer(s.model);
  mb.model->to(dev);
  mb.model->train();
  std::vector<torch::Tensor> params = mb.model->parameters();
  real::FlatParameters flat = real::flatten_parameters(params);
  mb.flat_grad = flat.grads;
  mb.optimizer = std::make_unique<real::FlatOptimizer>(real::optimizer_config(s.training), flat.params, flat.grads);
  const auto& m = s.model;
  mb.x = torch::randn({micro_batch, m.channels, m.image_size, m.image_size}, torch::TensorOptions().device(dev));
  mb.y = torch::randint(0, m.classes, {micro_batch}, torch::TensorOptions().dtype(torch::kInt64).device(dev));
  return mb;
}

// Whole model: forward (with the loss), backward, optimizer step, timed like the trainer's phases.
void time_whole_model(ModelBench& mb, const torch::Device& dev, int warmup, int iters, int ranks, ComputeSample& out) {
  std::vector<double> fwd, bwd, opt;
  for (int it = 0; it < warmup + iters; ++it) {
    auto a = mark(dev);
    torch::Tensor loss;
    {
      Autocast ac(mb.cuda, mb.prec);
      loss = torch::cross_entropy_loss(mb.model->forward(mb.x), mb.y);
    }
    auto b = mark(dev);
    loss.backward();
    auto c = mark(dev);
    if (ranks > 1) mb.flat_grad.div_(ranks);
    mb.optimizer->step();
    mb.flat_grad.zero_();
    auto d = mark(dev);
    if (it >= warmup) {
      fwd.push_back(seconds(a, b));
      bwd.push_back(seconds(b, c));
      opt.push_back(seconds(c, d));
    }
  }
  out.fwd = spread_of(fwd);
  out.bwd = spread_of(bwd);
  out.optimizer = spread_of(opt);
}

// One layer of core's layer table as a function of its input.
struct Segment {
  std::string name;
  std::function<torch::Tensor(const torch::Tensor&)> run;
};
std::vector<Segment> layer_segments(ModelBench& mb, const ViTConfig& m) {
  auto& model = mb.model;
  std::vector<Segment> segs;
  segs.push_back({"patch_embed", [&model, &m](const torch::Tensor& img) {
                    const auto b = img.size(0);
                    auto h = model->patch_embed(img).flatten(2).permute({2, 0, 1});
                    h = torch::cat({model->class_token.expand({1, b, m.width}), h}, 0);
                    return model->drop(h + model->pos_embedding);
                  }});
  for (int i = 0; i < m.depth; ++i) {
    auto* blk = (*model->blocks)[i]->as<real::EncoderBlockImpl>();
    segs.push_back({fmt::format("block{}.attn", i), [blk](const torch::Tensor& h) {
                      auto z = blk->ln1(h);
                      z = blk->self_attention(z);  // the trainer's attention (real/src/model.cpp)
                      return h + blk->drop(z);
                    }});
    segs.push_back({fmt::format("block{}.mlp", i), [blk](const torch::Tensor& h) {
                      auto z = blk->fc2(blk->drop(torch::gelu(blk->fc1(blk->ln2(h)))));
                      return h + blk->drop(z);
                    }});
  }
  const torch::Tensor y = mb.y;
  segs.push_back({"head", [&model, y](const torch::Tensor& h) {
                    return torch::cross_entropy_loss(model->head(model->ln(h)[0]), y);
                  }});
  return segs;
}

// Layer by layer, in core's layer table order: each layer's input is detached, so its backward is
// its own; the sum exceeds the whole pass by the boundary overheads, so only the shares are used.
void time_layers(ModelBench& mb, const ViTConfig& m, const torch::Device& dev, int warmup, int iters, ComputeSample& out) {
  const std::vector<Segment> segs = layer_segments(mb, m);
  const size_t n = segs.size();
  std::vector<std::vector<double>> f(n), b(n);
  for (int it = 0; it < warmup + iters; ++it) {
    std::vector<torch::Tensor> ins(n), outs(n);
    torch::Tensor cur = mb.x;
    for (size_t k = 0; k < n; ++k) {
      ins[k] = k == 0 ? mb.x : cur.detach().requires_grad_(true);
      auto t0 = mark(dev);
      {
        Autocast ac(mb.cuda, mb.prec);
        outs[k] = segs[k].run(ins[k]);
      }
      auto t1 = mark(dev);
      if (it >= warmup) f[k].push_back(seconds(t0, t1));
      cur = outs[k];
    }
    torch::Tensor g;
    for (size_t k = n; k-- > 0;) {
      auto t0 = mark(dev);
      if (k + 1 == n)
        outs[k].backward();
      else
        outs[k].backward(g);
      auto t1 = mark(dev);
      if (it >= warmup) b[k].push_back(seconds(t0, t1));
      if (k > 0) g = ins[k].grad();
    }
    mb.flat_grad.zero_();
  }
  for (size_t k = 0; k < n; ++k) out.layers.push_back({segs[k].name, spread_of(f[k]), spread_of(b[k])});
}

}  // namespace

ComputeSample measure_compute(const Scenario& s, const DeviceInfo& info, int micro_batch, int warmup, int iters,
                              int ranks) {
  const torch::Device dev = device_of(info);
  ModelBench mb = model_bench(s, dev, micro_batch);
  ComputeSample out;
  out.micro_batch = micro_batch;
  time_whole_model(mb, dev, warmup, iters, ranks, out);
  time_layers(mb, s.model, dev, warmup, iters, out);
  return out;
}

// ---- op benchmarks: one LibTorch kernel per op of the op model ----
namespace {

using Kernel = std::function<void()>;

// The model's sizes at one micro-batch.
struct Dims {
  int64_t b = 0, T = 0, N = 0, d = 0, h = 0, H = 0, hd = 0, P = 0, C = 0, R = 0;
};
Dims dims_of(const ViTConfig& m, int b) {
  Dims d;
  d.b = b;
  d.T = m.tokens();
  d.N = d.T - 1;
  d.d = m.width;
  d.h = m.mlp_hidden();
  d.H = m.heads;
  d.hd = m.width / m.heads;
  d.P = static_cast<int64_t>(m.patch) * m.patch * m.channels;
  d.C = m.classes;
  d.R = d.b * d.T;
  return d;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
bool starts_with(const std::string& s, const std::string& head) { return s.rfind(head, 0) == 0; }

class KernelMaker {
 public:
  KernelMaker(const Scenario& s, const torch::Device& dev)
      : m_(s.model), dev_(dev), half_(s.training.precision != Precision::FP32) {
    act_ = !half_ ? at::kFloat : s.training.precision == Precision::FP16 ? at::kHalf : at::kBFloat16;
  }

  // The kernel standing for one op, its inputs made here (not timed); `how` names it.
  Kernel make(const OpBenchmark& ob, std::string& how) {
    const Op& op = ob.op;
    if (ob.micro_batch == 0) return sweep(op, how);
    const Dims D = dims_of(m_, ob.micro_batch);
    // The op's name without its layer's ("block0.attn.qkv.wgrad" -> "qkv.wgrad").
    std::string rel = op.name;
    for (const char* prefix : {"patch_embed.", "head."})
      if (starts_with(rel, prefix)) rel = rel.substr(std::string(prefix).size());
    if (starts_with(rel, "block")) {
      const auto a = rel.find('.'), b = rel.find('.', a + 1);
      rel = b == std::string::npos ? rel : rel.substr(b + 1);
    }
    if (is_conv(op.kind)) return conv(op, D, how);
    if (is_matmul(op)) return matmul(op, rel, how);
    return memory(op, rel, D, how);  // data movement and norm ops, by name
  }

 private:
  const ViTConfig& m_;
  torch::Device dev_;
  bool half_;
  at::ScalarType act_ = at::kFloat;

  torch::Tensor rnd(at::IntArrayRef shape, at::ScalarType t) {
    return torch::randn(shape, torch::TensorOptions().dtype(at::kFloat).device(dev_)).to(t);
  }
  torch::Tensor empty(at::IntArrayRef shape, at::ScalarType t) {
    return torch::empty(shape, torch::TensorOptions().dtype(t).device(dev_));
  }

  // The patch embedding as the trainer's Conv2d runs it (stride = kernel = patch): the convolution
  // forward with its bias, and its backward for the weight and bias (the images need no gradient).
  Kernel conv(const Op& op, const Dims& D, std::string& how) {
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

  // Outputs of the family sweeps kept alive, the oldest dropped past kRetainBytes: as in a training
  // pass, where an op's output is a fresh block while the activations before it are still held, each
  // run writes to memory that is not in the cache (a block freed by the previous run and handed back at
  // once would be). Measured on this VM (1 thread, softmax over [64, 197, 197]): 1.09 ns an element with
  // the output block reused, 2.2 ns inside an autograd graph; its backward 0.37 against 1.5 ns.
  struct Retained {
    std::deque<torch::Tensor> outputs;
    double bytes = 0;
    void keep(const torch::Tensor& t) {
      outputs.push_back(t);
      bytes += static_cast<double>(t.numel()) * t.element_size();
      while (bytes > kRetainBytes && outputs.size() > 1) {
        bytes -= static_cast<double>(outputs.front().numel()) * outputs.front().element_size();
        outputs.pop_front();
      }
    }
    static constexpr double kRetainBytes = 256.0 * 1024 * 1024;  // 8x this VM's 32 MiB last-level cache
  };
  std::shared_ptr<Retained> retained_ = std::make_shared<Retained>();

  // A kernel-family sweep op (fit.cpp op_benchmarks: "sweep.<family>.<dims>"), outputs allocated as the
  // model's ops do and kept (Retained), operands cold like the model's ops (measure_ops' input sets).
  Kernel kind_sweep(const Op& op, std::string& how) {
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
          keep->keep(std::get<0>(at::native_layer_norm_backward(dy, x, {len}, mean, rstd, w, b, {true, true, true})));
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
      case OpKind::Strided: {  // [B, D, N] gathered into [N, B, D]: B, D, N the op's batch, m and n (fit.cpp)
        const int64_t b = std::llround(op.batch), d = std::llround(op.m), n = std::llround(op.n);
        if (b <= 0 || d <= 0 || n <= 0) break;
        auto x = rnd({b, d, n}, f32);
        return [x, keep] { keep->keep(x.permute({2, 0, 1}).contiguous()); };
      }
      default: break;
    }
    throw Error(fmt::format("internal: no kernel for sweep op {}", op.name));
  }

  // Sweep ops write into preallocated outputs: the device's throughput, no allocator in the way.
  Kernel sweep(const Op& op, std::string& how) {
    if (op.kind != OpKind::None) return kind_sweep(op, how);
    const at::ScalarType e = op.cls == OpClass::Memory ? at::kFloat : act_;
    const int64_t m = static_cast<int64_t>(op.m), n = static_cast<int64_t>(op.n), k = static_cast<int64_t>(op.k);
    if (op.cls == OpClass::Gemm) {
      how = "mm_out";
      auto a = rnd({m, k}, e), b = rnd({k, n}, e), c = empty({m, n}, e);
      return [a, b, c]() mutable { at::mm_out(c, a, b); };
    }
    if (op.cls == OpClass::AttnMatmul) {
      // In the layouts multi-head attention gives them: the [B H, T, hd] operand a transposed view of a
      // contiguous [T, B H, hd] (bmm_qk: Q K^T, bmm_av: P V), the scores contiguous.
      const int64_t bt = static_cast<int64_t>(op.batch);
      auto c = empty({bt, m, n}, e);
      if (starts_with(op.name, "sweep.bmm_qk.")) {
        how = "bmm_out(Q, K^T) strided";
        auto q = rnd({m, bt, k}, e).transpose(0, 1), kt = rnd({n, bt, k}, e).transpose(0, 1).transpose(1, 2);
        return [q, kt, c]() mutable { at::bmm_out(c, q, kt); };
      }
      how = "bmm_out(P, V) strided";
      auto p = rnd({bt, m, k}, e), v = rnd({k, bt, n}, e).transpose(0, 1);
      return [p, v, c]() mutable { at::bmm_out(c, p, v); };
    }
    const bool add = starts_with(op.name, "sweep.add.");
    const int64_t elems = static_cast<int64_t>(op.bytes / (add ? 3 : 2) / 4);
    auto x = rnd({elems}, at::kFloat), y = rnd({elems}, at::kFloat), z = empty({elems}, at::kFloat);
    if (add) {
      how = "add_out";
      return [x, y, z]() mutable { at::add_out(z, x, y); };
    }
    how = "copy_";
    return [x, z]() mutable { z.copy_(x); };
  }

  // Attention's matmuls by name ("qk", "av" and their gradients); a fused attention op has none.
  Kernel attention_matmul(const Op& op, const std::string& rel, std::string& how) {
    const int64_t m = static_cast<int64_t>(op.m), n = static_cast<int64_t>(op.n), k = static_cast<int64_t>(op.k);
    if (starts_with(rel, "sdpa")) return nullptr;  // fused attention: no stand-in on this LibTorch
    // bmm in the layouts of multi-head attention (real/src/model.cpp, torch 1.13's
    // multi_head_attention_forward) and of its autograd backward: q, k, v and the output's gradient
    // are transposed views [B H, T, hd] of contiguous [T, B H, hd] tensors; scores and probabilities
    // [B H, T, T] are contiguous.
    const int64_t bt = static_cast<int64_t>(op.batch);
    auto heads = [&](int64_t t, int64_t hd) { return rnd({t, bt, hd}, act_).transpose(0, 1); };  // [BH, t, hd]
    auto square = [&](int64_t t) { return rnd({bt, t, t}, act_); };
    if (rel == "qk") {  // S = Q K^T: m = n = T, k = hd
      how = "bmm(Q, K^T)";
      auto q = heads(m, k), kk = heads(n, k);
      return [q, kk] { (void)at::bmm(q, kk.transpose(1, 2)); };
    }
    if (rel == "av") {  // O = P V: m = T, n = hd, k = T
      how = "bmm(P, V)";
      auto p = square(m), v = heads(k, n);
      return [p, v] { (void)at::bmm(p, v); };
    }
    if (rel == "qk.dq") {  // dQ = dS K
      how = "bmm(dS, K)";
      auto ds = square(m), kk = heads(k, n);
      return [ds, kk] { (void)at::bmm(ds, kk); };
    }
    if (rel == "qk.dk") {  // dK^T = Q^T dS ([B H, hd, T], as autograd computes the second operand's gradient)
      how = "bmm(Q^T, dS)";
      auto q = heads(k, n), ds = square(k);
      return [q, ds] { (void)at::bmm(q.transpose(1, 2), ds); };
    }
    if (rel == "av.dprobs") {  // dP = dO V^T
      how = "bmm(dO, V^T)";
      auto dout = heads(m, k), v = heads(n, k);
      return [dout, v] { (void)at::bmm(dout, v.transpose(1, 2)); };
    }
    if (rel == "av.dv") {  // dV = P^T dO
      how = "bmm(P^T, dO)";
      auto p = square(m), dout = heads(k, n);
      return [p, dout] { (void)at::bmm(p.transpose(1, 2), dout); };
    }
    how = "bmm";
    auto a = rnd({bt, m, k}, act_), b = rnd({bt, k, n}, act_);
    return [a, b] { (void)at::bmm(a, b); };
  }

  // GEMMs as the trainer's linear layers run them; attention matmuls as bmm.
  Kernel matmul(const Op& op, const std::string& rel, std::string& how) {
    if (op.cls == OpClass::AttnMatmul) return attention_matmul(op, rel, how);
    const int64_t m = static_cast<int64_t>(op.m), n = static_cast<int64_t>(op.n), k = static_cast<int64_t>(op.k);
    if (ends_with(rel, ".wgrad")) {  // dW[out, in] = dY^T X: dY [rows, out] read transposed
      how = "mm(dY^T, X)";
      auto dy = rnd({k, m}, act_), x = rnd({k, n}, act_);
      return [dy, x] { (void)at::mm(dy.t(), x); };
    }
    if (ends_with(rel, ".dgrad") || op.kernels == 1) {  // dX[rows, in] = dY[rows, out] W[out, in]
      how = "mm";
      auto a = rnd({m, k}, act_), b = rnd({k, n}, act_);
      return [a, b] { (void)at::mm(a, b); };
    }
    // y[rows, out] = x[rows, in] W[out, in]^T + bias. As torch 1.13's linear runs it: on the blocks' 3-D
    // [T, b, in] input, matmul's mm then an in-place bias add; on a 2-D input (the head) and as the stand-in
    // for the patch embedding's convolution, addmm (the bias broadcast into the output, then the GEMM).
    auto bias = rnd({n}, act_), x = rnd({m, k}, act_), w = rnd({n, k}, act_);
    if (starts_with(op.name, "block")) {
      how = "mm + add_(bias)";
      return [bias, x, w] { at::mm(x, w.t()).add_(bias); };
    }
    how = "addmm";
    return [bias, x, w] { (void)at::addmm(bias, x, w.t()); };
  }

  // The (in, out) features of a linear layer's name.
  std::pair<int64_t, int64_t> linear_shape(const std::string& lin, const Dims& D) {
    if (lin == "qkv") return {D.d, 3 * D.d};
    if (lin == "out_proj") return {D.d, D.d};
    if (lin == "fc1") return {D.d, D.h};
    if (lin == "fc2") return {D.h, D.d};
    if (lin == "fc") return {D.d, D.C};
    if (lin == "conv") return {D.P, D.d};
    return {0, 0};
  }
  int64_t linear_rows(const std::string& lin, const Dims& D) {
    return lin == "conv" ? D.b * D.N : lin == "fc" ? D.b : D.R;
  }

  // Data movement and norm ops of the model, by name: the first group that knows the op makes its
  // kernel; anything else is a copy of as many fp32 elements as its bytes move (read + write).
  Kernel memory(const Op& op, const std::string& rel, const Dims& D, std::string& how) {
    const std::string first = rel.substr(0, rel.find('.'));
    const bool is_ln = first == "ln" || first == "ln1" || first == "ln2";
    if (Kernel k = is_ln ? layer_norm_kernel(op, rel, first, D, how) : nullptr) return k;
    if (Kernel k = parameter_kernel(rel, first, is_ln, D, how)) return k;
    if (Kernel k = cast_kernel(op, rel, how)) return k;
    if (Kernel k = embedding_kernel(rel, D, how)) return k;
    if (Kernel k = dropout_kernel(op, rel, how)) return k;
    if (Kernel k = attention_kernel(rel, D, how)) return k;
    if (Kernel k = block_kernel(rel, D, how)) return k;
    if (Kernel k = loss_kernel(rel, D, how)) return k;
    how = "copy (generic)";
    auto x = rnd({std::max<int64_t>(1, static_cast<int64_t>(op.bytes / 8))}, at::kFloat);
    return [x] { (void)x.clone(); };
  }

  // LayerNorm over the width and its backward, rows from the op's bytes (rows (d (4 + 4) + 2 x 4)
  // forward, rows (d 20 + 8) backward).
  Kernel layer_norm_kernel(const Op& op, const std::string& rel, const std::string& first, const Dims& D,
                           std::string& how) {
    const at::ScalarType f32 = at::kFloat;
    const int64_t d = D.d;
    if (rel == first) {
      how = "native_layer_norm";
      const int64_t rows = static_cast<int64_t>(std::llround(op.bytes / (8.0 * D.d + 8)));
      auto x = rnd({rows, D.d}, f32), w = rnd({D.d}, f32), b = rnd({D.d}, f32);
      return [x, w, b, d] { (void)at::native_layer_norm(x, {d}, w, b, 1e-6); };
    }
    if (rel == first + ".bwd") {
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
  Kernel parameter_kernel(const std::string& rel, const std::string& first, bool is_ln, const Dims& D,
                          std::string& how) {
    const at::ScalarType f32 = at::kFloat;
    const auto [in, out] = linear_shape(first, D);
    if (ends_with(rel, ".grad_acc")) {
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
    if (ends_with(rel, ".bias_grad") && in > 0) {
      how = "sum(0)";
      auto g = rnd({linear_rows(first, D), out}, act_);
      return [g] { (void)g.sum(0); };
    }
    if (ends_with(rel, ".cast_w") && in > 0) {
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
  Kernel cast_kernel(const Op& op, const std::string& rel, std::string& how) {
    if (!(ends_with(rel, "cast") || ends_with(rel, "cast_bwd") || rel == "cast_image")) return nullptr;
    const bool from_half = ends_with(rel, "scores.cast") || ends_with(rel, "probs.cast_bwd") ||
                           (ends_with(rel, ".cast_bwd") && !ends_with(rel, "scores.cast_bwd"));
    const int64_t elems = static_cast<int64_t>(std::llround(op.bytes / 6));
    auto x = rnd({elems}, from_half ? act_ : at::kFloat);
    const auto t = from_half ? at::kFloat : act_;
    how = from_half ? "to(float)" : "to(half)";
    return [x, t] { (void)x.to(t); };
  }

  // The patch embedding's tokens: the class token joined, the position embedding added, and their
  // backward.
  Kernel embedding_kernel(const std::string& rel, const Dims& D, std::string& how) {
    const at::ScalarType f32 = at::kFloat;
    if (rel == "cat_class_token") {  // cat(class token expanded, conv output [b, d, N] permuted to [N, b, d])
      how = "cat";
      auto cls = rnd({1, 1, D.d}, act_), x = rnd({D.b, D.d, D.N}, act_);
      const int64_t b = D.b, d = D.d;
      return [cls, x, b, d] { (void)torch::cat({cls.expand({1, b, d}), x.permute({2, 0, 1})}, 0); };
    }
    if (rel == "pos_add") {  // [T, b, d] + [T, 1, d] (fp32 parameter)
      how = "add (broadcast)";
      auto x = rnd({D.T, D.b, D.d}, act_), pos = rnd({D.T, 1, D.d}, f32);
      return [x, pos] { (void)at::add(x, pos); };
    }
    if (rel == "cat_bwd") {  // the patches' gradient slice [N, b, d] back to the convolution's [b, d, N]
      how = "copy (permuted)";
      auto g = rnd({D.T, D.b, D.d}, f32);
      const int64_t N = D.N;
      const auto t = act_;
      return [g, N, t] { (void)g.narrow(0, 1, N).permute({1, 2, 0}).to(t).contiguous(); };
    }
    if (rel == "pos_grad") {  // sum over the batch, accumulation into the position and class-token grads
      how = "sum(1) + add_ x2";
      auto g = rnd({D.T, D.b, D.d}, f32), pos = rnd({D.T, 1, D.d}, f32), cls = rnd({1, 1, D.d}, f32),
           cls_new = rnd({1, 1, D.d}, f32);
      return [g, pos, cls, cls_new]() mutable {
        pos.add_(g.sum(1, true));
        cls.add_(cls_new);
      };
    }
    return nullptr;
  }

  // Dropout and its backward: elements from the op's bytes (each read and written in its dtype, plus a
  // one-byte mask); fp32 in the embedding and on attention's probabilities.
  Kernel dropout_kernel(const Op& op, const std::string& rel, std::string& how) {
    if (!(ends_with(rel, "dropout") || ends_with(rel, "dropout_bwd"))) return nullptr;
    const double a = half_ ? 2 : 4;
    const double e = starts_with(rel, "embed") || starts_with(rel, "attn.") ? 4 : a;
    const int64_t elems = static_cast<int64_t>(std::llround(op.bytes / (2 * e + 1)));
    const double p = m_.dropout;
    auto x = rnd({elems}, e == 4 ? at::kFloat : act_);
    if (ends_with(rel, "dropout")) {
      how = "native_dropout";
      return [x, p] { (void)at::native_dropout(x, p, true); };
    }
    how = "native_dropout_backward";
    auto mask = std::get<1>(at::native_dropout(x, p, true));
    return [x, mask, p] { (void)at::native_dropout_backward(x, mask, 1.0 / (1.0 - p)); };
  }

  // Multi-head attention's layouts, scaling and softmax (real/src/model.cpp, core/src/ops.cpp).
  Kernel attention_kernel(const std::string& rel, const Dims& D, std::string& how) {
    const at::ScalarType f32 = at::kFloat;
    if (rel == "qkv_split") {  // q, k, v: three [T, b, d] slices of the [T, b, 3d] projection made contiguous
      how = "contiguous x3";
      auto qkv = rnd({D.T, D.b, 3 * D.d}, act_);
      const int64_t d = D.d;
      return [qkv, d] {
        for (int i = 0; i < 3; ++i) (void)qkv.narrow(2, i * d, d).contiguous();
      };
    }
    if (rel == "qkv_split_bwd") {  // chunk's backward (SplitBackward): the three gradients concatenated,
      // q's and v's contiguous, k's a [T, b, d] view of a [b, d, T] tensor (T innermost), as autograd
      // hands them over (core/src/ops.cpp)
      how = "cat (SplitBackward, k's gradient T-innermost)";
      auto g0 = rnd({D.T, D.b, D.d}, act_), g1 = rnd({D.b, D.d, D.T}, act_).permute({2, 0, 1}),
           g2 = rnd({D.T, D.b, D.d}, act_);
      return [g0, g1, g2] { (void)torch::cat({g0, g1, g2}, -1); };
    }
    if (rel == "qv_grad_layout") {  // view's backward for q and v: [B H, T, hd] -> [T, B H, hd] contiguous, x2
      how = "transpose.contiguous x2";
      auto gq = rnd({D.b * D.H, D.T, D.hd}, act_), gv = rnd({D.b * D.H, D.T, D.hd}, act_);
      return [gq, gv] {
        (void)gq.transpose(0, 1).contiguous();
        (void)gv.transpose(0, 1).contiguous();
      };
    }
    if (rel == "q_scale" || rel == "q_scale_bwd") {  // q [B H, T, hd] (a transposed view) / sqrt(hd)
      how = "div";
      auto q = rnd({D.T, D.b * D.H, D.hd}, act_).transpose(0, 1);
      const double sc = std::sqrt(static_cast<double>(D.hd));
      return [q, sc] { (void)at::div(q, sc); };
    }
    if (rel == "softmax") {
      how = "_softmax";
      auto x = rnd({D.b * D.H, D.T, D.T}, f32);
      return [x] { (void)at::_softmax(x, -1, false); };
    }
    if (rel == "softmax_bwd") {
      how = "_softmax_backward_data";
      auto y = at::_softmax(rnd({D.b * D.H, D.T, D.T}, f32), -1, false), g = rnd({D.b * D.H, D.T, D.T}, f32);
      return [y, g] { (void)at::_softmax_backward_data(g, y, -1, at::kFloat); };
    }
    if (rel == "out_layout") {  // [B H, T, hd] -> [T, B H, hd] contiguous
      how = "transpose.contiguous";
      auto o = rnd({D.b * D.H, D.T, D.hd}, act_);
      return [o] { (void)o.transpose(0, 1).contiguous(); };
    }
    return nullptr;
  }

  // A block's residual adds and the MLP's GELU, forward and backward.
  Kernel block_kernel(const std::string& rel, const Dims& D, std::string& how) {
    const at::ScalarType f32 = at::kFloat;
    if (ends_with(rel, ".residual")) {  // fp32 stream + branch output
      how = "add";
      auto x = rnd({D.R, D.d}, f32), y = rnd({D.R, D.d}, act_);
      return [x, y] { (void)at::add(x, y); };
    }
    if (ends_with(rel, ".residual_bwd")) {  // the two gradient paths meeting, fp32
      how = "add";
      auto x = rnd({D.R, D.d}, f32), y = rnd({D.R, D.d}, f32);
      return [x, y] { (void)at::add(x, y); };
    }
    if (rel == "gelu") {
      how = "gelu";
      auto x = rnd({D.R, D.h}, act_);
      return [x] { (void)at::gelu(x); };
    }
    if (rel == "gelu_bwd") {
      how = "gelu_backward";
      auto x = rnd({D.R, D.h}, act_), g = rnd({D.R, D.h}, act_);
      return [x, g] { (void)at::gelu_backward(g, x); };
    }
    return nullptr;
  }

  // The head's loss and its backward, and the class token's gradient scattered back into every token's.
  Kernel loss_kernel(const std::string& rel, const Dims& D, std::string& how) {
    const at::ScalarType f32 = at::kFloat;
    if (rel == "loss") {  // log_softmax (fp32) + nll_loss
      how = "cross_entropy_loss";
      auto logits = rnd({D.b, D.C}, act_);
      auto y = torch::randint(0, D.C, {D.b}, torch::TensorOptions().dtype(at::kLong).device(dev_));
      return [logits, y] { (void)at::cross_entropy_loss(logits.to(at::kFloat), y); };
    }
    if (rel == "loss_bwd") {  // nll_loss_backward + _log_softmax_backward_data
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
    if (rel == "select_bwd") {  // the class token's gradient into zeros of every token
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
};

// Cold operands: the op runs over `copies` sets of its own inputs in turn, together at least
// cold_bytes, so that each run finds its operands out of the cache (the code and the allocator's
// blocks stay warm, as in a pass). A training pass's activations are many times the last-level
// cache: each op reads operands written long before (or evicted by the ops since) and writes its
// output to memory, where one op in a loop keeps its few megabytes in the cache: memory-bound ops
// ran 2-4x faster alone than inside the pass, GEMMs ~10% faster.
class InputRing {
 public:
  InputRing(KernelMaker& maker, const OpBenchmark& ob, Kernel first, const torch::Device& dev, double cold_bytes)
      : dev_(dev), ring_{std::move(first)} {
    constexpr int kMaxCopies = 64;  // copies of one op's inputs, at most
    if (!dev.is_cuda() && cold_bytes > 0 && ob.op.bytes > 0) {
      const int copies = static_cast<int>(std::min<double>(kMaxCopies, std::ceil(cold_bytes / ob.op.bytes)));
      std::string how;
      for (int c = 1; c < copies; ++c) ring_.push_back(maker.make(ob, how));
    }
  }
  int size() const { return static_cast<int>(ring_.size()); }
  // One run of the next input set between two clock reads (seconds).
  double timed() {
    Kernel& run = ring_[next_];
    next_ = (next_ + 1) % ring_.size();
    auto a = mark(dev_);
    run();
    auto b = mark(dev_);
    return seconds(a, b);
  }

 private:
  torch::Device dev_;
  std::vector<Kernel> ring_;
  size_t next_ = 0;
};

// Timed runs per round, from the fastest warm-up run: at least `iters` in all, more for ops under 1 ms
// so each gets ~20 ms of runs, fewer for slow ones so each takes at most ~0.25 s, never under 3 a round.
int runs_per_round(double fastest, int iters, int rounds) {
  constexpr double kTarget = 0.02, kCap = 0.25;  // seconds of timed runs per op: aimed at, at most
  int runs = std::max(iters, static_cast<int>(std::min(10.0 * iters, kTarget / fastest)));
  runs = std::max(3, std::min(runs, static_cast<int>(kCap / fastest)));
  return std::max(3, (runs + rounds - 1) / rounds);
}

}  // namespace

std::vector<OpTiming> measure_ops(const Scenario& s, const DeviceInfo& info, const std::vector<OpBenchmark>& list,
                                  int warmup, int iters, double cold_bytes, int rounds) {
  const torch::Device dev = device_of(info);
  torch::NoGradGuard no_grad;
  torch::manual_seed(s.training.seed);
  KernelMaker maker(s, dev);
  rounds = std::max(1, rounds);
  std::vector<OpTiming> out(list.size());
  std::vector<std::vector<double>> all(list.size()), round_means(list.size());
  std::vector<int> runs_of(list.size(), 0);
  for (int round = 0; round < rounds; ++round)
    for (size_t i = 0; i < list.size(); ++i) {
      const OpBenchmark& ob = list[i];
      OpTiming& t = out[i];
      if (t.skipped) continue;
      Kernel k = maker.make(ob, t.how);
      if (!k) {
        t.skipped = true;
        t.how = "none";
        continue;
      }
      InputRing ring(maker, ob, std::move(k), dev, cold_bytes);
      double first = ring.timed();  // also the first warm-up run
      for (int w = 1; w < std::max<int>(warmup, ring.size()); ++w) first = std::min(first, ring.timed());
      first = std::max(first, 1e-7);
      if (round == 0) runs_of[i] = runs_per_round(first, iters, rounds);  // from the first round's warm-up
      double sum = 0;
      for (int r = 0; r < runs_of[i]; ++r) {
        const double x = ring.timed();
        all[i].push_back(x);
        sum += x;
      }
      round_means[i].push_back(sum / runs_of[i]);
      t.copies = ring.size();
    }
  for (size_t i = 0; i < list.size(); ++i) {
    if (out[i].skipped) continue;
    out[i].seconds = spread_of(all[i]);
    out[i].round_median = spread_of(round_means[i]).median;
    out[i].rounds = static_cast<int>(round_means[i].size());
  }
  return out;
}

CopySample measure_copy(const DeviceInfo& info, double bytes, int warmup, int iters) {
  const torch::Device dev = device_of(info);
  const int64_t n = static_cast<int64_t>(bytes / sizeof(float));
  std::vector<float> host(static_cast<size_t>(n), 1.0f);
  auto pageable = torch::from_blob(host.data(), {n}, torch::kFloat32);
  CopySample out;
  out.bytes = static_cast<double>(n) * sizeof(float);
  out.on_cpu = !dev.is_cuda();
  std::vector<double> pinned_t, pageable_t;
  // On CPU there is no device: the "copy" is a memcpy into a freshly allocated tensor (what moving a
  // batch would cost), and pinned equals pageable. On CUDA, from pageable memory and from a pinned
  // buffer, each timed to the end of the copy.
  torch::Tensor pinned = out.on_cpu ? pageable : pageable.pin_memory();
  for (int it = 0; it < warmup + iters; ++it) {
    for (int kind = 0; kind < 2; ++kind) {
      const torch::Tensor& src = kind == 0 ? pinned : pageable;
      auto a = mark(dev);
      torch::Tensor dst;
      if (out.on_cpu) {
        dst = torch::empty({n}, torch::kFloat32);
        dst.copy_(src);
      } else {
        dst = src.to(dev, /*non_blocking=*/kind == 0);
      }
      auto b = mark(dev);
      if (it >= warmup) (kind == 0 ? pinned_t : pageable_t).push_back(seconds(a, b));
    }
  }
  out.pinned_s = spread_of(pinned_t);
  out.pageable_s = spread_of(pageable_t);
  return out;
}

}  // namespace vitsim::calibrate
