// The plan's JSON ("vitsim.plan/2"): one mapping per struct (vitsim/core/base/json_reader.hpp) that
// plan_to_json writes and plan_from_json reads back, with the checks of a plan fed back in (plan --merge,
// plot).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/json_reader.hpp"
#include "vitsim/core/formats/identity.hpp"
#include "vitsim/core/results/json_file.hpp"
#include "vitsim/core/results/plan.hpp"

namespace vitsim {
using json = nlohmann::json;

namespace {
using detail::JsonField, detail::JsonIn, detail::JsonOut, detail::MappedAs, detail::non_negative;

constexpr long long kMaxLong = std::numeric_limits<long long>::max();
constexpr long long kMaxInt = std::numeric_limits<int>::max();

const auto kConstraintFields = [](auto& io, auto& c) {
  io.optional_integer("global_batch", c.global_batch, 1, kMaxLong);
  io.optional_integer("global_batch_min", c.global_batch_min, 1, kMaxLong);
  io.optional_integer("global_batch_max", c.global_batch_max, 1, kMaxLong);
  io.optional_number("deadline_s", c.deadline_s, non_negative("the deadline"));
  io.optional_number("budget", c.budget, non_negative("the budget"));
  io.boolean("must_fit", c.must_fit);
};

// A point's gradient reduction in numbers (core/model/comm_regime.hpp), written for points simulated on 2
// ranks or more.
const auto kCommFields = [](auto& io, auto& c) {
  io.string("collective", c.collective);
  io.string("op", c.op);
  io.integer("ranks", c.ranks, 2, kMaxInt);
  io.integer("calls", c.calls, 1, kMaxInt);
  io.number("bucket_bytes", c.bucket_bytes, non_negative("a bucket's bytes"));
  io.number("gradient_bytes", c.gradient_bytes, non_negative("the gradients' bytes"));
  io.number("cap_bytes", c.cap_bytes, non_negative("the bucket cap"));
  io.boolean("cap_moves", c.cap_moves);
  io.string("model", c.model);
  io.integer("ring_steps", c.ring_steps, 0, kMaxInt);
  io.number("step_latency_s", c.step_latency_s, non_negative("a latency"));
  io.string("nccl_choice", c.nccl_choice);
  io.number("payload_fraction", c.payload_fraction, detail::within(1e-3, 1, "a payload fraction"));
  io.number("bottleneck_bw", c.bottleneck_bw, non_negative("a bandwidth"));
  io.string("bottleneck", c.bottleneck);
  io.number("call_latency_s", c.call_latency_s, non_negative("a latency"));
  io.number("call_transfer_s", c.call_transfer_s, non_negative("a time"));
  io.number("latency_s", c.latency_s, non_negative("a latency"));
  io.number("transfer_s", c.transfer_s, non_negative("a time"));
  io.number("share", c.share, detail::within(1e-6, 1, "a share"));
  io.number("recommended_bytes", c.recommended_bytes, non_negative("a bucket's bytes"));
  io.integer("recommended_calls", c.recommended_calls, 0, kMaxInt);
  io.string("nccl_would", c.nccl_would);
  io.boolean("nccl_same", c.nccl_same);
  io.number("nccl_estimate_s", c.nccl_estimate_s, non_negative("a time"));
  io.number("named_estimate_s", c.named_estimate_s, non_negative("a time"));
};

template <class Io, MappedAs<PlanResult> P>
void plan_fields(Io& io, P& plan);
void check_plan_schema(const json& j, const std::string& origin);

// A --baseline plan's baseline (PlanResult::baseline): a whole plan of its own under "baseline", its head
// included; read back with the same checks, and it must span the plan's space without what-ifs.
json baseline_json(const std::shared_ptr<PlanResult>& b) {
  json j = json_file_head("vitsim.plan/2", "plan");
  JsonOut out(j);
  plan_fields(out, *b);
  return j;
}
void read_baseline(const JsonField& parent, const char* key, std::shared_ptr<PlanResult>& b,
                   const PlanResult& plan) {
  const JsonField f = parent.at(key);
  check_plan_schema(f.raw(), fmt::format("{}: {}", plan.origin, f.pointer()));
  b = std::make_shared<PlanResult>();
  b->origin = plan.origin;
  JsonIn in(f);
  plan_fields(in, *b);
  if (b->baseline) f.at("baseline").fail("a baseline holds no baseline of its own");
  if (!b->what_ifs.empty()) f.at("what_ifs").fail("a baseline is the plan without its what-ifs: expected []");
  if (b->space_size != plan.space_size)
    f.at("space_size")
        .fail(fmt::format("{} points, but the plan's space has {}: a baseline spans the same space",
                          b->space_size, plan.space_size));
  if (b->epochs != plan.epochs)
    f.at("epochs").fail(fmt::format("{}, but the plan trains {}", b->epochs, plan.epochs));
}

// The plan's fields above its points (schema, kind and vitsim_version: json_file_head and the check below).
template <class Io, MappedAs<PlanResult> P>
void header_fields(Io& io, P& plan) {
  if constexpr (!Io::writing)
    io.check([&](const JsonField& top) {
      if (top.at("kind").string() != "plan") top.at("kind").fail("expected \"plan\"");
      plan.vitsim_version = top.at("vitsim_version").string();
    });
  io.string("plan_id", plan.plan_id);
  io.check([&](const JsonField& top) {
    if (!is_sha256_id(plan.plan_id))
      top.at("plan_id").fail("expected \"sha256:\" and 64 hex digits (the plan's identity)");
  });
  io.string("scenario", plan.scenario);
  io.string_map("provenance", plan.provenance);
  io.strings("what_ifs", plan.what_ifs);
  io.strings("what_if_changes", plan.what_if_changes);
  io.integer("epochs", plan.epochs, 1, 1 << 20);
  io.number("price_per_gpu_hour", plan.price_per_gpu_hour, non_negative("the price per GPU-hour"));
  if (io.present(plan.price_per_kwh > 0, {"price_per_kwh"}))
    io.number("price_per_kwh", plan.price_per_kwh, non_negative("the price per kWh"));
  io.put("cost_unit", plan.cost_unit());
  io.string("objective", plan.objective);
  io.check([&](const JsonField& top) {
    const std::string& o = plan.objective;
    if (o != "time" && o != "cost" && o != "throughput" && o != "energy")
      top.at("objective")
          .fail(
              fmt::format("unknown objective '{}'; valid: cost, energy, throughput, time", o.substr(0, 40)));
  });
  io.object("constraints", plan.constraints, kConstraintFields);
  if (io.present(plan.batch_reference > 0, {"batch_reference"})) {
    io.integer("batch_reference", plan.batch_reference, 1, kMaxLong);
    io.string("batch_reference_source", plan.batch_reference_source);
  }
  io.integer("space_size", plan.space_size, 1, kMaxInt);
  if (io.present(!plan.space_notes.empty(), {"space_notes"})) io.strings("space_notes", plan.space_notes);
  io.object("shard", plan, [](auto& shard, auto& p) {
    shard.integer("count", p.shard_count, 1, p.space_size);
    shard.integer("index", p.shard_index, 0, p.shard_count - 1);
  });
  io.boolean("ranked", plan.ranked);
  io.strings("explanation", plan.explanation);
  if (io.present(plan.baseline != nullptr, {"baseline"}))
    io.custom("baseline", plan.baseline, baseline_json,
              [&](const JsonField& parent, const char* key, std::shared_ptr<PlanResult>& b) {
                read_baseline(parent, key, b, plan);
              });
}

// A point's own fields; `indices` are those read so far. Its result is written here and read by
// read_result (through the report reader).
template <class Io, MappedAs<PlanPoint> P>
void point_fields(Io& io, P& p, const PlanResult& plan, std::set<int>& indices) {
  io.integer("index", p.index, 0, plan.space_size - 1);
  io.check([&](const JsonField& pj) {
    if (!indices.insert(p.index).second) pj.at("index").fail(fmt::format("point {} appears twice", p.index));
  });
  io.string_map("params", p.params);
  io.boolean("simulated", p.simulated);
  const long long least = p.simulated ? 1 : 0;  // a point excluded before placement has no shape
  io.integer("nodes", p.nodes, least, kMaxInt);
  io.integer("gpus_per_node", p.gpus_per_node, least, kMaxInt);
  io.integer("gpus", p.gpus, least, kMaxInt);
  io.integer("micro_batch", p.micro_batch, least, kMaxInt);
  io.integer("grad_accum", p.grad_accum, least, kMaxInt);
  io.integer("zero", p.zero, 0, 3);
  io.integer("sequence_parallel", p.sequence_parallel, 1, kMaxInt);
  io.string("precision", p.precision);
  io.string("collective", p.collective);
  io.boolean("overlap", p.overlap);
  io.integer("global_batch", p.global_batch, 0, kMaxLong);
  io.number("memory_per_gpu_bytes", p.memory_per_gpu_bytes, non_negative("the memory per GPU"));
  io.number("gpu_memory_bytes", p.gpu_memory_bytes, non_negative("a GPU's memory"));
  io.check([&](const JsonField& pj) {
    if (p.gpu_memory_bytes > kMaxMemoryPerGpuBytes)
      pj.at("gpu_memory_bytes")
          .fail(fmt::format("{:.6g} bytes is beyond any device (limit 16 TiB)", p.gpu_memory_bytes));
  });
  if (io.present(p.largest_known, {"largest_micro_batch"})) {
    if constexpr (!Io::writing) p.largest_known = true;
    io.object("largest_micro_batch", p.largest_micro_batch, [](auto& by_stage, auto& m) {
      by_stage.integer("zero0", m[0], 0, kMaxInt);
      by_stage.integer("zero1", m[1], 0, kMaxInt);
      by_stage.integer("zero2", m[2], 0, kMaxInt);
      by_stage.integer("zero3", m[3], 0, kMaxInt);
    });
  }
  if (io.non_null("excluded", !p.excluded.empty())) io.string("excluded", p.excluded);
  io.check([&](const JsonField& pj) {
    if (!p.simulated && p.excluded.empty())
      pj.at("excluded").fail("a point that was not simulated must say why it was excluded");
  });
  io.number("time_to_train_s", p.time_to_train_s, non_negative("the time to train"));
  io.number("gpu_hours", p.gpu_hours, non_negative("the GPU-hours"));
  io.number("cost", p.cost, non_negative("the cost"));
  if (io.present(p.simulated && p.result.energy.known(), {"energy_kwh", "energy_cost"})) {
    io.number("energy_kwh", p.energy_kwh, non_negative("an energy"));
    io.number("energy_cost", p.energy_cost, non_negative("a cost"));
  }
  io.boolean("pareto", p.pareto);
  io.integer("rank", p.rank, 0, plan.space_size);
  if (io.present(p.simulated && p.comm.known(), {"comm"})) io.object("comm", p.comm, kCommFields);
  io.put("result", p.simulated ? report_point_to_json(p.result) : json(nullptr));
}

// Only vitsim.plan/2 is read; an older plan or another vitsim file gets a message that says what it is.
void check_plan_schema(const json& j, const std::string& origin) {
  const std::string schema =
      j.is_object() && j.contains("schema") && j["schema"].is_string() ? j["schema"].get<std::string>() : "";
  if (schema == "vitsim.plan/1")
    throw Error(fmt::format(
        "{}: a vitsim.plan/1 file (written before plans carried their identity): run `vitsim plan` "
        "again with this vitsim ({})",
        origin, vitsim_version()));
  if (schema != "vitsim.plan/2") {
    const std::string what = detail::what_schema(j);
    if (!what.empty())
      throw Error(fmt::format(
          "{}: this is {}, not a plan: give the JSON of `vitsim plan [--shard I/K] --format json`", origin,
          what));
    throw Error(fmt::format("{}: not a vitsim plan (expected \"schema\": \"vitsim.plan/2\")", origin));
  }
}

// A ranked point's derived figures must be its result's: time to train = epochs x epoch time, and so on.
void check_derived(const JsonField& pj, const PlanPoint& p, const PlanResult& plan) {
  const ReportPoint& r = p.result;
  const double time = r.epoch_time_s * plan.epochs, hours = time * p.gpus / 3600.0;
  const double cost = plan.price_per_gpu_hour > 0 ? hours * plan.price_per_gpu_hour : hours;
  auto same = [](double a, double b) {
    return std::fabs(a - b) <= 1e-6 * std::max(std::fabs(a), std::fabs(b)) + 1e-12;
  };
  if (!same(p.time_to_train_s, time))
    pj.at("time_to_train_s")
        .fail(fmt::format("{:.6g} s disagrees with epochs x epoch time = {} x {:.6g} s", p.time_to_train_s,
                          plan.epochs, r.epoch_time_s));
  if (!same(p.gpu_hours, hours))
    pj.at("gpu_hours")
        .fail(fmt::format("{:.6g} disagrees with time to train x GPUs = {:.6g}", p.gpu_hours, hours));
  if (!same(p.cost, cost))
    pj.at("cost").fail(
        fmt::format("{:.6g} disagrees with the GPU-hours and the price: {:.6g}", p.cost, cost));
  const double kwh = r.energy.known() ? r.energy.epoch_kwh * plan.epochs : 0;
  if (!same(p.energy_kwh, kwh))
    pj.at(pj.has("energy_kwh") ? "energy_kwh" : "result")
        .fail(fmt::format("{:.6g} kWh disagrees with epochs x the result's epoch_kwh = {:.6g} kWh",
                          p.energy_kwh, kwh));
  if (!same(p.energy_cost, kwh * plan.price_per_kwh))
    pj.at("energy_cost")
        .fail(fmt::format("{:.6g} disagrees with energy_kwh x price_per_kwh = {:.6g}", p.energy_cost,
                          kwh * plan.price_per_kwh));
}

// A simulated result answers its point: the memory it needs against the GPU's and its fits flag, and every
// setting both name (params, and the point's own fields for the keys that set them).
void check_against_point(const JsonField& pj, const PlanPoint& p) {
  const ReportPoint& r = p.result;
  // memory_per_gpu_bytes is the largest need over the ranks and gpu_memory_bytes the smallest GPU: within it,
  // every rank fits; beyond it, on GPUs of one kind, one does not.
  if (p.gpu_memory_bytes > 0 && r.fits_in_memory != (p.memory_per_gpu_bytes <= p.gpu_memory_bytes))
    pj.at("result")
        .at("fits_in_memory")
        .fail(fmt::format("{}, but the point needs {:.6g} bytes per GPU on a GPU of {:.6g} bytes",
                          r.fits_in_memory ? "true" : "false", p.memory_per_gpu_bytes, p.gpu_memory_bytes));
  // The largest micro-batch that fits at the point's own ZeRO stage says whether it fits: a stage edited
  // without its memory (or the memory without the stage) contradicts it (issue 39 item 22).
  if (p.largest_known && p.gpu_memory_bytes > 0 &&
      (p.micro_batch <= p.largest_micro_batch[static_cast<size_t>(p.zero)]) !=
          (p.memory_per_gpu_bytes <= p.gpu_memory_bytes))
    pj.at("zero").fail(fmt::format(
        "ZeRO-{} contradicts the point's memory: at this stage micro-batch {} {} (the largest that fits is "
        "{}), but it needs {:.6g} bytes per GPU on a GPU of {:.6g}",
        p.zero, p.micro_batch,
        p.micro_batch <= p.largest_micro_batch[static_cast<size_t>(p.zero)] ? "fits" : "does not fit",
        p.largest_micro_batch[static_cast<size_t>(p.zero)], p.memory_per_gpu_bytes, p.gpu_memory_bytes));
  for (const auto& [key, value] : r.params) {
    auto it = p.params.find(key);
    if (it != p.params.end() && it->second != value)
      pj.at("result").at("params").at(key).fail(fmt::format("\"{}\" disagrees with the point's \"{}\"",
                                                            value.substr(0, 40), it->second.substr(0, 40)));
  }
  // The settings the point's own fields hold, as a sweep or --set writes them (a boolean as any of its
  // spellings: on, yes, 1).
  auto same = [](const std::string& given, const std::string& value) {
    static const std::set<std::string> yes{"true", "on", "yes", "1"}, no{"false", "off", "no", "0"};
    if (value == "true" || value == "false") return (value == "true" ? yes : no).count(given) > 0;
    return given == value;
  };
  const std::pair<const char*, std::string> fields[] = {
      {"parallelism.zero", std::to_string(p.zero)},
      {"parallelism.sequence_parallel", std::to_string(p.sequence_parallel)},
      {"training.precision", p.precision},
      {"parallelism.overlap", p.overlap ? "true" : "false"},
      {"cluster.nodes", std::to_string(p.nodes)},
      {"cluster.gpus_per_node", std::to_string(p.gpus_per_node)},
      {"training.micro_batch", std::to_string(p.micro_batch)},
      {"training.grad_accum", std::to_string(p.grad_accum)}};
  for (const auto& [key, value] : fields) {
    if (auto it = p.params.find(key); it != p.params.end() && !same(it->second, value))
      pj.at("params").at(key).fail(
          fmt::format("\"{}\" disagrees with the point's {} ({})", it->second.substr(0, 40), key, value));
    if (auto it = r.params.find(key); it != r.params.end() && !same(it->second, value))
      pj.at("result").at("params").at(key).fail(
          fmt::format("\"{}\" disagrees with the point's {} ({})", it->second.substr(0, 40), key, value));
  }
}

// A simulated point's result, which must agree with the point's own fields; null for a point not simulated.
void read_result(const JsonField& pj, PlanPoint& p, const PlanResult& plan) {
  if (!p.simulated) {
    if (!pj.at("result").is_null())
      pj.at("result").fail("a point that was not simulated has no result (expected null)");
    return;
  }
  p.result = report_point_from_json(pj.at("result").raw(), plan.origin, pj.pointer() + "/result", false);
  const ReportPoint& r = p.result;
  if (r.nodes != p.nodes || r.gpus != p.gpus || r.micro_batch != p.micro_batch ||
      r.grad_accum != p.grad_accum || r.global_batch != p.global_batch)
    pj.at("result").fail(
        "the simulated result's nodes, gpus, micro_batch, grad_accum or global_batch differ from the "
        "point's");
  if (p.gpus != p.nodes * p.gpus_per_node)
    pj.at("gpus").fail(
        fmt::format("{} GPUs, but nodes x gpus_per_node = {} x {}", p.gpus, p.nodes, p.gpus_per_node));
  if (std::fabs(p.memory_per_gpu_bytes - r.memory_per_gpu_bytes) > 1e-6 * r.memory_per_gpu_bytes + 1)
    pj.at("memory_per_gpu_bytes")
        .fail(fmt::format("{:.6g} bytes disagrees with the simulated result's {:.6g}", p.memory_per_gpu_bytes,
                          r.memory_per_gpu_bytes));
  check_against_point(pj, p);
  if (plan.ranked) check_derived(pj, p, plan);
}

template <class Io, MappedAs<PlanResult> P>
void plan_fields(Io& io, P& plan) {
  header_fields(io, plan);
  std::set<int> indices;
  io.list("points", plan.points, [&](auto& point_io, auto& p) {
    point_fields(point_io, p, plan, indices);
    if constexpr (!std::remove_reference_t<decltype(point_io)>::writing)
      point_io.check([&](const JsonField& pj) { read_result(pj, p, plan); });
  });
  io.check([&](const JsonField& top) {
    if (plan.ranked && plan.shard_count > 1)
      top.at("ranked").fail("a shard's points are unranked; this one says ranked");
  });
}
}  // namespace

std::string plan_to_json(const PlanResult& plan) {
  return json_file_text("vitsim.plan/2", "plan", plan, [](auto& io, auto& v) { plan_fields(io, v); });
}

std::string comm_regime_to_json(const CommRegime& c) {
  return JsonOut::write(c, kCommFields).dump();
}

CommRegime comm_regime_from_json(const std::string& text, const std::string& origin) {
  const json j = detail::parse_json(text, origin);
  CommRegime c;
  JsonIn in(JsonField(j, origin, ""));
  kCommFields(in, c);
  return c;
}

PlanResult plan_from_json(const std::string& text, const std::string& origin) {
  const json j = detail::parse_json(text, origin);
  const JsonField top(j, origin, "");
  check_plan_schema(j, origin);
  PlanResult plan;
  plan.origin = origin;
  JsonIn in(top);
  plan_fields(in, plan);
  return plan;
}

}  // namespace vitsim
