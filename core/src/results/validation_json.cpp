// The validation's JSON (validation.hpp): one mapping per struct (vitsim/core/base/json_reader.hpp) that
// validation_to_json writes and validation_from_json reads back; read_validated_times (measured_times.hpp)
// takes each point's step time from it for --runs.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <type_traits>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/json_reader.hpp"
#include "vitsim/core/results/json_file.hpp"
#include "vitsim/core/results/measured_times.hpp"
#include "vitsim/core/results/report.hpp"
#include "vitsim/core/results/validation.hpp"

namespace vitsim {
using json = nlohmann::json;

namespace {
using detail::finite, detail::JsonField, detail::JsonIn, detail::MappedAs;

// A metric: its relative error is null where it was not scored.
const auto kMetricFields = [](auto& io, auto& m) {
  io.string("metric", m.metric);
  io.number("predicted", m.predicted, finite());
  io.number("measured", m.measured, finite());
  const bool scored = io.non_null("rel_error", m.scored);
  if (scored) io.number("rel_error", m.rel_error, finite());
  if constexpr (!std::remove_reference_t<decltype(io)>::writing) m.scored = scored;
};

const auto kPointFields = [](auto& io, auto& p) {
  io.string_map("params", p.params);
  io.list("metrics", p.metrics, kMetricFields);
};

const auto kCauseFields = [](auto& io, auto& c) {
  io.string("kind", c.kind);
  io.string("text", c.text);
};

json mape_json(const std::map<std::string, double>& mape) {
  return mape;
}
void read_mape(const JsonField& v, const char* key, std::map<std::string, double>& mape) {
  const JsonField m = v.at(key);
  if (!m.raw().is_object()) m.mismatch("an object of numbers");
  for (auto it = m.raw().begin(); it != m.raw().end(); ++it) mape[it.key()] = m.at(it.key()).number();
}

// The keys above the points are read when present; the points always.
template <class Io, MappedAs<Validation> V>
void validation_fields(Io& io, V& v) {
  if (io.present(true, {"scenario"})) io.string("scenario", v.scenario);
  if (io.present(true, {"scenario_id"})) io.string("scenario_id", v.scenario_id);
  if (io.present(true, {"tolerance"})) io.number("tolerance", v.tolerance, finite());
  if (io.present(true, {"pass"})) io.boolean("pass", v.pass);
  if (io.present(true, {"mape"})) io.custom("mape", v.mape, mape_json, read_mape);
  if (io.present(true, {"noise"})) io.number("noise", v.noise, finite());
  if (io.present(true, {"diagnosis"})) io.list("diagnosis", v.causes, kCauseFields);
  io.list("points", v.points, kPointFields);
  io.check([&](const JsonField& f) {
    if (v.points.empty()) f.at("points").fail("the validation has no points");
  });
}
}  // namespace

std::string validation_to_json(const Validation& v) {
  return json_file_text("vitsim.validation/2", "validation", v,
                        [](auto& io, auto& w) { validation_fields(io, w); });
}

namespace {
Validation read_validation(const JsonField& top) {
  Validation v;
  JsonIn in(top);
  validation_fields(in, v);
  return v;
}
}  // namespace

Validation validation_from_json(const std::string& text, const std::string& path) {
  const json j = detail::parse_json<json>(text, path);
  return read_validation(JsonField(j, path, ""));
}

std::vector<ValidatedTime> read_validated_times(const std::string& path, const std::string& text) {
  const json j = detail::parse_json<json>(text, path);
  const JsonField top(j, path, "");
  const Validation v = read_validation(top);
  const JsonField points = top.at("points");
  std::vector<ValidatedTime> out;
  std::map<std::map<std::string, std::string>, size_t> seen;  // params -> first point
  for (size_t i = 0; i < v.points.size(); ++i) {
    // validate compares each point once (a second measurement of a point is refused there): a point
    // repeated in the file is an edit, and would count as more runs than were measured (issue 39 item 14).
    const auto [first, fresh] = seen.emplace(v.points[i].params, i);
    if (!fresh)
      points[i].at("params").fail(
          fmt::format("the same point as /points/{}: vitsim validate holds each point once; a point "
                      "repeated would count as more runs than were measured",
                      first->second));
    const auto& ms = v.points[i].metrics;
    const auto it =
        std::find_if(ms.begin(), ms.end(), [](const ValidationMetric& m) { return m.metric == "step_time"; });
    if (it == ms.end()) points[i].at("metrics").fail("no step_time metric");
    const JsonField metric = points[i].at("metrics")[static_cast<size_t>(it - ms.begin())];
    ValidatedTime t;
    t.where = points[i].where();
    for (const auto& [key, value, into] : {std::tuple{"predicted", it->predicted, &t.predicted},
                                           std::tuple{"measured", it->measured, &t.measured}}) {
      if (!(value > 0)) metric.at(key).fail("not a positive step time in seconds");
      *into = value;
    }
    out.push_back(t);
  }
  return out;
}

}  // namespace vitsim
