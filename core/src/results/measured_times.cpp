// Measured times for `vitsim fit` (core/results/measured_times.hpp; docs/fit.md "Measured times").
#include "vitsim/core/results/measured_times.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string_view>

#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/json_reader.hpp"
#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/identity.hpp"
#include "vitsim/core/results/report.hpp"

namespace vitsim {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string> split_fields(std::string_view line) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = line.find(',', start);
    out.emplace_back(trim(line.substr(start, comma == std::string_view::npos ? comma : comma - start)));
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

// The header: scenario keys and one time column; returns the time column's index.
size_t read_header(const std::vector<std::string>& cols, const Origin& at, MeasuredTimes& m) {
  const std::vector<std::string> keys = scenario_keys();
  std::vector<std::string> known = keys;
  known.push_back(measured_metric_column(MeasuredMetric::StepTime));
  known.push_back(measured_metric_column(MeasuredMetric::EpochTime));
  size_t time_col = cols.size();
  for (size_t c = 0; c < cols.size(); ++c) {
    const std::string& name = cols[c];
    if (name.empty()) throw Error(at, fmt::format("column {} has no name", c + 1));
    if (name.find('"') != std::string::npos)
      throw Error(at,
                  fmt::format("column '{}': quotes are not read; write names and values bare", echo(name)));
    for (size_t d = 0; d < c; ++d)
      if (cols[d] == name)
        throw Error(at, fmt::format("column '{}' twice (columns {} and {})", name, d + 1, c + 1));
    const bool step = name == measured_metric_column(MeasuredMetric::StepTime);
    if (step || name == measured_metric_column(MeasuredMetric::EpochTime)) {
      if (time_col != cols.size())
        throw Error(at,
                    fmt::format("two time columns ('{}' and '{}'): keep one; the fit compares one time per "
                                "configuration",
                                cols[time_col], name));
      time_col = c;
      m.metric = step ? MeasuredMetric::StepTime : MeasuredMetric::EpochTime;
      continue;
    }
    if (std::find(keys.begin(), keys.end(), name) == keys.end()) {
      // A key's last part alone ("micro_batch" for training.micro_batch) is the likely slip of a log's
      // header.
      std::string guess = did_you_mean(name, known);
      for (const auto& k : keys)
        if (guess.empty() && k.size() > name.size() &&
            k.compare(k.size() - name.size(), name.size(), name) == 0 && k[k.size() - name.size() - 1] == '.')
          guess = fmt::format(" (did you mean '{}'?)", k);
      throw Error(at,
                  fmt::format("column '{}' is neither a scenario key (as --set takes it){} nor a time column "
                              "(step_time_s, epoch_time_s)",
                              echo(name), guess));
    }
  }
  if (time_col == cols.size())
    throw Error(at,
                "no time column: the header needs step_time_s (seconds per step) or epoch_time_s (seconds "
                "per epoch) beside the scenario keys");
  return time_col;
}

MeasuredTimes read_csv(const std::string& path, const std::string& text) {
  MeasuredTimes m;
  m.path = path;
  std::vector<std::string> header;
  size_t time_col = 0;
  int line_no = 0, header_line = 0;
  size_t start = text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;  // a spreadsheet's UTF-8 byte order mark
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view line = trim(std::string_view(text).substr(start, end - start));
    start = end + 1;
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    const Origin at{path, line_no};
    std::vector<std::string> fields = split_fields(line);
    if (header.empty()) {
      time_col = read_header(fields, at, m);
      header = std::move(fields);
      header_line = line_no;
      continue;
    }
    if (fields.size() != header.size())
      throw Error(at, fmt::format("{} fields, the header (line {}) has {}", fields.size(), header_line,
                                  header.size()));
    MeasuredTime row;
    row.origin = at;
    row.where = at.str();
    for (size_t c = 0; c < fields.size(); ++c) {
      if (fields[c].empty()) throw Error(at, fmt::format("column '{}' is empty", header[c]));
      if (fields[c].find('"') != std::string::npos)
        throw Error(at, fmt::format("column '{}': quotes are not read; write the value bare", header[c]));
      if (c != time_col) row.keys.emplace_back(header[c], fields[c]);
    }
    try {
      row.seconds = units::parse_number(fields[time_col], units::positive());
    } catch (const Error& e) {
      throw Error(at, fmt::format("{}: {} (seconds, a plain number)", header[time_col], e.what()));
    }
    m.rows.push_back(std::move(row));
  }
  if (header.empty())
    throw Error(Origin{path, 0}, "no header: the first line names the columns (docs/fit.md)");
  if (m.rows.empty()) throw Error(Origin{path, 0}, "no measured configurations below the header");
  return m;
}

MeasuredTimes read_report(const std::string& path, const std::string& text) {
  const Report r = report_from_json(text, path);
  require_report_kind(r, "measured", "vitsim fit --measured");
  if (r.points.empty()) throw Error(fmt::format("{}: the measured report has no points", path));
  MeasuredTimes m;
  m.path = path;
  m.report = true;
  m.metric = MeasuredMetric::StepTime;  // the steady state: a measured epoch holds the loader's start
  for (size_t i = 0; i < r.points.size(); ++i) {
    const ReportPoint& p = r.points[i];
    MeasuredTime row;
    row.origin = Origin{path, 0};
    row.where = fmt::format("{}: /points/{}", path, i);
    row.scenario_id = p.scenario_id;
    row.params = p.params;
    row.seconds = p.step_time_s.mean;
    if (!(row.seconds > 0)) throw Error(fmt::format("{}/step_time_s/mean: no measured step time", row.where));
    m.rows.push_back(std::move(row));
  }
  return m;
}

std::string describe(const std::map<std::string, std::string>& params) {
  std::string out;
  for (const auto& [k, v] : params) out += (out.empty() ? "" : " ") + k + "=" + v;
  return out.empty() ? "(no parameters)" : out;
}

}  // namespace

const char* measured_metric_column(MeasuredMetric m) {
  return m == MeasuredMetric::StepTime ? "step_time_s" : "epoch_time_s";
}

MeasuredTimes read_measured_times(const std::string& path) {
  return read_measured_times(path, read_input_file(path, "measured times"));
}

MeasuredTimes read_measured_times(const std::string& path, const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') return read_report(path, text);
  return read_csv(path, text);
}

std::vector<Scenario> measured_scenarios(const ScenarioFile& f, const MeasuredTimes& m, bool repeats) {
  std::vector<Scenario> out;
  std::map<std::string, std::string> seen;  // identity -> where
  std::vector<Scenario> all;                // the file's own points, for a report's identities
  for (const MeasuredTime& row : m.rows) {
    Scenario s;
    if (!m.report) {  // a CSV row
      ScenarioFile g = f;
      std::vector<Scenario> points;
      try {
        for (const auto& [key, value] : row.keys) {
          if (value.find(',') != std::string::npos)
            throw Error(fmt::format("{}: one value per configuration, not a list ('{}')", key, echo(value)));
          apply_override(g, key + "=" + value);
        }
        points = expand(g);
      } catch (const Error& e) {
        // The row's values go in as --set values: name them as the CSV's columns.
        std::string what = e.what();
        for (const auto& [key, value] : row.keys)
          if (what.rfind("--set " + key + ": ", 0) == 0)
            what = fmt::format("column '{}': {}", key, what.substr(8 + key.size()));
        throw Error(row.origin, what);
      }
      if (points.size() != 1) {
        std::string open;
        for (const Sweep& w : g.sweeps) open += (open.empty() ? "" : ", ") + w.key;
        throw Error(row.origin,
                    fmt::format("the row leaves the scenario's sweep over {} open ({} points): add a "
                                "column for it",
                                open, points.size()));
      }
      s = std::move(points.front());
    } else {  // a report's point
      if (all.empty()) all = expand(f);
      auto it = std::find_if(all.begin(), all.end(),
                             [&](const Scenario& p) { return scenario_id(p) == row.scenario_id; });
      if (it == all.end())
        throw Error(
            fmt::format("{}: the measured point {} is no point of the scenario '{}' (its identity "
                        "differs): fit with the scenario file and the --set values it was measured with",
                        row.where, describe(row.params), f.path));
      s = *it;
    }
    const auto [first, fresh] = seen.emplace(scenario_id(s), row.where);
    if (!fresh && !repeats)
      throw Error(
          fmt::format("{}: the same configuration as {}: give one time per configuration (the mean of "
                      "repeated runs)",
                      row.where, first->second));
    out.push_back(std::move(s));
  }
  return out;
}

bool is_validation(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text[first] != '{' || !json_depth_problem(text).empty()) return false;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  return !j.is_discarded() && j.is_object() && j.contains("schema") && j["schema"].is_string() &&
         j["schema"].get<std::string>().rfind("vitsim.validation/", 0) == 0;
}

}  // namespace vitsim
