// The LibTorch ViT against core's model description.
#include <catch2/catch.hpp>

#include "vitsim/core/vit.hpp"
#include "vitsim/real/model.hpp"

using namespace vitsim;

TEST_CASE("The LibTorch ViT has exactly core's parameter count", "[real][model]") {
  // Every preset small enough to build quickly, plus vit_b_16, whose count torchvision prints as
  // 86,567,656 (REFERENCE.md section 4: ViT-B 86.57 M).
  for (const char* name : {"vit_fmnist_tiny", "vit_cifar_tiny", "vit_cifar_small", "vit_tiny_patch16_224", "vit_b_16"}) {
    ViTConfig cfg = vit_preset(name);
    real::VisionTransformer model(cfg);
    INFO(name);
    CHECK(real::parameter_count(*model) == build_workload(cfg).total_params());
  }
  real::VisionTransformer b16(vit_preset("vit_b_16"));
  CHECK(real::parameter_count(*b16) == 86567656);
}

TEST_CASE("The ViT maps images to one logit per class", "[real][model]") {
  ViTConfig cfg = vit_preset("vit_fmnist_tiny");
  cfg.classes = 7;
  torch::manual_seed(1);
  real::VisionTransformer model(cfg);
  auto x = torch::randn({3, cfg.channels, cfg.image_size, cfg.image_size});
  auto y = model->forward(x);
  CHECK(y.sizes() == torch::IntArrayRef({3, 7}));
  // The head is zero-initialised as in torchvision: every logit starts at exactly 0.
  CHECK(y.abs().max().item<float>() == 0.0f);
  // A non-square layout error is core's error, not a LibTorch crash.
  cfg.patch = 5;
  CHECK_THROWS_WITH(real::VisionTransformer(cfg), "model image_size 28 is not a multiple of patch 5");
}
