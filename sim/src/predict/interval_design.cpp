// The design of an interval and how its samples are evaluated (sim/predict/interval.hpp; docs/predict.md
// "Intervals and sensitivity"): the Latin hypercube, the quantiles, the additive surrogate of the
// one-at-a-time ends, and a platform's text with its figures at a sample's values.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <pugixml.hpp>
#include <sstream>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/platform/figure_range.hpp"
#include "vitsim/core/platform/platform_props.hpp"
#include "vitsim/sim/predict/interval.hpp"

namespace vitsim::sim {

namespace {

// splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014): the
// same stream on every compiler and library, which std::uniform_real_distribution does not promise.
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
};

}  // namespace

std::vector<std::vector<double>> latin_hypercube(int n, int k, std::uint64_t seed) {
  SplitMix64 rng{seed};
  std::vector<std::vector<double>> rows(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(k)));
  std::vector<size_t> strata(static_cast<size_t>(n));
  for (int j = 0; j < k; ++j) {
    std::iota(strata.begin(), strata.end(), size_t{0});
    for (size_t i = strata.size(); i > 1; --i)
      std::swap(strata[i - 1], strata[rng.below(i)]);  // Fisher-Yates
    for (int s = 0; s < n; ++s) rows[s][j] = (static_cast<double>(strata[s]) + rng.unit()) / n;
  }
  return rows;
}

double quantile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double h = (static_cast<double>(v.size()) - 1) * p;
  const size_t lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (h - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

double figure_at(const FigureEnds& e, double u) {
  if (!e.two_sided) return e.low + u * (e.high - e.low);
  return u < 0.5 ? e.low + 2 * u * (e.value - e.low) : e.value + (2 * u - 1) * (e.high - e.value);
}

double additive_surrogate(double centre, const std::vector<FigureEnds>& ends, const std::vector<double>& x) {
  double out = centre;
  for (size_t j = 0; j < ends.size(); ++j) {
    const FigureEnds& e = ends[j];
    // A figure whose value is an end of its range (an occupancy factor): nothing on that side.
    if (x[j] < e.value && e.low < e.value) out += (x[j] - e.value) / (e.low - e.value) * (e.at_low - centre);
    if (x[j] > e.value && e.high > e.value)
      out += (x[j] - e.value) / (e.high - e.value) * (e.at_high - centre);
  }
  return out;
}

std::string platform_with_texts(const std::string& text, const std::string& path,
                                const std::vector<RangedFigure>& figures,
                                const std::vector<std::pair<std::string, std::string>>& texts) {
  pugi::xml_document doc;
  if (!doc.load_buffer(text.data(), text.size(), pugi::parse_full))
    throw Error(fmt::format("{}: cannot be read again to sample its ranges", path));
  std::map<std::string, size_t> index;
  for (size_t j = 0; j < figures.size(); ++j) index[figures[j].key + "=" + figures[j].raw] = j;
  for (pugi::xpath_node hit : doc.select_nodes("//prop")) {
    pugi::xml_node range = hit.node();
    const std::string id = range.attribute("id").value();
    const std::string_view base = range_base_key(id);
    if (base.empty()) continue;
    auto it = index.find(std::string(base) + "=" + range.attribute("value").value());
    if (it == index.end() || texts[it->second].first.empty()) continue;
    pugi::xml_node owner = range.parent();
    pugi::xml_node value = owner.find_child_by_attribute("prop", "id", std::string(base).c_str());
    if (!value) {
      value = owner.insert_child_before("prop", range);
      value.append_attribute("id") = std::string(base).c_str();
      value.append_attribute("value");
    }
    value.attribute("value").set_value(texts[it->second].first.c_str());
    if (!texts[it->second].second.empty())
      range.attribute("value").set_value(texts[it->second].second.c_str());
  }
  std::ostringstream out;
  doc.save(out, "  ");
  return out.str();
}

std::string platform_with_values(const std::string& text, const std::string& path,
                                 const std::vector<RangedFigure>& figures,
                                 const std::vector<double>& values) {
  std::vector<std::pair<std::string, std::string>> texts(figures.size());
  for (size_t j = 0; j < figures.size(); ++j)
    if (!std::isnan(values[j])) texts[j].first = exact_prop_value(*figures[j].prop, values[j]);
  return platform_with_texts(text, path, figures, texts);
}

}  // namespace vitsim::sim
