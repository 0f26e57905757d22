// Hostile inputs, each with the one line it must get. The same table renders docs/robustness.md: the test
// fails when the document is out of date (VITSIM_UPDATE_DOCS=1 rewrites it).
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_util.hpp"
#include "vitsim/core/model/dataset.hpp"
#include "vitsim/sim/collectives/collective.hpp"

namespace {

struct BadInput {
  const char* category;
  const char* what;
  std::vector<std::pair<std::string, std::string>> files;  // written into a fresh folder
  std::string args;                                        // vitsim arguments, run in that folder
  std::string message;                                     // the whole output, one line
  int status = 1;
  bool prefix = false;  // lists that grow with the schema: only their start is checked
};

// A valid base: a 2-node platform of 4 GPUs each (tests/test_util.hpp's layout) and a scenario on it.
std::string platform() {
  return vt::platform_xml(2, 4, "12GBps", "1us", {"1GBps", "1GBps"}, {"8Tf", "8Tf"});
}

std::string scenario(const std::string& training = "micro_batch=\"16\"", const std::string& extra = "",
                     const std::string& cluster = "nodes=\"1\" gpus_per_node=\"2\"",
                     const std::string& model = "preset=\"vit_b_16\"",
                     const std::string& dataset = "name=\"cifar10\"") {
  return "<scenario>\n  <cluster platform=\"p.xml\" " + cluster + "/>\n  <model " + model +
         "/>\n  <dataset " + dataset + "/>\n  <training " + training + "/>\n" + extra + "</scenario>\n";
}

std::string calib(const std::string& device_body) {
  return R"({"schema": "vitsim.calibration/2", "devices": [)" + device_body + "]}";
}

std::vector<BadInput> cases();

std::string render(const std::vector<BadInput>& all) {
  std::ostringstream o;
  o << "Every row is a case of `tests/cli/test_robustness.cpp`, which checks the exact output and exit "
       "status and\n"
       "regenerates this table (`VITSIM_UPDATE_DOCS=1 build/tests/test_robustness`). Runs happen in a "
       "folder\n"
       "holding a valid 2-node platform `p.xml` (4 GPUs per node) and the files each case writes.\n\n"
       "| # | category | bad input | command | exit | message |\n| --- | --- | --- | --- | --- | --- |\n";
  int i = 0;
  for (const auto& c : all) {
    std::string msg = c.message;
    for (size_t p = 0; (p = msg.find('|', p)) != std::string::npos; p += 2) msg.replace(p, 1, "\\|");
    o << "| " << ++i << " | " << c.category << " | " << c.what << " | `vitsim " << c.args << "` | "
      << c.status << " | `" << msg << (c.prefix ? " ...` |\n" : "` |\n");
  }
  return o.str();
}

}  // namespace

TEST_CASE("robustness: at least 40 bad inputs, each one clear line and a non-zero exit",
          "[robustness][negative]") {
  const auto all = cases();
  CHECK(all.size() >= 40);
  for (const auto& c : all) {
    INFO(c.category << ": " << c.what);
    vt::TempDir d;
    d.file("p.xml", platform());
    for (const auto& [name, content] : c.files) d.file(name, content);
    auto r = vt::run("cd " + d.path.string() + " && " + VITSIM_BINARY + " " + c.args + " -q");
    CHECK(r.status == c.status);
    if (c.prefix) {
      CHECK(r.out.rfind(c.message, 0) == 0);
      CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    } else {
      CHECK(r.out == c.message + "\n");
    }
  }
  const std::string doc = render(all);
  CHECK(vt::doc_section(vt::source("docs/robustness.md"), "test_robustness", doc) == doc);
}

// Issue 27: docs/plan.md names a node path's attributes bw/lat, bb_bw/bb_lat, loopback_bw/loopback_lat; they
// were refused as unknown. Each now edits the same attribute as bandwidth/latency.
TEST_CASE("what-ifs: a node path's attributes by the names docs/plan.md gives them", "[robustness][whatif]") {
  vt::TempDir d;
  d.file("p.xml", platform());
  d.file("s.xml", scenario());
  auto run = [&](const std::string& edit) {
    return vt::run("cd " + d.path.string() + " && " + VITSIM_BINARY + " predict s.xml -q --what-if '" + edit +
                   "'");
  };
  for (const auto& [alias, generic] :
       {std::pair{"link:n0.backbone:bb_bw=2GBps", "link:n0.backbone:bandwidth=2GBps"},
        std::pair{"link:n0.pcie:lat=3us", "link:n0.pcie:latency=3us"},
        std::pair{"link:n0.h2d:loopback_bw=5GBps", "link:n0.h2d:bandwidth=5GBps"}}) {
    INFO(alias);
    const vt::CmdResult a = run(alias), g = run(generic);
    CHECK(a.status == 0);
    CHECK(g.status == 0);
    // The same edit: the same table, the what-if note aside (it quotes the edit as given).
    auto table = [](const std::string& out) { return out.substr(0, out.find("note:")); };
    CHECK(table(a.out) == table(g.out));
  }
  const vt::CmdResult bad = run("link:n0.backbone:bw2=2GBps");
  CHECK(bad.status == 1);
  CHECK_THAT(bad.out,
             Catch::Contains("unknown attribute 'bw2' of NODE.backbone; valid: bandwidth (or bb_bw), "
                             "latency (or bb_lat)"));
}

namespace {
std::vector<BadInput> cases() {
  const std::string S = "predict s.xml";
  return {
      // --- scenario files ---
      // Issue 27: a value given twice in a sweep was simulated twice; a file's value that a sweep of its key
      // replaces was not read (gpus_per_node="nan" was accepted); scenario.name is the report's, not swept.
      {"scenario",
       "a sweep value given twice",
       {{"s.xml",
         scenario("micro_batch=\"16\"", "  <sweep param=\"cluster.gpus_per_node\" values=\"1,2,1\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: <sweep param='cluster.gpus_per_node'>: value '1' given twice (each value is "
       "a "
       "point, simulated once); give it once"},
      {"scenario",
       "a --set list value given twice",
       {{"s.xml", scenario()}},
       S + " --set training.micro_batch=16,32,16",
       "vitsim: error: --set training.micro_batch: --set training.micro_batch: value '16' given twice (each "
       "value is a point, simulated once); give it once"},
      {"scenario",
       "an invalid value that a sweep of its key replaces",
       {{"s.xml",
         scenario("micro_batch=\"16\"", "  <sweep param=\"cluster.gpus_per_node\" values=\"1,2\"/>\n",
                  "nodes=\"1\" gpus_per_node=\"nan\"")}},
       S,
       "vitsim: error: s.xml:2: cluster.gpus_per_node: 'nan' is not an integer (the sweep at s.xml:6 "
       "replaces "
       "it, "
       "but a value given is read: correct it or remove it)"},
      {"scenario",
       "scenario.name swept",
       {{"s.xml", scenario("micro_batch=\"16\"", "  <sweep param=\"scenario.name\" values=\"a,b\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: <sweep param='scenario.name'>: scenario.name names the whole report; it is "
       "not "
       "swept"},
      {"scenario",
       "missing file",
       {},
       "predict nope.xml",
       "vitsim: error: nope.xml: cannot open scenario file"},
      {"scenario",
       "empty file",
       {{"s.xml", ""}},
       S,
       "vitsim: error: s.xml:1: malformed XML: No document element found"},
      {"scenario",
       "unclosed tag",
       {{"s.xml", "<scenario><cluster platform='p.xml'>"}},
       S,
       "vitsim: error: s.xml:1: malformed XML: Start-end tags mismatch"},
      {"scenario",
       "wrong root element",
       {{"s.xml", "<platform/>"}},
       S,
       "vitsim: error: s.xml:1: root element is <platform>, expected <scenario>"},
      {"scenario",
       "unknown element",
       {{"s.xml", scenario("micro_batch=\"16\"", "  <optimiser/>\n")}},
       S,
       "vitsim: error: s.xml:6: unknown element <optimiser>; valid: cluster, compute, dataset, deepspeed,",
       1,
       true},
      {"scenario",
       "unknown attribute",
       {{"s.xml", scenario("micro_batch=\"16\" epoch=\"3\"")}},
       S,
       "vitsim: error: s.xml:5: unknown attribute 'epoch' on <training>; valid: micro_batch, grad_accum, "
       "epochs, precision, optimizer, lr, weight_decay, seed, framework, torch_version, optimizer_impl, "
       "cast, "
       "activation_checkpointing, "
       "gradient_clipping, loss_scale"},
      {"scenario",
       "training.cast naming no way to run half",
       {{"s.xml", scenario("micro_batch=\"16\" precision=\"fp16\" cast=\"half\"")}},
       S,
       "vitsim: error: s.xml:5: training.cast: unknown value 'half'; valid: autocast, module"},
      {"scenario",
       "training.cast module with nothing in half",
       {{"s.xml", scenario("micro_batch=\"16\" cast=\"module\"")}},
       S,
       "vitsim: error: s.xml:5: training.cast: module converts the model to half but training.precision is "
       "fp32 (nothing to convert): set training.precision=fp16 or bf16, or leave training.cast out"},
      {"scenario",
       "training.cast autocast under DeepSpeed",
       {{"s.xml",
         scenario("micro_batch=\"16\" precision=\"bf16\" framework=\"deepspeed\" cast=\"autocast\"")}},
       S,
       "vitsim: error: s.xml:5: training.cast: autocast, but DeepSpeed's engine converts the module itself "
       "(module.half() or .bfloat16()): training.framework=deepspeed runs module"},
      {"scenario",
       "element given twice",
       {{"s.xml", scenario("micro_batch=\"16\"", "  <training epochs=\"2\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: element <training> appears twice"},
      {"scenario",
       "element nested in another",
       {{"s.xml",
         "<scenario>\n  <cluster platform=\"p.xml\"/>\n  <training micro_batch=\"16\">\n    <lr/>\n  "
         "</training>\n</scenario>\n"}},
       S,
       "vitsim: error: s.xml:4: unexpected element <lr> inside <training>"},
      {"scenario",
       "no platform",
       {{"s.xml", "<scenario>\n  <model preset=\"vit_b_16\"/>\n</scenario>\n"}},
       S,
       "vitsim: error: s.xml:1: missing <cluster platform=\"...\"/>"},
      {"scenario",
       "sweep over an unknown key",
       {{"s.xml", scenario("micro_batch=\"16\"", "  <sweep param=\"training.batch\" values=\"1,2\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: <sweep param='training.batch'>: unknown key; valid: cluster.gpus_per_node, "
       "cluster.hosts,",
       1,
       true},
      {"scenario",
       "sweep with an empty value",
       {{"s.xml",
         scenario("micro_batch=\"16\"", "  <sweep param=\"training.micro_batch\" values=\"16,,32\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: <sweep> needs a non-empty comma-separated 'values'"},
      {"values",
       "zero GPUs per node",
       {{"s.xml", scenario("micro_batch=\"16\"", "", "nodes=\"1\" gpus_per_node=\"0\"")}},
       S,
       "vitsim: error: s.xml:2: cluster.gpus_per_node: 0 is out of range (expected 1 .. 1024)"},
      {"values",
       "10^9 GPUs",
       {{"s.xml", scenario()}},
       S + " --set cluster.nodes=1000000000",
       "vitsim: error: --set cluster.nodes: cluster.nodes: 1000000000 is out of range (expected 1 .. "
       "1048576)"},
      {"values",
       "more nodes than the platform has",
       {{"s.xml", scenario()}},
       S + " --set cluster.nodes=3",
       "vitsim: error: --set cluster.nodes: cluster.nodes: 3 nodes requested but p.xml has 2"},
      {"values",
       "more GPUs per node than the platform has",
       {{"s.xml", scenario()}},
       S + " --set cluster.gpus_per_node=8",
       "vitsim: error: --set cluster.gpus_per_node: cluster.gpus_per_node: 8 GPUs per node requested but "
       "node 'n0' has 4"},
      {"values",
       "a node listed twice",
       {{"s.xml", scenario("micro_batch=\"16\"", "", "nodes=\"2\" gpus_per_node=\"1\" hosts=\"n0 n0\"")}},
       S,
       "vitsim: error: s.xml:2: cluster.hosts: a node is listed twice"},
      {"values",
       "an unknown node",
       {{"s.xml", scenario("micro_batch=\"16\"", "", "nodes=\"1\" gpus_per_node=\"1\" hosts=\"n9\"")}},
       S,
       "vitsim: error: s.xml:2: cluster.hosts: no node 'n9' in p.xml; nodes: n0, n1"},
      {"values",
       "a node a what-if removed",
       {{"s.xml", scenario("micro_batch=\"16\"", "", "nodes=\"1\" gpus_per_node=\"1\" hosts=\"n1\"")}},
       S + " --what-if nodes:remove=n1",
       "vitsim: error: s.xml:2: cluster.hosts: no node 'n1' in p.xml (as edited by the what-ifs); nodes: n0"},
      {"values",
       "negative micro-batch",
       {{"s.xml", scenario("micro_batch=\"-4\"")}},
       S,
       "vitsim: error: s.xml:5: training.micro_batch: -4 is out of range (expected 1 .. 16777216)"},
      {"values",
       "fractional micro-batch",
       {{"s.xml", scenario("micro_batch=\"3.5\"")}},
       S,
       "vitsim: error: s.xml:5: training.micro_batch: '3.5' is not an integer"},
      {"values",
       "micro-batch not a number",
       {{"s.xml", scenario("micro_batch=\"lots\"")}},
       S,
       "vitsim: error: s.xml:5: training.micro_batch: 'lots' is not an integer"},
      {"values",
       "absurd micro-batch",
       {{"s.xml", scenario("micro_batch=\"1e30\"")}},
       S,
       "vitsim: error: s.xml:5: training.micro_batch: 1e30 is out of range (expected 1 .. 16777216)"},
      {"values",
       "unknown precision",
       {{"s.xml", scenario("micro_batch=\"16\" precision=\"fp8\"")}},
       S,
       "vitsim: error: s.xml:5: training.precision: unknown value 'fp8'; valid: fp32, fp16, bf16"},
      {"values",
       "unknown optimizer",
       {{"s.xml", scenario("micro_batch=\"16\" optimizer=\"lamb\"")}},
       S,
       "vitsim: error: s.xml:5: training.optimizer: unknown value 'lamb'; valid: adamw, adam, sgd"},
      {"values",
       "ZeRO stage 4",
       {{"s.xml", scenario("micro_batch=\"16\"", "  <parallelism zero=\"4\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: parallelism.zero: 4 is out of range (expected 0 .. 3)"},
      {"values",
       "a boolean that is not one",
       {{"s.xml", scenario("micro_batch=\"16\"", "  <parallelism overlap=\"maybe\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: parallelism.overlap: 'maybe' is not a boolean; valid: true, false, on, off, "
       "yes, no, 1, 0"},
      {"units",
       "bucket size without a unit",
       {{"s.xml", scenario("micro_batch=\"16\"", "  <parallelism bucket_size=\"25\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: parallelism.bucket_size: bad size '25': missing unit; valid units: B, kB, "
       "KB, MB, GB, TB, KiB, MiB, GiB, TiB, b, kb, Kb, Mb, Gb"},
      {"units",
       "bucket size with a bandwidth unit",
       {{"s.xml", scenario("micro_batch=\"16\"", "  <parallelism bucket_size=\"25MBps\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: parallelism.bucket_size: bad size '25MBps': unknown unit 'MBps'; valid "
       "units: B, kB, KB, MB, GB, TB, KiB, MiB, GiB, TiB, b, kb, Kb, Mb, Gb"},
      {"units",
       "negative bucket size",
       {{"s.xml", scenario("micro_batch=\"16\"", "  <parallelism bucket_size=\"-5MB\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: parallelism.bucket_size: must be positive"},
      {"units",
       "zero timeout",
       {{"s.xml", scenario("micro_batch=\"16\"", "  <run timeout=\"0s\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: run.timeout: must be positive"},
      {"names",
       "unknown collective",
       {{"s.xml", scenario("micro_batch=\"16\"", "  <parallelism collective=\"butterfly\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: parallelism.collective: unknown collective 'butterfly'; valid: " +
           vt::join(vitsim::sim::collective_names())},
      {"names",
       "unknown dataset",
       {{"s.xml", scenario("micro_batch=\"16\"", "", "nodes=\"1\" gpus_per_node=\"2\"", "preset=\"vit_b_16\"",
                           "name=\"mnist\"")}},
       S,
       "vitsim: error: s.xml:4: dataset.name: unknown value 'mnist'; valid: " +
           vt::join(vitsim::dataset_names())},
      {"names",
       "unknown model preset",
       {{"s.xml",
         scenario("micro_batch=\"16\"", "", "nodes=\"1\" gpus_per_node=\"2\"", "preset=\"vit_g_14\"")}},
       S,
       "vitsim: error: s.xml:3: model.preset: unknown model preset 'vit_g_14'; valid: vit_b_16, "
       "vit_base_patch16_224, vit_cifar_small, vit_cifar_tiny, vit_fmnist_tiny, vit_h_16, "
       "vit_huge_patch16_224, vit_l_16, vit_large_patch16_224, vit_small_patch16_224, vit_tiny_patch16_224, "
       "or timm's vit_{tiny,small,base,large,huge,giant}_patch<P>_<image> (e.g. vit_large_patch16_384)"},
      {"model",
       "image not a multiple of the patch",
       {{"s.xml", scenario("micro_batch=\"16\"", "", "nodes=\"1\" gpus_per_node=\"2\"",
                           "preset=\"vit_b_16\" patch=\"15\"")}},
       S,
       "vitsim: error: s.xml:3: model image_size 224 is not a multiple of patch 15"},
      {"model",
       "width not a multiple of the heads",
       {{"s.xml", scenario("micro_batch=\"16\"", "", "nodes=\"1\" gpus_per_node=\"2\"",
                           "preset=\"vit_b_16\" heads=\"7\"")}},
       S,
       "vitsim: error: s.xml:3: model width 768 is not a multiple of heads 7"},
      {"model",
       "dropout of 1.5",
       {{"s.xml", scenario("micro_batch=\"16\"", "", "nodes=\"1\" gpus_per_node=\"2\"",
                           "preset=\"vit_b_16\" dropout=\"1.5\"")}},
       S,
       "vitsim: error: s.xml:3: model.dropout: 1.5 is out of range (expected 0 .. 0.999)"},
      {"model",
       "resize that the model does not take",
       {{"s.xml", scenario("micro_batch=\"16\"", "", "nodes=\"1\" gpus_per_node=\"2\"", "preset=\"vit_b_16\"",
                           "name=\"cifar10\" resize=\"256\"")}},
       S,
       "vitsim: error: s.xml:4: dataset.resize: 256 px but the model takes 224 px images"},
      {"model",
       "synthetic data without a size",
       {{"s.xml", scenario("micro_batch=\"16\"", "", "nodes=\"1\" gpus_per_node=\"2\"", "preset=\"vit_b_16\"",
                           "name=\"synthetic\"")}},
       S,
       "vitsim: error: s.xml:4: dataset 'synthetic' needs train_samples"},
      {"model",
       "grayscale data for an RGB model",
       {{"s.xml", scenario("micro_batch=\"16\"", "", "nodes=\"1\" gpus_per_node=\"2\"", "preset=\"vit_b_16\"",
                           "name=\"fashion_mnist\"")}},
       S,
       "vitsim: error: s.xml:4: dataset.name: dataset has 1 channels but the model takes 3"},
      {"simulation",
       "no steps left after the warm-up",
       {{"s.xml", scenario("micro_batch=\"16\"", "  <simulation steps=\"3\" warmup=\"3\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: simulation.warmup: 3 warm-up steps leave none of the 3 steps to measure"},
      // --- DeepSpeed configs ---
      {"deepspeed",
       "missing config file",
       {{"s.xml", scenario("", "  <deepspeed config=\"ds.json\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: ds.json: cannot open DeepSpeed config"},
      {"deepspeed",
       "malformed JSON",
       {{"ds.json", "{\"train_batch_size\": }"},
        {"s.xml", scenario("", "  <deepspeed config=\"ds.json\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: ds.json: malformed JSON: [json.exception.parse_error.101] parse error at "
       "line 1, column 22: syntax error while parsing value - unexpected '}'; expected '[', '{', or a "
       "literal"},
      {"deepspeed",
       "a key DeepSpeed does not have",
       {{"ds.json", "{\"gradient_accumulation_step\": 2}"},
        {"s.xml", scenario("", "  <deepspeed config=\"ds.json\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: ds.json: unknown DeepSpeed key 'gradient_accumulation_step' (did you mean "
       "'gradient_accumulation_steps'?); known: activation_checkpointing, aio, allgather_size, amp, "
       "autotuning, bf16, "
       "bfloat16, checkpoint, comms_logger, communication_data_type, compile, compression_training, "
       "csv_monitor, curriculum_learning, data_efficiency, data_types, dataloader_drop_last, "
       "disable_allgather, dump_state, eigenvalue, elasticity, flops_profiler, fp16, fp32_allreduce, "
       "gradient_accumulation_dtype, gradient_accumulation_steps, gradient_clipping, "
       "gradient_predivide_factor, graph_harvesting, hybrid_engine, load_universal_checkpoint, "
       "memory_breakdown, moe, monitor_config, nebula, optimizer, pipeline, prescale_gradients, "
       "progressive_layer_drop, quantize_training, scheduler, seed, sparse_attention, sparse_gradients, "
       "steps_per_print, tensorboard, timers, torch_autocast, train_batch_size, "
       "train_micro_batch_size_per_gpu, use_data_before_expert_parallelism, use_node_local_storage, "
       "wall_clock_breakdown, wandb, weight_quantization, zero_allow_untested_optimizer, "
       "zero_force_ds_cpu_optimizer, zero_legacy_stage1, zero_optimization"},
      {"deepspeed",
       "config contradicting the scenario",
       {{"ds.json", "{\"train_micro_batch_size_per_gpu\": 64}"},
        {"s.xml", scenario("micro_batch=\"16\"", "  <deepspeed config=\"ds.json\"/>\n")}},
       S,
       "vitsim: error: s.xml:5: training.micro_batch=16 contradicts ds.json "
       "train_micro_batch_size_per_gpu=64"},
      {"deepspeed",
       "train_batch_size != micro x accumulation x ranks",
       {{"ds.json",
         "{\"train_batch_size\": 64, \"train_micro_batch_size_per_gpu\": 16, "
         "\"gradient_accumulation_steps\": 1}"},
        {"s.xml", scenario("", "  <deepspeed config=\"ds.json\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: train_batch_size 64 != micro_batch 16 x gradient_accumulation_steps 1 x "
       "ranks 2 = 32 (DeepSpeed requires equality)"},
      // Issue 27: DeepSpeed derives the micro-batch from train_batch_size alone (runtime/config.py): 33 // 2
      // ranks // 1 = 16, and 16 x 1 x 2 = 32 != 33 fails its own assertion; the line says so.
      {"deepspeed",
       "only train_batch_size, which no micro-batch meets",
       {{"ds.json", "{\"train_batch_size\": 33}"},
        {"s.xml", scenario("", "  <deepspeed config=\"ds.json\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: train_batch_size 33 != micro_batch 16 x gradient_accumulation_steps 1 x "
       "ranks 2 = 32 (DeepSpeed derives train_micro_batch_size_per_gpu = 33 // 2 = 16 with "
       "gradient_accumulation_steps 1, and requires equality): give a train_batch_size the ranks divide, or "
       "the micro-batch and accumulation instead"},
      {"deepspeed",
       "train_batch_size the ranks do not divide (DeepSpeed's derivation)",
       {{"ds.json", "{\"train_batch_size\": 15}"},
        {"s.xml", scenario("", "  <deepspeed config=\"ds.json\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: train_batch_size 15 != micro_batch 7 x gradient_accumulation_steps 1 x ranks "
       "2 = "
       "14 (DeepSpeed derives train_micro_batch_size_per_gpu = 15 // 2 = 7 with gradient_accumulation_steps "
       "1, "
       "and requires equality): give a train_batch_size the ranks divide, or the micro-batch and "
       "accumulation "
       "instead"},
      {"deepspeed",
       "ZeRO stage 7",
       {{"ds.json", "{\"zero_optimization\": {\"stage\": 7}}"},
        {"s.xml", scenario("micro_batch=\"16\"", "  <deepspeed config=\"ds.json\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: ds.json: zero_optimization.stage must be 0..3, got 7"},
      {"deepspeed",
       "fp16 and bf16 both enabled",
       {{"ds.json", "{\"fp16\": {\"enabled\": true}, \"bf16\": {\"enabled\": true}}"},
        {"s.xml", scenario("micro_batch=\"16\"", "  <deepspeed config=\"ds.json\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: ds.json: fp16 and bf16 are both enabled; DeepSpeed allows one"},
      {"deepspeed",
       "a number given as a string",
       {{"ds.json", "{\"train_micro_batch_size_per_gpu\": \"16\"}"},
        {"s.xml", scenario("", "  <deepspeed config=\"ds.json\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: ds.json: DeepSpeed key 'train_micro_batch_size_per_gpu' must be a positive "
       "integer in 1 .. 9007199254740992, got \"16\""},
      // --- platform files ---
      {"platform",
       "platform file missing",
       {{"s.xml", scenario()}},
       S + " --set cluster.platform=none.xml",
       "vitsim: error: --set cluster.platform: cluster.platform: no such file 'none.xml'"},
      {"platform",
       "malformed platform XML",
       {{"q.xml", "<platform><zone>"}, {"s.xml", scenario()}},
       S + " --set cluster.platform=q.xml",
       "vitsim: error: q.xml:1: malformed XML: Start-end tags mismatch"},
      {"platform",
       "no GPU hosts",
       {{"q.xml",
         "<platform version=\"4.1\"><zone id=\"z\" routing=\"Full\"><host id=\"h\" "
         "speed=\"1Gf\"/></zone></platform>"},
        {"s.xml", scenario()}},
       S + " --set cluster.platform=q.xml",
       "vitsim: error: q.xml:1: no GPU hosts: give hosts or clusters a gpu_model property "
       "(docs/platform-properties.md \"GPU properties\")"},
      {"platform",
       "a GPU figure without its unit",
       {{"q.xml",
         "<platform version=\"4.1\"><zone id=\"z\" routing=\"Full\"><host id=\"h\" speed=\"1Gf\">\n<prop "
         "id=\"gpu_model\" value=\"X\"/><prop id=\"gpu_flops_fp32\" "
         "value=\"8.1\"/></host></zone></platform>"},
        {"s.xml", scenario("micro_batch=\"16\"", "", "nodes=\"1\" gpus_per_node=\"1\"")}},
       S + " --set cluster.platform=q.xml",
       "vitsim: error: q.xml:2: property gpu_flops_fp32: bad speed '8.1': missing unit; valid units: f, kf, "
       "Kf, Mf, Gf, Tf, Pf, Ef"},
      {"platform",
       "negative bandwidth",
       {{"q.xml",
         "<platform version=\"4.1\"><zone id=\"z\" routing=\"Full\"><host id=\"h\" speed=\"1Gf\">\n<prop "
         "id=\"gpu_model\" value=\"X\"/><prop id=\"gpu_flops_fp32\" value=\"8Tf\"/>\n<prop id=\"gpu_mem_bw\" "
         "value=\"-5GBps\"/></host></zone></platform>"},
        {"s.xml", scenario("micro_batch=\"16\"", "", "nodes=\"1\" gpus_per_node=\"1\"")}},
       S + " --set cluster.platform=q.xml",
       "vitsim: error: q.xml:3: property gpu_mem_bw: bad bandwidth '-5GBps': out of range (expected > 0)"},
      // Issue 27: one <prop> given twice was silently overridden by the last.
      {"platform",
       "a property given twice",
       {{"q.xml",
         "<platform version=\"4.1\"><zone id=\"z\" routing=\"Full\"><host id=\"h\" speed=\"1Gf\">\n<prop "
         "id=\"gpu_model\" value=\"X\"/><prop id=\"gpu_flops_fp32\" value=\"8Tf\"/>\n<prop id=\"gpu_mem_bw\" "
         "value=\"300GBps\"/>\n<prop id=\"gpu_mem_bw\" value=\"3TBps\"/></host></zone></platform>"},
        {"s.xml", scenario("micro_batch=\"16\"", "", "nodes=\"1\" gpus_per_node=\"1\"")}},
       S + " --set cluster.platform=q.xml",
       "vitsim: error: q.xml:4: <prop id=\"gpu_mem_bw\"> given twice in <host> (also at line 3): which one "
       "holds "
       "is ambiguous; keep one"},
      {"platform",
       "a zone property given twice",
       {{"q.xml",
         "<platform version=\"4.1\"><zone id=\"z\" routing=\"Full\">\n<prop id=\"price_per_gpu_hour\" "
         "value=\"2\"/>\n<prop id=\"price_per_gpu_hour\" value=\"3\"/>\n<host id=\"h\" speed=\"1Gf\"><prop "
         "id=\"gpu_model\" value=\"X\"/><prop id=\"gpu_flops_fp32\" value=\"8Tf\"/><prop id=\"gpu_mem_bw\" "
         "value=\"300GBps\"/></host></zone></platform>"},
        {"s.xml", scenario("micro_batch=\"16\"", "", "nodes=\"1\" gpus_per_node=\"1\"")}},
       S + " --set cluster.platform=q.xml",
       "vitsim: error: q.xml:3: <prop id=\"price_per_gpu_hour\"> given twice in <zone> (also at line 2): "
       "which "
       "one holds is ambiguous; keep one"},
      {"platform",
       "a required GPU figure missing",
       {{"q.xml",
         "<platform version=\"4.1\"><zone id=\"z\" routing=\"Full\">\n<host id=\"h\" speed=\"1Gf\"><prop "
         "id=\"gpu_model\" value=\"X\"/></host></zone></platform>"},
        {"s.xml", scenario("micro_batch=\"16\"", "", "nodes=\"1\" gpus_per_node=\"1\"")}},
       S + " --set cluster.platform=q.xml",
       "vitsim: error: q.xml:2: GPU host lacks property 'gpu_flops_fp32' (speed)"},
      {"platform",
       "an efficiency above 1",
       {{"q.xml",
         "<platform version=\"4.1\"><zone id=\"z\" routing=\"Full\"><host id=\"h\" speed=\"1Gf\">\n<prop "
         "id=\"gpu_model\" value=\"X\"/><prop id=\"gpu_flops_fp32\" value=\"8Tf\"/><prop id=\"gpu_mem_bw\" "
         "value=\"300GBps\"/><prop id=\"gpu_mem\" value=\"16GB\"/>\n<prop id=\"gpu_efficiency\" "
         "value=\"33\"/></host></zone></platform>"},
        {"s.xml", scenario("micro_batch=\"16\"", "", "nodes=\"1\" gpus_per_node=\"1\"")}},
       S + " --set cluster.platform=q.xml",
       "vitsim: error: q.xml:3: property gpu_efficiency: '33' is not a number > 0 and <= 1"},
      // --- calibration files ---
      {"calibration",
       "missing calibration file",
       {{"s.xml", scenario()}},
       S + " --calibration none.json",
       "vitsim: error: none.json: cannot open calibration file"},
      {"calibration",
       "not a calibration",
       {{"c.json", "{\"schema\": \"vitsim.report/1\"}"}, {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: not a vitsim calibration (expected \"schema\": \"vitsim.calibration/2\")"},
      {"calibration",
       "a schema that is not a string (fuzzer finding)",
       {{"c.json", "{\"schema\": {\"host\": \"x\"}}"}, {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: not a vitsim calibration (expected \"schema\": \"vitsim.calibration/2\")"},
      {"calibration",
       "a calibration of the old schema 1",
       {{"c.json", R"({"schema": "vitsim.calibration/1", "devices": []})"}, {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: calibration schema vitsim.calibration/1 is no longer read (this vitsim reads "
       "vitsim.calibration/2: affine batch curves and op-class efficiencies); measure again with vitsim "
       "calibrate"},
      {"calibration",
       "a point without its backward time",
       {{"c.json",
         calib(
             R"({"device_type": "G8Tf", "precision": "fp32", "model": {"image_size": 224, "patch": 16, "channels": 3, "width": 768, "depth": 12, "heads": 12, "mlp_ratio": 4, "classes": 1000}, "points": [{"micro_batch": 16, "fwd_s": 0.1}]})")},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[0] ('G8Tf').points[0].bwd_s: missing"},
      {"calibration",
       "a negative measured time",
       {{"c.json",
         calib(
             R"({"device_type": "G8Tf", "precision": "fp32", "model": {"image_size": 224, "patch": 16, "channels": 3, "width": 768, "depth": 12, "heads": 12, "mlp_ratio": 4, "classes": 1000}, "points": [{"micro_batch": 16, "fwd_s": -0.1, "bwd_s": 0.2}]})")},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[0] ('G8Tf').points[0]: fwd_s must be a positive time in seconds, got "
       "-0.1"},
      // Issue 27: a negative optimizer time was blamed on fwd_s and bwd_s.
      {"calibration",
       "a negative optimizer time",
       {{"c.json",
         calib(
             R"({"device_type": "G8Tf", "precision": "fp32", "model": {"image_size": 224, "patch": 16, "channels": 3, "width": 768, "depth": 12, "heads": 12, "mlp_ratio": 4, "classes": 1000}, "points": [{"micro_batch": 16, "fwd_s": 0.1, "bwd_s": 0.2, "optimizer_s": -0.01}]})")},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[0] ('G8Tf').points[0]: optimizer_s must be a time >= 0 in seconds, "
       "got "
       "-0.01"},
      {"calibration",
       "an unknown precision",
       {{"c.json",
         calib(
             R"({"device_type": "G8Tf", "precision": "fp64", "model": {"image_size": 224, "patch": 16, "channels": 3, "width": 768, "depth": 12, "heads": 12, "mlp_ratio": 4, "classes": 1000}, "points": []})")},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[0] ('G8Tf'): unknown precision 'fp64'; valid: fp32, fp16, bf16"},
      // Found by bench/fuzz.sh (fuzz_calibration): a device without "model" escaped as a JSON exception.
      {"calibration",
       "a device without its model (fuzzer finding)",
       {{"c.json", calib(R"({"device_type": "T4", "precision": "fp32", "points": []})")},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[0] ('T4').model: missing"},
      {"calibration",
       "an op model efficiency above 1",
       {{"c.json",
         R"({"schema": "vitsim.calibration/2", "op_models": [{"device_type": "G8Tf", "precision": "fp32", "peak_flops": 8e12, "mem_bw": 3e11, "sm_count": 40, "tile": [128, 128], "gemm_efficiency": 1.5, "gemm_k_half": 0, "attn_efficiency": 0.5, "mem_efficiency": 0.8, "kernel_s": 3e-6, "host_op_s": 8e-6, "sync_s": 2e-5, "async": true}]})"},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: op_models[0] ('G8Tf'): 'gemm_efficiency' must be in (0, 1], got 1.5"},
      {"calibration",
       "devices that are not a list",
       {{"c.json", R"({"schema": "vitsim.calibration/2", "devices": 5})"}, {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices: expected an array, found a number (5)"},
      // Found by bench/fuzz.sh (fuzz_calibration): a number beyond double escaped the JSON parser's handler.
      {"calibration",
       "a number too large for a double (fuzzer finding)",
       {{"c.json", R"({"schema": 1e999})"}, {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: malformed JSON: [json.exception.out_of_range.406] number overflow parsing "
       "'1e999'"},
      {"deepspeed",
       "a number too large for a double",
       {{"ds.json", R"({"train_batch_size": 1e999})"},
        {"s.xml", scenario("", "  <deepspeed config=\"ds.json\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: ds.json: malformed JSON: [json.exception.out_of_range.406] number overflow "
       "parsing '1e999'"},
      // Issue 27: nesting that overflowed the stack (nlohmann's serializer recurses once per level when a bad
      // value is echoed; 30,000 levels crashed on a 1 MiB stack, 100,000 on the default 8 MiB), and figures
      // that are not plausible (predictions of 1e300 s with exit 0).
      {"deepspeed",
       "a config nested 100,000 deep (crashed)",
       {{"ds.json", "{\"optimizer\": " + std::string(100000, '[') + std::string(100000, ']') + "}"},
        {"s.xml", scenario("", "  <deepspeed config=\"ds.json\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: ds.json: JSON nested deeper than 64 levels at line 1 (vitsim's JSON files "
       "nest a few levels; deeper nesting would overflow the reader's stack)"},
      {"deepspeed",
       "fp32_allreduce contradicting communication_data_type",
       {{"ds.json", R"({"fp32_allreduce": true, "communication_data_type": "fp16"})"},
        {"s.xml", scenario("", "  <deepspeed config=\"ds.json\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: ds.json: DeepSpeed keys 'fp32_allreduce': true and "
       "'communication_data_type': "
       "\"fp16\" contradict each other (one all-reduces in fp32, the other in fp16); give one"},
      {"calibration",
       "a calibration nested 100,000 deep",
       {{"c.json", R"({"schema": "vitsim.calibration/2", "devices": )" + std::string(100000, '[') +
                       std::string(100000, ']') + "}"},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: JSON nested deeper than 64 levels at line 1 (vitsim's JSON files nest a few "
       "levels; deeper nesting would overflow the reader's stack)"},
      {"calibration",
       "a host-to-device copy of 1e-300 B/s",
       {{"c.json", R"({"schema": "vitsim.calibration/2", "devices": [], "h2d": {"pinned_bw": 1e-300}})"},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: h2d: pinned_bw 1e-300 B/s is not a plausible copy bandwidth (expected 0 for "
       "not "
       "measured, or 1kBps .. 1PBps)"},
      {"calibration",
       "a link of 1e-300 B/s",
       {{"c.json", R"({"schema": "vitsim.calibration/2", "devices": [], "links": [{"class": "nic", )"
                   R"("bandwidth": 1e-300, "latency": 1e-6}]})"},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: links[0]: bandwidth 1e-300 B/s is not a plausible link bandwidth (expected "
       "1kBps .. 1PBps)"},
      // Issue 37 items 2, 4: calibrate's measured straggler figure and its round checks.
      {"calibration",
       "a measured step cv of the whole step or more",
       {{"c.json",
         calib(
             R"({"device_type": "G8Tf", "precision": "fp32", "model": {"image_size": 224, "patch": 16, "channels": 3, "width": 768, "depth": 12, "heads": 12, "mlp_ratio": 4, "classes": 1000}, "points": [{"micro_batch": 16, "fwd_s": 0.1, "bwd_s": 0.2}], "step_cv": {"value": 1.5, "why": "measured: x"}})")},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[0] ('G8Tf').step_cv: value must be a coefficient of variation in [0, "
       "1) "
       "of the step, got 1.5"},
      {"calibration",
       "a measured step cv's spread that excludes its value (issue 37 item 2)",
       {{"c.json",
         calib(
             R"({"device_type": "G8Tf", "precision": "fp32", "model": {"image_size": 224, "patch": 16, "channels": 3, "width": 768, "depth": 12, "heads": 12, "mlp_ratio": 4, "classes": 1000}, "points": [{"micro_batch": 16, "fwd_s": 0.1, "bwd_s": 0.2}], "step_cv": {"value": 0.03, "low": 0.04, "high": 0.08, "why": "measured: x"}})")},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[0] ('G8Tf').step_cv: low and high must hold the value, 0 <= low <= "
       "value <= high < 1, got 0.04 <= 0.03 <= 0.08"},
      {"calibration",
       "round checks of an unknown phase",
       {{"c.json",
         calib(
             R"({"device_type": "G8Tf", "precision": "fp32", "model": {"image_size": 224, "patch": 16, "channels": 3, "width": 768, "depth": 12, "heads": 12, "mlp_ratio": 4, "classes": 1000}, "points": [{"micro_batch": 16, "fwd_s": 0.1, "bwd_s": 0.2}], "rounds": {"ops": {"rounds": 3, "repeats": 0, "spread": 0.01, "limit": 0.1, "noisy": false}}})")},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[0] ('G8Tf').rounds: unknown key 'ops'; valid: compute, step"},
      // --- command line and outputs ---
      {"command line",
       "an empty what-if (did nothing, silently)",
       {{"s.xml", scenario()}},
       S + " --what-if ''",
       "vitsim: error: --what-if '': an empty edit; give KIND:TARGET=VALUE (kinds: gpu, link, loader, nodes, "
       "prop, zone), e.g. link:n0-nic:bandwidth=10GBps"},
      {"command line",
       "--set without a value",
       {{"s.xml", scenario()}},
       S + " --set training.micro_batch",
       "vitsim: error: --set 'training.micro_batch': expected KEY=VALUE, e.g. training.micro_batch=32"},
      {"command line",
       "unwritable output path",
       {{"s.xml", scenario()}},
       S + " --out /nonexistent/dir/r.json",
       "vitsim: error: cannot write /nonexistent/dir/r.json: No such file or directory"},
      {"command line",
       "unwritable trace path",
       {{"s.xml", scenario()}},
       S + " --trace /nonexistent/t.json",
       "vitsim: error: cannot write /nonexistent/t.json: No such file or directory"},
      // Issue 37 item 1: model.class_tokens (1 .. 64), last so that the rows above keep their numbers.
      {"model",
       "no class token (model.class_tokens 0)",
       {{"s.xml", scenario("micro_batch=\"16\"", "", "nodes=\"1\" gpus_per_node=\"2\"",
                           "preset=\"vit_b_16\" class_tokens=\"0\"")}},
       S,
       "vitsim: error: s.xml:3: model.class_tokens: 0 is out of range (expected 1 .. 64)"},
  };
}
}  // namespace

// Issue 27: DeepSpeed derives the batch figures a config leaves out (runtime/config.py
// _set_batch_related_parameters, v0.14.4), on the 2 data-parallel ranks of the base scenario; a config giving
// only train_batch_size was refused. And `--set scenario.name` names the report (it was ignored).
TEST_CASE("DeepSpeed batch figures derived as DeepSpeed derives them, and --set scenario.name",
          "[robustness][deepspeed]") {
  vt::TempDir d;
  d.file("p.xml", platform());
  d.file("s.xml", scenario("", "  <deepspeed config=\"ds.json\"/>\n"));
  struct Derived {
    const char* config;
    int micro_batch, grad_accum;
  };
  for (const auto& c :
       {Derived{R"({"train_batch_size": 64})", 32, 1},  // 64 // 2 ranks, accumulation 1
        Derived{R"({"train_batch_size": 64, "gradient_accumulation_steps": 2})", 16, 2},  // 64 // 2 // 2
        Derived{R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 16})", 16,
                2}}) {  // 64 // 16 // 2
    INFO(c.config);
    d.file("ds.json", c.config);
    auto r = vt::run("cd " + d.path.string() + " && " + VITSIM_BINARY + " predict s.xml -q --format json");
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["points"][0]["micro_batch"] == c.micro_batch);
    CHECK(j["points"][0]["grad_accum"] == c.grad_accum);
    CHECK(j["points"][0]["global_batch"] == 64);
  }
  for (const char* command : {"predict", "plan"}) {
    auto r = vt::run("cd " + d.path.string() + " && " + VITSIM_BINARY + " " + command +
                     " s.xml -q --format json --set scenario.name=run,a");
    REQUIRE(r.status == 0);
    CHECK(nlohmann::json::parse(r.out)["scenario"] == "run,a");  // a comma is part of a name, not a sweep
  }
}
