#include "vitsim/core/model/vit.hpp"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <numeric>
#include <optional>

#include "vitsim/core/base/enum_names.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim {

namespace {
constexpr EnumNames<Precision, 3> kPrecisions{
    {{Precision::FP32, "fp32"}, {Precision::FP16, "fp16"}, {Precision::BF16, "bf16"}}};
}  // namespace

const char* precision_name(Precision p) {
  return name_of(kPrecisions, p);
}

Precision parse_precision(const std::string& name) {
  return value_of(kPrecisions, name, "precision");
}

int precision_bytes(Precision p) {
  return p == Precision::FP32 ? 4 : 2;
}

int ViTConfig::patches() const {
  return (image_size / patch) * (image_size / patch);
}
int ViTConfig::tokens() const {
  return patches() + class_tokens;
}
int ViTConfig::mlp_hidden() const {
  return static_cast<int>(std::lround(width * mlp_ratio));
}

void ViTConfig::validate() const {
  auto positive = [](const char* what, double v) {
    if (!(v > 0)) throw Error(fmt::format("model {} must be positive, got {}", what, v));
  };
  positive("image_size", image_size);
  positive("patch", patch);
  positive("channels", channels);
  positive("width", width);
  positive("depth", depth);
  positive("heads", heads);
  positive("mlp_ratio", mlp_ratio);
  positive("classes", classes);
  if (image_size % patch != 0)
    throw Error(fmt::format("model image_size {} is not a multiple of patch {}", image_size, patch));
  if (width % heads != 0)
    throw Error(fmt::format("model width {} is not a multiple of heads {}", width, heads));
  if (dropout < 0 || dropout >= 1)
    throw Error(fmt::format("model dropout must be in [0, 1), got {}", dropout));
  if (class_tokens < 1 || class_tokens > kMaxClassTokens)
    throw Error(fmt::format("model class_tokens must be in [1, {}], got {}", kMaxClassTokens, class_tokens));
}

namespace {
// A preset is the ViTConfig it stands for: {"", image_size, patch, channels, width, depth, heads, mlp_ratio,
// classes}, the rest at ViTConfig's defaults.
using Preset = ViTConfig;
// Shapes from torchvision / timm (Dosovitskiy et al. Table 1; DeiT for tiny/small).
const std::map<std::string, Preset>& presets() {
  static const std::map<std::string, Preset> p{
      {"vit_tiny_patch16_224", {"", 224, 16, 3, 192, 12, 3, 4.0, 1000}},
      {"vit_small_patch16_224", {"", 224, 16, 3, 384, 12, 6, 4.0, 1000}},
      {"vit_base_patch16_224", {"", 224, 16, 3, 768, 12, 12, 4.0, 1000}},
      {"vit_b_16", {"", 224, 16, 3, 768, 12, 12, 4.0, 1000}},
      {"vit_large_patch16_224", {"", 224, 16, 3, 1024, 24, 16, 4.0, 1000}},
      {"vit_l_16", {"", 224, 16, 3, 1024, 24, 16, 4.0, 1000}},
      {"vit_huge_patch16_224", {"", 224, 16, 3, 1280, 32, 16, 4.0, 1000}},
      {"vit_h_16", {"", 224, 16, 3, 1280, 32, 16, 4.0, 1000}},
      // Small variants trained from scratch on 32 px CIFAR (patch 4: 64 patches) and 28 px Fashion-MNIST.
      {"vit_cifar_tiny", {"", 32, 4, 3, 192, 6, 3, 2.0, 10}},
      {"vit_cifar_small", {"", 32, 4, 3, 384, 7, 6, 2.0, 10}},
      {"vit_fmnist_tiny", {"", 28, 7, 1, 64, 4, 4, 2.0, 10}},
  };
  return p;
}
}  // namespace

std::vector<std::string> vit_preset_names() {
  std::vector<std::string> out;
  for (const auto& [k, v] : presets()) out.push_back(k);
  return out;
}

namespace {
// timm's naming (timm/models/vision_transformer.py): vit_<size>_patch<P>_<image>, optionally followed by
// a pretrained tag after a dot ("vit_base_patch16_224.augreg_in21k", which does not change the shape).
// The sizes' width, depth, heads and MLP ratio are timm's (ViT paper Table 1; DeiT for tiny and small;
// giant from Zhai et al. 2022, timm vit_giant_patch14_224: 1408 wide, 40 deep, 16 heads, MLP 6144 = 48/11).
std::optional<Preset> timm_preset(const std::string& full) {
  const std::string name = full.substr(0, full.find('.'));
  static const std::map<std::string, Preset> sizes{{"tiny", {"", 0, 0, 3, 192, 12, 3, 4.0, 1000}},
                                                   {"small", {"", 0, 0, 3, 384, 12, 6, 4.0, 1000}},
                                                   {"base", {"", 0, 0, 3, 768, 12, 12, 4.0, 1000}},
                                                   {"large", {"", 0, 0, 3, 1024, 24, 16, 4.0, 1000}},
                                                   {"huge", {"", 0, 0, 3, 1280, 32, 16, 4.0, 1000}},
                                                   {"giant", {"", 0, 0, 3, 1408, 40, 16, 48.0 / 11.0, 1000}}};
  if (name.rfind("vit_", 0) != 0) return std::nullopt;
  const size_t a = name.find("_patch", 4);
  if (a == std::string::npos) return std::nullopt;
  auto it = sizes.find(name.substr(4, a - 4));
  if (it == sizes.end()) return std::nullopt;
  const size_t b = name.find('_', a + 6);
  if (b == std::string::npos) return std::nullopt;
  auto whole = [](const std::string& t) -> int {  // digits only, no leading zero, at most 5 of them
    if (t.empty() || t.size() > 5 || t.find_first_not_of("0123456789") != std::string::npos || t[0] == '0')
      return 0;
    return static_cast<int>(units::parse_integer(t, 1, 99999));
  };
  const int patch = whole(name.substr(a + 6, b - a - 6)), image = whole(name.substr(b + 1));
  if (patch <= 0 || image <= 0) return std::nullopt;
  Preset p = it->second;
  p.patch = patch;
  p.image_size = image;
  return p;
}
}  // namespace

ViTConfig vit_preset(const std::string& name) {
  auto it = presets().find(name);
  std::optional<Preset> timm;
  if (it == presets().end()) timm = timm_preset(name);
  if (it == presets().end() && !timm) {
    std::string valid;
    for (const auto& n : vit_preset_names()) valid += (valid.empty() ? "" : ", ") + n;
    throw Error(
        fmt::format("unknown model preset '{}'; valid: {}, or timm's vit_{{tiny,small,base,large,huge,giant}}"
                    "_patch<P>_<image> (e.g. vit_large_patch16_384)",
                    echo(name), valid));
  }
  ViTConfig c = timm ? *timm : it->second;
  c.preset = name;
  return c;
}

const char* layer_kind_name(LayerKind k) {
  switch (k) {
    case LayerKind::PatchEmbed:
      return "patch_embed";
    case LayerKind::Attention:
      return "attention";
    case LayerKind::Mlp:
      return "mlp";
    case LayerKind::Head:
      return "head";
  }
  return "?";
}

// Layer accounting, per sample (b = 1). T tokens, d width, h MLP hidden, a heads, P patch pixels*channels.
// Parameters follow torchvision's VisionTransformer exactly (conv patch embedding with bias, class
// token, learned position embedding, pre-norm blocks: LayerNorm, MultiheadAttention with in_proj
// weight+bias and out_proj, LayerNorm, MLP with two biased Linear layers; final LayerNorm; Linear head).
Workload build_workload(const ViTConfig& cfg) {
  cfg.validate();
  Workload w;
  w.model = cfg;
  const double T = cfg.tokens();
  const double N = cfg.patches();
  const double K = cfg.class_tokens;  // T = N + K
  const double d = cfg.width;
  const double h = cfg.mlp_hidden();
  const double a = cfg.heads;
  const double P = static_cast<double>(cfg.patch) * cfg.patch * cfg.channels;
  const bool dropout = cfg.dropout > 0;

  // Patch embedding: conv as a GEMM [N, P] x [P, d]; plus the K class tokens and the position embedding
  // of all T tokens.
  LayerCost pe{"patch_embed", LayerKind::PatchEmbed};
  pe.params = static_cast<int64_t>(P * d + d + K * d + T * d);
  pe.fwd_flops = 2 * N * P * d;
  pe.bwd_flops = 2 * N * P * d;  // weight gradient only: the image needs no gradient
  pe.fwd_act_bytes = 4 * (cfg.image_size * cfg.image_size * cfg.channels + 2 * T * d);
  pe.saved_act_bytes_16 = 2 * cfg.image_size * cfg.image_size * cfg.channels;  // the input image
  w.layers.push_back(pe);

  for (int i = 0; i < cfg.depth; ++i) {
    // Attention sub-block: LN1 + QKV + scores + softmax + weighted sum + out projection.
    LayerCost at{fmt::format("block{}.attn", i), LayerKind::Attention};
    at.params = static_cast<int64_t>(2 * d + 3 * d * d + 3 * d + d * d + d);
    at.fwd_flops = 2 * (T * d * 3 * d + T * d * d) + 2 * 2 * T * T * d;  // 4 T d^2 MACs + 2 T^2 d MACs
    at.bwd_flops = 2 * at.fwd_flops;
    at.fwd_act_bytes = 4 * (T * d * 2 /*LN*/ + T * d * 4 /*qkv*/ + 2 * a * T * T /*scores*/ + T * d * 3);
    // Korthikanti et al. attention: 11 s b h + 5 a s^2 b (bytes, 16-bit) plus LN input 2 s b h.
    // Without dropout the softmax-dropout mask (a s^2 b, 1 byte), its output (2 a s^2 b) and the
    // output-dropout mask (s b h, 1 byte) are not kept.
    // Fused attention (scaled_dot_product_attention's flash and memory-efficient kernels) keeps no
    // a x T x T tensor: backward recomputes the scores from Q, K, V, the output (proj in) and one fp32
    // softmax statistic (the logsumexp) per head and query row, a T floats, and regenerates a dropout
    // mask from the RNG state (FlashAttention, Dao et al. 2022, section 3.1; docs/sources.md "ViT sizes").
    const bool fused = cfg.attention == AttentionPath::Fused;
    const double scores = fused ? 0 : a * T * T;
    at.saved_act_bytes_16 = 2 * T * d /*LN in*/ + 2 * T * d /*QKV in*/ + 4 * T * d /*Q,K*/ +
                            2 * scores /*softmax*/ + 2 * T * d /*V*/ + 2 * T * d /*proj in*/ +
                            (dropout ? 2 * scores : 0);
    at.saved_act_bytes_8 = dropout ? (scores + T * d) : 0;
    at.saved_act_bytes_fp32 = fused ? 4 * a * T /*logsumexp*/ : 0;
    w.layers.push_back(at);

    // MLP sub-block: LN2 + fc1 + GELU + fc2. Korthikanti: 19 s b h with dropout mask, plus LN 2 s b h.
    LayerCost mlp{fmt::format("block{}.mlp", i), LayerKind::Mlp};
    mlp.params = static_cast<int64_t>(2 * d + d * h + h + h * d + d);
    mlp.fwd_flops = 2 * (T * d * h * 2);
    mlp.bwd_flops = 2 * mlp.fwd_flops;
    mlp.fwd_act_bytes = 4 * (T * d * 2 + T * h * 2 + T * d);
    mlp.saved_act_bytes_16 =
        2 * T * d /*LN in*/ + 2 * T * d /*fc1 in*/ + 2 * T * h /*GELU in*/ + 2 * T * h /*fc2 in*/;
    mlp.saved_act_bytes_8 = dropout ? T * d : 0;
    w.layers.push_back(mlp);
  }

  // Final LayerNorm + classification head on the class token (token 0).
  LayerCost head{"head", LayerKind::Head};
  head.params = static_cast<int64_t>(2 * d + d * cfg.classes + cfg.classes);
  head.fwd_flops = 2 * d * cfg.classes;
  head.bwd_flops = 2 * head.fwd_flops;
  head.fwd_act_bytes = 4 * (T * d * 2 + d + cfg.classes);
  head.saved_act_bytes_16 = 2 * T * d + 2 * d + 2 * cfg.classes;
  w.layers.push_back(head);
  return w;
}

int64_t Workload::total_params() const {
  return std::accumulate(layers.begin(), layers.end(), int64_t{0},
                         [](int64_t s, const LayerCost& l) { return s + l.params; });
}
double Workload::fwd_flops_per_sample() const {
  double s = 0;
  for (const auto& l : layers) s += l.fwd_flops;
  return s;
}
double Workload::bwd_flops_per_sample() const {
  double s = 0;
  for (const auto& l : layers) s += l.bwd_flops;
  return s;
}
double Workload::saved_activation_bytes(const LayerCost& l, Precision p) const {
  const double scale16 = p == Precision::FP32 ? 2.0 : 1.0;  // fp32 doubles the 2-byte terms
  return l.saved_act_bytes_16 * scale16 + l.saved_act_bytes_8 + l.saved_act_bytes_fp32;
}

}  // namespace vitsim
