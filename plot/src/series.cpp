// A report's points as the curves of a plot (plot.hpp): which kind a report resolves to, the curves and
// their labels, several reports merged into one, and the text pieces of a gnuplot script.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "gnuplot_text.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/plot/plot.hpp"

namespace vitsim::plot {

std::string gp_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += ' ';
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string gp_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) {
    if (l.empty()) continue;
    const std::string q = gp_string(l);
    out += (out.empty() ? "" : "\\n") + q.substr(1, q.size() - 2);
  }
  return "\"" + out + "\"";
}

std::string data_text(const std::vector<std::pair<double, double>>& xy) {
  std::string out;
  for (const auto& [x, y] : xy) out += fmt::format("{:.9g} {:.9g}\n", x, y);
  return out;
}

namespace {

// The parameter merge_reports tags each report's points with.
constexpr const char* kReportKey = "report";

// Parameters that are the x axis of each kind; everything else in `params` tells series apart.
const std::set<std::string>& axis_keys(Kind kind) {
  static const std::set<std::string> scaling{"gpus", "nodes", "cluster.nodes", "cluster.gpus_per_node"};
  static const std::set<std::string> batch{"micro_batch", "training.micro_batch"};
  return kind == Kind::Batch ? batch : scaling;
}

// The scenario-file spelling of a canonical report key: a label shows only the canonical one.
const std::map<std::string, std::string>& spelled_as() {
  static const std::map<std::string, std::string> m{{"cluster.gpus_per_node", "gpus"},
                                                    {"cluster.nodes", "nodes"},
                                                    {"training.micro_batch", "micro_batch"},
                                                    {"training.grad_accum", "grad_accum"}};
  return m;
}

using Params = std::map<std::string, std::string>;

// Points grouped by everything but the x axis, in the order each group first appears.
std::vector<std::pair<Params, std::vector<const ReportPoint*>>> groups_of(const Report& r, Kind kind) {
  std::vector<std::pair<Params, std::vector<const ReportPoint*>>> groups;
  for (const auto& p : r.points) {
    Params key = p.params;
    for (const auto& k : axis_keys(kind)) key.erase(k);
    // The GPU count can sit in cluster.gpus_per_node or cluster.nodes; for a scaling plot only the total
    // matters, and a node order (cluster.hosts) is the same cluster whatever prefix of it is used.
    if (kind == Kind::Scaling) key.erase("cluster.hosts");
    auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == key; });
    if (it == groups.end()) {
      groups.push_back({key, {}});
      it = groups.end() - 1;
    }
    it->second.push_back(&p);
  }
  return groups;
}

// The series' point with the fewest GPUs that has a throughput: the reference of its ideal line and, without
// a 1-GPU point, of its efficiency.
const ReportPoint* smallest_point(const std::vector<const ReportPoint*>& pts) {
  const ReportPoint* base = nullptr;
  for (const ReportPoint* p : pts)
    if (p->throughput_img_s > 0 && (!base || p->gpus < base->gpus)) base = p;
  return base;
}

// A series' epoch time at a linear speed-up from its point with the fewest GPUs (Series::ideal).
std::vector<std::pair<double, double>> ideal_scaling(const std::vector<const ReportPoint*>& pts) {
  const ReportPoint* base = smallest_point(pts);
  std::vector<std::pair<double, double>> out;
  if (!base) return out;
  for (const ReportPoint* p : pts)
    if (p->throughput_img_s > 0)
      out.push_back({static_cast<double>(p->gpus), p->epoch_time_s / 60.0 * p->throughput_img_s * base->gpus /
                                                       (p->gpus * base->throughput_img_s)});
  std::sort(out.begin(), out.end());
  return out;
}

// Series::efficiency and its reference: the report's own efficiencies where the series has them (a 1-GPU
// point), else each point's throughput against the series' smallest point's, the same formula.
void fill_efficiency(Series& s, const std::vector<const ReportPoint*>& pts) {
  for (const ReportPoint* p : pts)
    if (p->scaling_efficiency >= 0)
      s.efficiency.push_back({static_cast<double>(p->gpus), 100.0 * p->scaling_efficiency});
  if (!s.efficiency.empty()) {
    s.efficiency_reference = 1;
    return;
  }
  const ReportPoint* base = smallest_point(pts);
  if (!base) return;
  s.efficiency_reference = base->gpus;
  for (const ReportPoint* p : pts)
    if (p->throughput_img_s > 0)
      s.efficiency.push_back({static_cast<double>(p->gpus),
                              100.0 * p->throughput_img_s * base->gpus / (p->gpus * base->throughput_img_s)});
}

// The point's y value and its interval's ends in the plot's unit (epoch minutes, or ms per sample).
void add_point(Series& s, const ReportPoint& p, Kind kind) {
  const PointInterval& in = p.interval;
  if (kind == Kind::Scaling) {
    const double x = p.gpus;
    s.time.push_back({x, p.epoch_time_s / 60.0});
    if (in.samples > 0) s.band.push_back({x, in.epoch_low_s / 60.0, in.epoch_high_s / 60.0});
  } else if (p.global_batch > 0) {
    const double x = p.micro_batch, per_sample = 1e3 / p.global_batch;
    s.time.push_back({x, p.step_time_s.mean * per_sample});
    if (in.samples > 0) s.band.push_back({x, in.step_low_s * per_sample, in.step_high_s * per_sample});
  }
  if (in.samples > 0 && s.band_label.empty())
    s.band_label = fmt::format("p{:g}-p{:g}", 100 * in.p_low, 100 * in.p_high);
}

// What tells report i apart from the others (merge_reports).
std::string report_tag(const std::vector<Report>& reports, size_t i) {
  auto differs = [&](auto value_of) {
    for (const auto& r : reports)
      if (value_of(r) != value_of(reports.front())) return true;
    return false;
  };
  auto prov = [](const char* key) {
    return [key](const Report& r) {
      auto it = r.provenance.find(key);
      return it == r.provenance.end() ? std::string() : it->second;
    };
  };
  const Report& r = reports[i];
  std::vector<std::string> parts;
  if (differs([](const Report& x) { return x.scenario; })) parts.push_back(r.scenario);
  if (differs(prov("what_ifs"))) {
    const std::string w = prov("what_ifs")(r);
    parts.push_back(w.empty() ? "no what-if" : "what-if " + w);
  }
  if (differs(prov("calibration"))) {
    const std::string c = prov("calibration")(r);
    parts.push_back(c.empty() ? "no calibration" : "calibration " + c);
  }
  std::string tag;
  for (const auto& p : parts) tag += (tag.empty() ? "" : ", ") + p;
  return tag;
}

}  // namespace

std::string param_label(const std::string& key, const std::string* value) {
  if (key == kReportKey) return value ? *value : "";
  if (!value) return key + " as in the scenario";
  const std::string& v = *value;
  if (key == "gpus") return fmt::format("{} GPU{}", v, v == "1" ? "" : "s");
  if (key == "nodes") return fmt::format("{} node{}", v, v == "1" ? "" : "s");
  if (key == "micro_batch") return fmt::format("micro-batch {}", v);
  if (key == "grad_accum") return fmt::format("accumulation {}", v);
  return key + "=" + v;
}

std::vector<std::string> differing_keys(const std::vector<std::map<std::string, std::string>>& sets) {
  std::vector<std::string> differing;
  for (const auto& set : sets)
    for (const auto& [k, v] : set)
      if (std::find(differing.begin(), differing.end(), k) == differing.end())
        for (const auto& other : sets) {
          auto it = other.find(k);
          if (it == other.end() || it->second != v) {
            differing.push_back(k);
            break;
          }
        }
  std::erase_if(differing, [&](const std::string& k) {
    auto it = spelled_as().find(k);
    return it != spelled_as().end() &&
           std::find(differing.begin(), differing.end(), it->second) != differing.end();
  });
  return differing;
}

std::string params_label(const std::map<std::string, std::string>& set,
                         const std::vector<std::string>& keys) {
  std::string label;
  for (const auto& k : keys) {
    auto it = set.find(k);
    auto spelled = spelled_as().find(k);
    const std::string part = param_label(spelled == spelled_as().end() ? k : spelled->second,
                                         it == set.end() ? nullptr : &it->second);
    if (!part.empty()) label += (label.empty() ? "" : ", ") + part;
  }
  return label;
}

Report merge_reports(const std::vector<Report>& reports) {
  if (reports.empty()) throw Error("no report to plot");
  if (reports.size() == 1) return reports.front();
  std::vector<std::string> tags;
  for (size_t i = 0; i < reports.size(); ++i) tags.push_back(report_tag(reports, i));
  // Reports alike in all of that with a point alike too (two runs of one scenario and the same --sets): each
  // file's name as well, so that no two reports share a curve. Reports a --set apart keep their labels:
  // the set key's values tell their curves apart.
  auto share_a_point = [&](size_t i, size_t j) {
    for (const auto& p : reports[i].points)
      for (const auto& q : reports[j].points)
        if (p.params == q.params) return true;
    return false;
  };
  std::vector<bool> alike(reports.size(), false);
  for (size_t i = 0; i < reports.size(); ++i)
    for (size_t j = i + 1; j < reports.size(); ++j)
      if (tags[i] == tags[j] && share_a_point(i, j)) alike[i] = alike[j] = true;
  for (size_t i = 0; i < reports.size(); ++i)
    if (alike[i]) {
      const std::string& origin = reports[i].origin;
      const std::string file = origin.empty() ? fmt::format("report {}", i + 1)
                                              : std::filesystem::path(origin).filename().string();
      tags[i] += (tags[i].empty() ? "" : ", ") + file;
    }
  Report out;
  out.source = reports.front().source;
  std::vector<std::string> names;
  for (size_t i = 0; i < reports.size(); ++i) {
    const Report& r = reports[i];
    if (std::find(names.begin(), names.end(), r.scenario) == names.end()) names.push_back(r.scenario);
    for (auto p : r.points) {
      p.params[kReportKey] = tags[i];
      out.points.push_back(std::move(p));
    }
  }
  for (const auto& n : names) out.scenario += (out.scenario.empty() ? "" : " vs ") + n;
  return out;
}

Kind resolve_kind(const Report& r, Kind requested) {
  std::set<int> gpus, micro;
  for (const auto& p : r.points) {
    gpus.insert(p.gpus);
    micro.insert(p.micro_batch);
  }
  if (r.points.empty()) throw Error(fmt::format("report '{}' has no points to plot", r.scenario));
  if (requested == Kind::Auto) {
    // The swept axis with more distinct values is the x axis; the other one tells curves apart.
    if (micro.size() > 1 && micro.size() > gpus.size()) return Kind::Batch;
    if (gpus.size() > 1) return Kind::Scaling;
    if (micro.size() > 1) return Kind::Batch;
    throw Error(
        fmt::format("report '{}' sweeps neither the GPU count nor the micro-batch: nothing to plot "
                    "(a scaling plot needs several GPU counts, a batch plot several micro-batches)",
                    r.scenario));
  }
  if (requested == Kind::Scaling && gpus.size() < 2)
    throw Error(fmt::format("report '{}' has a single GPU count ({}): a scaling plot needs several",
                            r.scenario, *gpus.begin()));
  if (requested == Kind::Batch && micro.size() < 2)
    throw Error(fmt::format("report '{}' has a single micro-batch ({}): a batch plot needs several",
                            r.scenario, *micro.begin()));
  return requested;
}

std::vector<Series> make_series(const Report& r, Kind kind) {
  if (kind == Kind::Auto) throw Error("make_series: resolve the plot kind first");
  auto groups = groups_of(r, kind);
  std::vector<Params> sets;
  for (const auto& g : groups) sets.push_back(g.first);
  const std::vector<std::string> differing = differing_keys(sets);
  std::vector<Series> out;
  for (const auto& [key, pts] : groups) {
    Series s;
    s.label = params_label(key, differing);
    if (s.label.empty()) s.label = r.scenario.empty() ? "prediction" : r.scenario;
    for (const ReportPoint* p : pts) add_point(s, *p, kind);
    std::sort(s.time.begin(), s.time.end());
    std::sort(s.band.begin(), s.band.end());
    if (kind == Kind::Scaling) {
      fill_efficiency(s, pts);
      std::sort(s.efficiency.begin(), s.efficiency.end());
      s.ideal = ideal_scaling(pts);
    }
    if (!s.time.empty()) out.push_back(std::move(s));
  }
  if (out.empty())
    throw Error(
        fmt::format("report '{}': no point has the figures a {} plot needs", r.scenario, kind_name(kind)));
  return out;
}

}  // namespace vitsim::plot
