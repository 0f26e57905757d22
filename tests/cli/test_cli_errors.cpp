// Negative tests: every kind of bad input prints one line naming file:line, the bad value and the valid
// choices, and exits with status 1. The exact messages are asserted.
#include <catch2/catch.hpp>

#include "test_util.hpp"
#include "vitsim/sim/collectives/collective.hpp"

namespace {

struct Case {
  const char* name;
  std::string scenario;  // "" = no file written
  std::string args;
  std::string message;
  bool prefix_only = false;
};

std::string scenario(const std::string& cluster, const std::string& model, const std::string& training,
                     const std::string& extra = "") {
  return "<scenario>\n  <cluster platform=\"p.xml\" " + cluster + "/>\n  <model " + model +
         "/>\n  <dataset name=\"cifar10\"/>\n  <training " + training + "/>\n" + extra + "</scenario>\n";
}

const std::string kCluster = "nodes=\"1\" gpus_per_node=\"2\"";
const std::string kModel = "preset=\"vit_b_16\"";
const std::string kTraining = "micro_batch=\"16\"";

}  // namespace

TEST_CASE("bad inputs give one clear line and exit 1", "[cli][negative]") {
  vt::TempDir d;
  // Two nodes of 4 GPUs (platform_xml's layout).
  d.file("p.xml", vt::platform_xml(2, 4, "12GBps", "1us", {"1GBps", "1GBps"}, {"8Tf", "8Tf"}));
  // All three batch figures: with one left out DeepSpeed derives it (64 // 16 // 2 = 2 accumulation steps).
  d.file(
      "ds.json",
      R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 16, "gradient_accumulation_steps": 1})");
  d.file("bad.json", R"({"train_batch_size": 64, "gradient_accumulation_step": 2})");
  const std::vector<Case> cases{
      {"missing file", "", "predict nope.xml", "vitsim: error: nope.xml: cannot open scenario file"},
      {"malformed XML", "<scenario><cluster platform='p.xml'></scenario>", "predict s.xml",
       "vitsim: error: s.xml:1: malformed XML: Start-end tags mismatch"},
      {"unknown element", scenario(kCluster, kModel, kTraining, "  <optimiser/>\n"), "predict s.xml",
       "vitsim: error: s.xml:6: unknown element <optimiser>; valid: cluster, compute, dataset, deepspeed, "
       "loader, model, nccl, "
       "parallelism, run, simulation, training, validation, whatif, sweep"},
      {"unknown attribute", scenario(kCluster, kModel, "micro_batch=\"16\" epoch=\"3\""), "predict s.xml",
       "vitsim: error: s.xml:5: unknown attribute 'epoch' on <training>; valid: micro_batch, grad_accum, "
       "epochs, "
       "precision, optimizer, lr, weight_decay, seed, framework, torch_version, optimizer_impl, cast, "
       "activation_checkpointing, "
       "gradient_clipping, loss_scale"},
      {"missing unit", scenario(kCluster, kModel, kTraining, "  <parallelism bucket_size=\"25\"/>\n"),
       "predict s.xml",
       "vitsim: error: s.xml:6: parallelism.bucket_size: bad size '25': missing unit; valid units: B, kB, "
       "KB, MB, GB, "
       "TB, KiB, MiB, GiB, TiB, b, kb, Kb, Mb, Gb"},
      {"unknown preset", scenario(kCluster, "preset=\"vit_b_17\"", kTraining), "predict s.xml",
       "vitsim: error: s.xml:3: model.preset: unknown model preset 'vit_b_17'; valid: vit_b_16, "
       "vit_base_patch16_224, "
       "vit_cifar_small, vit_cifar_tiny, vit_fmnist_tiny, vit_h_16, vit_huge_patch16_224, vit_l_16, "
       "vit_large_patch16_224, vit_small_patch16_224, vit_tiny_patch16_224, or timm's "
       "vit_{tiny,small,base,large,huge,giant}_patch<P>_<image> (e.g. vit_large_patch16_384)"},
      {"unknown collective",
       scenario(kCluster, kModel, kTraining, "  <parallelism collective=\"butterfly\"/>\n"), "predict s.xml",
       "vitsim: error: s.xml:6: parallelism.collective: unknown collective 'butterfly'; valid: " +
           vt::join(vitsim::sim::collective_names())},
      {"zero batch", scenario(kCluster, kModel, "micro_batch=\"0\""), "predict s.xml",
       "vitsim: error: s.xml:5: training.micro_batch: 0 is out of range (expected 1 .. 16777216)"},
      {"negative batch", scenario(kCluster, kModel, kTraining), "predict s.xml --set training.micro_batch=-8",
       "vitsim: error: --set training.micro_batch: training.micro_batch: -8 is out of range (expected 1 .. "
       "16777216)"},
      {"train_batch_size mismatch", scenario(kCluster, kModel, "", "  <deepspeed config=\"ds.json\"/>\n"),
       "predict s.xml",
       "vitsim: error: s.xml:6: train_batch_size 64 != micro_batch 16 x gradient_accumulation_steps 1 x "
       "ranks 2 = 32 "
       "(DeepSpeed requires equality)"},
      {"unknown DeepSpeed key", scenario(kCluster, kModel, kTraining, "  <deepspeed config=\"bad.json\"/>\n"),
       "predict s.xml",
       "vitsim: error: s.xml:6: bad.json: unknown DeepSpeed key 'gradient_accumulation_step' (did you mean "
       "'gradient_accumulation_steps'?); known: "
       "activation_checkpointing, aio, allgather_size, amp, autotuning, bf16, bfloat16, checkpoint, "
       "comms_logger, "
       "communication_data_type, compile, compression_training, csv_monitor, curriculum_learning, "
       "data_efficiency, data_types, dataloader_drop_last, disable_allgather, dump_state, eigenvalue, "
       "elasticity, flops_profiler, fp16, fp32_allreduce, gradient_accumulation_dtype, "
       "gradient_accumulation_steps, gradient_clipping, gradient_predivide_factor, graph_harvesting, "
       "hybrid_engine, load_universal_checkpoint, memory_breakdown, moe, monitor_config, nebula, optimizer, "
       "pipeline, prescale_gradients, progressive_layer_drop, quantize_training, scheduler, seed, "
       "sparse_attention, sparse_gradients, steps_per_print, tensorboard, timers, torch_autocast, "
       "train_batch_size, train_micro_batch_size_per_gpu, use_data_before_expert_parallelism, "
       "use_node_local_storage, wall_clock_breakdown, wandb, weight_quantization, "
       "zero_allow_untested_optimizer, zero_force_ds_cpu_optimizer, zero_legacy_stage1, zero_optimization"},
      {"more GPUs per node than the platform has",
       scenario("nodes=\"1\" gpus_per_node=\"5\"", kModel, kTraining), "predict s.xml",
       "vitsim: error: s.xml:2: cluster.gpus_per_node: 5 GPUs per node requested but node 'n0' has 4"},
      {"more nodes than the platform has", scenario(kCluster, kModel, kTraining),
       "predict s.xml --set cluster.nodes=3",
       "vitsim: error: --set cluster.nodes: cluster.nodes: 3 nodes requested but p.xml has 2"},
      {"unknown node", scenario("nodes=\"1\" gpus_per_node=\"1\" hosts=\"n7\"", kModel, kTraining),
       "predict s.xml", "vitsim: error: s.xml:2: cluster.hosts: no node 'n7' in p.xml; nodes: n0, n1"},
      // The list of keys grows with the schema: the test checks its start and that it is sorted.
      {"unknown --set key", scenario(kCluster, kModel, kTraining), "predict s.xml --set training.batch=3",
       "vitsim: error: --set training.batch: unknown key; valid: cluster.gpus_per_node, cluster.hosts, "
       "cluster.nodes, "
       "cluster.platform, compute.model, dataset.channels,",
       true},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    if (!c.scenario.empty()) d.file("s.xml", c.scenario);
    auto r = vt::run("cd " + d.path.string() + " && " + VITSIM_BINARY + " " + c.args + " -q");
    CHECK(r.status == 1);
    if (c.prefix_only) {
      CHECK(r.out.rfind(c.message, 0) == 0);
      CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    } else {
      CHECK(r.out == c.message + "\n");
    }
  }
}

TEST_CASE("a platform whose Full zone lacks a route between two nodes is an error, not a crash",
          "[cli][negative]") {
  vt::TempDir d;
  std::string xml =
      vt::platform_xml(3, 1, "12GBps", "1us", {"1GBps", "1GBps", "1GBps"}, {"8Tf", "8Tf", "8Tf"});
  xml.erase(xml.rfind("<zoneRoute"),
            xml.find("</zoneRoute>", xml.rfind("<zoneRoute")) + 12 - xml.rfind("<zoneRoute"));
  d.file("p.xml", xml);
  d.file("s.xml", scenario("nodes=\"3\" gpus_per_node=\"1\"", kModel, kTraining));
  auto r = vt::run("cd " + d.path.string() + " && " + VITSIM_BINARY + " predict s.xml -q");
  CHECK(r.status == 1);
  CHECK(r.out == "vitsim: error: p.xml:3: zone 'test' (routing Full) has no route from 'n1' to 'n2'\n");
}

TEST_CASE("a platform property without its unit is an error naming the line", "[cli][negative]") {
  vt::TempDir d;
  std::string xml = vt::platform_xml(1, 2, "12GBps", "1us", {}, {"8Tf"});
  xml.replace(xml.find("value=\"1000TBps\""), 16, "value=\"320\"");
  d.file("p.xml", xml);
  d.file("s.xml", scenario(kCluster, kModel, kTraining));
  auto r = vt::run("cd " + d.path.string() + " && " + VITSIM_BINARY + " predict s.xml -q");
  CHECK(r.status == 1);
  CHECK(r.out ==
        "vitsim: error: p.xml:4: property gpu_mem_bw: bad bandwidth '320': missing unit; valid units: Bps, "
        "kBps, KBps, MBps, GBps, TBps, KiBps, MiBps, GiBps, TiBps, bps, kbps, Kbps, Mbps, Gbps, Tbps, Kibps, "
        "Mibps, Gibps\n");
}
