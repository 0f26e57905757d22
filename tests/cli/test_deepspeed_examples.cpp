// Issue 28 item 2: every DeepSpeed config in the shapes of DeepSpeedExamples' training/ folders and the
// DeepSpeed docs' examples is read as DeepSpeed reads it: a key DeepSpeed accepts is read or warned about,
// never refused as unknown; the batch sizes are derived by DeepSpeed's own rule (runtime/config.py,
// _set_batch_related_parameters, then _batch_assertion). The fixtures are tests/data/deepspeed/*.json,
// written from the public files' keys (docs/sources.md, "DeepSpeed configs"); a config that turns on a
// feature vitsim does not model is refused with the feature named (never as an unknown key).
#include <catch2/catch.hpp>

#include <optional>
#include <string>

#include "test_util.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/formats/deepspeed.hpp"
#include "vitsim/core/formats/scenario.hpp"

using namespace vitsim;

namespace {

// A scenario of `nodes` one-GPU nodes around tests/data/deepspeed/NAME (test_util's platform; the
// collective pinned so that nothing here depends on which one runs).
Scenario resolve_example(const vt::TempDir& d, const std::string& name, int nodes = 2,
                         const std::string& training = "") {
  d.file("p.xml", vt::platform_xml(nodes, 1, "100GBps", "0us", std::vector<std::string>(nodes, "10GBps"),
                                   std::vector<std::string>(nodes, "10Tf")));
  const std::string s =
      d.file("s.xml", fmt::format(R"(<scenario name="ds">
  <cluster platform="p.xml" nodes="{}" gpus_per_node="1"/>
  <model preset="vit_cifar_tiny"/>
  <dataset name="synthetic" train_samples="6400" image_size="32" channels="3"/>
  {}
  <parallelism collective="ring"/>
  <deepspeed config="{}"/>
  <simulation steps="6" warmup="1"/>
</scenario>
)",
                                  nodes, training, vt::source("tests/data/deepspeed/" + name)));
  const auto points = expand(read_scenario_file(s));
  REQUIRE(points.size() == 1);
  return points.front();
}

std::string refusal(const vt::TempDir& d, const std::string& name) {
  try {
    resolve_example(d, name);
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("DeepSpeed's batch rule: any two give the third, train_batch_size alone gives the micro-batch",
          "[habits][deepspeed][batch]") {
  // runtime/config.py _set_batch_related_parameters, case by case (world = data-parallel ranks; `//`).
  const auto b = [](std::optional<long long> t, std::optional<long long> m, std::optional<long long> g,
                    long long world) { return derive_deepspeed_batch(t, m, g, world); };
  // train_batch_size alone: accumulation 1, micro = 16 // 2 = 8 (the cifar example on 2 GPUs).
  CHECK(b(16, std::nullopt, std::nullopt, 2).micro_batch == 8);
  CHECK(b(16, std::nullopt, std::nullopt, 2).grad_accum == 1);
  // train_batch_size and micro: accumulation = 256 // 8 // 2 = 16.
  CHECK(b(256, 8, std::nullopt, 2).grad_accum == 16);
  // train_batch_size and accumulation: micro = 256 // 2 // 4 = 32.
  CHECK(b(256, std::nullopt, 4, 2).micro_batch == 32);
  // micro and accumulation: train = 4 x 2 x 8 = 64; micro alone: train = 4 x 8 = 32, accumulation 1.
  CHECK(b(std::nullopt, 4, 2, 8).train_batch == 64);
  CHECK(b(std::nullopt, 4, std::nullopt, 8).train_batch == 32);
  CHECK(b(std::nullopt, 4, std::nullopt, 8).grad_accum == 1);
  // All three: only the assertion, train == micro x accumulation x world.
  CHECK(b(64, 4, 2, 8).train_batch == 64);
  // Inconsistent: 16 // 3 = 5 and 5 x 1 x 3 = 15 != 16 (_batch_assertion).
  CHECK_THROWS_WITH(b(16, std::nullopt, std::nullopt, 3),
                    "train_batch_size 16 != micro_batch 5 x gradient_accumulation_steps 1 x ranks 3 = 15 "
                    "(DeepSpeed derives train_micro_batch_size_per_gpu = 16 // 3 "
                    "= 5 with gradient_accumulation_steps 1, and requires equality): give a train_batch_size "
                    "the ranks divide, or the micro-batch and accumulation instead");
  // 4 // 8 = 0: DeepSpeed's "has to be greater than 0".
  CHECK_THROWS_WITH(b(4, std::nullopt, std::nullopt, 8), Catch::Contains("micro_batch 0 x"));
  CHECK_THROWS_WITH(b(64, 4, 3, 8),
                    "train_batch_size 64 != micro_batch 4 x gradient_accumulation_steps 3 x ranks 8 = 96 "
                    "(DeepSpeed requires equality)");
  // Neither train_batch_size nor the micro-batch: DeepSpeed's assertion.
  CHECK_THROWS_WITH(b(std::nullopt, std::nullopt, 2, 8),
                    Catch::Contains("either train_batch_size or train_micro_batch_size_per_gpu"));
}

TEST_CASE("DeepSpeedExamples' and the docs' configs read as DeepSpeed reads them", "[habits][deepspeed]") {
  vt::TempDir d;
  SECTION("training/cifar (bf16, the twin master-weights keys): train_batch_size 16 on 2 GPUs gives 8 x 1") {
    const Scenario s = resolve_example(d, "dse_cifar_bf16.json");
    CHECK(s.training.micro_batch == 8);  // 16 // 2
    CHECK(s.training.grad_accum == 1);
    CHECK(s.training.precision == Precision::BF16);
    const DeepSpeedConfig c = read_deepspeed_config(vt::source("tests/data/deepspeed/dse_cifar_bf16.json"));
    CHECK(unmodelled_warning(c).find("bf16.bf16_master_weights_and_grads") != std::string::npos);
    CHECK(unmodelled_warning(c).find("fp16.fp16_master_weights_and_grads") != std::string::npos);
  }
  SECTION("training/cifar on 3 GPUs: 16 // 3 = 5 and 15 != 16, refused as DeepSpeed refuses it") {
    CHECK_THROWS_WITH(
        resolve_example(d, "dse_cifar_bf16.json", 3),
        Catch::Contains("train_batch_size 16 != micro_batch 5 x gradient_accumulation_steps 1 x "
                        "ranks 3 = 15"));
  }
  SECTION("a scenario's micro-batch counts as given: 16 // 4 // 2 = 2 accumulation steps") {
    const Scenario s = resolve_example(d, "dse_cifar_bf16.json", 2, R"(<training micro_batch="4"/>)");
    CHECK(s.training.grad_accum == 2);
  }
  SECTION("training/imagenet fp16 ZeRO-1: an unknown top-level key DeepSpeed ignores is warned") {
    const Scenario s = resolve_example(d, "dse_imagenet_fp16_z1.json");
    CHECK(s.training.micro_batch == 128);  // 256 // 2 // 1
    CHECK(s.parallel.zero == 1);
    const DeepSpeedConfig c =
        read_deepspeed_config(vt::source("tests/data/deepspeed/dse_imagenet_fp16_z1.json"));
    CHECK(unmodelled_warning(c).find("keys DeepSpeed itself ignores: cuda_visible_devices") !=
          std::string::npos);
  }
  SECTION("training/pipeline_parallelism: 256 and micro 8 on 2 GPUs give 16 accumulation steps") {
    const Scenario s = resolve_example(d, "dse_pipeline.json");
    CHECK(s.training.micro_batch == 8);
    CHECK(s.training.grad_accum == 16);  // 256 // 8 // 2
  }
  SECTION("training/gan: train_batch_size 64 alone") {
    CHECK(resolve_example(d, "dse_gan.json").training.micro_batch == 32);  // 64 // 2
  }
  SECTION("training/BingBertGlue: 32 and micro 4 give 32 // 4 // 2 = 4 steps") {
    CHECK(resolve_example(d, "dse_bing_bert_glue.json").training.grad_accum == 4);
  }
  SECTION("training/autotuning ZeRO-3 with \"auto\" micro-batch: the scenario fills it") {
    const Scenario s = resolve_example(d, "dse_autotuning_fp16_z3.json", 2, R"(<training micro_batch="6"/>)");
    CHECK(s.training.micro_batch == 6);
    CHECK(s.parallel.zero == 3);
  }
  SECTION("training/MoQ: quantize_training is warned, not refused") {
    CHECK(resolve_example(d, "dse_moq.json").training.precision == Precision::FP16);
  }
  SECTION("the docs' getting-started config: \"zero_optimization\": true is ZeRO-1 (the deprecated form)") {
    const Scenario s = resolve_example(d, "dsdocs_getting_started.json");
    CHECK(s.parallel.zero == 1);         // zero/config.py read_zero_config_deprecated: stage 1 when true
    CHECK(s.training.micro_batch == 4);  // 8 // 2 // 1
  }
  SECTION("DeepSpeed v0.16's newer bf16 and ZeRO-3 keys are known") {
    const Scenario s = resolve_example(d, "dsdocs_zero3_newer_keys.json");
    CHECK(s.parallel.zero == 3);
    CHECK(s.training.grad_accum == 2);
  }
  SECTION("activation_checkpointing: DeepSpeed ignores a key it does not read; a near miss is a typo") {
    d.file("ac.json", R"({"train_micro_batch_size_per_gpu": 4, "activation_checkpointing": {"profile": false,
                          "my_own_flag": true}})");
    const DeepSpeedConfig c = read_deepspeed_config(d / "ac.json");
    CHECK(c.ignored == std::vector<std::string>{"activation_checkpointing.my_own_flag"});
    d.file("ac.json", R"({"activation_checkpointing": {"profiles": false}})");
    CHECK_THROWS_WITH(read_deepspeed_config(d / "ac.json"),
                      Catch::Contains("(did you mean 'activation_checkpointing.profile'?)"));
  }
  SECTION("features vitsim does not model are refused by name, never as unknown keys") {
    CHECK_THAT(refusal(d, "dse_vit_random_ltd.json"),
               Catch::Contains("'data_efficiency.enabled' is not modelled by vitsim"));
    CHECK_THAT(refusal(d, "dse_bing_bert_pld.json"),
               Catch::Contains("'progressive_layer_drop.enabled' is not modelled by vitsim"));
    CHECK_THAT(refusal(d, "dse_onebitadam.json"),
               Catch::Contains("training.optimizer") && Catch::Contains("'onebitadam'"));
  }
}

TEST_CASE("DeepSpeed v0.14.4's reading: bf16 key by key, bfloat16, bfp16, offload, checkpointing's scope",
          "[habits][deepspeed][v014]") {
  vt::TempDir d;
  SECTION(
      "bf16: enabled read, the fp16 keys copied into it ignored (runtime/config.py get_bfloat16_enabled)") {
    d.file("b.json", R"({"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true, "loss_scale": 0,
                         "hysteresis": 2, "immediate_grad_update": false}})");
    const DeepSpeedConfig c = read_deepspeed_config(d / "b.json");
    CHECK(c.precision == std::string("bf16"));
    CHECK(c.ignored == std::vector<std::string>{"bf16.hysteresis", "bf16.loss_scale"});  // key order
    CHECK(c.unmodelled == std::vector<std::string>{"bf16.immediate_grad_update"});
    // A near miss of a key DeepSpeed reads is a typo DeepSpeed would silently drop: refused.
    d.file("b.json", R"({"bf16": {"enabeld": true}})");
    CHECK_THROWS_WITH(read_deepspeed_config(d / "b.json"), Catch::Contains("(did you mean 'bf16.enabled'?)"));
    // fp16 too is read key by key: an unknown key is ignored, not refused.
    d.file("b.json", R"({"fp16": {"enabled": true, "my_scale_note": 1}})");
    CHECK(read_deepspeed_config(d / "b.json").ignored == std::vector<std::string>{"fp16.my_scale_note"});
  }
  SECTION("\"bfloat16\": read as bf16 alone, ignored beside bf16 (bf16 is tried first)") {
    d.file("b.json", R"({"bfloat16": {"enabled": true, "loss_scale": 0}})");
    DeepSpeedConfig c = read_deepspeed_config(d / "b.json");
    CHECK(c.precision == std::string("bf16"));
    CHECK(c.ignored == std::vector<std::string>{"bf16.loss_scale"});
    REQUIRE(c.notes.size() == 1);
    CHECK_THAT(c.notes[0], Catch::Contains("read as 'bf16'"));
    d.file("b.json", R"({"bf16": {"enabled": false}, "bfloat16": {"enabled": true}})");
    c = read_deepspeed_config(d / "b.json");
    CHECK(!c.precision);  // bf16.enabled false wins: DeepSpeed never reads "bfloat16" here
    CHECK(c.ignored == std::vector<std::string>{"bfloat16"});
  }
  SECTION("communication_data_type: fp32, fp16, bf16 only; bfp16 (before v0.14.1) with a did-you-mean") {
    d.file("c.json", R"({"communication_data_type": "BF16"})");
    CHECK(read_deepspeed_config(d / "c.json").comm_dtype == std::string("bf16"));  // lower-cased first
    d.file("c.json", R"({"communication_data_type": "bfp16"})");
    CHECK_THROWS_WITH(read_deepspeed_config(d / "c.json"),
                      Catch::Contains("(did you mean bf16? DeepSpeed took bfp16 before v0.14.1 only)"));
    d.file("c.json", R"({"communication_data_type": "half"})");
    CHECK_THROWS_WITH(read_deepspeed_config(d / "c.json"), Catch::Contains("(did you mean fp16?)"));
  }
  SECTION("offload: device cpu or nvme read, the deprecated booleans too; partial offload refused") {
    d.file("o.json", R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme",
                         "nvme_path": "/local_nvme"}, "offload_param": {"device": "none"}}})");
    DeepSpeedConfig c = read_deepspeed_config(d / "o.json");
    CHECK(c.offload_optimizer == std::string("nvme"));
    CHECK(!c.offload_param);
    d.file("o.json", R"({"zero_optimization": {"stage": 2, "cpu_offload": true}})");
    CHECK(read_deepspeed_config(d / "o.json").offload_optimizer == std::string("cpu"));
    d.file("o.json", R"({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "gpu"}}})");
    CHECK_THROWS_WITH(read_deepspeed_config(d / "o.json"), Catch::Contains("must be none, cpu or nvme"));
    d.file("o.json", R"({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu",
                         "ratio": 0.3}}})");
    CHECK_THROWS_WITH(read_deepspeed_config(d / "o.json"),
                      Catch::Contains("'zero_optimization.offload_optimizer.ratio' is not modelled"));
  }
  SECTION("offload in a scenario: DeepSpeed's only, and DeepSpeedCPUAdam's (sgd refused as DeepSpeed does)") {
    d.file("o.json", R"({"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2,
                         "offload_optimizer": {"device": "cpu"}}})");
    d.file("p.xml", vt::platform_xml(2, 1, "100GBps", "0us", {"10GBps", "10GBps"}, {"10Tf", "10Tf"}));
    auto resolve = [&](const std::string& training, const std::string& ds) {
      return expand(read_scenario_file(d.file("s.xml", R"(<scenario name="o">
  <cluster platform="p.xml" nodes="2" gpus_per_node="1"/>
  <model preset="vit_cifar_tiny"/>
  <dataset name="synthetic" train_samples="6400" image_size="32" channels="3"/>
  )" + training + "\n" + ds + R"(
</scenario>
)")))
          .front();
    };
    CHECK(resolve("", R"(<deepspeed config="o.json"/>)").parallel.offload_optimizer == "cpu");
    CHECK_THROWS_WITH(
        resolve(R"(<training optimizer="sgd"/>)", R"(<deepspeed config="o.json"/>)"),
        Catch::Contains("DeepSpeedCPUAdam") && Catch::Contains("parallelism.offload_optimizer"));
    CHECK_THROWS_WITH(resolve("", R"(<parallelism offload_optimizer="cpu"/>)"),
                      Catch::Contains("needs training.framework=deepspeed, not vitsim"));
  }
  SECTION(
      "activation_checkpointing configures deepspeed.checkpointing: the scenario decides, a note says so") {
    d.file("a.json",
           R"({"train_micro_batch_size_per_gpu": 4, "activation_checkpointing": {"profile": false}})");
    const DeepSpeedConfig c = read_deepspeed_config(d / "a.json");
    CHECK(c.activation_checkpointing == true);
    REQUIRE(c.notes.size() == 1);
    CHECK_THAT(c.notes[0], Catch::Contains("training.activation_checkpointing"));
  }
}
