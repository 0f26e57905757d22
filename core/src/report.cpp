#include "vitsim/core/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "vitsim/core/error.hpp"
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
  for (auto& p : r.points) {
    p.scaling_efficiency = -1;
    for (const auto& ref : r.points)
      if (ref.gpus == 1 && group_key(ref) == group_key(p) && ref.throughput_img_s > 0) {
        p.scaling_efficiency = p.throughput_img_s / (p.gpus * ref.throughput_img_s);
        break;
      }
  }
}

namespace {
json stats_json(const StepStats& s) { return {{"mean", s.mean}, {"p50", s.p50}, {"p95", s.p95}}; }
json breakdown_json(const Breakdown& b) {
  return {{"data", b.data},       {"h2d", b.h2d},           {"compute_fwd", b.compute_fwd},
          {"compute_bwd", b.compute_bwd}, {"optimizer", b.optimizer}, {"comm_total", b.comm_total},
          {"comm_exposed", b.comm_exposed}};
}
StepStats stats_from(const json& j) { return {j.at("mean").get<double>(), j.at("p50").get<double>(), j.at("p95").get<double>()}; }
Breakdown breakdown_from(const json& j) {
  Breakdown b;
  b.data = j.at("data").get<double>();
  b.h2d = j.at("h2d").get<double>();
  b.compute_fwd = j.at("compute_fwd").get<double>();
  b.compute_bwd = j.at("compute_bwd").get<double>();
  b.optimizer = j.at("optimizer").get<double>();
  b.comm_total = j.at("comm_total").get<double>();
  b.comm_exposed = j.at("comm_exposed").get<double>();
  return b;
}
}  // namespace

std::string report_to_json(const Report& r) {
  json j;
  j["schema"] = "vitsim.report/1";
  j["scenario"] = r.scenario;
  j["source"] = r.source;
  j["provenance"] = r.provenance;
  j["points"] = json::array();
  for (const auto& p : r.points) {
    json pj;
    pj["params"] = p.params;
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

Report report_from_json(const std::string& text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers too large (fuzzer finding)
    throw Error(fmt::format("{}: malformed JSON: {}", origin, e.what()));
  }
  if (!j.is_object() || j.value("schema", json()) != "vitsim.report/1")
    throw Error(fmt::format("{}: not a vitsim report (expected \"schema\": \"vitsim.report/1\")", origin));
  Report r;
  try {
    r.scenario = j.value("scenario", "");
    r.source = j.value("source", "");
    if (j.contains("provenance")) r.provenance = j["provenance"].get<std::map<std::string, std::string>>();
    for (const auto& pj : j.at("points")) {
      ReportPoint p;
      p.params = pj.at("params").get<std::map<std::string, std::string>>();
      p.nodes = pj.at("nodes").get<int>();
      p.gpus = pj.at("gpus").get<int>();
      p.micro_batch = pj.at("micro_batch").get<int>();
      p.grad_accum = pj.at("grad_accum").get<int>();
      p.global_batch = pj.value("global_batch", 0LL);
      p.steps_per_epoch = pj.value("steps_per_epoch", 0LL);
      p.step_time_s = stats_from(pj.at("step_time_s"));
      p.breakdown_s = breakdown_from(pj.at("breakdown_s"));
      p.epoch_time_s = pj.at("epoch_time_s").get<double>();
      p.throughput_img_s = pj.at("throughput_img_s").get<double>();
      p.scaling_efficiency = pj.at("scaling_efficiency").is_null() ? -1 : pj.at("scaling_efficiency").get<double>();
      p.memory_per_gpu_bytes = pj.value("memory_per_gpu_bytes", 0.0);
      if (pj.contains("memory_breakdown_bytes")) {
        const json& m = pj["memory_breakdown_bytes"];
        p.memory.params = m.at("params").get<double>();
        p.memory.grads = m.at("grads").get<double>();
        p.memory.optimizer = m.at("optimizer").get<double>();
        p.memory.activations = m.at("activations").get<double>();
        p.memory.buffers = m.at("buffers").get<double>();
        p.memory.reserved = m.at("reserved").get<double>();
      }
      p.fits_in_memory = pj.value("fits_in_memory", true);
      p.bound = pj.value("bound", "");
      p.extrapolated = pj.value("extrapolated", false);
      p.simulated_steps = pj.value("simulated_steps", 0);
      if (pj.contains("test_accuracy")) p.test_accuracy = pj["test_accuracy"].get<std::vector<double>>();
      if (pj.contains("notes")) p.notes = pj["notes"].get<std::vector<std::string>>();
      for (const auto& rj : pj.value("per_rank", json::array())) {
        RankReport rr;
        rr.rank = rj.at("rank").get<int>();
        rr.host = rj.value("host", "");
        rr.device = rj.value("device", "");
        rr.step_time_s = stats_from(rj.at("step_time_s"));
        rr.breakdown_s = breakdown_from(rj.at("breakdown_s"));
        p.per_rank.push_back(rr);
      }
      r.points.push_back(p);
    }
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: report does not follow vitsim.report/1: {}", origin, e.what()));
  }
  return r;
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
         "throughput_img_s,scaling_efficiency,memory_per_gpu_bytes,fits_in_memory,bound\n";
  for (const auto& p : r.points) {
    for (const auto& k : keys) {
      auto it = p.params.find(k);
      std::string v = it == p.params.end() ? "" : it->second;
      out += (v.find(',') != std::string::npos ? "\"" + v + "\"" : v) + ",";
    }
    const Breakdown& b = p.breakdown_s;
    out += fmt::format("{},{},{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},"
                       "{:.9g},{},{:.0f},{},{}\n",
                       p.nodes, p.gpus, p.micro_batch, p.grad_accum, p.global_batch, p.steps_per_epoch,
                       p.step_time_s.mean, p.step_time_s.p50, p.step_time_s.p95, b.data, b.h2d, b.compute_fwd,
                       b.compute_bwd, b.optimizer, b.comm_total, b.comm_exposed, p.epoch_time_s, p.throughput_img_s,
                       p.scaling_efficiency < 0 ? std::string() : fmt::format("{:.6g}", p.scaling_efficiency),
                       p.memory_per_gpu_bytes, p.fits_in_memory ? "true" : "false", p.bound);
  }
  return out;
}

std::string report_to_table(const Report& r) {
  std::string out = fmt::format("vitsim {} report: {}\n", r.source, r.scenario);
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"nodes", "gpus", "micro", "accum", "step", "compute", "data+h2d", "comm", "exposed", "epoch",
                  "img/s", "eff", "mem/GPU", "fits", "bound"});
  for (const auto& p : r.points) {
    const Breakdown& b = p.breakdown_s;
    rows.push_back({std::to_string(p.nodes), std::to_string(p.gpus), std::to_string(p.micro_batch),
                    std::to_string(p.grad_accum), units::format_time(p.step_time_s.mean),
                    units::format_time(b.compute_fwd + b.compute_bwd), units::format_time(b.data + b.h2d),
                    units::format_time(b.comm_total), units::format_time(b.comm_exposed),
                    units::format_time(p.epoch_time_s), fmt::format("{:.1f}", p.throughput_img_s),
                    p.scaling_efficiency < 0 ? "-" : fmt::format("{:.0f}%", 100 * p.scaling_efficiency),
                    units::format_bytes(p.memory_per_gpu_bytes), p.fits_in_memory ? "yes" : "NO", p.bound});
  }
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
