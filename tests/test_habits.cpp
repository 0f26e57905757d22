// Issue 15 items 1, 2 and 4: the user's habits. Durations and names as users type them, real DeepSpeed
// configs (shapes from DeepSpeedExamples), activation checkpointing, optimizer offload, gradient
// clipping, MFU/HFU.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "vitsim/core/error.hpp"
#include "vitsim/core/units.hpp"
#include "vitsim/core/vit.hpp"

using namespace vitsim;
using units::Kind;

TEST_CASE("habits: durations as users type them", "[habits][units]") {
  // 1 min = 60 s, 1 h = 3600 s, 1 d = 86400 s (SI-accepted units; SimGrid's 'm' kept).
  CHECK(units::parse("90min", Kind::Time) == 5400);
  CHECK(units::parse("90m", Kind::Time) == 5400);
  CHECK(units::parse("2d", Kind::Time) == 172800);
  CHECK(units::parse("1h30m", Kind::Time) == 5400);
  CHECK(units::parse("1h30min", Kind::Time) == 5400);
  CHECK(units::parse("2d12h", Kind::Time) == 216000);
  CHECK(units::parse("1m30s", Kind::Time) == 90);
  CHECK(units::parse("1h0m5s", Kind::Time) == 3605);
  CHECK(units::parse("1s500ms", Kind::Time) == Approx(1.5));
  CHECK(units::parse("1.5h", Kind::Time) == 5400);
  // Out of order, repeated, dangling, or a compound of another kind.
  CHECK_THROWS_WITH(units::parse("30m1h", Kind::Time),
                    Catch::StartsWith("bad time '30m1h': in a compound duration each unit is smaller than the one "
                                      "before ('h' after 'm')"));
  CHECK_THROWS_WITH(units::parse("1h1h", Kind::Time), Catch::StartsWith("bad time '1h1h': in a compound duration"));
  CHECK_THROWS_WITH(units::parse("1h30", Kind::Time), Catch::StartsWith("bad time '1h30': missing unit"));
  CHECK_THROWS_WITH(units::parse("1h-5m", Kind::Time), Catch::StartsWith("bad time '1h-5m': unknown unit 'h-'"));
  CHECK_THROWS_WITH(units::parse("1GB5MB", Kind::Bytes), Catch::StartsWith("bad size '1GB5MB': unknown unit 'GB5MB'"));
  CHECK_THROWS_WITH(units::parse("1h30x", Kind::Time), Catch::StartsWith("bad time '1h30x': unknown unit 'x'"));
}

TEST_CASE("habits: timm model names are presets", "[habits][vit]") {
  struct Case {
    const char* name;
    int image, patch, width, depth, heads;
  };
  // timm/models/vision_transformer.py: tiny 192/12/3, small 384/12/6, base 768/12/12, large 1024/24/16,
  // huge 1280/32/16, giant 1408/40/16.
  for (const Case& c : {Case{"vit_large_patch16_384", 384, 16, 1024, 24, 16}, Case{"vit_base_patch32_224", 224, 32, 768, 12, 12},
                        Case{"vit_small_patch16_224", 224, 16, 384, 12, 6}, Case{"vit_tiny_patch16_384", 384, 16, 192, 12, 3},
                        Case{"vit_huge_patch14_224", 224, 14, 1280, 32, 16}, Case{"vit_giant_patch14_224", 224, 14, 1408, 40, 16},
                        Case{"vit_base_patch16_224.augreg_in21k", 224, 16, 768, 12, 12}}) {
    INFO(c.name);
    const ViTConfig m = vit_preset(c.name);
    CHECK(m.preset == c.name);
    CHECK(m.image_size == c.image);
    CHECK(m.patch == c.patch);
    CHECK(m.width == c.width);
    CHECK(m.depth == c.depth);
    CHECK(m.heads == c.heads);
    CHECK_NOTHROW(m.validate());
  }
  CHECK(vit_preset("vit_giant_patch14_224").mlp_hidden() == 6144);  // timm: mlp_ratio 48/11
  // vit_base_patch16_224 by the pattern equals the listed preset.
  CHECK(build_workload(vit_preset("vit_base_patch16_224")).total_params() ==
        build_workload(vit_preset("vit_b_16")).total_params());
  for (const char* bad : {"vit_medium_patch16_224", "vit_base_patch_224", "vit_base_patch16", "vit_base_patch0_224",
                          "vit_base_patch16_22x", "deit_base_patch16_224", "vit_base_patch16_224_extra"}) {
    INFO(bad);
    CHECK_THROWS_WITH(vit_preset(bad), Catch::StartsWith(std::string("unknown model preset '") + bad + "'; valid: "));
  }
  // A pattern with an impossible shape is refused by validate (224 is not a multiple of 14 x ... 32? 224/32 = 7: fine;
  // 384/14 is not whole).
  CHECK_THROWS_WITH(vit_preset("vit_base_patch14_384").validate(),
                    "model image_size 384 is not a multiple of patch 14");
}
