#include "vitsim/real/model.hpp"

#include <cmath>

namespace vitsim::real {

// torchvision uses LayerNorm(eps=1e-6) throughout its ViT.
constexpr double kLayerNormEps = 1e-6;

EncoderBlockImpl::EncoderBlockImpl(int width, int heads, int mlp_hidden, double dropout) {
  ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width}).eps(kLayerNormEps)));
  attn = register_module("attn", torch::nn::MultiheadAttention(torch::nn::MultiheadAttentionOptions(width, heads)));
  ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width}).eps(kLayerNormEps)));
  fc1 = register_module("fc1", torch::nn::Linear(width, mlp_hidden));
  fc2 = register_module("fc2", torch::nn::Linear(mlp_hidden, width));
  drop = register_module("drop", torch::nn::Dropout(dropout));
  // torchvision's MLPBlock init: xavier-uniform weights, normal(std=1e-6) biases.
  for (auto* l : {&fc1, &fc2}) {
    torch::nn::init::xavier_uniform_((*l)->weight);
    torch::nn::init::normal_((*l)->bias, 0.0, 1e-6);
  }
}

torch::Tensor EncoderBlockImpl::forward(torch::Tensor x) {
  // LibTorch 1.13's MultiheadAttention has no batch_first: [tokens, batch, width] (REFERENCE.md 7).
  auto y = ln1(x);
  y = std::get<0>(attn->forward(y, y, y, torch::Tensor(), /*need_weights=*/false));
  x = x + drop(y);
  y = ln2(x);
  y = fc2(drop(torch::gelu(fc1(y))));
  return x + drop(y);
}

VisionTransformerImpl::VisionTransformerImpl(const ViTConfig& c) : cfg(c) {
  cfg.validate();
  const int d = cfg.width;
  patch_embed = register_module(
      "patch_embed", torch::nn::Conv2d(torch::nn::Conv2dOptions(cfg.channels, d, cfg.patch).stride(cfg.patch)));
  class_token = register_parameter("class_token", torch::zeros({1, 1, d}));
  pos_embedding = register_parameter("pos_embedding", torch::empty({cfg.tokens(), 1, d}).normal_(0.0, 0.02));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int i = 0; i < cfg.depth; ++i) blocks->push_back(EncoderBlock(d, cfg.heads, cfg.mlp_hidden(), cfg.dropout));
  ln = register_module("ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(kLayerNormEps)));
  head = register_module("head", torch::nn::Linear(d, cfg.classes));
  drop = register_module("drop", torch::nn::Dropout(cfg.dropout));
  // torchvision: conv_proj trunc_normal_(std=sqrt(1 / fan_in)) whose cut-off is at +-2 absolute, far
  // beyond the std here, so a plain normal is the same distribution; zero bias; zero-initialised head.
  const double fan_in = double(cfg.channels) * cfg.patch * cfg.patch;
  torch::nn::init::normal_(patch_embed->weight, 0.0, std::sqrt(1.0 / fan_in));
  torch::nn::init::zeros_(patch_embed->bias);
  torch::nn::init::zeros_(head->weight);
  torch::nn::init::zeros_(head->bias);
}

torch::Tensor VisionTransformerImpl::forward(torch::Tensor images) {
  const auto b = images.size(0);
  auto x = patch_embed(images);                 // [B, d, H/p, W/p]
  x = x.flatten(2).permute({2, 0, 1});          // [N, B, d]
  x = torch::cat({class_token.expand({1, b, cfg.width}), x}, 0);  // [T, B, d]
  x = drop(x + pos_embedding);
  for (auto& m : *blocks) x = m->as<EncoderBlockImpl>()->forward(x);
  x = ln(x);
  return head(x[0]);  // the class token
}

int64_t parameter_count(torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

}  // namespace vitsim::real
