#include "vitsim/core/results/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "results/report_interval.hpp"
#include "vitsim/core/base/csv.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/model/energy.hpp"

namespace vitsim {

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

double breakdown_sum_s(const Breakdown& b) {
  return b.data + b.h2d + b.compute_fwd + b.compute_bwd + b.optimizer + b.comm_exposed + b.straggler_wait;
}

double gpu_busy_s(const Breakdown& b) {
  return b.compute_fwd + b.compute_bwd + b.optimizer + b.comm_exposed;
}

std::string bound_of(const Breakdown& b) {
  std::pair<double, const char*> terms[] = {{b.compute_fwd + b.compute_bwd, "compute"},
                                            {b.comm_exposed, "exposed_comm"},
                                            {b.data, "data"},
                                            {b.h2d, "h2d"},
                                            {b.optimizer, "optimizer"},
                                            {b.straggler_wait, "straggler_wait"}};
  auto best = std::max_element(std::begin(terms), std::end(terms),
                               [](auto& a, auto& c) { return a.first < c.first; });
  return best->second;
}

void fill_scaling_efficiency(Report& r) {
  auto group_key = [](const ReportPoint& p) {
    auto params = p.params;
    for (const char* k : {"cluster.nodes", "cluster.gpus_per_node", "nodes", "gpus", "cluster.hosts"})
      params.erase(k);
    return params;
  };
  // One pass for the references (the first 1-GPU point of each group), one for the points: a report read
  // back may hold many points, and comparing every pair was quadratic.
  std::vector<std::map<std::string, std::string>> keys;
  keys.reserve(r.points.size());
  for (const auto& p : r.points) keys.push_back(group_key(p));
  std::map<std::map<std::string, std::string>, double> reference;
  for (size_t i = 0; i < r.points.size(); ++i)
    if (r.points[i].gpus == 1 && r.points[i].throughput_img_s > 0)
      reference.emplace(keys[i], r.points[i].throughput_img_s);
  for (size_t i = 0; i < r.points.size(); ++i) {
    ReportPoint& p = r.points[i];
    auto it = reference.find(keys[i]);
    p.scaling_efficiency = it == reference.end() ? -1 : p.throughput_img_s / (p.gpus * it->second);
  }
}

namespace {

std::string csv_params(const std::vector<std::string>& keys,
                       const std::map<std::string, std::string>& params) {
  std::string out;
  for (const auto& k : keys) {
    auto it = params.find(k);
    out += csv_cell(it == params.end() ? "" : it->second) + ",";
  }
  return out;
}

// The whole run's columns (predict's closing summary: the scenario's epochs, or predict --epochs), where a
// point has them; a figure the point lacks (no price, no GPU power figures) is an empty cell.
std::string csv_totals(const ReportPoint& p) {
  if (p.total_epochs <= 0) return ",,,,,";
  return fmt::format(",{},{:.9g},{:.9g},{},{}", p.total_epochs, p.total_time_s(), p.total_gpu_hours(),
                     p.price_per_gpu_hour > 0 ? fmt::format("{:.9g}", p.total_cost()) : std::string(),
                     p.energy.known() ? fmt::format("{:.9g}", p.total_kwh()) : std::string());
}

std::string csv_figures(const ReportPoint& p) {
  const Breakdown& b = p.breakdown_s;
  return fmt::format(
      "{},{},{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},"
      "{:.9g},{:.9g},{},{:.0f},{},{},{},{},{},{},{}",
      p.nodes, p.gpus, p.micro_batch, p.grad_accum, p.global_batch, p.steps_per_epoch, p.step_time_s.mean,
      p.step_time_s.p50, p.step_time_s.p95, b.data, b.h2d, b.compute_fwd, b.compute_bwd, b.optimizer,
      b.comm_total, b.comm_exposed, b.straggler_wait, p.epoch_time_s, p.throughput_img_s,
      p.scaling_efficiency < 0 ? std::string() : fmt::format("{:.6g}", p.scaling_efficiency),
      p.memory_per_gpu_bytes, p.fits_in_memory ? "true" : "false", p.bound,
      p.model_flops > 0 ? fmt::format("{:.6g}", p.tflops_per_gpu()) : std::string(),
      p.mfu() > 0 ? fmt::format("{:.6g}", p.mfu()) : std::string(),
      p.hfu() > 0 ? fmt::format("{:.6g}", p.hfu()) : std::string(),
      p.energy.known() ? fmt::format("{:.9g}", p.energy.epoch_kwh) : std::string(),
      p.energy.known() && p.energy.price_per_kwh > 0 ? fmt::format("{:.9g}", p.energy.epoch_cost())
                                                     : std::string());
}

// A failed point's row: its parameters and the fixed columns its params name, every figure empty, the
// reason in the last column.
std::string csv_failed_row(const std::vector<std::string>& keys, const FailedPoint& f, bool totals,
                           size_t interval_cells) {
  auto param = [&](const char* k) {
    auto it = f.params.find(k);
    return it == f.params.end() ? std::string() : it->second;
  };
  std::string out = csv_params(keys, f.params) + param("nodes") + "," + param("gpus") + "," +
                    param("micro_batch") + "," + param("grad_accum") + std::string(24, ',');
  if (totals) out += ",,,,,";
  out += std::string(interval_cells, ',');
  return out + "," + csv_cell(f.reason) + "\n";
}

}  // namespace

std::string report_to_csv(const Report& r) {
  std::vector<std::string> keys = csv_param_keys(r.points);
  for (const auto& k : csv_param_keys(r.failed))
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  const bool intervals = has_intervals(r);
  const bool totals =
      std::any_of(r.points.begin(), r.points.end(), [](const ReportPoint& p) { return p.total_epochs > 0; });
  const bool failed = !r.failed.empty();
  std::string out;
  for (const auto& k : keys) out += csv_cell(k) + ",";
  out +=
      "nodes,gpus,micro_batch,grad_accum,global_batch,steps_per_epoch,step_mean_s,step_p50_s,step_p95_s,"
      "data_s,h2d_s,compute_fwd_s,compute_bwd_s,optimizer_s,comm_total_s,comm_exposed_s,straggler_wait_s,"
      "epoch_time_s,"
      "throughput_img_s,scaling_efficiency,memory_per_gpu_bytes,fits_in_memory,bound,tflops_per_gpu,mfu,hfu,"
      "energy_kwh_per_epoch,energy_cost_per_epoch";
  if (totals) out += ",epochs,total_time_s,gpu_hours,total_cost,total_kwh";
  const std::string interval_header = intervals ? interval_csv_header() : "";
  if (intervals) out += "," + interval_header;
  out += failed ? ",failed\n" : "\n";
  const size_t interval_cells =
      intervals ? static_cast<size_t>(std::count(interval_header.begin(), interval_header.end(), ',') + 1)
                : 0;
  // The rows in the sweep's order: a failed point where its number puts it, the others in turn.
  auto next_failed = r.failed.begin();
  int number = 1;
  auto flush_failed = [&] {
    while (next_failed != r.failed.end() && next_failed->point <= number) {
      out += csv_failed_row(keys, *next_failed++, totals, interval_cells);
      ++number;
    }
  };
  for (const auto& p : r.points) {
    flush_failed();
    out += csv_params(keys, p.params) + csv_figures(p);
    if (totals) out += csv_totals(p);
    if (intervals) out += "," + interval_csv_cells(p);
    out += failed ? ",\n" : "\n";
    ++number;
  }
  while (next_failed != r.failed.end())  // the failed points after the last one that ran
    out += csv_failed_row(keys, *next_failed++, totals, interval_cells);
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
  return fmt::format("rank {} ({}{})", worst->rank, worst->device,
                     worst->host.empty() ? "" : " on " + worst->host);
}

std::string param_column_head(const std::string& key) {
  return key.substr(key.find('.') + 1);
}

std::string align_columns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w;
  for (const auto& row : rows) {
    w.resize(std::max(w.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i)
      out += fmt::format("{:>{}}{}", row[i], w[i], i + 1 < row.size() ? "  " : "\n");
  return out;
}

double parse_price_per_gpu_hour(const std::map<std::string, std::string>& props, const std::string& path) {
  auto it = props.find("price_per_gpu_hour");
  if (it == props.end()) return 0;
  double v = -1;
  try {
    v = units::parse_number(it->second, units::non_negative());
  } catch (const Error&) {
  }
  if (!(v >= 0))
    throw Error(fmt::format(
        "{}: zone property price_per_gpu_hour '{}' is not a non-negative number (price per GPU-hour)", path,
        it->second));
  return v;
}

namespace {

// The columns of the scenario's swept or overridden keys that the fixed columns do not show.
const std::vector<std::string> kShownByFixedColumns = {"nodes",
                                                       "gpus",
                                                       "micro_batch",
                                                       "grad_accum",
                                                       "cluster.nodes",
                                                       "cluster.gpus_per_node",
                                                       "training.micro_batch",
                                                       "training.grad_accum"};

// The closing summary: each point's whole run (its epochs), in time, GPU-hours, cost and energy.
std::string totals_table(const Report& r) {
  bool any = false, cost = false, energy = false, energy_cost = false;
  for (const auto& p : r.points) {
    if (p.total_epochs <= 0) continue;
    any = true;
    cost = cost || p.price_per_gpu_hour > 0;
    energy = energy || p.energy.known();
    energy_cost = energy_cost || (p.energy.known() && p.energy.price_per_kwh > 0);
  }
  if (!any) return {};
  std::vector<std::vector<std::string>> rows{{"point", "epochs", "time", "GPU-hours"}};
  if (cost) rows[0].push_back("cost $");  // as plan's cost column (PlanResult::cost_unit)
  if (energy) rows[0].push_back("kWh");
  if (energy_cost) rows[0].push_back("energy cost");
  for (size_t i = 0; i < r.points.size(); ++i) {
    const ReportPoint& p = r.points[i];
    if (p.total_epochs <= 0) continue;
    rows.push_back({std::to_string(i + 1), std::to_string(p.total_epochs),
                    units::format_time(p.total_time_s()), fmt::format("{:.4g}", p.total_gpu_hours())});
    if (cost) rows.back().push_back(p.price_per_gpu_hour > 0 ? fmt::format("{:.2f}", p.total_cost()) : "-");
    if (energy) rows.back().push_back(p.energy.known() ? fmt::format("{:.4g}", p.total_kwh()) : "-");
    if (energy_cost)
      rows.back().push_back(p.energy.known() && p.energy.price_per_kwh > 0
                                ? fmt::format("{:.2f}", p.total_kwh() * p.energy.price_per_kwh)
                                : "-");
  }
  std::string out =
      "Whole run, per point (the scenario's training.epochs, or predict --epochs N; time = epoch x epochs, "
      "GPU-hours = time x GPUs):\n" +
      align_columns(rows);
  if (!cost)
    out += "cost: the platform states no price_per_gpu_hour (zone property); GPU-hours stand for the cost\n";
  return out;
}

}  // namespace

std::string report_to_table(const Report& r) {
  std::string out = fmt::format("vitsim {} report: {}\n", r.source, r.scenario);
  // On heterogeneous platforms the rank that bounds the step gets a column (core straggler()).
  bool stragglers = false, energy = false, energy_cost = false;
  const bool intervals = has_intervals(r);
  for (const auto& p : r.points) {
    stragglers = stragglers || !straggler(p).empty();
    energy = energy || p.energy.known();
    energy_cost = energy_cost || (p.energy.known() && p.energy.price_per_kwh > 0);
  }
  // Every swept or overridden key the fixed columns do not show comes first: it tells the rows apart.
  const std::vector<std::string> keys = param_columns(r.points, kShownByFixedColumns, false);
  std::vector<std::vector<std::string>> rows(1);
  for (const auto& k : keys) rows[0].push_back(param_column_head(k));
  // step = compute + optimizer + data+h2d + exposed + straggler wait (breakdown_sum_s); comm is in flight,
  // most of it under the backward, and adds only its exposed part.
  for (const char* h :
       {"nodes", "gpus", "micro", "accum", "step", "compute", "optimizer", "data+h2d", "comm", "exposed",
        "straggler wait", "epoch", "img/s", "eff", "TFLOP/s", "MFU", "mem/GPU", "fits", "bound"})
    rows[0].push_back(h);
  // --interval: its column right after the epoch's (core/src/results/report_interval.hpp).
  const auto epoch_column = std::find(rows[0].begin(), rows[0].end(), "epoch") - rows[0].begin();
  for (const auto& p : r.points) {
    const Breakdown& b = p.breakdown_s;
    std::vector<std::string> row;
    for (const auto& k : keys) row.push_back(p.params.count(k) ? p.params.at(k) : "-");
    for (std::string v :
         {std::to_string(p.nodes), std::to_string(p.gpus), std::to_string(p.micro_batch),
          std::to_string(p.grad_accum), units::format_time(p.step_time_s.mean),
          units::format_time(b.compute_fwd + b.compute_bwd), units::format_time(b.optimizer),
          units::format_time(b.data + b.h2d), units::format_time(b.comm_total),
          units::format_time(b.comm_exposed), units::format_time(b.straggler_wait),
          units::format_time(p.epoch_time_s), fmt::format("{:.1f}", p.throughput_img_s),
          p.scaling_efficiency < 0 ? std::string("-") : fmt::format("{:.0f}%", 100 * p.scaling_efficiency),
          p.model_flops > 0 ? fmt::format("{:.1f}", p.tflops_per_gpu()) : std::string("-"),
          p.mfu() > 0 ? fmt::format("{:.1f}%", 100 * p.mfu()) : std::string("-"),
          units::format_bytes(p.memory_per_gpu_bytes), std::string(p.fits_in_memory ? "yes" : "NO"), p.bound})
      row.push_back(std::move(v));
    if (energy) row.push_back(p.energy.known() ? fmt::format("{:.3g}", p.energy.epoch_kwh) : "-");
    if (energy_cost)
      row.push_back(p.energy.known() && p.energy.price_per_kwh > 0
                        ? fmt::format("{:.2f}", p.energy.epoch_cost())
                        : "-");
    if (stragglers) row.push_back(straggler(p));
    if (intervals) row.insert(row.begin() + epoch_column + 1, interval_cell(p));
    rows.push_back(std::move(row));
  }
  if (intervals) rows[0].insert(rows[0].begin() + epoch_column + 1, interval_column(r));
  if (energy) rows[0].push_back("kWh/epoch");
  if (energy_cost) rows[0].push_back("energy cost");
  if (stragglers) rows[0].push_back("straggler");
  out += align_columns(rows);
  std::vector<std::string> notes;
  for (const auto& p : r.points)
    for (const auto& n : p.notes)
      if (std::find(notes.begin(), notes.end(), n) == notes.end()) notes.push_back(n);
  for (const auto& n : notes) out += "note: " + n + "\n";
  if (intervals) out += sensitivity_text(r);
  for (const auto& f : r.failed)
    out += fmt::format("failed: point {} {}: {}\n", f.point, nlohmann::json(f.params).dump(), f.reason);
  return out + totals_table(r);
}

}  // namespace vitsim
