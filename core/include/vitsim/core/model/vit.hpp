#pragma once
// The ViT that both the simulator and the real trainer use: its shape, and per-layer arithmetic
// (parameters, FLOPs, bytes moved, activation memory) as functions of micro-batch and precision.
#include <cstdint>
#include <string>
#include <vector>

namespace vitsim {

enum class Precision { FP32, FP16, BF16 };
const char* precision_name(Precision p);
Precision parse_precision(const std::string& name);  // throws Error listing fp32, fp16, bf16
int precision_bytes(Precision p);                    // bytes per activation/gradient element

// How attention is computed: the math path (scores B x H x S x S written and read by the scale,
// softmax and the matmuls, forward and backward: nn.MultiheadAttention on PyTorch <= 1.13, the study's
// stack) or a fused kernel (scaled_dot_product_attention / flash attention: no S x S tensor in memory).
enum class AttentionPath { Math, Fused };
const char* attention_path_name(AttentionPath a);             // "math", "fused"
AttentionPath parse_attention_path(const std::string& name);  // throws Error listing the valid names

// model.class_tokens' upper bound. ASSUMPTION: a bound against typos, not a measured limit: the most any
// source here runs is 8 (NeMo's ViT-g/14, docs/sources.md); a model with more would raise it.
inline constexpr int kMaxClassTokens = 64;

struct ViTConfig {
  std::string preset;  // the preset it came from, "" when given by parameters
  int image_size = 224;
  int patch = 16;
  int channels = 3;
  int width = 768;  // hidden size d
  int depth = 12;
  int heads = 12;
  double mlp_ratio = 4.0;
  int classes = 1000;
  // Dropout probability. torchvision's vit_b_16 uses 0.0; with 0 the dropout masks and outputs that
  // Korthikanti et al. count are not stored, which changes activation memory.
  double dropout = 0.0;
  AttentionPath attention = AttentionPath::Math;  // model.attention; not part of the shape (same_shape)
  // Learned tokens prepended to the patches (model.class_tokens): 1 in torchvision's and timm's ViT, 2 in
  // DeiT's distilled models (class + distillation), 8 in Megatron's / NeMo's vit_backbone.py. Each has its
  // own position embedding; the head reads token 0.
  int class_tokens = 1;

  int patches() const;     // (image_size / patch)^2
  int tokens() const;      // patches + class_tokens
  int mlp_hidden() const;  // round(width * mlp_ratio)
  void validate() const;   // throws Error on impossible shapes (image not divisible by patch, ...)
};

// Named presets: vit_tiny/small/base/large/huge_patch16_224 (aliases vit_b_16, vit_l_16, vit_h_16 as in
// torchvision), and small variants for 32 px CIFAR and 28 px Fashion-MNIST; any timm name
// vit_<tiny|small|base|large|huge|giant>_patch<P>_<image>[.tag] (vit_large_patch16_384).
ViTConfig vit_preset(const std::string& name);  // throws Error listing the valid names
std::vector<std::string> vit_preset_names();

enum class LayerKind { PatchEmbed, Attention, Mlp, Head };
const char* layer_kind_name(LayerKind k);

// One layer of the model as the simulator schedules it. Per-sample figures; multiply by micro-batch.
struct LayerCost {
  std::string name;  // "patch_embed", "block3.attn", "block3.mlp", "head"
  LayerKind kind;
  int64_t params = 0;               // trainable parameters in this layer (grads have the same count)
  double fwd_flops = 0;             // forward FLOPs per sample (1 MAC = 2 FLOPs)
  double bwd_flops = 0;             // backward FLOPs per sample (input grads + weight grads)
  double fwd_act_bytes = 0;         // activation bytes read + written in forward, per sample, fp32
  double saved_act_bytes_16 = 0;    // activations kept for backward per sample, 2-byte elements
  double saved_act_bytes_8 = 0;     // 1-byte elements kept (dropout masks)
  double saved_act_bytes_fp32 = 0;  // bytes always kept in fp32 (fused attention's softmax statistics)
};

struct Workload {
  ViTConfig model;
  std::vector<LayerCost> layers;  // forward order
  int64_t total_params() const;
  double fwd_flops_per_sample() const;
  double bwd_flops_per_sample() const;
  // Activation bytes kept for backward per sample at a precision (fp32 doubles 2-byte elements).
  double saved_activation_bytes(const LayerCost& l, Precision p) const;
};

Workload build_workload(const ViTConfig& cfg);

}  // namespace vitsim
