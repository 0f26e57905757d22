#include "vitsim/core/formats/scenario.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <mutex>
#include <optional>
#include <pugixml.hpp>
#include <set>
#include <sstream>

#include "formats/scenario_detail.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/deepspeed.hpp"
#include "vitsim/core/formats/scenario_limits.hpp"
#include "vitsim/core/model/dataset.hpp"
#include "vitsim/core/model/framework.hpp"
#include "vitsim/core/model/nccl_tuning.hpp"

// --- The scenario's keys, one row each: its type, default, valid values, one line of documentation and
// how it is applied to the Scenario. The schema (element -> attributes), the known-key check, the
// defaults, resolve() and docs/scenarios.md's key table (tests/cli/test_descriptors.cpp) all read this table.
// resolve() applies the rows in table order, so an earlier key's error comes first; checks across an
// element's keys run after its last row (element_checks()).
namespace vitsim::scenario_detail {
namespace {

const char* const kPathValid = "a file name, relative to the scenario file";

void apply_hosts(Resolution& x) {
  ClusterSpec& c = x.s.cluster;
  const auto* h = x.r.raw("cluster.hosts");
  if (!h) return;
  std::istringstream in(*h);
  for (std::string w; in >> w;) c.hosts.push_back(w);
  std::set<std::string> uniq(c.hosts.begin(), c.hosts.end());
  if (uniq.size() != c.hosts.size()) x.r.fail("cluster.hosts", "a node is listed twice");
  if (static_cast<int>(c.hosts.size()) < c.nodes)
    x.r.fail("cluster.nodes",
             fmt::format("{} nodes requested but cluster.hosts lists {}", c.nodes, c.hosts.size()));
}

// A preset, then any parameter overriding it.
void apply_preset(Resolution& x) {
  if (x.r.has("model.preset")) {
    try {
      x.s.model = vit_preset(x.r.str("model.preset", ""));
    } catch (const Error& e) {
      x.r.fail("model.preset", e.what());
    }
  } else if (!x.r.has("model.width")) {
    throw Error(Origin{x.file.path, 0},
                "missing <model preset=\"...\"/> or model parameters (width, depth, heads, ...)");
  }
}

// The dataset's published facts (core/model/dataset.hpp), when it has them.
const std::optional<DatasetFacts>& facts(const Resolution& x) {
  return dataset(x.s.dataset.name).facts;
}

void apply_what_ifs(Resolution& x) {
  // What-ifs: ';'-separated edits. Platform edits are applied by core::EditedPlatforms before simulating;
  // a loader edit is a scenario setting and is applied here (a --set of loader.workers wins).
  const auto* e = x.r.raw("whatif.edits");
  if (!e) return;
  for (const auto& edit : split_list(*e, ';')) {
    if (edit.empty()) continue;
    if (edit.rfind("loader:workers=", 0) == 0) {
      const std::string v = edit.substr(15);
      int workers = -1;
      try {
        workers = static_cast<int>(units::parse_integer(v, 0, 1024));
      } catch (const Error&) {
        x.r.fail("whatif.edits",
                 fmt::format("what-if '{}': '{}' is not a worker count (0 .. 1024)", edit, v));
      }
      if (x.r.origin("loader.workers").file.rfind("--set", 0) != 0) x.s.loader.workers = workers;
    }
    x.s.what_ifs.push_back(edit);
  }
}

// Model shape keys: the preset's value (ViT-B/16's without one) unless given.
KeyRow shape_row(std::string key, long long min, long long max, std::string doc, int ViTConfig::*field) {
  return integer_row(
      key, "preset's", [field](const Resolution& x) { return x.s.model.*field; }, min, max, std::move(doc),
      [field](Resolution& x, long long v) { x.s.model.*field = static_cast<int>(v); });
}

using R = Resolution;

// parallelism.overlap as the framework runs it. DeepSpeed v0.14.4: zero/config.py overlap_comm_valid gives
// overlap_comm = (stage == 3) when the config leaves it unset; at ZeRO-0 the engine reduces the gradients
// after backward (engine.py backward -> allreduce_gradients -> buffered_allreduce_fallback) and only the ZeRO
// optimizers read overlap_comm, so a true there changes nothing: simulated off, and the point says so
// (ParallelSpec::overlap_ignored). docs/sources.md "Kernels, framework steps and the op model".
void apply_overlap(R& x) {
  Scenario& s = x.s;
  const bool deepspeed = s.training.framework == Framework::DeepSpeed;
  bool on = x.r.boolean("parallelism.overlap", deepspeed && s.parallel.zero == 3);
  if (deepspeed && s.parallel.zero == 0 && on) {
    s.parallel.overlap_ignored = true;
    on = false;
  }
  s.parallel.overlap = on;
}

// nccl.algo or nccl.proto as given, checked in NCCL's syntax against the point's NCCL version.
std::string nccl_override(R& x, const std::string& key) {
  const std::string value = x.r.str(key, "");
  try {
    const NcclVersion& v = nccl_version(x.s.nccl.version);
    nccl_enable(key == "nccl.algo" ? NcclOverrides{value, ""} : NcclOverrides{"", value}, v);
  } catch (const Error& e) {
    x.r.fail(key, e.what());
  }
  return value;
}

// nccl.min_channels or nccl.max_channels: 0 (NCCL's default) to the point's NCCL version's MAXCHANNELS.
KeyRow nccl_channels_row(const std::string& key, int NcclSpec::*field, std::string doc) {
  return integer_row(key, 0, 0, 64, std::move(doc), [key, field](R& x, long long v) {
    x.s.nccl.*field = static_cast<int>(v);
    try {
      NcclTopo t;
      nccl_limit_channels(t, nccl_version(x.s.nccl.version), x.s.nccl.overrides());
    } catch (const Error& e) {
      x.r.fail(key, e.what());
    }
  });
}

// The setter of one field of an element's spec: field(&Scenario::training, &TrainingSpec::micro_batch).
template <class Spec, class T>
auto field(Spec Scenario::*spec, T Spec::*member) {
  return [spec, member](R& x, const auto& v) { (x.s.*spec).*member = static_cast<T>(v); };
}

std::vector<KeyRow> scenario_rows() {
  return {
      custom_row("scenario.name", "text", "the file's name", "any text",
                 "the name reports carry (`<scenario name=...>`)",
                 [](R& x) { x.s.name = x.r.str("scenario.name", x.file.name); }),
  };
}

std::vector<KeyRow> cluster_rows() {
  return {
      custom_row("cluster.platform", "path", "(required)", kPathValid, "SimGrid platform file",
                 [](R& x) { x.s.cluster.platform = x.r.path("cluster.platform"); }),
      integer_row("cluster.nodes", 1, 1, kMaxScenarioNodes,
                  "nodes used: the first `nodes` of the platform (or of cluster.hosts)",
                  field(&Scenario::cluster, &ClusterSpec::nodes)),
      integer_row("cluster.gpus_per_node", 1, 1, kMaxGpusPerNode,
                  "GPUs used in each node: its first `gpus_per_node`",
                  field(&Scenario::cluster, &ClusterSpec::gpus_per_node)),
      custom_row("cluster.hosts", "list", "platform order", "space-separated node names, each once",
                 "the nodes (clusters) in the order they are used", apply_hosts),
  };
}

std::vector<KeyRow> model_rows() {
  return {
      custom_row("model.preset", "name", "",
                 join(vit_preset_names()) +
                     ", or any timm name `vit_<tiny|small|base|large|huge|giant>_patch<P>_<image>[.tag]` "
                     "(`vit_large_patch16_384`)",
                 "the ViT's shape; without a preset, model.width and the shape keys below", apply_preset),
      shape_row("model.image_size", 1, 65536, "input image side (px)", &ViTConfig::image_size),
      shape_row("model.patch", 1, 65536, "patch side (px); divides image_size", &ViTConfig::patch),
      shape_row("model.channels", 1, 64, "input channels", &ViTConfig::channels),
      shape_row("model.width", 1, 1 << 20, "hidden size; a multiple of heads", &ViTConfig::width),
      shape_row("model.depth", 1, 4096, "encoder blocks", &ViTConfig::depth),
      shape_row("model.heads", 1, 4096, "attention heads", &ViTConfig::heads),
      number_row(
          "model.mlp_ratio", "preset's", [](const R& x) { return x.s.model.mlp_ratio; }, 1e-3, 1e3,
          "MLP hidden size / width", field(&Scenario::model, &ViTConfig::mlp_ratio)),
      shape_row("model.classes", 1, 1 << 24, "classifier outputs", &ViTConfig::classes),
      integer_row(
          "model.class_tokens", 1, 1, kMaxClassTokens,
          "learned tokens prepended to the patches (2: DeiT distilled, 8: NeMo); the head reads the first",
          field(&Scenario::model, &ViTConfig::class_tokens)),
      number_row(
          "model.dropout", "preset's", [](const R& x) { return x.s.model.dropout; }, 0, 0.999,
          "dropout probability (0: no masks stored)", field(&Scenario::model, &ViTConfig::dropout)),
      choice_row(
          "model.attention", "math", {"math", "fused"},
          "how attention runs: `math` (scores in memory, PyTorch <= 1.13, the study's stack) or `fused` "
          "(scaled_dot_product_attention / flash); see \"The model\"",
          [](R& x, const std::string& v) { x.s.model.attention = parse_attention_path(v); }),
  };
}

// dataset.name: a choice whose error guesses the name meant ("imagenet": did you mean 'imagenet1k'?).
KeyRow dataset_name_row() {
  KeyRow row = choice_row("dataset.name", "synthetic", dataset_names(),
                          "known sets fill the sizes below (core/src/model/dataset.cpp)",
                          field(&Scenario::dataset, &DatasetSpec::name));
  row.apply = [choose = row.apply](R& x) {
    if (const auto* v = x.r.raw("dataset.name"); v && !find_dataset(*v))
      x.r.fail("dataset.name", fmt::format("unknown value '{}'; valid: {}{}", *v, join(dataset_names()),
                                           did_you_mean(*v, dataset_names())));
    choose(x);
  };
  return row;
}

std::vector<KeyRow> dataset_rows() {
  return {
      dataset_name_row(),
      integer_row(
          "dataset.train_samples", "per dataset", [](const R& x) { return facts(x) ? facts(x)->train : 0; },
          1, 1LL << 40, "training set size",
          [](R& x, long long v) {
            x.s.dataset.train_samples = v;
            if (v == 0)
              throw Error(x.r.origin("dataset.name"),
                          fmt::format("dataset '{}' needs train_samples", x.s.dataset.name));
          }),
      integer_row(
          "dataset.test_samples", "per dataset", [](const R& x) { return facts(x) ? facts(x)->test : 0; }, 0,
          1LL << 40, "test set size", field(&Scenario::dataset, &DatasetSpec::test_samples)),
      integer_row(
          "dataset.image_size", "per dataset",
          [](const R& x) { return facts(x) ? facts(x)->image : x.s.model.image_size; }, 1, 65536,
          "image side as stored (px)", field(&Scenario::dataset, &DatasetSpec::image_size)),
      integer_row(
          "dataset.channels", "per dataset",
          [](const R& x) { return facts(x) ? facts(x)->channels : x.s.model.channels; }, 1, 64,
          "channels as stored; must equal the model's", field(&Scenario::dataset, &DatasetSpec::channels)),
      integer_row(
          "dataset.resize", "model.image_size", [](const R& x) { return x.s.model.image_size; }, 1, 65536,
          "the side images are resized to; must equal the model's input size",
          [](R& x, long long v) {
            if (v != x.s.model.image_size)
              x.r.fail("dataset.resize",
                       fmt::format("{} px but the model takes {} px images", v, x.s.model.image_size));
          }),
      number_row("dataset.per_gpu_fraction", 0, 0, 1,
                 "weak scaling: each GPU gets this fraction of the set (0: off)",
                 field(&Scenario::dataset, &DatasetSpec::per_gpu_fraction)),
      custom_row("dataset.path", "path", "", "a folder, relative to the scenario file",
                 "where the real trainer reads it",
                 [](R& x) { x.s.dataset.path = x.r.path("dataset.path"); }),
  };
}

std::vector<KeyRow> training_rows() {
  return {
      integer_row("training.micro_batch", 1, 1, 1 << 24, "samples per GPU per micro-batch",
                  field(&Scenario::training, &TrainingSpec::micro_batch)),
      integer_row("training.grad_accum", 1, 1, 1 << 20, "micro-batches per optimizer step",
                  field(&Scenario::training, &TrainingSpec::grad_accum)),
      integer_row("training.epochs", 1, 1, 1 << 20, "epochs",
                  field(&Scenario::training, &TrainingSpec::epochs)),
      choice_row("training.precision", "fp32", kPrecisions,
                 "fp32, or fp16 / bf16 as training.cast runs them (autocast: fp32 weights; module: the "
                 "model in half)",
                 [](R& x, const std::string& v) { x.s.training.precision = parse_precision(v); }),
      choice_row("training.optimizer", "adamw", {"adamw", "adam", "sgd"}, "the optimizer",
                 field(&Scenario::training, &TrainingSpec::optimizer)),
      number_row("training.lr", 1e-4, 0, 1e3, "learning rate", field(&Scenario::training, &TrainingSpec::lr)),
      number_row("training.weight_decay", 0.01, 0, 1e3, "weight decay",
                 field(&Scenario::training, &TrainingSpec::weight_decay)),
      integer_row("training.seed", 1, 0, 1LL << 53,
                  "seed of the real trainer's initialisation and data order",
                  field(&Scenario::training, &TrainingSpec::seed)),
      choice_row("training.framework", "vitsim", {"vitsim", "deepspeed", "ddp"},
                 "whose code runs the step (its fixed per-step work; see \"The model\"); deepspeed with a "
                 "`<deepspeed>` config",
                 [](R& x, const std::string& v) { x.s.training.framework = parse_framework(v); }),
      choice_row(
          "training.torch_version", "1.13", torch_version_names(),
          "framework ddp: the PyTorch version whose step is modelled (its optimizer default, zero_grad "
          "and clip_grad_norm_; see \"The model\")",
          field(&Scenario::training, &TrainingSpec::torch_version)),
      choice_row("training.optimizer_impl", "default", {"default", "per-tensor", "foreach", "fused"},
                 "framework ddp: how torch.optim runs the optimizer (default: the PyTorch version's, "
                 "per-tensor in 1.13, foreach in 2.x)",
                 [](R& x, const std::string& v) {
                   x.s.training.optimizer_impl = v;
                   if (v == "fused" && x.s.training.optimizer == "sgd")
                     x.r.fail("training.optimizer_impl", "fused is modelled for adamw and adam, not sgd");
                   if (v == "fused" && x.s.training.optimizer == "adamw" &&
                       !torch_version(x.s.training.torch_version).fused_adamw)
                     x.r.fail("training.optimizer_impl",
                              fmt::format("PyTorch {} has no fused AdamW (AdamW(fused=True) arrived in 2.0)",
                                          x.s.training.torch_version));
                 }),
      custom_row("training.cast", "choice", "the framework's", join(half_cast_names()),
                 "how fp16/bf16 runs: `autocast` (torch.autocast: fp32 weights, gradients and optimizer "
                 "state; fp32 LayerNorm, softmax and residual stream; casts before the GEMMs; vitsim's and "
                 "ddp's default) or `module` (model.half(): the whole model in half, no casts; torch.optim's "
                 "state in half, no fp32 master; deepspeed's, the only one it runs); see \"The model\"",
                 [](R& x) {  // checked against precision and framework in check_training (scenario.cpp)
                   if (x.r.has("training.cast"))
                     x.s.training.cast = parse_half_cast(x.r.choice("training.cast", "", half_cast_names()));
                 }),
      boolean_row("training.activation_checkpointing", false,
                  "checkpoint every encoder block: only block inputs stay in memory, backward runs each "
                  "block's forward "
                  "again (see \"The model\")",
                  field(&Scenario::training, &TrainingSpec::activation_checkpointing)),
      number_row("training.gradient_clipping", 0, 0, 1e9,
                 "max gradient norm (0: off): a norm reduction and a scale each step",
                 field(&Scenario::training, &TrainingSpec::gradient_clipping)),
      number_row("training.loss_scale", 0, 0, 1e30,
                 "fp16 loss scale (DeepSpeed fp16.loss_scale): 0 dynamic, > 0 static",
                 field(&Scenario::training, &TrainingSpec::loss_scale)),
  };
}

// ZeRO-Offload is DeepSpeed's; DeepSpeed v0.14.4 runs an offloaded optimizer as DeepSpeedCPUAdam only
// (engine.py _configure_basic_optimizer builds it for Adam and AdamW; any other optimizer raises
// ZeRORuntimeException in _configure_optimizer while zero_force_ds_cpu_optimizer is true, its default).
void check_offload(R& x, const std::string& key, const std::string& v) {
  if (v == "none") return;
  if (x.s.training.framework != Framework::DeepSpeed)
    x.r.fail(key,
             fmt::format("{} offload is DeepSpeed's ZeRO-Offload: it needs training.framework=deepspeed, "
                         "not {}",
                         v, framework_name(x.s.training.framework)));
  if (key == "parallelism.offload_optimizer" && x.s.training.optimizer == "sgd")
    x.r.fail(key,
             "DeepSpeed runs an offloaded optimizer as DeepSpeedCPUAdam (adam, adamw) and refuses sgd "
             "(ZeRORuntimeException while zero_force_ds_cpu_optimizer is true); vitsim models CPU Adam only");
}

// parallelism.offload_optimizer or parallelism.offload_param: none, cpu or nvme, checked by check_offload.
KeyRow offload_row(const std::string& key, std::string ParallelSpec::*field, std::string doc) {
  return choice_row(key, "none", {"none", "cpu", "nvme"}, std::move(doc),
                    [key, field](R& x, const std::string& v) {
                      x.s.parallel.*field = v;
                      check_offload(x, key, v);
                    });
}

std::vector<KeyRow> parallelism_rows() {
  return {
      integer_row("parallelism.zero", 0, 0, 3, "ZeRO stage", field(&Scenario::parallel, &ParallelSpec::zero)),
      custom_row("parallelism.overlap", "boolean", "the framework's",
                 "true, false (or on, off, yes, no, 1, 0)",
                 "reduce gradient buckets during backward (DeepSpeed overlap_comm); default as the framework "
                 "runs it: deepspeed as v0.14.4's zero/config.py (on at ZeRO-3, off at ZeRO 1-2; ZeRO-0 "
                 "reduces after backward whatever it says), vitsim and ddp off",
                 apply_overlap),
      bucket_row("parallelism.bucket_size", true,
                 "gradient bucket cap (DeepSpeed reduce_bucket_size, DDP bucket_cap_mb)",
                 field(&Scenario::parallel, &ParallelSpec::bucket_bytes)),
      bucket_row(
          "parallelism.allgather_bucket_size", false,
          "ZeRO's parameter all-gather bucket, vitsim and ddp (deepspeed gathers at once: docs/model.md)",
          field(&Scenario::parallel, &ParallelSpec::allgather_bucket_bytes)),
      registry_row("parallelism.collective", "auto", "collective",
                   "the collective algorithm: `auto`, what NCCL would run (docs/model.md, Collectives)",
                   field(&Scenario::parallel, &ParallelSpec::collective)),
      custom_row("parallelism.comm_dtype", "choice", "gradient dtype", join(kPrecisions),
                 "gradients' dtype on the wire (DeepSpeed communication_data_type)",
                 [](R& x) {
                   if (x.r.has("parallelism.comm_dtype")) x.s.parallel.comm_dtype = comm_dtype(x);
                 }),
      integer_row("parallelism.sequence_parallel", 1, 1, 1 << 20,
                  "patch (sequence) parallelism, DeepSpeed-Ulysses style: groups of this many ranks split "
                  "each image's "
                  "tokens; divides the ranks and the heads (see \"Capacity planning\")",
                  [](R& x, long long v) {
                    Scenario& s = x.s;
                    s.parallel.sequence_parallel = static_cast<int>(v);
                    if (s.ranks() % v != 0)
                      x.r.fail("parallelism.sequence_parallel",
                               fmt::format("{} does not divide the {} ranks ({} nodes x {} GPUs)", v,
                                           s.ranks(), s.cluster.nodes, s.cluster.gpus_per_node));
                    if (s.model.heads % v != 0)
                      x.r.fail(
                          "parallelism.sequence_parallel",
                          fmt::format(
                              "{} does not divide the model's {} heads (Ulysses gives each rank whole heads)",
                              v, s.model.heads));
                  }),
      offload_row("parallelism.offload_optimizer", &ParallelSpec::offload_optimizer,
                  "DeepSpeed ZeRO-Offload of the optimizer (zero_optimization.offload_optimizer.device): its "
                  "state and step on the host at ZeRO 1-3 (docs/model.md \"ZeRO-Offload\")"),
      offload_row("parallelism.offload_param", &ParallelSpec::offload_param,
                  "DeepSpeed ZeRO-3 parameter offload (zero_optimization.offload_param.device): the "
                  "parameters kept on the host, fetched each pass (docs/model.md \"ZeRO-Offload\")"),
  };
}

// nccl: NCCL's tuner (core/model/nccl_tuning.hpp); the version first, the overrides checked against it.
std::vector<KeyRow> nccl_rows() {
  std::string versions;
  for (const auto& v : nccl_versions()) versions += (versions.empty() ? "" : ", ") + v.name;
  return {
      custom_row("nccl.version", "name", nccl_newest_version().name, versions + " (or a release, 2.18.3)",
                 "the NCCL release whose tuner picks algorithm, protocol and channels (docs/model.md, NCCL's "
                 "tuner); read by the collective `auto` (the default)",
                 [](R& x) {
                   try {
                     x.s.nccl.version =
                         nccl_version(x.r.str("nccl.version", nccl_newest_version().name)).name;
                   } catch (const Error& e) {
                     x.r.fail("nccl.version", e.what());
                   }
                 }),
      custom_row("nccl.algo", "text", "", "NCCL_ALGO's syntax: `Ring`, `Tree,Ring`, `^Tree` (any case)",
                 "NCCL_ALGO: the algorithms NCCL may pick (docs/model.md, NCCL's tuner); in `--set` a comma "
                 "list is a sweep",
                 [](R& x) { x.s.nccl.algo = nccl_override(x, "nccl.algo"); }),
      custom_row("nccl.proto", "text", "", "NCCL_PROTO's syntax: `LL128,Simple`, `^LL128` (any case)",
                 "NCCL_PROTO: the protocols NCCL may pick (docs/model.md, NCCL's tuner); in `--set` a comma "
                 "list is a sweep",
                 [](R& x) { x.s.nccl.proto = nccl_override(x, "nccl.proto"); }),
      nccl_channels_row("nccl.min_channels", &NcclSpec::min_channels,
                        "NCCL_MIN_NCHANNELS: at least this many channels for rings and trees, the first ones "
                        "copied (docs/model.md, NCCL's tuner); 0: NCCL's default"),
      nccl_channels_row("nccl.max_channels", &NcclSpec::max_channels,
                        "NCCL_MAX_NCHANNELS: at most this many channels for rings and trees (docs/model.md, "
                        "NCCL's tuner); 0: NCCL's default"),
  };
}

std::vector<KeyRow> loader_rows() {
  return {
      integer_row("loader.workers", 2, 0, 1024, "PyTorch DataLoader num_workers per GPU",
                  field(&Scenario::loader, &LoaderSpec::workers)),
      boolean_row("loader.pinned", true, "pin_memory", field(&Scenario::loader, &LoaderSpec::pinned)),
      integer_row("loader.prefetch", 2, 1, 1024, "prefetch_factor: batches each worker keeps ready",
                  field(&Scenario::loader, &LoaderSpec::prefetch)),
  };
}

std::vector<KeyRow> simulation_rows() {
  return {
      integer_row("simulation.steps", 20, 1, 1 << 24, "optimizer steps simulated",
                  field(&Scenario::simulation, &SimulationSpec::steps)),
      integer_row("simulation.warmup", 2, 0, 1 << 24,
                  "first steps excluded from the statistics; fewer than steps",
                  field(&Scenario::simulation, &SimulationSpec::warmup)),
      boolean_row("simulation.full_epoch", false, "simulate every step of one epoch instead of extrapolating",
                  field(&Scenario::simulation, &SimulationSpec::full_epoch)),
      integer_row("simulation.max_steps", kDefaultMaxSteps, 1, 1 << 24,
                  "most steps the steady-state search may simulate (see \"The model\", Epoch time)",
                  field(&Scenario::simulation, &SimulationSpec::max_steps)),
      custom_row("simulation.max_memory", "bytes", "half the memory", "> 0, with a unit (32GiB)",
                 "memory one simulated point may need (see \"Errors\", Limits)",
                 [](R& x) {
                   x.s.simulation.max_memory =
                       x.r.quantity("simulation.max_memory", 0, units::Kind::Bytes, units::positive());
                 }),
      integer_row("simulation.max_routes", kDefaultMaxRoutes, 1, 1LL << 53,
                  "routes a what-if may leave in a Full zone (see \"Errors\", Limits)",
                  field(&Scenario::simulation, &SimulationSpec::max_routes)),
      integer_row("simulation.max_points", kDefaultMaxPoints, 1, 1LL << 53,
                  "sweep points one command may run (see \"Errors\", Limits)",
                  field(&Scenario::simulation, &SimulationSpec::max_points)),
      choice_row("simulation.flows", "auto", {"auto", "always"},
                 "auto: a ring whose transfers share no link, and any collective's calls where nothing else "
                 "sends, are computed without SimGrid flows (same times; see \"The model\", Collectives); "
                 "always: every transfer a flow",
                 field(&Scenario::simulation, &SimulationSpec::flows)),
  };
}

// run: the real trainer's settings (see "The real trainer")
std::vector<KeyRow> run_rows() {
  return {
      choice_row("run.device", "auto", {"auto", "cpu", "cuda"}, "where the real trainer runs",
                 field(&Scenario::run, &RunSpec::device)),
      integer_row("run.max_steps", 0, 0, 1LL << 53,
                  "optimizer steps per epoch the real trainer runs (0: the whole epoch)",
                  field(&Scenario::run, &RunSpec::max_steps)),
      integer_row("run.checkpoint_every", 0, 0, 1 << 30,
                  "optimizer steps between checkpoints (0: only at the end)",
                  field(&Scenario::run, &RunSpec::checkpoint_every)),
      custom_row("run.checkpoint_dir", "path", "", "a folder, relative to the scenario file",
                 "where checkpoints go (none: no checkpoints)",
                 [](R& x) { x.s.run.checkpoint_dir = x.r.path("run.checkpoint_dir"); }),
      custom_row("run.timeout", "duration", "300s", "> 0, with a unit (30s, 5min, 1h30m)",
                 "a collective that does not finish within this fails the run",
                 [](R& x) {
                   x.s.run.timeout_s = x.r.quantity("run.timeout", 300, units::Kind::Time);
                   if (!(x.s.run.timeout_s > 0)) x.r.fail("run.timeout", "must be positive");
                 }),
      integer_row("run.check_every", 50, 0, 1 << 30, "steps between replica checksum comparisons",
                  field(&Scenario::run, &RunSpec::check_every)),
      integer_row("run.threads", 0, 0, 4096, "intra-op threads per rank (0: cores / local ranks)",
                  field(&Scenario::run, &RunSpec::threads)),
      boolean_row("run.augment", true, "random crop and flip", field(&Scenario::run, &RunSpec::augment)),
      integer_row("run.eval_samples", 0, 0, 1LL << 53, "test samples evaluated per epoch (0: all)",
                  field(&Scenario::run, &RunSpec::eval_samples)),
  };
}

std::vector<KeyRow> validation_rows() {
  return {
      number_row("validation.tolerance", 0.10, 0, 100, "relative step-time error `vitsim validate` accepts",
                 field(&Scenario::validation, &ValidationSpec::tolerance)),
  };
}

std::vector<KeyRow> compute_rows() {
  return {
      registry_row(
          "compute.model", "auto", "compute model",
          "how compute time is modelled (docs/model.md, Compute models), as SimGrid's --cfg=cpu/model",
          field(&Scenario::compute, &ComputeSpec::model)),
  };
}

std::vector<KeyRow> whatif_rows() {
  return {
      custom_row("whatif.edits", "list", "", "`;`-separated what-ifs (docs/plan.md, What-ifs)",
                 "platform what-ifs applied before simulating (see \"Capacity planning\")", apply_what_ifs),
  };
}

// deepspeed: merged into the attributes before the rows apply (read_and_merge_deepspeed)
std::vector<KeyRow> deepspeed_rows() {
  return {
      custom_row("deepspeed.config", "path", "", "a DeepSpeed JSON config, relative to the scenario file",
                 "DeepSpeed config whose settings the scenario takes (\"DeepSpeed import\" below)",
                 [](R&) {}),
  };
}

}  // namespace

// The table, in resolution order: one function per element, each in the order its keys are applied and
// its attributes listed.
const std::vector<KeyRow>& key_rows() {
  static const std::vector<KeyRow> rows = [] {
    std::vector<KeyRow> all;
    for (auto element : {scenario_rows, cluster_rows, model_rows, dataset_rows, training_rows,
                         parallelism_rows, nccl_rows, loader_rows, simulation_rows, run_rows, validation_rows,
                         compute_rows, whatif_rows, deepspeed_rows}) {
      auto r = element();
      all.insert(all.end(), std::make_move_iterator(r.begin()), std::make_move_iterator(r.end()));
    }
    return all;
  }();
  return rows;
}

}  // namespace vitsim::scenario_detail
