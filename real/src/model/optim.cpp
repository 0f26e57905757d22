// Flat-buffer optimizers: LibTorch 1.13's AdamW, Adam and SGD step, written once over the whole model.
#include "vitsim/real/optim.hpp"

#include <cmath>

#include <fmt/format.h>

#include "vitsim/core/base/error.hpp"

namespace vitsim::real {

FlatOptimizer::FlatOptimizer(OptimizerConfig cfg, torch::Tensor params, torch::Tensor grads)
    : cfg_(std::move(cfg)), params_(std::move(params)), grads_(std::move(grads)) {
  if (cfg_.kind != "adamw" && cfg_.kind != "adam" && cfg_.kind != "sgd")
    throw Error(fmt::format("internal: unknown optimizer {}", cfg_.kind));
  if (params_.numel() != grads_.numel() || params_.scalar_type() != torch::kFloat32 ||
      grads_.scalar_type() != torch::kFloat32 || !params_.is_contiguous() || !grads_.is_contiguous())
    throw Error("internal: flat optimizer needs contiguous fp32 parameter and gradient buffers of one size");
  m_ = torch::zeros_like(params_);
  if (cfg_.kind != "sgd") v_ = torch::zeros_like(params_);
}

void FlatOptimizer::step() {
  torch::NoGradGuard ng;
  ++step_;
  auto& p = params_;
  const auto& g = grads_;
  if (cfg_.kind == "sgd") {
    // torch::optim::SGD: d_p = g + wd p; buf = d_p at the first step, then buf = momentum buf + d_p
    // (dampening 0); p -= lr buf.
    torch::Tensor d_p = cfg_.weight_decay != 0 ? g.add(p, cfg_.weight_decay) : g;
    if (step_ == 1)
      m_.copy_(d_p);
    else
      m_.mul_(cfg_.momentum).add_(d_p, 1.0);
    p.add_(m_, -cfg_.lr);
    return;
  }
  // torch::optim::AdamW decays the parameters before the moments (decoupled weight decay);
  // torch::optim::Adam adds wd p to the gradient (L2).
  torch::Tensor grad = g;
  if (cfg_.weight_decay != 0) {
    if (cfg_.kind == "adamw")
      p.mul_(1 - cfg_.lr * cfg_.weight_decay);
    else
      grad = g.add(p, cfg_.weight_decay);
  }
  const double bias_correction1 = 1 - std::pow(cfg_.beta1, static_cast<double>(step_));
  const double bias_correction2 = 1 - std::pow(cfg_.beta2, static_cast<double>(step_));
  m_.mul_(cfg_.beta1).add_(grad, 1 - cfg_.beta1);
  v_.mul_(cfg_.beta2).addcmul_(grad, grad, 1 - cfg_.beta2);
  auto denom = (v_.sqrt() / std::sqrt(bias_correction2)).add_(cfg_.eps);
  p.addcdiv_(m_, denom, -cfg_.lr / bias_correction1);
}

void FlatOptimizer::save(torch::serialize::OutputArchive& archive) const {
  archive.write("optimizer_kind", c10::IValue(cfg_.kind));
  archive.write("optimizer_step", c10::IValue(static_cast<int64_t>(step_)));
  archive.write("optimizer_m", m_, /*is_buffer=*/true);
  if (v_.defined()) archive.write("optimizer_v", v_, /*is_buffer=*/true);
}

std::vector<std::pair<std::string, torch::Tensor>> FlatOptimizer::state() const {
  std::vector<std::pair<std::string, torch::Tensor>> out{{"optimizer_m", m_}};
  if (v_.defined()) out.push_back({"optimizer_v", v_});
  return out;
}

void FlatOptimizer::load(torch::serialize::InputArchive& archive) {
  c10::IValue kind, step;
  if (!archive.try_read("optimizer_kind", kind) || !kind.isString() ||
      !archive.try_read("optimizer_step", step) || !step.isInt())
    throw Error("the checkpoint holds no flat optimizer state (written by an older vitsim?)");
  if (kind.toStringRef() != cfg_.kind)
    throw Error(
        fmt::format("the checkpoint's optimizer is {}, the scenario's {}", kind.toStringRef(), cfg_.kind));
  auto read = [&](const char* key, torch::Tensor& into) {
    torch::Tensor t;
    if (!archive.try_read(key, t, /*is_buffer=*/true) || t.numel() != into.numel())
      throw Error(
          fmt::format("the checkpoint's optimizer state {} is missing or of another model size", key));
    torch::NoGradGuard ng;
    into.copy_(t.view_as(into));
  };
  read("optimizer_m", m_);
  if (v_.defined()) read("optimizer_v", v_);
  step_ = step.toInt();
}

OptimizerConfig optimizer_config(const TrainingSpec& t) {
  OptimizerConfig c;
  c.kind = t.optimizer;
  c.lr = t.lr;
  c.weight_decay = t.weight_decay;
  return c;
}

FlatParameters flatten_parameters(const std::vector<torch::Tensor>& params) {
  FlatParameters f;
  int64_t total = 0;
  for (const auto& p : params) total += p.numel();
  const auto opts =
      torch::TensorOptions().dtype(torch::kFloat32).device(params.empty() ? torch::kCPU : params[0].device());
  f.grads = torch::zeros({total}, opts);
  f.params = torch::empty({total}, opts);
  f.offsets.resize(params.size());
  int64_t off = 0;
  for (int i = static_cast<int>(params.size()) - 1; i >= 0; --i) {
    auto p = params[i];
    f.offsets[i] = off;
    p.mutable_grad() = f.grads.narrow(0, off, p.numel()).view(p.sizes());
    off += p.numel();
  }
  bind_flat_parameters(params, f.offsets, f.params);
  return f;
}

void bind_flat_parameters(const std::vector<torch::Tensor>& params, const std::vector<int64_t>& offsets,
                          torch::Tensor& flat) {
  if (params.size() != offsets.size()) throw Error("internal: one offset per parameter");
  torch::NoGradGuard ng;
  for (size_t i = 0; i < params.size(); ++i) {
    auto p = params[i];
    auto view = flat.narrow(0, offsets[i], p.numel()).view(p.sizes());
    if (view.data_ptr() != p.data_ptr()) view.copy_(p);
    p.set_data(view);
  }
}

}  // namespace vitsim::real
