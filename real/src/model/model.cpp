#include "vitsim/real/model.hpp"

#include <torch/version.h>

#include <cmath>

namespace vitsim::real {

// torchvision uses LayerNorm(eps=1e-6) throughout its ViT.
constexpr double kLayerNormEps = 1e-6;

EncoderBlockImpl::EncoderBlockImpl(int width, int heads_, int mlp_hidden, double dropout) : heads(heads_) {
  ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width}).eps(kLayerNormEps)));
  attn = register_module("attn",
                         torch::nn::MultiheadAttention(torch::nn::MultiheadAttentionOptions(width, heads)));
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

// Self-attention with the MultiheadAttention module's parameters (in_proj, out_proj: torchvision's
// layout and initialisation), computed here rather than by its forward: LibTorch's C++
// multi_head_attention_forward tells self-attention apart with two torch::equal over the activations
// (a full comparison and, on a GPU, a host synchronisation per layer), where PyTorch's Python checks
// identity. x: [tokens, batch, width] (LibTorch 1.13's MultiheadAttention has no batch_first,
// docs/sources.md "Software and machine facts").
torch::Tensor EncoderBlockImpl::self_attention(const torch::Tensor& x) {
  namespace F = torch::nn::functional;
  const int64_t T = x.size(0), B = x.size(1), W = x.size(2), H = heads, D = W / H;
  auto qkv = F::linear(x, attn->in_proj_weight, attn->in_proj_bias).chunk(3, -1);  // 3 x [T, B, W]
  torch::Tensor o;
#if TORCH_VERSION_MAJOR >= 2
  // [B, H, T, D] views; on CUDA the fused kernels (flash or memory-efficient attention) take them as they
  // are.
  auto split = [&](const torch::Tensor& t) { return t.view({T, B, H, D}).permute({1, 2, 0, 3}); };
  o = at::scaled_dot_product_attention(split(qkv[0]), split(qkv[1]), split(qkv[2]));  // [B, H, T, D]
  o = o.permute({2, 0, 1, 3}).reshape({T, B, W});
#else
  // The arithmetic of torch.nn.functional.multi_head_attention_forward (1.13) without mask or dropout.
  auto split = [&](const torch::Tensor& t) { return t.contiguous().view({T, B * H, D}).transpose(0, 1); };
  auto q = split(qkv[0]) / std::sqrt(static_cast<double>(D)), k = split(qkv[1]), v = split(qkv[2]);
  auto a = torch::softmax(torch::bmm(q, k.transpose(1, 2)), -1);  // [B*H, T, T]
  o = torch::bmm(a, v).transpose(0, 1).contiguous().view({T, B, W});
#endif
  return F::linear(o, attn->out_proj->weight, attn->out_proj->bias);
}

torch::Tensor EncoderBlockImpl::forward_attn(torch::Tensor x) {
  auto y = ln1(x);
  y = self_attention(y);
  return x + drop(y);
}

torch::Tensor EncoderBlockImpl::forward_mlp(torch::Tensor x) {
  auto y = ln2(x);
  y = fc2(drop(torch::gelu(fc1(y))));
  return x + drop(y);
}

torch::Tensor EncoderBlockImpl::forward(torch::Tensor x) {
  return forward_mlp(forward_attn(x));
}

VisionTransformerImpl::VisionTransformerImpl(const ViTConfig& c) : cfg(c) {
  cfg.validate();
  const int d = cfg.width;
  patch_embed = register_module(
      "patch_embed",
      torch::nn::Conv2d(torch::nn::Conv2dOptions(cfg.channels, d, cfg.patch).stride(cfg.patch)));
  // The learned token block [K, 1, d] (model.class_tokens; [1, K, d] batch-first), prepended to the patches.
  class_token = register_parameter("class_token", torch::zeros({cfg.class_tokens, 1, d}));
  pos_embedding = register_parameter("pos_embedding", torch::empty({cfg.tokens(), 1, d}).normal_(0.0, 0.02));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int i = 0; i < cfg.depth; ++i)
    blocks->push_back(EncoderBlock(d, cfg.heads, cfg.mlp_hidden(), cfg.dropout));
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
  return forward(std::move(images), nullptr);
}

torch::Tensor VisionTransformerImpl::forward(torch::Tensor images, const LayerObserver& after_layer) {
  int layer = 0;
  auto done = [&](torch::Tensor& t) {
    if (after_layer) after_layer(layer, t);
    ++layer;
  };
  const auto b = images.size(0);
  auto x = patch_embed(images);                                                  // [B, d, H/p, W/p]
  x = x.flatten(2).permute({2, 0, 1});                                           // [N, B, d]
  x = torch::cat({class_token.expand({cfg.class_tokens, b, cfg.width}), x}, 0);  // [T, B, d]
  x = drop(x + pos_embedding);
  done(x);
  for (auto& m : *blocks) {
    auto* block = m->as<EncoderBlockImpl>();
    x = block->forward_attn(x);
    done(x);
    x = block->forward_mlp(x);
    done(x);
  }
  x = ln(x);
  auto logits = head(x[0]);  // the class token
  done(logits);
  return logits;
}

int64_t parameter_count(torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

}  // namespace vitsim::real
