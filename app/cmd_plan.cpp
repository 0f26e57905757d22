// `vitsim plan`: its flags are the CLI11 definitions below; their table in docs/plan.md is generated from
// them.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "interval_option.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/deepspeed.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/formats/scenario_inputs.hpp"
#include "vitsim/core/results/measured_times.hpp"
#include "vitsim/core/results/plan.hpp"
#include "vitsim/sim/predict/plan.hpp"
#include "vitsim/sim/predict/plan_search.hpp"

namespace vitsim::app {

namespace {
struct PlanArgs {
  std::string scenario;
  std::vector<std::string> sets, what_ifs, merge;
  std::string format = "table";
  std::string out, deadline, shard, emit_ds_config;
  ScenarioFile file;           // the scenario as planned (--set and --what-if applied), for --emit-ds-config
  OneLinePlan one_line;        // --gpu ... --model ... --dataset ...: platform and scenario made here
  std::string saved_scenario;  // --save-scenario: the scenario saved there before, "" when none
  std::string save_scenario;
  std::shared_ptr<TempDir> made;  // where the one-line form's files live without --save-scenario
  long long global_batch = 0, global_batch_min = 0, global_batch_max = 0;
  double budget = -1;
  bool allow_oom = false, quiet = false, baseline = false;
  int top = 20;
  IntervalFlags interval;
  sim::PlanOptions opt;
};

void parse_shard(const std::string& text, sim::PlanOptions& opt) {
  const auto slash = text.find('/');
  long long i = -1, k = -1;
  try {
    if (slash != std::string::npos) {
      k = units::parse_integer(text.substr(slash + 1), 1, 1 << 30);
      i = units::parse_integer(text.substr(0, slash), 0, k - 1);
    }
  } catch (const Error&) {
    i = -1;
  }
  if (i < 0)
    throw UsageError(fmt::format("--shard '{}': expected I/K with 0 <= I < K, e.g. 0/2", echo(text)));
  opt.shard_index = static_cast<int>(i);
  opt.shard_count = static_cast<int>(k);
}

// The subcommand and its flags, read into a.
CLI::App* add_plan_options(CLI::App& cli, PlanArgs& a) {
  CLI::App* c = cli.add_subcommand(
      "plan", "search a scenario's space under constraints; rank, Pareto front, explanation");
  add_scenario(c, a.scenario, "scenario XML file whose sweeps (and --set lists) open the space");
  c->add_option("--set", a.sets, "override an attribute: KEY=VALUE, or KEY=V1,V2,... to sweep it");
  c->add_option("--what-if", a.what_ifs,
                "a platform edit, KIND:TARGET=VALUE, e.g. link:tesla3-nic:bandwidth=1.25GBps (docs/plan.md "
                "\"What-ifs\"; repeatable)");
  c->add_option("--calibration", a.opt.calibration, "calibration JSON from `vitsim calibrate`");
  c->add_option("--global-batch", a.global_batch, "images per optimizer step, fixed (accumulation follows)")
      ->check(integer(1, 1LL << 40));
  c->add_option("--global-batch-min", a.global_batch_min, "smallest global batch allowed")
      ->check(integer(1, 1LL << 40));
  c->add_option("--global-batch-max", a.global_batch_max, "largest global batch allowed")
      ->check(integer(1, 1LL << 40));
  c->add_option("--deadline", a.deadline, "longest time to train the epochs, with its unit (\"12h\")");
  c->add_option("--budget", a.budget, "largest cost of the epochs ($ with a platform price, else GPU-hours)")
      ->check(number(units::non_negative()));
  c->add_flag("--allow-oom", a.allow_oom, "keep points that do not fit in GPU memory");
  c->add_flag("--baseline", a.baseline, "also plan without the what-ifs and compare the top picks");
  c->add_option("--epochs", a.opt.epochs, "epochs to train (default: the scenario's training.epochs)")
      ->check(integer(1, 1 << 20));
  c->add_option("--objective", a.opt.objective,
                "what ranks first: time, cost, throughput or energy (kWh of the epochs) (default: time)")
      ->check(CLI::IsMember({"time", "cost", "throughput", "energy"}));
  c->add_option("--price-per-kwh", a.opt.price_per_kwh,
                "price of one kWh for the energy cost (instead of the platform's price_per_kwh)")
      ->check(number(units::non_negative()));
  c->add_option("--format", a.format, "output format (default: table)")
      ->check(CLI::IsMember({"table", "json", "csv"}));
  c->add_option("--top", a.top,
                "feasible rows in the table (default: 20; 0 = all; Pareto points always shown)")
      ->check(integer(0, 1 << 30));
  c->add_option("--out", a.out, "write the output to this file instead of stdout");
  c->add_option("--emit-ds-config", a.emit_ds_config,
                "write the top pick as a DeepSpeed config (ds_config.json) DeepSpeed and vitsim read");
  c->add_option("--jobs,-j", a.opt.jobs, "points simulated at once (default: the cores)")
      ->check(integer(1, 4096));
  c->add_option("--shard", a.shard, "simulate only points with index % K == I and write them unranked (I/K)");
  c->add_option("--merge", a.merge,
                "rank the union of shard outputs (vitsim plan --shard ... --format json)");
  c->add_flag("--quiet,-q", a.quiet, "no progress line on stderr");
  add_interval_options(c, a.interval, a.opt.interval, "for the top candidates (--interval-top),");
  c->add_option("--interval-top", a.opt.interval_top,
                "candidates that get an interval, the first by the objective (implies --interval; default 3)")
      ->check(integer(1, 1 << 20));
  // The one-line form: no scenario file, the cluster and the job as flags.
  add_one_line_options(c, a.one_line);
  c->add_option(
      "--save-scenario", a.save_scenario,
      "one-line form: write platform.xml and scenario.xml into this folder, to edit and plan again");
  return c;
}

// --merge: the shards' points ranked as they were planned.
PlanResult merge_shards(const PlanArgs& a, const CLI::App& c) {
  if (!a.scenario.empty()) throw UsageError("plan: give either a scenario or --merge, not both");
  // The shards were planned, priced and constrained by the `vitsim plan --shard` commands; --merge ranks them
  // as they were (a different price or objective would be another plan, with another plan_id).
  for (const char* flag :
       {"--set", "--what-if", "--calibration", "--global-batch", "--global-batch-min", "--emit-ds-config",
        "--gpu", "--save-scenario", "--global-batch-max", "--deadline", "--budget", "--allow-oom",
        "--baseline", "--epochs", "--objective", "--price-per-kwh", "--shard", "--jobs"})
    if (c.count(flag) > 0)
      throw UsageError(
          fmt::format("{} shapes the plan: give it to each `vitsim plan --shard` command; --merge ranks the "
                      "shards as they were planned",
                      flag));
  for (const char* flag : {"--interval", "--samples", "--interval-mode", "--interval-seed", "--p-low",
                           "--p-high", "--interval-top", "--runs"})
    if (c.count(flag) > 0)
      throw UsageError(
          fmt::format("{}: an interval is simulated for the ranked plan's top candidates, which --merge does "
                      "not simulate: "
                      "run `vitsim plan SCENARIO.xml --interval` in one piece",
                      flag));
  std::vector<NamedPath> inputs;
  for (const auto& f : a.merge) inputs.push_back({f, "--merge shard"});
  check_output_paths({{a.out, "--out"}}, inputs);
  std::vector<PlanResult> shards;
  for (const auto& f : a.merge) shards.push_back(plan_from_json(read_input_file(f, "plan shard"), f));
  return merge_plans(shards);
}

// The constraints given on the command line, over the scenario's.
void set_constraints(PlanArgs& a) {
  PlanConstraints& k = a.opt.constraints;
  if (a.global_batch > 0) k.global_batch = a.global_batch;
  if (a.global_batch_min > 0) k.global_batch_min = a.global_batch_min;
  if (a.global_batch_max > 0) k.global_batch_max = a.global_batch_max;
  if (!a.deadline.empty()) {
    try {
      k.deadline_s = units::parse(a.deadline, units::Kind::Time);
    } catch (const Error& e) {
      throw UsageError(fmt::format("--deadline: {}", e.what()));
    }
  }
  if (a.budget >= 0) k.budget = a.budget;
  k.must_fit = !a.allow_oom;
}

// --save-scenario DIR before anything is written (issue 39 items 3, 5): a folder (made when missing), and the
// two files it receives none of the run's inputs (a --deepspeed DIR/scenario.xml was overwritten before the
// run failed) nor another output. A file edited since it was saved is refused by write_one_line_scenario.
void check_save_scenario(const PlanArgs& a) {
  namespace fs = std::filesystem;
  const std::string& dir = a.save_scenario;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw Error(
        fmt::format("--save-scenario '{}' is a file, not a folder: give the folder (made when missing) "
                    "that receives platform.xml and scenario.xml",
                    dir));
  const bool made = fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("--save-scenario '{}': cannot make the folder: {}", dir, ec.message()));
  std::vector<NamedPath> inputs{{a.one_line.deepspeed, "--deepspeed"}, {a.opt.calibration, "--calibration"}};
  for (const auto& run : a.opt.interval.runs) inputs.push_back({run, "--runs"});
  try {
    check_output_paths({{(fs::path(dir) / "platform.xml").string(), "--save-scenario's platform.xml"},
                        {(fs::path(dir) / "scenario.xml").string(), "--save-scenario's scenario.xml"},
                        {a.out, "--out"},
                        {a.emit_ds_config, "--emit-ds-config"}},
                       inputs);
  } catch (const Error&) {
    if (made) fs::remove(dir, ec);  // nothing written: not even the folder
    throw;
  }
}

// The one-line form: the platform and scenario written (into --save-scenario, else a temporary folder) and
// planned as a scenario file would be.
void make_one_line_scenario(PlanArgs& a, const CLI::App& c) {
  const bool one_line = !a.one_line.gpu.empty();
  for (const char* flag :
       {"--nodes", "--gpus-per-node", "--nic", "--model", "--dataset", "--deepspeed", "--save-scenario"})
    if (c.count(flag) > 0 && !one_line)
      throw UsageError(
          fmt::format("{} belongs to the one-line form: give --gpu GPU too, or a scenario", flag));
  if (!one_line) return;
  if (!a.scenario.empty())
    throw UsageError("plan: give either a scenario or the one-line form (--gpu ...), not both");
  std::string dir = a.save_scenario;
  if (dir.empty()) {
    a.made = std::make_shared<TempDir>("vitsim-plan-");
    dir = a.made->path();
  } else {
    check_save_scenario(a);
  }
  a.scenario = write_one_line_scenario(a.one_line, dir, &a.saved_scenario);
}

// The one-line form searches (sim/predict/plan_search.hpp); with --save-scenario its search is saved as the
// scenario's sweeps, so that `vitsim plan DIR/scenario.xml` (with the global batch) plans the same space.
void search_one_line(PlanArgs& a, ScenarioFile& f) {
  const sim::OneLineSearch search = sim::open_one_line_search(
      f, a.one_line.nodes, a.global_batch > 0 ? std::optional<long long>(a.global_batch) : std::nullopt);
  a.opt.space_notes = search.lines;
  if (search.global_batch) a.global_batch = *search.global_batch;
  if (a.save_scenario.empty()) return;
  save_one_line_search(f, a.scenario, a.saved_scenario);
  const std::string again =
      a.scenario + (search.global_batch ? fmt::format(" --global-batch {}", *search.global_batch) : "");
  fmt::print(stderr, "vitsim: wrote {} and {}: edit them and plan again with vitsim plan {}\n", a.scenario,
             (std::filesystem::path(a.scenario).parent_path() / "platform.xml").string(), again);
}

// The scenario's space planned (and, with --baseline, planned again without the what-ifs and compared).
PlanResult plan_scenario(PlanArgs& a) {
  PlanResult result;
  check_runs_took_scenario("plan", a.scenario, a.opt.interval);
  require_scenario("plan", a.scenario, " (or --merge SHARD.json..., or --gpu GPU --model M --dataset D)");
  ScenarioFile f = read_scenario_file(a.scenario);
  if (a.made) name_one_line_origins(f);  // its temporary files are no file of the user's
  apply_sets(f, a.sets);
  add_what_ifs(f, a.what_ifs);
  if (!a.one_line.gpu.empty()) search_one_line(a, f);
  set_constraints(a);
  if (!a.shard.empty()) parse_shard(a.shard, a.opt);
  resolve_interval(a.interval, a.opt.interval);
  if (a.opt.interval.samples > 0 && a.opt.shard_count > 1)
    throw UsageError(
        "plan: --interval simulates the ranked plan's top candidates: not with --shard (nor under "
        "vitsim-plan-mpi); run `vitsim plan SCENARIO.xml --interval` in one piece");
  // Before the sweep, not after it: --out writable, and not one of the inputs.
  std::vector<NamedPath> inputs = scenario_inputs(f);
  inputs.push_back({a.opt.calibration, "--calibration"});
  for (const auto& run : a.opt.interval.runs) {
    inputs.push_back({run, "--runs"});
    for (NamedPath& in : measured_inputs(f, run)) inputs.push_back(std::move(in));  // its rows' files
  }
  check_output_paths({{a.out, "--out"}, {a.emit_ds_config, "--emit-ds-config"}}, inputs);
  if (!a.emit_ds_config.empty() && !a.shard.empty())
    throw UsageError("plan: --emit-ds-config writes the top pick of a ranked plan: not with --shard");
  a.file = f;
  a.opt.progress = !a.quiet;
  if (a.baseline) {
    if (!f.attrs.count("whatif.edits"))
      throw UsageError("plan: --baseline compares against what-ifs: give --what-if EDIT");
    if (a.opt.shard_count > 1) throw UsageError("plan: --baseline does not combine with --shard");
    ScenarioFile base = f;
    base.attrs.erase("whatif.edits");
    sim::PlanOptions base_opt = a.opt;
    base_opt.interval.samples = 0;  // the baseline's top pick is compared by its central value only
    const PlanResult without = sim::plan(base, base_opt);
    result = sim::plan(f, a.opt);
    for (auto& line : compare_plans(without, result)) result.explanation.push_back(std::move(line));
    result.baseline = std::make_shared<PlanResult>(without);  // the JSON carries it for vitsim plot
  } else {
    result = sim::plan(f, a.opt);
  }
  return result;
}

// --emit-ds-config: the top pick's point resolved again from the scenario as planned, its swept and derived
// keys set as --set would, and written as a DeepSpeed config.
void emit_ds_config(const PlanArgs& a, const PlanResult& result) {
  const PlanPoint* top = nullptr;
  for (const auto& p : result.points)
    if (p.rank == 1) top = &p;
  if (!top) return;  // nothing feasible: write_plan says so
  ScenarioFile f = a.file;
  const std::vector<std::string> keys = scenario_keys();
  for (const auto& [key, value] : top->params)
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) apply_override(f, key + "=" + value);
  const std::vector<Scenario> points = expand(f);
  if (points.size() != 1)
    throw Error(
        fmt::format("plan: --emit-ds-config: the top pick resolved to {} points, expected 1", points.size()));
  const Scenario& pick = points.front();
  if (pick.deepspeed_config.empty()) {
    write_file_atomic(a.emit_ds_config, deepspeed_config_for(pick));
    return;
  }
  // The user's config with only the planned keys changed, and what changed said (stderr: the plan's
  // table or JSON stays on stdout).
  const DeepSpeedEdit edit = deepspeed_config_edit(pick);
  write_file_atomic(a.emit_ds_config, edit.text);
  std::fflush(stdout);
  fmt::print(stderr, "vitsim: note: --emit-ds-config {}: {} {}\n", a.emit_ds_config, pick.deepspeed_config,
             edit.changes.empty() ? std::string("as written (the top pick is its own settings)")
                                  : fmt::format("with {} key(s) changed:", edit.changes.size()));
  for (const auto& c : edit.changes) fmt::print(stderr, "  {}\n", c);
  for (const auto& n : edit.notes) fmt::print(stderr, "vitsim: note: --emit-ds-config: {}\n", n);
}

// The result written (stdout or --out); 5 when nothing is feasible.
int write_plan(const PlanArgs& a, const PlanResult& result) {
  std::string text = a.format == "json"  ? plan_to_json(result)
                     : a.format == "csv" ? plan_to_csv(result)
                                         : plan_to_table(result, a.top);
  if (!result.ranked && a.format == "table")
    throw Error(
        "plan: a shard's points are unranked: write them with --format json and rank them with --merge");
  write_output(a.out, text);
  // Written in full (the table's excluded counts, the JSON's reasons), but no answer: say why on stderr
  // and exit 5 so that a script does not take the first row of an empty ranking.
  int status = 0;
  if (result.ranked) {
    const std::string why = infeasible_reason(result);
    if (!why.empty()) {
      std::fflush(stdout);
      fmt::print(stderr, "vitsim: error: plan: {}\n", why);
      status = 5;
    }
  }
  // Points whose simulation failed are excluded as "failed: REASON"; the plan ranks the others (exit 6).
  size_t failed = 0;
  std::string first;
  for (const auto& p : result.points)
    if (p.excluded.rfind("failed: ", 0) == 0 && failed++ == 0)
      first = fmt::format("point {} {}: {}", p.index, nlohmann::json(p.params).dump(), p.excluded.substr(8));
  return some_points_failed("plan", failed, result.points.size(), first, status);
}

}  // namespace

void add_plan(CLI::App& cli, Action& action) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* c = add_plan_options(cli, *a);
  c->callback([&action, a, c] {
    action = [a, c] {
      if (a->merge.empty()) make_one_line_scenario(*a, *c);
      if (c->count("--interval-top") > 0) a->interval.on = true;
      try {
        const PlanResult result = a->merge.empty() ? plan_scenario(*a) : merge_shards(*a, *c);
        if (!a->emit_ds_config.empty()) emit_ds_config(*a, result);
        return write_plan(*a, result);
      } catch (const UsageError& e) {
        if (!a->made) throw;
        throw UsageError(name_one_line_files(e.what(), a->made->path(), a->one_line));
      } catch (const Error& e) {
        if (!a->made) throw;
        throw Error(name_one_line_files(e.what(), a->made->path(), a->one_line));
      }
    };
  });
}

}  // namespace vitsim::app
