// The compute benchmark with LibTorch (measure_compute): the scenario's model trained as the trainer trains
// it, whole (forward with the loss, backward, optimizer step) and layer by layer.
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

#include <fmt/format.h>

#include "harness/torch_util.hpp"
#include "vitsim/core/base/system.hpp"
#include "vitsim/real/autocast.hpp"
#include "vitsim/real/model.hpp"
#include "vitsim/real/optim.hpp"

namespace vitsim::calibrate {
namespace {

using real::Autocast;  // vitsim/real/autocast.hpp

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
  mb.optimizer =
      std::make_unique<real::FlatOptimizer>(real::optimizer_config(s.training), flat.params, flat.grads);
  const auto& m = s.model;
  mb.x =
      torch::randn({micro_batch, m.channels, m.image_size, m.image_size}, torch::TensorOptions().device(dev));
  mb.y = torch::randint(0, m.classes, {micro_batch}, torch::TensorOptions().dtype(torch::kInt64).device(dev));
  return mb;
}

// Whole model: forward (with the loss), backward, optimizer step, timed like the trainer's phases.
void time_whole_model(ModelBench& mb, const torch::Device& dev, const Repeats& repeats, int ranks,
                      ComputeSample& out) {
  const auto [fwd, bwd, opt] = timed_phases<3>(repeats, [&] {
    auto a = mark(dev);
    torch::Tensor loss;
    {
      Autocast ac(mb.cuda, mb.prec);
      loss = torch::cross_entropy_loss(mb.model->forward(mb.x), mb.y);
    }
    auto b = mark(dev);
    loss.backward();
    auto c = mark(dev);
    // As the trainer's update (real/src/trainer/point_loop.cpp): the mean gradient, its finite check and the
    // loss read back (each a sync with the device), the step, the zeroed gradient. The loss's mean over the
    // ranks (an all-reduce) is the step phase's.
    if (ranks > 1) mb.flat_grad.div_(ranks);
    const bool finite = mb.flat_grad.isfinite().all().item<bool>();
    const double loss_value = loss.detach().to(torch::kFloat64).item<double>();
    if (!finite || !std::isfinite(loss_value)) mb.flat_grad.zero_();  // kept: what the trainer branches on
    mb.optimizer->step();
    mb.flat_grad.zero_();
    auto d = mark(dev);
    return std::array<double, 3>{seconds(a, b), seconds(b, c), seconds(c, d)};
  });
  out.fwd = spread_of(fwd);
  out.bwd = spread_of(bwd);
  out.optimizer = spread_of(opt);
  out.step_s.clear();
  for (size_t i = 0; i < fwd.size(); ++i) out.step_s.push_back(fwd[i] + bwd[i]);
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
                    h = torch::cat({model->class_token.expand({m.class_tokens, b, m.width}), h}, 0);
                    return model->drop(h + model->pos_embedding);
                  }});
  for (int i = 0; i < m.depth; ++i) {
    auto* blk = (*model->blocks)[i]->as<real::EncoderBlockImpl>();
    segs.push_back({fmt::format("block{}.attn", i), [blk](const torch::Tensor& h) {
                      auto z = blk->ln1(h);
                      z = blk->self_attention(z);  // the trainer's attention (real/src/model/model.cpp)
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
void time_layers(ModelBench& mb, const ViTConfig& m, const torch::Device& dev, const Repeats& repeats,
                 ComputeSample& out) {
  const std::vector<Segment> segs = layer_segments(mb, m);
  const size_t n = segs.size();
  std::vector<std::vector<double>> f(n), b(n);
  repeat_runs(repeats, [&](bool timed) {
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
      if (timed) f[k].push_back(seconds(t0, t1));
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
      if (timed) b[k].push_back(seconds(t0, t1));
      if (k > 0) g = ins[k].grad();
    }
    mb.flat_grad.zero_();
  });
  for (size_t k = 0; k < n; ++k) out.layers.push_back({segs[k].name, spread_of(f[k]), spread_of(b[k])});
}

}  // namespace

double measure_gemm_rate(const DeviceInfo& info, Precision p, const Repeats& repeats) {
  const torch::Device dev = device_of(info);
  constexpr int64_t n = 1024;
  const auto dtype = dev.is_cuda() && p == Precision::FP16   ? torch::kHalf
                     : dev.is_cuda() && p == Precision::BF16 ? torch::kBFloat16
                                                             : torch::kFloat32;
  const auto opts = torch::TensorOptions().device(dev).dtype(dtype);
  const torch::Tensor a = torch::randn({n, n}, opts), b = torch::randn({n, n}, opts);
  torch::Tensor c = torch::empty({n, n}, opts);
  const std::vector<double> t = timed_runs(repeats, [&] {
    auto s = mark(dev);
    torch::mm_out(c, a, b);
    auto e = mark(dev);
    return seconds(s, e);
  });
  return 2.0 * n * n * n / *std::min_element(t.begin(), t.end());
}

ComputeSample measure_compute(const Scenario& s, const DeviceInfo& info, int micro_batch,
                              const Repeats& repeats, int ranks) {
  const torch::Device dev = device_of(info);
  ModelBench mb = model_bench(s, dev, micro_batch);
  ComputeSample out;
  out.micro_batch = micro_batch;
  time_whole_model(mb, dev, repeats, ranks, out);
  time_layers(mb, s.model, dev, repeats, out);
  return out;
}

}  // namespace vitsim::calibrate
