#include "vitsim/core/base/suggest.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace vitsim {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_name(const std::string& typed, const std::vector<std::string>& candidates) {
  if (typed.size() <= 2) return {};  // "-x", "pl": too short to guess from
  std::string best;
  size_t best_d = std::string::npos;
  for (const auto& c : candidates) {
    if (c == typed) continue;
    // The edits allowed grow with the part typed after what the two share: "training.batch" is not
    // "training.epochs" (4 edits in 5 characters), "training.micro_bach" is "training.micro_batch".
    size_t common = 0;
    while (common < typed.size() && common < c.size() && typed[common] == c[common]) ++common;
    const size_t allowed = std::max<size_t>(2, (typed.size() - common) / 3);
    const bool prefix = typed.size() >= 3 && c.rfind(typed, 0) == 0;  // "pred" of "predict"
    // The distance is at least the difference of the lengths: a name too long or too short for any edit
    // allowed is not compared at all. Without it a 2e7-character column name cost 87 s of CPU against the
    // key table (issue 39 item 4); with it the work is bounded by the candidates' lengths (a name compared
    // is at most 1.5 times the candidate's length).
    const size_t length_gap = typed.size() > c.size() ? typed.size() - c.size() : c.size() - typed.size();
    if (!prefix && length_gap > allowed) continue;
    const size_t d = prefix ? 1 : edit_distance(typed, c);
    if (d <= allowed && d < best_d) best_d = d, best = c;
  }
  return best;
}

std::string did_you_mean(const std::string& typed, const std::vector<std::string>& candidates) {
  const std::string c = closest_name(typed, candidates);
  return c.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", c);
}

std::string count_noun(long long n, const std::string& noun, const std::string& plural_noun) {
  if (n == 1 || n == -1) return fmt::format("{} {}", n, noun);
  return fmt::format("{} {}", n, plural_noun.empty() ? noun + "s" : plural_noun);
}

std::string signed_percent(double fraction, int decimals) {
  if (!std::isfinite(fraction)) return fraction > 0 ? "+inf%" : fraction < 0 ? "-inf%" : "n/a";
  decimals = std::clamp(decimals, 0, 6);
  const double scale = std::pow(10.0, decimals);
  const double pct = std::round(fraction * 100 * scale) / scale;
  if (pct == 0) return fmt::format("{:.{}f}%", 0.0, decimals);
  return fmt::format("{:+.{}f}%", pct, decimals);
}

}  // namespace vitsim
