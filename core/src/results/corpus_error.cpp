// The model's own error on the public corpus (corpus_error.hpp; docs/predict.md "The model's own error").
#include "vitsim/core/results/corpus_error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/results/measured_times.hpp"

namespace vitsim {

const std::string& builtin_corpus_residuals_text();  // generated from data/corpus_residuals.txt

std::vector<std::string> CorpusError::origins() const {
  std::set<std::string> seen;
  for (const CorpusResidual& r : rows) seen.insert(r.origin);
  return {seen.begin(), seen.end()};
}

CorpusError read_corpus_error(const std::string& path, std::string_view text) {
  CorpusError out;
  out.path = path;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    const Origin where{path, lineno};
    if (line.empty() || line.front() == '#') continue;
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    if (f.empty()) continue;
    static const char* const kColumns[] = {"origin", "file", "line", "measured_s", "predicted_s"};
    if (f.size() != 5)
      throw Error(where, fmt::format("{} fields where a row has 5 ({}{}): every row names the origin "
                                     "(the independent source) and the corpus file it comes from",
                                     f.size(), kColumns[0], " file line measured_s predicted_s"));
    CorpusResidual r;
    r.origin = f[0];
    r.file = f[1];
    size_t column = 2;
    try {
      r.line = static_cast<int>(units::parse_integer(f[2], 1, 1 << 30));
      column = 3;
      r.measured_s = units::parse_number(f[3], units::positive());
      column = 4;
      r.predicted_s = units::parse_number(f[4], units::positive());
    } catch (const Error& e) {
      throw Error(where, fmt::format("{}: {}", kColumns[column], e.what()));
    }
    check_time_ratio(where.str(), r.measured_s, r.predicted_s);
    out.rows.push_back(std::move(r));
  }
  if (out.origins().size() < 2)
    throw Error(
        fmt::format("{}: {} origin{} ({} row{}): the model's error across sources needs rows of "
                    "two origins or more",
                    path, out.origins().size(), out.origins().size() == 1 ? "" : "s", out.rows.size(),
                    out.rows.size() == 1 ? "" : "s"));
  return out;
}

const CorpusError& shipped_corpus_error() {
  static const CorpusError table =
      read_corpus_error("data/corpus_residuals.txt (compiled in)", builtin_corpus_residuals_text());
  return table;
}

CorpusBand corpus_band(const CorpusError& e, double p_low, double p_high, std::string_view leave_out) {
  std::map<std::string, int> per_origin;
  for (const CorpusResidual& r : e.rows)
    if (r.origin != leave_out) ++per_origin[r.origin];
  if (per_origin.empty()) throw Error(fmt::format("{}: no row outside origin '{}'", e.path, leave_out));
  std::vector<std::pair<double, double>> weighted;  // log(measured / predicted), weight
  for (const CorpusResidual& r : e.rows)
    if (r.origin != leave_out)
      weighted.emplace_back(std::log(r.measured_s / r.predicted_s),
                            1.0 / (static_cast<double>(per_origin[r.origin]) * per_origin.size()));
  std::sort(weighted.begin(), weighted.end());
  // The smallest residual whose pooled weight at or below it reaches p (1e-12: the sum of weights that
  // make p exactly, 0.1 of five origins' 1/5 each, must not miss it by a rounding).
  auto at = [&](double p) {
    double sum = 0;
    for (const auto& [x, w] : weighted)
      if ((sum += w) >= p - 1e-12) return x;
    return weighted.back().first;
  };
  CorpusBand b;
  b.ratio_low = std::exp(at(p_low));
  b.ratio_high = std::exp(at(p_high));
  b.origins = static_cast<int>(per_origin.size());
  for (const auto& [o, n] : per_origin) b.rows += n;
  return b;
}

CorpusHoldout corpus_holdout(const CorpusError& e, double p_low, double p_high) {
  CorpusHoldout h;
  std::vector<double> widths;
  for (const std::string& o : e.origins()) {
    const CorpusBand b = corpus_band(e, p_low, p_high, o);
    int n = 0, in = 0;
    for (const CorpusResidual& r : e.rows) {
      if (r.origin != o) continue;
      const double ratio = r.measured_s / r.predicted_s;
      ++n;
      in += ratio >= b.ratio_low && ratio <= b.ratio_high;
    }
    h.held += in;
    h.rows += n;
    h.origins_held += in >= (p_high - p_low) * n - 1e-9;
    ++h.origins;
    widths.push_back(b.ratio_high - b.ratio_low);
  }
  std::sort(widths.begin(), widths.end());
  const size_t m = widths.size();
  h.median_width = m % 2 ? widths[m / 2] : (widths[m / 2 - 1] + widths[m / 2]) / 2;
  return h;
}

}  // namespace vitsim
