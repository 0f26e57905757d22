#include "vitsim/sim/predict/plan.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "collectives/nccl_comm.hpp"
#include "predict/plan_memory.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/calibration.hpp"
#include "vitsim/core/formats/identity.hpp"
#include "vitsim/core/formats/whatif.hpp"
#include "vitsim/core/model/energy.hpp"
#include "vitsim/core/model/memory.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/results/report.hpp"
#include "vitsim/sim/engine/process_pool.hpp"
#include "vitsim/sim/point/simulate.hpp"
#include "vitsim/sim/predict/interval.hpp"

namespace vitsim::sim {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

struct Candidate {
  int index = 0;
  std::optional<Scenario> scenario;  // empty when the combination is invalid
  std::string invalid;               // resolve()'s error for it
  std::map<std::string, std::string> params;
};

// The cartesian product of the sweeps, in file order (as expand() walks it), resolving each point on its
// own so that one invalid combination (a sequence-parallel degree that does not divide the ranks)
// excludes that point instead of failing the plan.
std::vector<Candidate> enumerate(const ScenarioFile& f) {
  std::vector<Candidate> out;
  for_each_combination(f, [&](const auto& attrs, const auto& params) {
    Candidate c;
    c.index = static_cast<int>(out.size());
    c.params = params;
    try {
      c.scenario = resolve(f, attrs, params);
    } catch (const Error& e) {
      c.invalid = e.what();
    }
    out.push_back(std::move(c));
  });
  return out;
}

bool swept(const ScenarioFile& f, const std::string& key) {
  for (const auto& s : f.sweeps)
    if (s.key == key) return true;
  return false;
}

// What a child process hands back: the point's summary as a one-point report (per-rank detail is
// `vitsim predict`'s) and its gradient reduction in numbers (the explanation's advice).
json point_result(PreparedEngine& engine, const PointSetup& setup, const Scenario& s,
                  const PlatformFacts& facts, const Calibration* calib) {
  SimResult r = simulate_prepared(engine, setup, s, facts, calib, false);
  r.point.per_rank.clear();
  Report one;
  one.points.push_back(r.point);
  json out{{"report", report_to_json_value(one)}};
  if (r.comm.known()) out["comm"] = comm_regime_to_json(r.comm);
  return out;
}

// The point's memory against its GPUs (excluded when it does not fit), and the largest micro-batch that
// would fit at each ZeRO stage.
void memory_check(const Scenario& s, const PlatformFacts& facts, const RankPlacement& place, PlanPoint& p) {
  const Workload w = build_workload(s.model);
  const MemoryFit f = memory_fit(s, w, facts, place);
  p.memory_per_gpu_bytes = f.need;
  p.gpu_memory_bytes = f.have;
  for (int z = 0; z < 4; ++z) p.largest_micro_batch[z] = largest_fitting_micro_batch(s, z, w, facts, place);
  p.largest_known = true;
  if (!f.fits)
    p.excluded =
        fmt::format("memory: needs {} per GPU, a GPU has {}", units::format_bytes(p.memory_per_gpu_bytes),
                    units::format_bytes(p.gpu_memory_bytes));
}

void check_options(const PlanOptions& opt) {
  if (opt.shard_count < 1 || opt.shard_index < 0 || opt.shard_index >= opt.shard_count)
    throw Error(fmt::format("--shard {}/{}: expected I/K with 0 <= I < K", opt.shard_index, opt.shard_count));
  if (opt.interval.samples > 0 && opt.shard_count > 1)
    throw Error("--interval needs the ranked plan (its top candidates): not with --shard");
  if (opt.interval.samples > 0 && opt.interval_top < 1)
    throw Error(fmt::format("--interval-top {}: expected 1 or more candidates", opt.interval_top));
  if (opt.objective != "time" && opt.objective != "cost" && opt.objective != "throughput" &&
      opt.objective != "energy")
    throw Error(fmt::format("unknown objective '{}'; valid: cost, energy, throughput, time", opt.objective));
}

// The plan's fields that do not depend on simulating.
PlanResult plan_header(const ScenarioFile& file, const PlanOptions& opt, size_t space_size) {
  PlanResult result;
  result.scenario = file.name;
  result.objective = opt.objective;
  result.constraints = opt.constraints;
  result.space_size = static_cast<int>(space_size);
  result.shard_index = opt.shard_index;
  result.shard_count = opt.shard_count;
  result.provenance["scenario_file"] = file.path;
  result.provenance["generator"] = fmt::format("vitsim {} (SimGrid S4U)", vitsim_version());
  if (!opt.calibration.empty()) result.provenance["calibration"] = opt.calibration;
  return result;
}

// The what-ifs edit the platform of every valid candidate (into `edited`'s files, which must outlive the
// simulations); the plan records them and what they changed.
void apply_what_ifs(std::vector<Candidate>& cands, EditedPlatforms& edited, PlanResult& result) {
  std::vector<Scenario> valid;
  for (auto& c : cands)
    if (c.scenario) valid.push_back(*c.scenario);
  edited.apply(valid);
  size_t k = 0;
  for (auto& c : cands)
    if (c.scenario) c.scenario = valid[k++];
  for (const auto& c : cands)
    if (c.scenario) {
      result.what_ifs = c.scenario->what_ifs;
      break;
    }
  for (const auto& e : edited.effects())
    for (const auto& ch : e.changes) result.what_if_changes.push_back(fmt::format("[{}] {}", e.edit, ch));
}

// The plan's identity: every point of the whole space (not only this shard's), the platforms as
// simulated (what-ifs applied), the calibration, and the plan's own settings. Shards of one plan share it.
void identify(const std::vector<Candidate>& cands, const PlanOptions& opt, PlanResult& result) {
  PlanResult settings;
  settings.constraints = opt.constraints;
  std::string id =
      fmt::format("space={}\nepochs={}\nobjective={}\nconstraints={}\n", cands.size(), opt.epochs,
                  opt.objective, json::parse(plan_to_json(settings))["constraints"].dump());
  std::map<std::string, std::string> platform_sha;
  for (const auto& c : cands) {
    id += fmt::format("{}:{}\n", c.index,
                      c.scenario ? scenario_id(*c.scenario) : "invalid " + json(c.params).dump());
    if (c.scenario && !platform_sha.count(c.scenario->cluster.platform) &&
        fs::exists(c.scenario->cluster.platform))
      platform_sha[c.scenario->cluster.platform] = sha256_hex(read_file(c.scenario->cluster.platform));
  }
  for (const auto& [path, sha] : platform_sha) id += "platform=" + sha + "\n";
  for (const auto& w : result.what_ifs) id += "what_if=" + w + "\n";
  if (!opt.calibration.empty()) id += "calibration=" + sha256_hex(read_file(opt.calibration)) + "\n";
  if (opt.price_per_kwh >= 0) id += fmt::format("price_per_kwh={}\n", opt.price_per_kwh);
  result.plan_id = "sha256:" + sha256_hex(id);
  std::string shas;
  for (const auto& [path, sha] : platform_sha) shas += (shas.empty() ? "" : ",") + sha;
  result.provenance["platform_sha256"] = shas;
}

// With a fixed global batch and no sweep over the accumulation: global_batch / (micro_batch x replicas),
// when that is a whole number.
void derive_grad_accum(Scenario& s, long long global_batch, PlanPoint& p) {
  const long long per_step = 1LL * s.training.micro_batch * s.dp_ranks();
  if (global_batch % per_step != 0) return;
  s.training.grad_accum = static_cast<int>(global_batch / per_step);
  s.params["training.grad_accum"] = std::to_string(s.training.grad_accum);
  p.params["training.grad_accum"] = std::to_string(s.training.grad_accum);
}

// The point's shape as the plan lists it.
void describe(const Scenario& s, PlanPoint& p) {
  p.nodes = s.cluster.nodes;
  p.gpus_per_node = s.cluster.gpus_per_node;
  p.gpus = s.ranks();
  p.micro_batch = s.training.micro_batch;
  p.grad_accum = s.training.grad_accum;
  p.zero = s.parallel.zero;
  p.sequence_parallel = s.parallel.sequence_parallel;
  p.precision = precision_name(s.training.precision);
  p.collective = s.parallel.collective;
  p.overlap = s.parallel.overlap;
  p.global_batch = s.global_batch();
  p.params["nodes"] = std::to_string(p.nodes);
  p.params["gpus"] = std::to_string(p.gpus);
  p.params["micro_batch"] = std::to_string(p.micro_batch);
  p.params["grad_accum"] = std::to_string(p.grad_accum);
}

// Why the point's global batch breaks the constraints ("" when it does not).
std::string batch_exclusion(const PlanConstraints& k, const PlanPoint& p, int replicas) {
  if (k.global_batch && p.global_batch != *k.global_batch)
    return fmt::format("global batch: {} x {} x {} replicas = {}, not {}", p.micro_batch, p.grad_accum,
                       replicas, p.global_batch, *k.global_batch);
  if (k.global_batch_min && p.global_batch < *k.global_batch_min)
    return fmt::format("global batch: {} < {}", p.global_batch, *k.global_batch_min);
  if (k.global_batch_max && p.global_batch > *k.global_batch_max)
    return fmt::format("global batch: {} > {}", p.global_batch, *k.global_batch_max);
  return "";
}

// The checks made without simulating (validity, placement, memory, global batch): the point as listed,
// with `excluded` set when one fails; `setup`, what its simulation takes.
PlanPoint screen(Candidate& c, const PlanOptions& opt, bool derive_accum, PlatformCache& platforms,
                 PointSetup& setup) {
  PlanPoint p;
  p.index = c.index;
  p.params = c.params;
  if (!c.scenario) {
    p.excluded = "invalid: " + c.invalid;
    return p;
  }
  Scenario& s = *c.scenario;
  if (derive_accum) derive_grad_accum(s, *opt.constraints.global_batch, p);
  describe(s, p);
  const PlatformFacts& facts = platforms.of(s);
  try {
    setup = check_point(s, facts);
    setup.comm_regime = true;  // the explanation's advice reads it (core/model/comm_regime.hpp)
  } catch (const Error& e) {
    p.excluded = std::string("placement: ") + e.what();
    return p;
  }
  memory_check(s, facts, setup.place, p);
  if (!p.excluded.empty() && !opt.constraints.must_fit) p.excluded.clear();
  if (p.excluded.empty()) {  // the epoch needs one global batch of the dataset (core/model/epoch.hpp)
    try {
      check_epoch(s);
    } catch (const Error& e) {
      p.excluded = std::string("dataset: ") + e.what();
    }
  }
  if (p.excluded.empty()) p.excluded = batch_exclusion(opt.constraints, p, s.dp_ranks());
  return p;
}

// Past which global batch the top pick is flagged: the batch the scenario's DeepSpeed config was tuned
// for, else the largest of the published ViT recipes on ImageNet (docs/sources.md, "Large-batch ViT
// training": ViT trained with 4,096, DeiT with 1,024).
void batch_reference(const Scenario& s, PlanResult& result) {
  constexpr long long kPublishedVitBatch = 4096;
  if (s.deepspeed_train_batch) {
    result.batch_reference = *s.deepspeed_train_batch;
    result.batch_reference_source = "the train_batch_size of the scenario's DeepSpeed config";
  } else {
    result.batch_reference = kPublishedVitBatch;
    result.batch_reference_source =
        "the largest global batch of the published ViT ImageNet recipes: 4,096 in Dosovitskiy et al. 2021, "
        "1,024 in DeiT, Touvron et al. 2021";
  }
}

// Epochs and prices from the first valid point of the whole space, not of the shard.
void epochs_and_prices(std::vector<Candidate>& cands, const PlanOptions& opt, PlatformCache& platforms,
                       PlanResult& result) {
  for (auto& c : cands)
    if (c.scenario) {
      const PlatformFacts& facts = platforms.of(*c.scenario);
      result.epochs = opt.epochs > 0 ? opt.epochs : c.scenario->training.epochs;
      batch_reference(*c.scenario, result);
      result.price_per_gpu_hour = parse_price_per_gpu_hour(facts.props, facts.path);
      const auto kwh = facts.props.find("price_per_kwh");
      result.price_per_kwh =
          opt.price_per_kwh >= 0 ? opt.price_per_kwh
          : kwh == facts.props.end()
              ? 0
              : parse_price_per_kwh(kwh->second, facts.path + ": zone property price_per_kwh");
      break;
    }
}

// A point that passed the checks, and where its result goes in the plan's list.
struct ToSimulate {
  size_t slot;
  int index;  // the point's index in the space
  Scenario scenario;
  PointSetup setup;  // its placement and collective (screen), inherited by its child
};

void simulate(const std::vector<ToSimulate>& work, const PlanOptions& opt, PlatformCache& platforms,
              const Calibration* calib, std::vector<PlanPoint>& points) {
  if (const std::string note = calib ? unused_calibration_note(*calib) : ""; !note.empty() && opt.progress)
    fmt::print(stderr, "vitsim: note: {}\n", note);
  ForkedPoints how;
  how.who = opt.shard_count > 1 ? fmt::format("vitsim plan (shard {}/{})", opt.shard_index, opt.shard_count)
                                : std::string("vitsim plan");
  how.what = fmt::format("points simulated ({} excluded before)", points.size() - work.size());
  how.progress = opt.progress;
  how.jobs = opt.jobs;
  how.prefix = "vitsim-plan-";
  // The points of one platform file fork from one zygote that loaded it (process_pool.hpp).
  std::unique_ptr<PreparedEngine> engine;  // in a zygote and its children
  how.group_of = [&](size_t i) { return work[i].scenario.cluster.platform; };
  how.prepare = [&](size_t i) { engine = prepare_engine(work[i].scenario, platforms.of(work[i].scenario)); };
  const std::vector<ForkedResult> results = gather_forked_each(work.size(), how, [&](size_t i) {
    return point_result(*engine, work[i].setup, work[i].scenario, platforms.of(work[i].scenario), calib);
  });
  for (size_t i = 0; i < work.size(); ++i) {
    PlanPoint& p = points[work[i].slot];
    // A point whose simulation failed (its process killed, an error of its own) is excluded with its
    // reason; the others are ranked (the command exits 6: docs/errors.md).
    if (!results[i].ok()) {
      p.excluded = "failed: " + results[i].error;
      continue;
    }
    p.result = report_from_json_value(results[i].result["report"], fmt::format("plan point {}", p.index))
                   .points.at(0);
    p.simulated = true;
    if (results[i].result.contains("comm"))
      p.comm = comm_regime_from_json(results[i].result["comm"].get<std::string>(),
                                     fmt::format("plan point {}", p.index));
    if (const std::string note = calib ? unused_calibration_note(*calib) : ""; !note.empty())
      p.result.notes.push_back(note);
    // The simulation's figure for the largest rank is the one reported (the same model and inputs).
    p.memory_per_gpu_bytes = p.result.memory_per_gpu_bytes;
  }
}

// plan --interval: the top `interval_top` ranked points get their interval and sensitivity as predict's
// (sim/predict/interval.hpp: their scenarios as simulated, what-ifs applied), then the plan is ranked again
// (the same ranking: by central values) so that its explanation holds the pick against the runner-up.
// `platforms`: the plan's, so that the points' files are not read and load-checked again.
void add_plan_intervals(PlanResult& result, const std::vector<ToSimulate>& work, const Calibration* calib,
                        const PlanOptions& opt, const std::vector<MeasuredRun>& runs,
                        PlatformCache& platforms) {
  std::map<int, const Scenario*> scenario_of;
  for (const auto& w : work) scenario_of[w.index] = &w.scenario;
  std::vector<PlanPoint*> top;
  for (auto& p : result.points)
    if (p.rank >= 1 && p.rank <= opt.interval_top) top.push_back(&p);
  if (top.empty()) return;
  std::sort(top.begin(), top.end(), [](const PlanPoint* a, const PlanPoint* b) { return a->rank < b->rank; });
  Report report;
  std::vector<Scenario> scenarios;
  for (const PlanPoint* p : top) {
    report.points.push_back(p->result);
    scenarios.push_back(*scenario_of.at(p->index));
  }
  PredictOptions po;
  po.jobs = opt.jobs;
  po.progress = opt.progress;
  po.interval = opt.interval;
  add_intervals(report, scenarios, calib, po, "vitsim plan --interval", runs, &platforms);
  for (size_t i = 0; i < top.size(); ++i) {
    top[i]->result.interval = report.points[i].interval;
    top[i]->result.sensitivity = report.points[i].sensitivity;
  }
  rank_plan(result);
}

}  // namespace

PlanResult plan(const ScenarioFile& given, const PlanOptions& opt) {
  check_options(opt);
  ScenarioFile file = given;
  file.global_batch = opt.constraints.global_batch;  // wins over a DeepSpeed config's batch (issue 38)
  // --runs: read and resolved before any simulation, so that a bad file fails at once.
  const std::vector<MeasuredRun> runs =
      opt.interval.samples > 0 ? measured_runs(file, opt.interval.runs) : std::vector<MeasuredRun>{};
  std::vector<Candidate> cands = enumerate(file);
  PlanResult result = plan_header(file, opt, cands.size());
  result.space_notes = opt.space_notes;
  for (const auto& c : cands)
    if (c.scenario) {
      if (!c.scenario->deepspeed_batch_replaced.empty())
        result.space_notes.push_back(c.scenario->deepspeed_batch_replaced);
      // Which wins, once per key (a sweep's first point may equal the config's value: any point's line).
      std::set<std::string> keys;
      for (const auto& d : cands)
        if (d.scenario)
          for (const auto& o : d.scenario->deepspeed_overrides)
            if (keys.insert(o.substr(0, o.find(" wins over "))).second) result.space_notes.push_back(o);
      break;
    }
  // A genuine mistake (a misspelt value) makes every combination invalid: report it as the error it is.
  if (std::none_of(cands.begin(), cands.end(), [](const Candidate& c) { return c.scenario.has_value(); }))
    throw Error(cands.front().invalid);
  EditedPlatforms edited;
  edited.set_link_connections(nccl_link_connections());
  apply_what_ifs(cands, edited, result);
  identify(cands, opt, result);

  PlatformCache platforms;
  const bool derive_accum = opt.constraints.global_batch && !swept(file, "training.grad_accum");
  std::vector<PlanPoint> points;
  std::vector<ToSimulate> work;
  for (auto& c : cands) {
    if (c.index % opt.shard_count != opt.shard_index) continue;
    PointSetup setup;
    points.push_back(screen(c, opt, derive_accum, platforms, setup));
    if (points.back().excluded.empty())
      work.push_back({points.size() - 1, c.index, *c.scenario, std::move(setup)});
  }
  epochs_and_prices(cands, opt, platforms, result);
  std::unique_ptr<Calibration> calib;
  if (!opt.calibration.empty()) calib = std::make_unique<Calibration>(read_calibration(opt.calibration));
  simulate(work, opt, platforms, calib.get(), points);
  result.points = std::move(points);
  if (opt.shard_count > 1) {
    result.provenance["shard"] = fmt::format("{}/{}", opt.shard_index, opt.shard_count);
    return result;  // unranked: merge_plans() ranks the union
  }
  rank_plan(result);
  if (opt.interval.samples > 0) add_plan_intervals(result, work, calib.get(), opt, runs, platforms);
  return result;
}

}  // namespace vitsim::sim
