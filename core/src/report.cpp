#include "vitsim/core/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <set>
#include <nlohmann/json.hpp>

#include "vitsim/core/energy.hpp"
#include "vitsim/core/error.hpp"
#include "vitsim/core/identity.hpp"
#include "json_reader.hpp"
#include "vitsim/core/units.hpp"

namespace vitsim {
using json = nlohmann::json;

StepStats step_stats(std::vector<double> v) {
  StepStats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / v.size();
  auto pct = [&](double q) {  // linear interpolation between closest ranks (numpy's default)
    double pos = q * (v.size() - 1);
    size_t i = static_cast<size_t>(pos);
    double f = pos - i;
    return i + 1 < v.size() ? v[i] + f * (v[i + 1] - v[i]) : v[i];
  };
  s.p50 = pct(0.5);
  s.p95 = pct(0.95);
  return s;
}

std::string bound_of(const Breakdown& b) {
  std::pair<double, const char*> terms[] = {{b.compute_fwd + b.compute_bwd, "compute"},
                                            {b.comm_exposed, "exposed_comm"},
                                            {b.data, "data"},
                                            {b.h2d, "h2d"},
                                            {b.optimizer, "optimizer"}};
  auto best = std::max_element(std::begin(terms), std::end(terms),
                               [](auto& a, auto& c) { return a.first < c.first; });
  return best->second;
}

void fill_scaling_efficiency(Report& r) {
  auto group_key = [](const ReportPoint& p) {
    auto params = p.params;
    for (const char* k : {"cluster.nodes", "cluster.gpus_per_node", "nodes", "gpus", "cluster.hosts"}) params.erase(k);
    return params;
  };
  // One pass for the references (the first 1-GPU point of each group), one for the points: a report read
  // back may hold many points, and comparing every pair was quadratic.
  std::vector<std::map<std::string, std::string>> keys;
  keys.reserve(r.points.size());
  for (const auto& p : r.points) keys.push_back(group_key(p));
  std::map<std::map<std::string, std::string>, double> reference;
  for (size_t i = 0; i < r.points.size(); ++i)
    if (r.points[i].gpus == 1 && r.points[i].throughput_img_s > 0) reference.emplace(keys[i], r.points[i].throughput_img_s);
  for (size_t i = 0; i < r.points.size(); ++i) {
    ReportPoint& p = r.points[i];
    auto it = reference.find(keys[i]);
    p.scaling_efficiency = it == reference.end() ? -1 : p.throughput_img_s / (p.gpus * it->second);
  }
}

namespace {
json stats_json(const StepStats& s) { return {{"mean", s.mean}, {"p50", s.p50}, {"p95", s.p95}}; }
json breakdown_json(const Breakdown& b) {
  return {{"data", b.data},       {"h2d", b.h2d},           {"compute_fwd", b.compute_fwd},
          {"compute_bwd", b.compute_bwd}, {"optimizer", b.optimizer}, {"comm_total", b.comm_total},
          {"comm_exposed", b.comm_exposed}};
}

using detail::JsonField;

// A step's statistics: finite, a step takes time, the median is not above the 95th percentile.
StepStats stats_from(const JsonField& f) {
  StepStats s;
  s.mean = f.at("mean").non_negative("a step time");
  s.p50 = f.at("p50").non_negative("a step time");
  s.p95 = f.at("p95").non_negative("a step time");
  if (s.mean <= 0) f.at("mean").fail("a step takes time: the mean step time is 0");
  if (s.p50 > s.p95 * (1 + 1e-9)) f.at("p50").fail(fmt::format("the median step ({:.6g} s) is above the 95th percentile ({:.6g} s)", s.p50, s.p95));
  return s;
}
Breakdown breakdown_from(const JsonField& f) {
  Breakdown b;
  b.data = f.at("data").non_negative("a time");
  b.h2d = f.at("h2d").non_negative("a time");
  b.compute_fwd = f.at("compute_fwd").non_negative("a time");
  b.compute_bwd = f.at("compute_bwd").non_negative("a time");
  b.optimizer = f.at("optimizer").non_negative("a time");
  b.comm_total = f.at("comm_total").non_negative("a time");
  b.comm_exposed = f.at("comm_exposed").non_negative("a time");
  return b;
}

const char* const kBounds[] = {"compute", "exposed_comm", "data", "h2d", "optimizer"};
constexpr long long kMaxCount = 1LL << 31;  // nodes, GPUs, micro-batch, accumulation: an int
}  // namespace

std::string report_scenario_id(const Report& r) {
  std::string ids;
  for (const auto& p : r.points) ids += p.scenario_id + "\n";
  return "sha256:" + sha256_hex(ids);
}

json json_file_head(const std::string& schema, const std::string& kind) {
  return {{"schema", schema}, {"kind", kind}, {"vitsim_version", vitsim_version()}};
}

std::string report_to_json(const Report& r) {
  json j = json_file_head("vitsim.report/2", r.kind());
  j["scenario"] = r.scenario;
  j["scenario_id"] = report_scenario_id(r);
  j["source"] = r.source;
  j["provenance"] = r.provenance;
  j["points"] = json::array();
  for (const auto& p : r.points) {
    json pj;
    pj["params"] = p.params;
    pj["scenario_id"] = p.scenario_id;
    pj["nodes"] = p.nodes;
    pj["gpus"] = p.gpus;
    pj["micro_batch"] = p.micro_batch;
    pj["grad_accum"] = p.grad_accum;
    pj["global_batch"] = p.global_batch;
    pj["steps_per_epoch"] = p.steps_per_epoch;
    pj["step_time_s"] = stats_json(p.step_time_s);
    pj["breakdown_s"] = breakdown_json(p.breakdown_s);
    pj["epoch_time_s"] = p.epoch_time_s;
    pj["throughput_img_s"] = p.throughput_img_s;
    pj["scaling_efficiency"] = p.scaling_efficiency < 0 ? json(nullptr) : json(p.scaling_efficiency);
    pj["memory_per_gpu_bytes"] = p.memory_per_gpu_bytes;
    pj["memory_breakdown_bytes"] = {{"params", p.memory.params},         {"grads", p.memory.grads},
                                    {"optimizer", p.memory.optimizer},   {"activations", p.memory.activations},
                                    {"buffers", p.memory.buffers},       {"reserved", p.memory.reserved}};
    pj["fits_in_memory"] = p.fits_in_memory;
    if (p.model_flops > 0) {  // issue 15: MFU (absent from older reports)
      pj["flops_per_gpu_step"] = {{"model", p.model_flops}, {"recompute", p.recompute_flops}};
      pj["peak_flops_per_gpu"] = p.peak_flops;
      pj["tflops_per_gpu"] = p.tflops_per_gpu();
      pj["mfu"] = p.mfu();
      pj["hfu"] = p.hfu();
    }
    if (p.energy.known()) {  // issue 14: energy per epoch (absent without GPU power figures)
      json e = {{"gpus_busy_w", p.energy.busy_w},
                {"gpus_idle_w", p.energy.idle_w},
                {"busy_fraction", p.energy.busy_fraction},
                {"epoch_kwh", p.energy.epoch_kwh}};
      if (p.energy.price_per_kwh > 0) e["price_per_kwh"] = p.energy.price_per_kwh, e["epoch_cost"] = p.energy.epoch_cost();
      pj["energy"] = e;
    }
    pj["bound"] = p.bound;
    pj["extrapolated"] = p.extrapolated;
    pj["simulated_steps"] = p.simulated_steps;
    pj["test_accuracy"] = p.test_accuracy;
    pj["notes"] = p.notes;
    pj["per_rank"] = json::array();
    for (const auto& rr : p.per_rank)
      pj["per_rank"].push_back({{"rank", rr.rank},
                                {"host", rr.host},
                                {"device", rr.device},
                                {"step_time_s", stats_json(rr.step_time_s)},
                                {"breakdown_s", breakdown_json(rr.breakdown_s)}});
    j["points"].push_back(pj);
  }
  return j.dump(2) + "\n";
}

ReportPoint report_point_from_json(const json& j, const std::string& origin, const std::string& pointer, bool measured,
                                   int schema_version) {
  const JsonField f(j, origin, pointer);
  ReportPoint p;
  // Types and ranges, field by field.
  p.params = f.at("params").string_map();
  if (schema_version >= 2) {
    p.scenario_id = f.at("scenario_id").string();
    bool hex = p.scenario_id.size() == 7 + 64 && p.scenario_id.rfind("sha256:", 0) == 0;
    for (size_t i = 7; hex && i < p.scenario_id.size(); ++i) hex = std::isxdigit(static_cast<unsigned char>(p.scenario_id[i]));
    if (!hex) f.at("scenario_id").fail("expected \"sha256:\" and 64 hex digits (the identity of the scenario point)");
  }
  p.nodes = static_cast<int>(f.at("nodes").integer(1, kMaxCount - 1));
  p.gpus = static_cast<int>(f.at("gpus").integer(1, kMaxCount - 1));
  p.micro_batch = static_cast<int>(f.at("micro_batch").integer(1, kMaxCount - 1));
  p.grad_accum = static_cast<int>(f.at("grad_accum").integer(1, kMaxCount - 1));
  p.global_batch = f.at("global_batch").integer(1, std::numeric_limits<long long>::max());
  p.steps_per_epoch = f.at("steps_per_epoch").integer(1, std::numeric_limits<long long>::max());
  p.step_time_s = stats_from(f.at("step_time_s"));
  p.breakdown_s = breakdown_from(f.at("breakdown_s"));
  p.epoch_time_s = f.at("epoch_time_s").non_negative("the epoch time");
  p.throughput_img_s = f.at("throughput_img_s").non_negative("the throughput");
  p.scaling_efficiency = f.at("scaling_efficiency").is_null() ? -1 : f.at("scaling_efficiency").non_negative("the scaling efficiency");
  p.memory_per_gpu_bytes = f.at("memory_per_gpu_bytes").non_negative("the memory per GPU");
  {
    const JsonField m = f.at("memory_breakdown_bytes");
    p.memory.params = m.at("params").non_negative("a memory figure");
    p.memory.grads = m.at("grads").non_negative("a memory figure");
    p.memory.optimizer = m.at("optimizer").non_negative("a memory figure");
    p.memory.activations = m.at("activations").non_negative("a memory figure");
    p.memory.buffers = m.at("buffers").non_negative("a memory figure");
    p.memory.reserved = m.at("reserved").non_negative("a memory figure");
  }
  p.fits_in_memory = f.at("fits_in_memory").boolean();
  if (j.contains("flops_per_gpu_step")) {  // optional: written since issue 15; mfu/hfu/tflops derive from these
    const JsonField fl = f.at("flops_per_gpu_step");
    p.model_flops = fl.at("model").non_negative("a FLOP count");
    p.recompute_flops = fl.at("recompute").non_negative("a FLOP count");
    p.peak_flops = f.at("peak_flops_per_gpu").non_negative("a peak FLOP/s");
  }
  if (j.contains("energy")) {  // optional: written since issue 14 when the platform states GPU power
    const JsonField e = f.at("energy");
    p.energy.busy_w = e.at("gpus_busy_w").non_negative("a power");
    p.energy.idle_w = e.at("gpus_idle_w").non_negative("a power");
    p.energy.busy_fraction = e.at("busy_fraction").number(0, 1, "a fraction of the epoch");
    p.energy.epoch_kwh = e.at("epoch_kwh").non_negative("an energy");
    if (!(p.energy.busy_w > 0)) e.at("gpus_busy_w").fail("the GPUs' busy power is 0: a report without power figures has no \"energy\"");
    if (p.energy.idle_w > p.energy.busy_w * (1 + 1e-12))
      e.at("gpus_idle_w").fail(fmt::format("{:.6g} W is above the busy power {:.6g} W", p.energy.idle_w, p.energy.busy_w));
    if (e.has("price_per_kwh") || e.has("epoch_cost")) {
      p.energy.price_per_kwh = e.at("price_per_kwh").non_negative("a price per kWh");
      const double cost = e.at("epoch_cost").non_negative("a cost");
      if (std::fabs(cost - p.energy.epoch_cost()) > 1e-6 * std::max(cost, p.energy.epoch_cost()) + 1e-12)
        e.at("epoch_cost").fail(fmt::format("{:.6g} disagrees with epoch_kwh x price_per_kwh = {:.6g} x {:.6g}", cost,
                                            p.energy.epoch_kwh, p.energy.price_per_kwh));
    }
  }
  p.bound = f.at("bound").string();
  p.extrapolated = f.at("extrapolated").boolean();
  p.simulated_steps = static_cast<int>(f.at("simulated_steps").integer(0, kMaxCount - 1));
  {
    const JsonField acc = f.at("test_accuracy");
    for (size_t i = 0, n = acc.size(); i < n; ++i) p.test_accuracy.push_back(acc[i].number(0, 1, "an accuracy"));
  }
  p.notes = f.at("notes").strings();
  {
    const JsonField ranks = f.at("per_rank");
    std::vector<bool> seen(static_cast<size_t>(std::min<long long>(p.gpus, 1 << 20)), false);
    for (size_t i = 0, n = ranks.size(); i < n; ++i) {
      const JsonField rj = ranks[i];
      RankReport rr;
      rr.rank = static_cast<int>(rj.at("rank").integer(0, p.gpus - 1));
      if (static_cast<size_t>(rr.rank) < seen.size()) {
        if (seen[rr.rank]) rj.at("rank").fail(fmt::format("rank {} appears twice", rr.rank));
        seen[rr.rank] = true;
      }
      rr.host = rj.at("host").string();
      rr.device = rj.at("device").string();
      rr.step_time_s = stats_from(rj.at("step_time_s"));
      rr.breakdown_s = breakdown_from(rj.at("breakdown_s"));
      // The point's step is the slowest rank's (or the per-step maximum over ranks): never below a rank's.
      if (rr.step_time_s.mean > p.step_time_s.mean * (1 + 1e-9))
        f.at("step_time_s").at("mean").fail(fmt::format("the point's mean step ({:.6g} s) is below rank {}'s ({:.6g} s)",
                                                        p.step_time_s.mean, rr.rank, rr.step_time_s.mean));
      p.per_rank.push_back(rr);
    }
  }

  // The figures must agree with each other.
  for (const auto& [key, value] : std::initializer_list<std::pair<const char*, long long>>{
           {"nodes", p.nodes}, {"gpus", p.gpus}, {"micro_batch", p.micro_batch}, {"grad_accum", p.grad_accum}}) {
    auto it = p.params.find(key);
    if (it != p.params.end() && it->second != std::to_string(value))
      f.at("params").at(key).fail(fmt::format("\"{}\" disagrees with the point's {} ({})", it->second, key, value));
  }
  if (p.gpus < p.nodes) f.at("gpus").fail(fmt::format("{} GPUs on {} nodes: fewer GPUs than nodes", p.gpus, p.nodes));
  const double replicas_batch = 1.0 * p.micro_batch * p.grad_accum * p.gpus;
  if (p.global_batch > replicas_batch)
    f.at("global_batch").fail(fmt::format("{} is more than micro_batch x grad_accum x gpus = {:.0f}", p.global_batch, replicas_batch));
  const double step = p.step_time_s.mean;
  const double steps = static_cast<double>(p.steps_per_epoch);
  const double expected_epoch = step * steps;
  if (p.extrapolated) {
    if (std::fabs(p.epoch_time_s - expected_epoch) > kEpochTolerance * expected_epoch + kWarmupSteps * step)
      f.at("epoch_time_s").fail(fmt::format(
          "{:.6g} s disagrees with the mean step x steps_per_epoch = {:.6g} s x {} = {:.6g} s (an extrapolated epoch "
          "must be within {:.0f}% + {:.0f} steps of it)",
          p.epoch_time_s, step, p.steps_per_epoch, expected_epoch, 100 * kEpochTolerance, kWarmupSteps));
  } else {
    const double factor = measured ? kMeasuredEpochMaxFactor : kFullEpochMaxFactor;
    if (p.epoch_time_s < step * (1 - 1e-9) || p.epoch_time_s > factor * expected_epoch)
      f.at("epoch_time_s").fail(fmt::format(
          "{:.6g} s is outside [one mean step, {:.0f} x mean step x steps_per_epoch] = [{:.6g} s, {:.6g} s] for an "
          "epoch run in full",
          p.epoch_time_s, factor, step, factor * expected_epoch));
  }
  {
    const double expected = p.global_batch / step;
    const double low = p.steps_per_epoch > 1 ? expected * (steps - 1) / steps * (1 - kThroughputTolerance) : 0;
    if (p.throughput_img_s > expected * (1 + kThroughputTolerance) || p.throughput_img_s < low || p.throughput_img_s <= 0)
      f.at("throughput_img_s").fail(fmt::format(
          "{:.6g} images/s disagrees with global_batch / mean step = {} / {:.6g} s = {:.6g} images/s", p.throughput_img_s,
          p.global_batch, step, expected));
  }
  if (p.energy.known()) {
    const double kwh = energy_kwh(p.energy, p.epoch_time_s);
    if (std::fabs(p.energy.epoch_kwh - kwh) > 1e-6 * std::max(p.energy.epoch_kwh, kwh) + 1e-15)
      f.at("energy").at("epoch_kwh").fail(fmt::format(
          "{:.6g} kWh disagrees with epoch_time_s x (gpus_idle_w + busy_fraction x (gpus_busy_w - gpus_idle_w)) = {:.6g} kWh",
          p.energy.epoch_kwh, kwh));
  }
  if ((p.fits_in_memory || measured) && p.memory_per_gpu_bytes > kMaxMemoryPerGpuBytes)
    f.at("memory_per_gpu_bytes").fail(fmt::format("{:.6g} bytes ({:.1f} TiB) per GPU is beyond any device (limit 16 TiB)",
                                                  p.memory_per_gpu_bytes, p.memory_per_gpu_bytes / std::pow(1024.0, 4)));
  {
    const double sum = p.memory.total();
    if (sum > 0 && std::fabs(sum - p.memory_per_gpu_bytes) > 1e-6 * sum + 1)
      f.at("memory_per_gpu_bytes").fail(fmt::format("{:.6g} bytes disagrees with the sum of memory_breakdown_bytes ({:.6g})",
                                                    p.memory_per_gpu_bytes, sum));
  }
  if (std::find(std::begin(kBounds), std::end(kBounds), p.bound) == std::end(kBounds))
    f.at("bound").fail(fmt::format("unknown bound '{}'; valid: compute, exposed_comm, data, h2d, optimizer",
                                   p.bound.size() > 40 ? p.bound.substr(0, 40) + "..." : p.bound));
  if (p.bound != bound_of(p.breakdown_s))
    f.at("bound").fail(fmt::format("\"{}\", but the breakdown's largest term is {}", p.bound, bound_of(p.breakdown_s)));
  if (measured && p.simulated_steps != 0)
    f.at("simulated_steps").fail(fmt::format("{} simulated steps in a measured report", p.simulated_steps));
  return p;
}

Report report_from_json(const std::string& text, const std::string& origin) {
  const json j = detail::parse_json(text, origin);
  const JsonField top(j, origin, "");
  const std::string schema = top.has("schema") && j["schema"].is_string() ? j["schema"].get<std::string>() : "";
  Report r;
  r.origin = origin;
  if (schema == "vitsim.report/1") {
    r.schema_version = 1;
  } else if (schema != "vitsim.report/2") {
    const std::string what = detail::what_schema(j);
    if (!what.empty() && schema.rfind("vitsim.report/", 0) != 0)
      throw Error(fmt::format("{}: this is {}, not a report (vitsim predict or vitsim train)", origin, what));
    throw Error(fmt::format("{}: not a vitsim report (expected \"schema\": \"vitsim.report/2\" or \"vitsim.report/1\")", origin));
  }
  r.scenario = top.at("scenario").string();
  r.source = top.at("source").string();
  if (r.source != "simulated" && r.source != "measured")
    top.at("source").fail(fmt::format("\"{}\": expected \"simulated\" or \"measured\"", r.source.substr(0, 40)));
  if (r.schema_version >= 2) {
    const std::string kind = top.at("kind").string();
    if (kind != "predicted" && kind != "measured")
      top.at("kind").fail(fmt::format("\"{}\": a report is \"predicted\" or \"measured\"", kind.substr(0, 40)));
    if (kind != r.kind())
      top.at("kind").fail(fmt::format("\"{}\" contradicts \"source\": \"{}\"", kind, r.source));
    r.vitsim_version = top.at("vitsim_version").string();
  }
  if (top.has("provenance")) r.provenance = top.at("provenance").string_map();
  const JsonField points = top.at("points");
  for (size_t i = 0, n = points.size(); i < n; ++i)
    r.points.push_back(report_point_from_json(points[i].raw(), origin, points[i].pointer(), r.source == "measured",
                                              r.schema_version));
  if (r.schema_version >= 2 && top.at("scenario_id").string() != report_scenario_id(r))
    top.at("scenario_id").fail("does not match the points' scenario_id values (the report was edited)");
  // A stored scaling efficiency must be the one its 1-GPU reference gives.
  Report recomputed = r;
  fill_scaling_efficiency(recomputed);
  for (size_t i = 0; i < r.points.size(); ++i) {
    const double stored = r.points[i].scaling_efficiency, again = recomputed.points[i].scaling_efficiency;
    if (stored >= 0 && (again < 0 || std::fabs(stored - again) > 1e-6 * std::max(1.0, again)))
      points[i].at("scaling_efficiency").fail(
          again < 0 ? fmt::format("{:.6g}, but the report has no 1-GPU point with the same settings to compare with", stored)
                    : fmt::format("{:.6g} disagrees with throughput / (gpus x the 1-GPU throughput) = {:.6g}", stored, again));
  }
  return r;
}

void require_report_kind(const Report& r, const std::string& kind, const std::string& purpose) {
  if (r.schema_version < 2)
    throw Error(fmt::format("{}: a vitsim.report/1 file (written before reports carried their kind and scenario "
                            "identity): {} needs a report from this vitsim ({}); run it again",
                            r.origin, purpose, vitsim_version()));
  if (r.kind() == kind) return;
  if (r.kind() == "predicted")
    throw Error(fmt::format("{}: /kind: this report is predicted (simulated by vitsim predict), not measured: {} needs "
                            "a report written by `vitsim train`",
                            r.origin, purpose));
  throw Error(fmt::format("{}: /kind: this report is {}, but {} needs a {} one", r.origin, r.kind(), purpose, kind));
}

std::string report_to_csv(const Report& r) {
  std::vector<std::string> keys;
  // The fixed columns below already carry these; repeating them as parameter columns gave duplicate names.
  const std::vector<std::string> fixed{"nodes", "gpus", "micro_batch", "grad_accum"};
  for (const auto& p : r.points)
    for (const auto& [k, v] : p.params)
      if (std::find(keys.begin(), keys.end(), k) == keys.end() && std::find(fixed.begin(), fixed.end(), k) == fixed.end())
        keys.push_back(k);
  std::string out;
  for (const auto& k : keys) out += k + ",";
  out += "nodes,gpus,micro_batch,grad_accum,global_batch,steps_per_epoch,step_mean_s,step_p50_s,step_p95_s,"
         "data_s,h2d_s,compute_fwd_s,compute_bwd_s,optimizer_s,comm_total_s,comm_exposed_s,epoch_time_s,"
         "throughput_img_s,scaling_efficiency,memory_per_gpu_bytes,fits_in_memory,bound,tflops_per_gpu,mfu,hfu,"
         "energy_kwh_per_epoch,energy_cost_per_epoch\n";
  for (const auto& p : r.points) {
    for (const auto& k : keys) {
      auto it = p.params.find(k);
      std::string v = it == p.params.end() ? "" : it->second;
      out += (v.find(',') != std::string::npos ? "\"" + v + "\"" : v) + ",";
    }
    const Breakdown& b = p.breakdown_s;
    out += fmt::format("{},{},{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},"
                       "{:.9g},{},{:.0f},{},{},{},{},{},{},{}\n",
                       p.nodes, p.gpus, p.micro_batch, p.grad_accum, p.global_batch, p.steps_per_epoch,
                       p.step_time_s.mean, p.step_time_s.p50, p.step_time_s.p95, b.data, b.h2d, b.compute_fwd,
                       b.compute_bwd, b.optimizer, b.comm_total, b.comm_exposed, p.epoch_time_s, p.throughput_img_s,
                       p.scaling_efficiency < 0 ? std::string() : fmt::format("{:.6g}", p.scaling_efficiency),
                       p.memory_per_gpu_bytes, p.fits_in_memory ? "true" : "false", p.bound,
                       p.model_flops > 0 ? fmt::format("{:.6g}", p.tflops_per_gpu()) : std::string(),
                       p.mfu() > 0 ? fmt::format("{:.6g}", p.mfu()) : std::string(),
                       p.hfu() > 0 ? fmt::format("{:.6g}", p.hfu()) : std::string(),
                       p.energy.known() ? fmt::format("{:.9g}", p.energy.epoch_kwh) : std::string(),
                       p.energy.known() && p.energy.price_per_kwh > 0 ? fmt::format("{:.9g}", p.energy.epoch_cost()) : std::string());
  }
  return out;
}

std::string straggler(const ReportPoint& p) {
  std::set<std::string> devices;
  for (const auto& rr : p.per_rank) devices.insert(rr.device);
  if (devices.size() < 2) return {};
  const RankReport* worst = nullptr;
  double worst_busy = -1;
  for (const auto& rr : p.per_rank) {
    const Breakdown& b = rr.breakdown_s;
    const double busy = b.data + b.h2d + b.compute_fwd + b.compute_bwd + b.optimizer;
    if (busy > worst_busy) worst_busy = busy, worst = &rr;
  }
  return fmt::format("rank {} ({}{})", worst->rank, worst->device, worst->host.empty() ? "" : " on " + worst->host);
}

std::string report_to_table(const Report& r) {
  std::string out = fmt::format("vitsim {} report: {}\n", r.source, r.scenario);
  // On heterogeneous platforms the rank that bounds the step gets a column (core straggler()).
  bool stragglers = false, energy = false, energy_cost = false;
  for (const auto& p : r.points) {
    stragglers = stragglers || !straggler(p).empty();
    energy = energy || p.energy.known();
    energy_cost = energy_cost || (p.energy.known() && p.energy.price_per_kwh > 0);
  }
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"nodes", "gpus", "micro", "accum", "step", "compute", "data+h2d", "comm", "exposed", "epoch",
                  "img/s", "eff", "TFLOP/s", "MFU", "mem/GPU", "fits", "bound"});
  for (const auto& p : r.points) {
    const Breakdown& b = p.breakdown_s;
    rows.push_back({std::to_string(p.nodes), std::to_string(p.gpus), std::to_string(p.micro_batch),
                    std::to_string(p.grad_accum), units::format_time(p.step_time_s.mean),
                    units::format_time(b.compute_fwd + b.compute_bwd), units::format_time(b.data + b.h2d),
                    units::format_time(b.comm_total), units::format_time(b.comm_exposed),
                    units::format_time(p.epoch_time_s), fmt::format("{:.1f}", p.throughput_img_s),
                    p.scaling_efficiency < 0 ? "-" : fmt::format("{:.0f}%", 100 * p.scaling_efficiency),
                    p.model_flops > 0 ? fmt::format("{:.1f}", p.tflops_per_gpu()) : "-",
                    p.mfu() > 0 ? fmt::format("{:.1f}%", 100 * p.mfu()) : "-",
                    units::format_bytes(p.memory_per_gpu_bytes), p.fits_in_memory ? "yes" : "NO", p.bound});
    if (energy) rows.back().push_back(p.energy.known() ? fmt::format("{:.3g}", p.energy.epoch_kwh) : "-");
    if (energy_cost) rows.back().push_back(p.energy.known() && p.energy.price_per_kwh > 0 ? fmt::format("{:.2f}", p.energy.epoch_cost()) : "-");
    if (stragglers) rows.back().push_back(straggler(p));
  }
  if (energy) rows[0].push_back("kWh/epoch");
  if (energy_cost) rows[0].push_back("energy cost");
  if (stragglers) rows[0].push_back("straggler");
  std::vector<size_t> w(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) out += fmt::format("{:>{}}{}", row[i], w[i], i + 1 < row.size() ? "  " : "\n");
  }
  std::vector<std::string> notes;
  for (const auto& p : r.points)
    for (const auto& n : p.notes)
      if (std::find(notes.begin(), notes.end(), n) == notes.end()) notes.push_back(n);
  for (const auto& n : notes) out += "note: " + n + "\n";
  return out;
}

}  // namespace vitsim
