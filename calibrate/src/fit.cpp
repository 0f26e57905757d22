// Statistics, the ring all-reduce fit and the platform file writer: pure functions, no Torch, no MPI.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "vitsim/calibrate/calibrate.hpp"
#include "vitsim/core/error.hpp"

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

double algbw(double bytes, double seconds) { return seconds > 0 ? bytes / seconds : 0; }

double busbw_allreduce(double bytes, double seconds, int ranks) {
  return algbw(bytes, seconds) * 2.0 * (ranks - 1) / ranks;
}

RingFit fit_ring_allreduce(const std::vector<AllreduceSample>& samples, int ranks) {
  if (ranks < 2) throw Error(fmt::format("an all-reduce fit needs at least 2 ranks, got {}", ranks));
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& s : samples) {
    if (!(s.seconds > 0) || !(s.bytes > 0))
      throw Error(fmt::format("all-reduce sample of {} bytes in {} s: both must be positive", s.bytes, s.seconds));
    lo = std::min(lo, s.bytes);
    hi = std::max(hi, s.bytes);
  }
  if (samples.size() < 2 || lo == hi) throw Error("an all-reduce fit needs samples of at least two message sizes");
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
    throw Error("all-reduce times do not grow with the message size: no bandwidth can be fitted (measure larger sizes)");
  RingFit f;
  f.latency_s = c0 / (2.0 * (ranks - 1));
  f.bandwidth = 2.0 * (ranks - 1) / (ranks * c1);
  for (const auto& s : samples)
    f.max_rel_residual = std::max(f.max_rel_residual, std::abs(ring_allreduce_time(f, s.bytes, ranks) - s.seconds) / s.seconds);
  return f;
}

double ring_allreduce_time(const RingFit& f, double bytes, int ranks) {
  return 2.0 * (ranks - 1) * f.latency_s + 2.0 * (ranks - 1) / ranks * bytes / f.bandwidth;
}

namespace {
// Quantities with their units, as SimGrid and core/units read them; 6 significant digits.
std::string bw(double v) { return fmt::format("{:.6g}MBps", v / 1e6); }
std::string lat(double v) { return fmt::format("{:.6g}us", v * 1e6); }
std::string flops(double v) { return fmt::format("{:.6g}Gf", v / 1e9); }
std::string bytes(double v) { return fmt::format("{:.6g}MiB", v / (1024.0 * 1024.0)); }
std::string prop(const std::string& k, const std::string& v) {
  return fmt::format("      <prop id=\"{}\" value=\"{}\"/>\n", k, v);
}
}  // namespace

std::string platform_xml(const PlatformText& p) {
  if (p.nodes.empty()) throw Error("platform: no node to write");
  struct Group {
    std::string id;
    const PlatformNode* node;
    std::vector<const PlatformDevice*> devices;
  };
  std::vector<Group> groups;
  for (const auto& n : p.nodes) {
    if (n.devices.empty()) throw Error(fmt::format("platform: node {} has no device", n.id));
    if (!(n.link_bw > 0) || !(n.h2d_bw > 0))
      throw Error(fmt::format("platform: node {} needs a positive link and host-to-device bandwidth", n.id));
    size_t first_group = groups.size();
    for (const auto& d : n.devices) {
      if (groups.size() == first_group || groups.back().devices.front()->gpu_model != d.gpu_model)
        groups.push_back({"", &n, {}});
      groups.back().devices.push_back(&d);
    }
    for (size_t g = first_group; g < groups.size(); ++g)
      groups[g].id = groups.size() - first_group == 1 ? n.id : fmt::format("{}-{}", n.id, g - first_group);
  }
  std::string out = "<?xml version=\"1.0\"?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n<!--\n";
  out += fmt::format("  {}: written by `vitsim calibrate --emit-platform` from measurements on these machines.\n\n", p.name);
  for (const auto& g : groups) {
    out += fmt::format("     +---- {} ({} device{} of type {}) ----+\n     |  ", g.id, g.devices.size(),
                       g.devices.size() == 1 ? "" : "s", g.devices.front()->gpu_model);
    for (size_t i = 0; i < g.devices.size(); ++i) out += fmt::format("{}{}-dev{}", i ? " <=> " : "", g.id, i);
    out += "\n     +------------------------------------------+\n";
  }
  if (groups.size() > 1) out += "     (clusters joined pairwise through their NIC links)\n";
  out += "\n" + p.provenance;
  if (!p.provenance.empty() && p.provenance.back() != '\n') out += "\n";
  out += "-->\n<platform version=\"4.1\">\n";
  out += fmt::format("  <zone id=\"{}\" routing=\"Full\">\n", p.name);
  for (const auto& g : groups) {
    const PlatformNode& n = *g.node;
    const PlatformDevice& d = *g.devices.front();
    // The ring edge between two devices crosses both private links (latency a/2 each) and the backbone
    // (no latency; FATPIPE at the fitted bandwidth), so a route's latency is the fitted a.
    out += fmt::format(
        "    <cluster id=\"{}\" prefix=\"{}-dev\" suffix=\"\" radical=\"0-{}\" speed=\"{}\" bw=\"{}\" lat=\"{}\" "
        "sharing_policy=\"SPLITDUPLEX\" bb_bw=\"{}\" bb_lat=\"0us\" bb_sharing_policy=\"FATPIPE\" loopback_bw=\"{}\" "
        "loopback_lat=\"0us\" router_id=\"{}-router\">\n",
        g.id, g.id, g.devices.size() - 1, flops(d.flops), bw(n.link_bw), lat(n.link_lat / 2), bw(n.link_bw),
        bw(n.h2d_bw), g.id);
    out += prop("gpu_model", d.gpu_model);
    out += prop("gpu_flops_fp32", flops(d.flops));
    out += prop("gpu_mem_bw", bw(d.mem_bw));
    out += prop("gpu_mem", bytes(d.mem_bytes));
    out += prop("gpu_efficiency", "1");
    out += prop("cpu_cores", std::to_string(n.cpu_cores));
    out += prop("h2d_pageable_bw", bw(n.h2d_bw));
    if (n.loader_image_overhead > 0) out += prop("loader_image_overhead", lat(n.loader_image_overhead));
    out += "    </cluster>\n";
  }
  if (groups.size() > 1) {
    if (!(p.nic_bw > 0)) throw Error("platform: several clusters need a positive NIC bandwidth");
    for (const auto& g : groups)
      out += fmt::format("    <link id=\"{}-nic\" bandwidth=\"{}\" latency=\"{}\" sharing_policy=\"SPLITDUPLEX\"/>\n", g.id,
                         bw(p.nic_bw), lat(p.nic_lat / 2));
    for (size_t i = 0; i < groups.size(); ++i)
      for (size_t j = i + 1; j < groups.size(); ++j)
        out += fmt::format(
            "    <zoneRoute src=\"{0}\" dst=\"{1}\" gw_src=\"{0}-router\" gw_dst=\"{1}-router\"><link_ctn id=\"{0}-nic\" "
            "direction=\"UP\"/><link_ctn id=\"{1}-nic\" direction=\"DOWN\"/></zoneRoute>\n",
            groups[i].id, groups[j].id);
  }
  out += "  </zone>\n</platform>\n";
  return out;
}

}  // namespace vitsim::calibrate
