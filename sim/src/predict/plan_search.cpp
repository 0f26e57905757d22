// The one-line form's default search (vitsim/sim/predict/plan_search.hpp, docs/plan.md "The one-line form").
#include "vitsim/sim/predict/plan_search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "predict/plan_memory.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/deepspeed.hpp"
#include "vitsim/sim/engine/process_pool.hpp"
#include "vitsim/sim/point/simulate.hpp"

namespace vitsim::sim {
namespace {

// The search's own values come in as --set lists do (merge_deepspeed lets a "--set" origin win over the
// config), named so that a message about them says where they came from.
Origin search_origin(const std::string& key) {
  return Origin{"--set " + key + " (the one-line search)", 0};
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : sep) + x;
  return out;
}

bool pinned(const ScenarioFile& f, const std::string& key) {
  if (auto it = f.attrs.find(key); it != f.attrs.end() && it->second.origin.file.rfind("--set", 0) == 0)
    return true;
  return std::any_of(f.sweeps.begin(), f.sweeps.end(), [&](const Sweep& s) { return s.key == key; });
}

// The values a key takes in `f`: its sweep's, else its attribute's, else `def`.
std::vector<std::string> values_of(const ScenarioFile& f, const std::string& key, const std::string& def) {
  for (const Sweep& s : f.sweeps)
    if (s.key == key) return s.values;
  if (auto it = f.attrs.find(key); it != f.attrs.end()) return {it->second.value};
  return {def};
}

void open_axis(ScenarioFile& f, const std::string& key, const std::vector<long long>& values) {
  std::vector<std::string> text;
  for (long long v : values) text.push_back(std::to_string(v));
  if (text.size() == 1) {
    f.attrs[key] = Attribute{text.front(), search_origin(key)};
    return;
  }
  f.attrs.erase(key);
  f.sweeps.push_back(Sweep{key, text, search_origin(key)});
}

std::string list_text(const std::vector<std::string>& v) {
  if (v.size() <= 6) return join(v);
  return fmt::format("{}, {}, ..., {}", v[0], v[1], v.back());
}

// 1, 2, 4, ... below `most`, then `most`.
std::vector<long long> powers_of_two_and(long long most) {
  std::vector<long long> out;
  for (long long n = 1; n < most; n *= 2) out.push_back(n);
  out.push_back(most);
  return out;
}

// One point of `f` on `nodes` nodes at micro-batch 1 and accumulation 1 (each sweep at its last value), to
// read its GPUs and memory: resolved with the DeepSpeed config, whose batch is then the ranks' (a config's
// train_batch_size would refuse the one image per rank).
Scenario probe(const ScenarioFile& f, long long nodes, const std::string& precision) {
  ScenarioFile g = f;
  for (const Sweep& s : g.sweeps) g.attrs[s.key] = Attribute{s.values.back(), s.origin};
  g.sweeps.clear();
  g.attrs["cluster.nodes"] = Attribute{std::to_string(nodes), search_origin("cluster.nodes")};
  g.attrs["training.micro_batch"] = Attribute{"1", search_origin("training.micro_batch")};
  g.attrs["training.grad_accum"] = Attribute{"1", search_origin("training.grad_accum")};
  if (!precision.empty())
    g.attrs["training.precision"] = Attribute{precision, search_origin("training.precision")};
  ScenarioFile plain = g;
  plain.attrs.erase("deepspeed.config");
  g.global_batch = resolve(plain, plain.attrs, {}).dp_ranks();
  return resolve(g, g.attrs, {});
}

// The GPU's fastest precision by its stated peaks: bf16 where its bf16 figure is above fp32 (bf16 needs no
// loss scale), else fp16 where that is, else fp32.
std::string fastest_precision(const GpuFacts& g, std::string& why) {
  const std::string fp32 = units::format_flops(g.flops_fp32);
  if (g.flops_bf16 > g.flops_fp32) {
    why = fmt::format("the {}'s fastest: {} against {} in fp32", g.model, units::format_flops(g.flops_bf16),
                      fp32);
    return "bf16";
  }
  if (g.flops_fp16 > g.flops_fp32) {
    why = fmt::format("the {}'s fastest: {} against {} in fp32 (no faster bf16 path)", g.model,
                      units::format_flops(g.flops_fp16), fp32);
    return "fp16";
  }
  why = fmt::format("the {} has no faster fp16 or bf16 path ({} in fp32)", g.model, fp32);
  return "fp32";
}

std::optional<DeepSpeedConfig> config_of(const ScenarioFile& f) {
  auto it = f.attrs.find("deepspeed.config");
  if (it == f.attrs.end()) return std::nullopt;
  std::filesystem::path p(it->second.value);
  if (p.is_relative()) p = std::filesystem::path(f.path).parent_path() / p;
  try {
    return read_deepspeed_config(p.string());
  } catch (const Error& e) {
    throw Error(it->second.origin, e.what());
  }
}

}  // namespace

OneLineSearch open_one_line_search(ScenarioFile& f, int max_nodes, std::optional<long long> global_batch) {
  OneLineSearch out;
  const std::optional<DeepSpeedConfig> ds = config_of(f);
  std::vector<std::string> axes, replaced, pins;
  // Nodes.
  long long most_nodes = max_nodes;
  if (pinned(f, "cluster.nodes")) {
    for (const auto& v : values_of(f, "cluster.nodes", "1"))
      most_nodes = std::max<long long>(most_nodes, units::parse_integer(v, 1, 1 << 20));
    axes.push_back(fmt::format("nodes {} (--set)", list_text(values_of(f, "cluster.nodes", "1"))));
  } else {
    const std::vector<long long> nodes = powers_of_two_and(max_nodes);
    open_axis(f, "cluster.nodes", nodes);
    axes.push_back(fmt::format("nodes {}", list_text(values_of(f, "cluster.nodes", "1"))));
  }
  // Precision: the user's (--set, the config's fp16 or bf16 section), else the GPU's fastest.
  std::string precision_line;
  if (pinned(f, "training.precision")) {
    precision_line = fmt::format("precision {} (--set)", list_text(values_of(f, "training.precision", "")));
  } else if (ds && ds->precision) {
    precision_line = fmt::format("precision {} ({})", *ds->precision, ds->path);
  } else {
    const Scenario s = probe(f, 1, "");
    PlatformCache platforms;
    const PlatformFacts& facts = platforms.of(s);
    std::string why;
    const std::string p = facts.gpu.empty() ? "fp32" : fastest_precision(facts.gpu.begin()->second, why);
    f.attrs["training.precision"] = Attribute{p, search_origin("training.precision")};
    precision_line = fmt::format("precision {} ({}{}; --set training.precision=... pins another)", p, why,
                                 ds ? ", the DeepSpeed config enabling neither fp16 nor bf16" : "");
  }
  // ZeRO stages.
  std::vector<long long> stages;
  if (pinned(f, "parallelism.zero")) {
    for (const auto& v : values_of(f, "parallelism.zero", "0"))
      stages.push_back(units::parse_integer(v, 0, 3));
  } else {
    stages = {0, 1, 2, 3};
    if (ds && ds->zero_stage) replaced.push_back(fmt::format("zero_optimization.stage {}", *ds->zero_stage));
    if (ds && ds->zero_stage) pins.push_back(fmt::format("--set parallelism.zero={}", *ds->zero_stage));
  }
  // Micro-batches: powers of two up to the largest that fits at any searched stage on the most nodes.
  if (pinned(f, "training.micro_batch")) {
    axes.push_back(
        fmt::format("micro-batch {} (--set)", list_text(values_of(f, "training.micro_batch", "1"))));
  } else {
    const std::string precision = values_of(f, "training.precision", "").front();  // "": the config's
    const Scenario s = probe(f, most_nodes, precision);
    PlatformCache platforms;
    const PlatformFacts& facts = platforms.of(s);
    const Workload w = build_workload(s.model);
    const RankPlacement place = check_point(s, facts).place;
    long long largest = 0;
    int at_stage = 0;
    for (long long z : stages)
      if (const long long m = largest_fitting_micro_batch(s, static_cast<int>(z), w, facts, place);
          m > largest)
        largest = m, at_stage = static_cast<int>(z);
    std::vector<long long> micro;
    for (long long m = 1; m <= std::max(1LL, largest); m *= 2) micro.push_back(m);
    open_axis(f, "training.micro_batch", micro);
    axes.push_back(
        fmt::format("micro-batch {} (powers of two up to the largest that fits: {} at ZeRO-{} on {} GPUs)",
                    list_text(values_of(f, "training.micro_batch", "1")), largest, at_stage, s.ranks()));
    if (ds && ds->micro_batch) {
      replaced.push_back(fmt::format("train_micro_batch_size_per_gpu {}", *ds->micro_batch));
      pins.push_back(fmt::format("--set training.micro_batch={}", *ds->micro_batch));
    }
  }
  const bool zero_pinned = pinned(f, "parallelism.zero");
  if (!zero_pinned) open_axis(f, "parallelism.zero", stages);
  std::vector<std::string> zero_text;
  for (long long z : stages) zero_text.push_back(std::to_string(z));
  axes.push_back(fmt::format("ZeRO {}{}", join(zero_text), zero_pinned ? " (--set)" : ""));
  std::string axes_text;
  for (const auto& a : axes) axes_text += (axes_text.empty() ? "" : " x ") + a;
  out.lines.push_back(fmt::format("Searched (the one-line form; --set KEY=VALUE pins an axis): {} = {}",
                                  axes_text, count_noun(sweep_points(f), "point")));
  // The settings that are not axes.
  const bool deepspeed = ds.has_value();
  std::string overlap =
      pinned(f, "parallelism.overlap") ? "overlap as --set gives it"
      : ds && ds->overlap_comm
          ? fmt::format("overlap {} ({}'s overlap_comm)", *ds->overlap_comm ? "on" : "off", ds->path)
      : deepspeed ? "overlap as DeepSpeed v0.14.4 runs each stage (off at ZeRO 0-2, on at ZeRO-3)"
                  : "overlap off, as vitsim's trainer runs it";
  out.global_batch = global_batch;
  std::string accum;
  if (pinned(f, "training.grad_accum")) {
    accum = "accumulation as --set gives it";
  } else if (global_batch) {
    accum = fmt::format("accumulation to meet --global-batch {}", *global_batch);
  } else if (ds && ds->train_batch_size) {
    out.global_batch = *ds->train_batch_size;
    accum = fmt::format("accumulation to meet {}'s train_batch_size {} (--global-batch N for another)",
                        ds->path, *ds->train_batch_size);
  } else {
    accum = "accumulation 1 (--global-batch N fixes the images per step; the accumulation then follows)";
  }
  out.lines.push_back(fmt::format("  {}; {}; {}", precision_line, overlap, accum));
  if (!replaced.empty())
    out.lines.push_back(fmt::format("  {}: its {} searched over instead (pin with {})", ds->path,
                                    join(replaced, " and "), join(pins, " ")));
  return out;
}

}  // namespace vitsim::sim
