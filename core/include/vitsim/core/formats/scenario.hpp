#pragma once
// Scenario files: what to train, on which cluster, how. Parsed once, strictly, into immutable structs.
//
// A scenario file is read into a flat map of attributes keyed by their dotted path
// ("training.micro_batch"), each remembering file:line. Sweeps and --set overrides act on that map;
// each sweep point is then resolved into a typed Scenario and validated.
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/model/buckets.hpp"
#include "vitsim/core/model/framework.hpp"
#include "vitsim/core/model/nccl_tuning.hpp"
#include "vitsim/core/model/vit.hpp"

namespace vitsim {

struct ClusterSpec {
  std::string platform;   // path to the SimGrid platform XML (resolved against the scenario's folder)
  int nodes = 1;          // how many nodes are used
  int gpus_per_node = 1;  // GPUs used in each node
  std::vector<std::string> hosts;  // node names in the order they are used; empty: platform order
  // How messages name the platform when `platform` is a what-if's edited copy in a temporary folder
  // ("platforms/tesla.xml (as edited by the what-ifs)", set by EditedPlatforms); empty: `platform` itself.
  std::string platform_label;
};

struct DatasetSpec {
  std::string name = "synthetic";  // a row of core/model/dataset.hpp's table (dataset_names())
  long long train_samples = 0;     // whole training set
  long long test_samples = 0;
  int image_size = 0;  // as stored on disk
  int channels = 3;
  double per_gpu_fraction = 0;  // weak scaling: each GPU gets this fraction of the set (0 = off)
  std::string path;             // where the real trainer reads it from ("" = its default)
  long long effective_train_samples(int ranks) const;
};

struct TrainingSpec {
  int micro_batch = 1;
  int grad_accum = 1;
  int epochs = 1;
  Precision precision = Precision::FP32;
  std::string optimizer = "adamw";
  double lr = 1e-4;
  double weight_decay = 0.01;
  unsigned long long seed = 1;
  // Whose code runs the step (its fixed per-step work, core/model/framework.hpp): a <deepspeed> config sets
  // deepspeed.
  Framework framework = Framework::Vitsim;
  // framework ddp: the PyTorch version whose step is modelled (core/model/framework.hpp torch_versions())
  // and how torch.optim runs the optimizer ("default": the version's; "per-tensor", "foreach", "fused").
  std::string torch_version = "1.13";
  std::string optimizer_impl = "default";
  // Activation checkpointing of every encoder block (torch.utils.checkpoint / deepspeed.checkpointing):
  // only each block's input is kept; backward runs the block's forward again first.
  bool activation_checkpointing = false;
  double gradient_clipping = 0;  // max gradient norm; 0 = no clipping (DeepSpeed gradient_clipping)
  double loss_scale = 0;         // fp16 loss scale: 0 = dynamic (DeepSpeed fp16.loss_scale), > 0 static
  // training.cast: how fp16/bf16 runs the model (core/model/framework.hpp HalfCast); nullopt: the framework's
  // (half_cast(), below).
  std::optional<HalfCast> cast;
};

struct ParallelSpec {
  int zero = 0;
  bool overlap = false;  // default: as the framework runs it (parallelism.overlap's row)
  // overlap asked for where the framework cannot (DeepSpeed's ZeRO-0 reduces after backward): simulated off,
  // said in the point's notes.
  bool overlap_ignored = false;
  double bucket_bytes = 5e8 * 4;  // DeepSpeed reduce_bucket_size default: 5e8 elements (fp32)
  double allgather_bucket_bytes = 5e8 * 4;
  std::string collective = "auto";      // a name in sim's collective registry (sim::collective_names())
  std::optional<Precision> comm_dtype;  // DeepSpeed communication_data_type; default = gradient dtype
  // Patch (sequence) parallelism in the style of DeepSpeed-Ulysses: groups of this many consecutive ranks
  // split each image's tokens; all-to-alls around attention; 1 = pure data parallelism.
  int sequence_parallel = 1;
  // DeepSpeed's ZeRO-Offload (zero_optimization.offload_optimizer / offload_param .device): "none", "cpu" or
  // "nvme". The optimizer's is used at ZeRO 1-3, the parameters' at ZeRO-3, as DeepSpeed v0.14.4 uses them
  // (core/model/offload.hpp; docs/model.md "ZeRO-Offload").
  std::string offload_optimizer = "none";
  std::string offload_param = "none";
};

// NCCL's tuner (core/model/nccl_tuning.hpp, docs/model.md "NCCL's tuner"): the version whose tables model
// NCCL's choice of algorithm, protocol and channels, and NCCL_ALGO / NCCL_PROTO in NCCL's syntax. Read by
// the collective "auto" (parallelism.collective=auto, the default; sim/src/collectives/collective_nccl.cpp).
struct NcclSpec {
  std::string version;   // a name of nccl_versions(), "2.23"; resolved to the newest when not given
  std::string algo;      // NCCL_ALGO, "" = NCCL's default
  std::string proto;     // NCCL_PROTO, "" = NCCL's default
  int min_channels = 0;  // NCCL_MIN_NCHANNELS, 0 = NCCL's default (nccl_limit_channels)
  int max_channels = 0;  // NCCL_MAX_NCHANNELS, 0 = NCCL's default
  NcclOverrides overrides() const { return {algo, proto, min_channels, max_channels}; }
};

struct LoaderSpec {
  int workers = 2;
  bool pinned = true;
  int prefetch = 2;  // batches each worker keeps ready (PyTorch prefetch_factor)
};

// Limits on the work one command may start (docs/errors.md "Limits"): estimated before the work, refused
// beyond them with what it would cost; each is raised with --set simulation.max_...=N.
constexpr long long kDefaultMaxPoints = 100'000;    // sweep points per command (a point is a simulation)
constexpr long long kDefaultMaxRoutes = 1'000'000;  // routes a what-if may leave in a Full zone (1,415 nodes)
constexpr int kDefaultMaxSteps = 5'000;             // steps the steady-state search may simulate

struct SimulationSpec {
  int steps = 20;           // optimizer steps simulated (steady-state mode)
  int warmup = 2;           // first steps excluded from the statistics
  bool full_epoch = false;  // simulate every step of one epoch instead of extrapolating
  // Steady-state search (sim/simulate.cpp): when the measured steps are not steady, simulate more, up to
  // the epoch or this many steps.
  int max_steps = kDefaultMaxSteps;
  double max_memory = 0;  // bytes one simulated point may need (0: half the machine's memory)
  long long max_routes = kDefaultMaxRoutes;
  long long max_points = kDefaultMaxPoints;
  // auto: a fused ring whose transfers share no link with any other transfer is computed without SimGrid
  // flows (exact for its model: sim/collectives/collective.hpp Group::set_lone_ring); always: every transfer
  // is a flow.
  std::string flows = "auto";
};

// Settings only the real trainer reads.
struct RunSpec {
  std::string device = "auto";  // auto, cpu, cuda
  long long max_steps = 0;      // stop after this many optimizer steps per epoch (0 = whole epoch)
  int checkpoint_every = 0;     // optimizer steps between checkpoints (0 = only at the end)
  std::string checkpoint_dir;   // "" = no checkpoints
  double timeout_s = 300;       // a collective that does not finish within this fails the run
  int check_every = 50;         // replica checksum comparison every N steps
  int threads = 0;              // intra-op threads per rank (0 = cores / local ranks)
  bool augment = true;          // random crop + flip
  long long eval_samples = 0;   // test samples evaluated per epoch (0 = all)
};

struct ValidationSpec {
  double tolerance = 0.10;  // relative step-time error above which `vitsim validate` fails
};

// How compute time is modelled: a name of sim's registry (sim::compute_model_names(),
// docs/model.md "Compute models"), as SimGrid's --cfg=cpu/model chooses its CPU model; "auto" picks per
// device.
struct ComputeSpec {
  std::string model = "auto";
};

struct DeepSpeedConfig;  // deepspeed.hpp

// One fully resolved point.
struct Scenario {
  std::string name;
  std::string file;  // the scenario file it came from
  ClusterSpec cluster;
  ViTConfig model;
  DatasetSpec dataset;
  TrainingSpec training;
  ParallelSpec parallel;
  NcclSpec nccl;
  LoaderSpec loader;
  SimulationSpec simulation;
  RunSpec run;
  ValidationSpec validation;
  ComputeSpec compute;
  std::map<std::string, std::string> params;  // every swept or overridden key and its value
  std::map<std::string, Origin> origins;      // where each given attribute came from
  // Where `key` was set (file:line, "--set key", a DeepSpeed file), or the scenario file itself.
  Origin origin_of(const std::string& key) const {
    auto it = origins.find(key);
    return it == origins.end() ? Origin{file, 0} : it->second;
  }
  // Platform edits (docs/plan.md), one per line, applied before simulating.
  std::vector<std::string> what_ifs;
  // The DeepSpeed config's train_batch_size, when it gives one (the batch the config was tuned for).
  std::optional<long long> deepspeed_train_batch;
  // The DeepSpeed config's path as read (deepspeed.config resolved), "" without one.
  std::string deepspeed_config;
  // What ScenarioFile::global_batch replaced in the DeepSpeed config, in words ("" when nothing).
  std::string deepspeed_batch_replaced;
  // Each --set or <sweep> that replaced a value of the DeepSpeed config, in words (issue 39 item 21: which
  // wins is said): in the point's notes and the plan's head.
  std::vector<std::string> deepspeed_overrides;
  int ranks() const { return cluster.nodes * cluster.gpus_per_node; }
  // Data-parallel replicas: a sequence-parallel group of ranks shares one micro-batch.
  int dp_ranks() const { return ranks() / parallel.sequence_parallel; }
  long long global_batch() const { return 1LL * training.micro_batch * training.grad_accum * dp_ranks(); }
};

// How the point's fp16/bf16 runs: training.cast, else its framework's (framework_half_cast). At fp32 nothing
// is cast either way.
inline HalfCast half_cast(const Scenario& s) {
  return s.training.cast.value_or(framework_half_cast(s.training.framework));
}
// The whole module in half: fp16/bf16 with HalfCast::Module.
inline bool module_in_half(const Scenario& s) {
  return s.training.precision != Precision::FP32 && half_cast(s) == HalfCast::Module;
}

// The scenario's gradient buckets (core/model/buckets.hpp): the dtype they are communicated in, from
// parallelism.comm_dtype, training.framework and training.precision; the layout, from the model,
// parallelism.bucket_size, that dtype and the rule of training.framework at parallelism.zero.
inline Precision gradient_comm_dtype(const Scenario& s) {
  return gradient_comm_dtype(s.parallel.comm_dtype, half_cast(s), s.training.precision);
}
inline std::vector<GradBucket> gradient_buckets(const Scenario& s) {
  return gradient_buckets(s.model, s.parallel.bucket_bytes, gradient_comm_dtype(s),
                          bucket_rule(s.training.framework, s.parallel.zero, s.training.precision));
}

struct Attribute {
  std::string value;
  Origin origin;
  bool swept = false;  // a <sweep>'s value (for_each_combination): it wins over a DeepSpeed config's value
};

struct Sweep {
  std::string key;
  std::vector<std::string> values;
  Origin origin;
};

// The file as read, before sweeps are expanded.
struct ScenarioFile {
  std::string path;
  std::string name;
  std::map<std::string, Attribute> attrs;  // "training.micro_batch" -> "64" @ file:line
  std::vector<Sweep> sweeps;               // cartesian product, in file order
  // plan --global-batch: wins over a DeepSpeed config's train_batch_size and gradient_accumulation_steps
  // (read_and_merge_deepspeed); unset elsewhere.
  std::optional<long long> global_batch;
};

ScenarioFile read_scenario_file(const std::string& path);  // throws Error with file:line
// Applies a command-line override "key=value" or "key=v1,v2,v3" (a sweep, replacing any on that key).
void apply_override(ScenarioFile& f, const std::string& assignment);
// One row of the scenario's key table (core/src/formats/scenario.cpp): the schema, the known-key check, the
// defaults, resolve() and docs/scenarios.md's key table (tests/cli/test_descriptors.cpp) all come from it.
struct ScenarioKeyInfo {
  std::string key;            // dotted path, "training.micro_batch" (<training micro_batch="..."/>)
  std::string type;           // integer, number, boolean, choice, bytes, duration, path, list, name, text
  std::string default_value;  // as docs/scenarios.md shows it; "" when unset means none
  std::string valid;          // range or choices, in words
  std::string registry;  // a registry outside core that holds the valid names ("collective", "compute model")
  std::string doc;       // one line
};
// In resolution order: a key's default may depend on the keys before it.
const std::vector<ScenarioKeyInfo>& scenario_key_table();
// Every valid dotted key, sorted, for error messages and documentation.
std::vector<std::string> scenario_keys();
// Calls fn(attributes, params) for every combination of the sweeps (their cartesian product, in file
// order); params holds the --set values and the swept values of that combination.
void for_each_combination(const ScenarioFile& f,
                          const std::function<void(const std::map<std::string, Attribute>& attrs,
                                                   const std::map<std::string, std::string>& params)>& fn);
// The number of points the sweeps make (their product), and the check for_each_combination makes first:
// more than simulation.max_points (default kDefaultMaxPoints) is an Error saying how many and why.
long long sweep_points(const ScenarioFile& f);
void check_sweep_size(const ScenarioFile& f);
// Expands sweeps and resolves each point; throws Error naming the attribute's origin.
std::vector<Scenario> expand(const ScenarioFile& f);
// A list value as scenarios read it, each item trimmed: sweep values split at ',', what-ifs at ';'.
std::vector<std::string> split_list(const std::string& s, char sep);
Scenario resolve(const ScenarioFile& f, const std::map<std::string, Attribute>& attrs,
                 const std::map<std::string, std::string>& params);

}  // namespace vitsim
