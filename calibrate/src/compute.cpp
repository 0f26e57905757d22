// Compute and copy micro-benchmarks with LibTorch: the only Torch translation unit of calibrate/.
#include <ATen/autocast_mode.h>
#include <dlfcn.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <chrono>
#include <functional>
#include <thread>

#include <fmt/format.h>

#include "measure.hpp"
#include "vitsim/real/autocast.hpp"
#include "vitsim/core/error.hpp"
#include "vitsim/real/model.hpp"
#include "vitsim/real/optim.hpp"
#include "vitsim/real/train.hpp"

namespace vitsim::calibrate {
namespace {
using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

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
  // Threads as the trainer sets them: ranks x threads never exceeds the cores (REFERENCE.md 7).
  const real::ThreadPlan plan = real::plan_threads(s.run.threads, local_size);
  info.threads = plan.threads;
  if (!plan.warning.empty()) fmt::print(stderr, "vitsim calibrate: warning: {}\n", plan.warning);
  torch::set_num_threads(info.threads);
  using SetFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) fn(info.threads);
  return info;
}

ComputeSample measure_compute(const Scenario& s, const DeviceInfo& info, int micro_batch, int warmup, int iters,
                              int ranks) {
  const torch::Device dev = device_of(info);
  const bool cuda = dev.is_cuda();
  const Precision prec = s.training.precision;
  torch::manual_seed(s.training.seed);
  real::VisionTransformer model(s.model);
  model->to(dev);
  model->train();
  std::vector<torch::Tensor> params = model->parameters();
  // Parameters and gradients in flat buffers and the flat optimizer, as the trainer keeps and steps them
  // (its optimizer phase divides and zeroes the gradient buffer).
  real::FlatParameters flat = real::flatten_parameters(params);
  torch::Tensor flat_grad = flat.grads;
  auto optimizer = std::make_unique<real::FlatOptimizer>(real::optimizer_config(s.training), flat.params, flat.grads);
  const auto& m = s.model;
  auto x = torch::randn({micro_batch, m.channels, m.image_size, m.image_size}, torch::TensorOptions().device(dev));
  auto y = torch::randint(0, m.classes, {micro_batch}, torch::TensorOptions().dtype(torch::kInt64).device(dev));

  ComputeSample out;
  out.micro_batch = micro_batch;
  // Whole model: forward (with the loss), backward, optimizer step, timed like the trainer's phases.
  {
    std::vector<double> fwd, bwd, opt;
    for (int it = 0; it < warmup + iters; ++it) {
      auto a = mark(dev);
      torch::Tensor loss;
      {
        Autocast ac(cuda, prec);
        loss = torch::cross_entropy_loss(model->forward(x), y);
      }
      auto b = mark(dev);
      loss.backward();
      auto c = mark(dev);
      if (ranks > 1) flat_grad.div_(ranks);
      optimizer->step();
      flat_grad.zero_();
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
  // Layer by layer, in core's layer table order: each layer's input is detached, so its backward is
  // its own; the sum exceeds the whole pass by the boundary overheads, so only the shares are used.
  {
    struct Segment {
      std::string name;
      std::function<torch::Tensor(const torch::Tensor&)> run;
    };
    std::vector<Segment> segs;
    segs.push_back({"patch_embed", [&](const torch::Tensor& img) {
                      const auto b = img.size(0);
                      auto h = model->patch_embed(img).flatten(2).permute({2, 0, 1});
                      h = torch::cat({model->class_token.expand({1, b, m.width}), h}, 0);
                      return model->drop(h + model->pos_embedding);
                    }});
    for (int i = 0; i < m.depth; ++i) {
      auto* blk = (*model->blocks)[i]->as<real::EncoderBlockImpl>();
      segs.push_back({fmt::format("block{}.attn", i), [blk](const torch::Tensor& h) {
                        auto z = blk->ln1(h);
                        z = std::get<0>(blk->attn->forward(z, z, z, torch::Tensor(), false));
                        return h + blk->drop(z);
                      }});
      segs.push_back({fmt::format("block{}.mlp", i), [blk](const torch::Tensor& h) {
                        auto z = blk->fc2(blk->drop(torch::gelu(blk->fc1(blk->ln2(h)))));
                        return h + blk->drop(z);
                      }});
    }
    segs.push_back({"head", [&](const torch::Tensor& h) {
                      return torch::cross_entropy_loss(model->head(model->ln(h)[0]), y);
                    }});
    const size_t n = segs.size();
    std::vector<std::vector<double>> f(n), b(n);
    for (int it = 0; it < warmup + iters; ++it) {
      std::vector<torch::Tensor> ins(n), outs(n);
      torch::Tensor cur = x;
      for (size_t k = 0; k < n; ++k) {
        ins[k] = k == 0 ? x : cur.detach().requires_grad_(true);
        auto t0 = mark(dev);
        {
          Autocast ac(cuda, prec);
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
      flat_grad.zero_();
    }
    for (size_t k = 0; k < n; ++k) out.layers.push_back({segs[k].name, spread_of(f[k]), spread_of(b[k])});
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
