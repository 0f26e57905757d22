// Statistics of repeated timings and the ring all-reduce fit: pure functions, no Torch, no MPI.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>

#include "vitsim/calibrate/calibrate.hpp"
#include "vitsim/core/base/error.hpp"

namespace vitsim::calibrate {

namespace {
// Linear interpolation between order statistics (numpy's default "linear" percentile).
double percentile_sorted(const std::vector<double>& v, double q) {
  const double pos = q * (v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - lo) * (v[hi] - v[lo]);
}
}  // namespace

Spread spread_of(std::vector<double> values) {
  if (values.empty()) throw Error("internal: spread of an empty sample");
  std::sort(values.begin(), values.end());
  Spread s;
  s.count = static_cast<int>(values.size());
  s.min = values.front();
  s.max = values.back();
  s.median = percentile_sorted(values, 0.5);
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / values.size();
  s.p25 = percentile_sorted(values, 0.25);
  s.p75 = percentile_sorted(values, 0.75);
  return s;
}

double algbw(double bytes, double seconds) {
  return seconds > 0 ? bytes / seconds : 0;
}

double busbw_allreduce(double bytes, double seconds, int ranks) {
  return algbw(bytes, seconds) * 2.0 * (ranks - 1) / ranks;
}

RingFit fit_ring_allreduce(const std::vector<AllreduceSample>& samples, int ranks) {
  if (ranks < 2) throw Error(fmt::format("an all-reduce fit needs at least 2 ranks, got {}", ranks));
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& s : samples) {
    if (!(s.seconds > 0) || !(s.bytes > 0))
      throw Error(
          fmt::format("all-reduce sample of {} bytes in {} s: both must be positive", s.bytes, s.seconds));
    lo = std::min(lo, s.bytes);
    hi = std::max(hi, s.bytes);
  }
  if (samples.size() < 2 || lo == hi)
    throw Error("an all-reduce fit needs samples of at least two message sizes");
  // t = c0 + c1 S with c0 = 2(n-1) a, c1 = 2(n-1) / (n B); weighted least squares, w = 1/t^2.
  double sw = 0, sx = 0, sxx = 0, st = 0, sxt = 0;
  for (const auto& s : samples) {
    const double w = 1.0 / (s.seconds * s.seconds);
    sw += w;
    sx += w * s.bytes;
    sxx += w * s.bytes * s.bytes;
    st += w * s.seconds;
    sxt += w * s.bytes * s.seconds;
  }
  double c1 = (sw * sxt - sx * st) / (sw * sxx - sx * sx);
  double c0 = (st - c1 * sx) / sw;
  if (c0 < 0) {
    c0 = 0;
    c1 = sxt / sxx;
  }
  if (!(c1 > 0))
    throw Error(
        "all-reduce times do not grow with the message size: no bandwidth can be fitted (measure larger "
        "sizes)");
  RingFit f;
  f.latency_s = c0 / (2.0 * (ranks - 1));
  f.bandwidth = 2.0 * (ranks - 1) / (ranks * c1);
  for (const auto& s : samples)
    f.max_rel_residual = std::max(f.max_rel_residual,
                                  std::abs(ring_allreduce_time(f, s.bytes, ranks) - s.seconds) / s.seconds);
  return f;
}

double ring_allreduce_time(const RingFit& f, double bytes, int ranks) {
  return 2.0 * (ranks - 1) * f.latency_s + 2.0 * (ranks - 1) / ranks * bytes / f.bandwidth;
}

double parse_cache_size(const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::logic_error&) {
    return 0;
  }
  std::string unit = text.substr(used);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.back()))) unit.pop_back();
  const double scale = unit.empty()  ? 1
                       : unit == "K" ? 1024.0
                       : unit == "M" ? 1024.0 * 1024
                       : unit == "G" ? 1024.0 * 1024 * 1024
                                     : 0;
  return v > 0 ? v * scale : 0;
}

}  // namespace vitsim::calibrate
