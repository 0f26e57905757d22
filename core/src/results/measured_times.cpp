// Measured times for `vitsim fit` (core/results/measured_times.hpp; docs/fit.md "Measured times").
#include "vitsim/core/results/measured_times.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>

#include "vitsim/core/base/csv.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/json_reader.hpp"
#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/identity.hpp"
#include "vitsim/core/formats/scenario_inputs.hpp"
#include "vitsim/core/results/report.hpp"

namespace vitsim {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
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
  int header_line = 0;
  size_t start = text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;  // a spreadsheet's UTF-8 byte order mark
  int line_no = 1;
  while (start < text.size()) {
    // A blank line or a comment ('#' first) is skipped; anything else is a record (RFC 4180: a quoted field
    // may hold commas, quotes written twice and line ends).
    const size_t eol = std::min(text.find('\n', start), text.size());
    const std::string_view line = trim(std::string_view(text).substr(start, eol - start));
    if (line.empty() || line.front() == '#') {
      start = eol + 1;
      ++line_no;
      continue;
    }
    const CsvRecord record = read_csv_record(text, start, line_no, path);
    const Origin at{path, record.line};
    const std::vector<std::string>& fields = record.fields;
    if (header.empty()) {
      time_col = read_header(fields, at, m);
      header = fields;
      header_line = record.line;
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
  // The reader serves both commands that take measured times: the message names both.
  require_report_kind(r, "measured", "vitsim fit --measured (and predict --runs)");
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

bool looks_like_json(const std::string& path, const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (text[first] == '{' || text[first] == '[')) return true;
  const std::string ext = std::filesystem::path(path).extension().string();
  return ext == ".json" || ext == ".JSON";
}

MeasuredTimes read_measured_times(const std::string& path, const std::string& text) {
  // An XML file (a scenario or platform given in the wrong place) was read as a CSV header, as JSON was
  // before issue 39 item 19: refused by what it is.
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '<')
    throw Error(
        fmt::format("{}: an XML file (a scenario or platform?), where measured times are a CSV of "
                    "scenario keys and step_time_s or epoch_time_s, or a report of kind measured "
                    "(vitsim train; for --runs also a validation) (docs/fit.md)",
                    path));
  if (!looks_like_json(path, text)) return read_csv(path, text);
  // A file named .json, or starting as JSON does, is read as JSON: `[]` or garbage in it was read as a CSV
  // header before ("column '[]' is neither a scenario key ...", issue 39 item 19).
  const nlohmann::json j = detail::parse_json(text, path);
  if (!j.is_object())
    throw Error(
        fmt::format("{}: JSON holding {}, where vitsim's JSON is an object: measured times are a "
                    "report of kind measured (vitsim train; for --runs also a validation, vitsim "
                    "validate --format json) or a CSV (docs/fit.md)",
                    path, j.is_array() ? "an array" : std::string("a ") + j.type_name()));
  return read_report(path, text);
}

std::string row_message(const MeasuredTime& row, const std::string& what) {
  // The row's values go in as --set values: name them as the CSV's columns.
  for (const auto& [key, value] : row.keys)
    if (what.rfind("--set " + key + ": ", 0) == 0)
      return fmt::format("{}: column '{}': {}", row.where, key, what.substr(8 + key.size()));
  return fmt::format("{}: {}", row.where, what);
}

std::vector<NamedPath> measured_inputs(const ScenarioFile& f, const MeasuredTimes& m) {
  std::vector<NamedPath> out;
  if (m.report) return out;
  std::set<std::string> seen;
  for (const NamedPath& own : scenario_inputs(f)) seen.insert(own.path);
  for (const MeasuredTime& row : m.rows) {
    ScenarioFile g = f;
    try {
      for (const auto& [key, value] : row.keys) apply_override(g, key + "=" + value);
    } catch (const Error&) {
      continue;  // measured_scenarios names the row and the column
    }
    for (const NamedPath& in : scenario_inputs(g))
      if (seen.insert(in.path).second) out.push_back({in.path, fmt::format("{} of {}", in.role, row.where)});
  }
  return out;
}

std::vector<NamedPath> measured_inputs(const ScenarioFile& f, const std::string& path) {
  const std::string text = read_input_file(path, "measured runs (--runs)");
  if (looks_like_json(path, text)) return {};
  return measured_inputs(f, read_measured_times(path, text));
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
        throw Error(row_message(row, e.what()));
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
    // The identity holds no platform: the same configuration on two platform files is two configurations
    // (fit then says they are on two platforms, naming the rows; issue 39 item 20).
    const auto [first, fresh] = seen.emplace(scenario_id(s) + "\n" + s.cluster.platform, row.where);
    if (!fresh && !repeats)
      throw Error(
          fmt::format("{}: the same configuration as {}: give one time per configuration (the mean of "
                      "repeated runs)",
                      row.where, first->second));
    out.push_back(std::move(s));
  }
  return out;
}

void check_time_ratio(const std::string& where, double measured_s, double predicted_s) {
  static_assert(kMinTimeRatio == 1e-12 && kMaxTimeRatio == 1e12, "the message below states the bound");
  const double ratio = measured_s / predicted_s;
  if (!(std::isfinite(ratio) && ratio >= kMinTimeRatio && ratio <= kMaxTimeRatio))
    throw Error(
        fmt::format("{}: measured {:g} s against {:g} s predicted: a ratio of {:g}, outside 1e-12 .. 1e12 "
                    "(not a time of this configuration)",
                    where, measured_s, predicted_s, ratio));
}

bool is_validation(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text[first] != '{' || !json_depth_problem(text).empty()) return false;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  return !j.is_discarded() && j.is_object() && j.contains("schema") && j["schema"].is_string() &&
         j["schema"].get<std::string>().rfind("vitsim.validation/", 0) == 0;
}

}  // namespace vitsim
