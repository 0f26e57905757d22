#pragma once
// The ViT of a scenario in the LibTorch C++ frontend, built from core's ViTConfig so the simulator and
// the trainer always agree on what is trained. Layout and parameters follow torchvision's
// VisionTransformer exactly (its parameter count equals build_workload(cfg).total_params()).
// Includes Torch: only the trainer's translation units and the model test include this header.
#include <torch/torch.h>

#include <functional>

#include "vitsim/core/model/vit.hpp"

namespace vitsim::real {

struct EncoderBlockImpl : torch::nn::Module {
  EncoderBlockImpl(int width, int heads, int mlp_hidden, double dropout);
  torch::Tensor forward(torch::Tensor x);       // x: [tokens, batch, width]; forward_mlp(forward_attn(x))
  torch::Tensor forward_attn(torch::Tensor x);  // core's "blockN.attn": x + attention(ln1(x))
  torch::Tensor forward_mlp(torch::Tensor x);   // core's "blockN.mlp": x + mlp(ln2(x))
  torch::Tensor self_attention(const torch::Tensor& x);
  int heads;
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::MultiheadAttention attn{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::Dropout drop{nullptr};
};
TORCH_MODULE(EncoderBlock);

struct VisionTransformerImpl : torch::nn::Module {
  explicit VisionTransformerImpl(const ViTConfig& cfg);
  torch::Tensor forward(torch::Tensor images);  // [batch, channels, H, W] -> logits [batch, classes]
  // The same forward, calling after_layer(index, output) after each of core's layers (build_workload's
  // order: patch_embed, block0.attn, block0.mlp, ..., head): the trace's per-layer times.
  using LayerObserver = std::function<void(int layer, torch::Tensor& output)>;
  torch::Tensor forward(torch::Tensor images, const LayerObserver& after_layer);
  ViTConfig cfg;
  torch::nn::Conv2d patch_embed{nullptr};
  torch::Tensor class_token, pos_embedding;
  torch::nn::ModuleList blocks;
  torch::nn::LayerNorm ln{nullptr};
  torch::nn::Linear head{nullptr};
  torch::nn::Dropout drop{nullptr};
};
TORCH_MODULE(VisionTransformer);

int64_t parameter_count(torch::nn::Module& m);

}  // namespace vitsim::real
