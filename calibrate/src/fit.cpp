// Statistics, the ring all-reduce fit and the platform file writer: pure functions, no Torch, no MPI.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>

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

// ---- the op model's fit ----

std::vector<OpBenchmark> op_benchmarks(const Workload& w, const std::vector<int>& micro_batches, Precision p,
                                       int sweep_rows) {
  std::vector<OpBenchmark> out;
  // The model: one layer of each kind (the first attention and MLP blocks stand for all of them).
  std::vector<int> layers;
  for (LayerKind kind : {LayerKind::PatchEmbed, LayerKind::Attention, LayerKind::Mlp, LayerKind::Head})
    for (int l = 0; l < static_cast<int>(w.layers.size()); ++l)
      if (w.layers[l].kind == kind) {
        layers.push_back(l);
        break;
      }
  for (int b : micro_batches)
    for (int l : layers)
      for (const Op& op : layer_ops(w, l, b, OpOptions{p})) out.push_back({op, b});
  // The sweep.
  const double e = p == Precision::FP32 ? 4 : 2;
  auto matmul = [&](OpClass cls, const std::string& name, double batch, double m, double n, double k) {
    Op op;
    op.name = name;
    op.pass = Pass::Fwd;
    op.cls = cls;
    op.batch = batch;
    op.m = m;
    op.n = n;
    op.k = k;
    op.flops = 2 * batch * m * n * k;
    op.bytes = batch * (m * k + k * n + m * n) * e;
    out.push_back({op, 0});
  };
  const int dims[] = {32, 64, 128, 256, 512, 1024, 2048};
  std::vector<int> ms{sweep_rows, 256, 1024, 4096};
  for (size_t im = 0; im < ms.size(); ++im)
    for (int in = 0; in < 7; ++in)
      for (int ik = 0; ik < 7; ++ik) {
        const double m = ms[im], n = dims[in], k = dims[ik];
        if ((in + ik + static_cast<int>(im)) % 2 != 0 || 2 * m * n * k > 4294967296.0) continue;
        matmul(OpClass::Gemm, fmt::format("sweep.gemm.m{}.n{}.k{}", ms[im], dims[in], dims[ik]), 1, m, n, k);
      }
  for (int bh : {64, 256})
    for (int t : {17, 65, 197})
      for (int hd : {16, 32, 64}) {
        matmul(OpClass::AttnMatmul, fmt::format("sweep.bmm_qk.b{}.t{}.hd{}", bh, t, hd), bh, t, t, hd);
        matmul(OpClass::AttnMatmul, fmt::format("sweep.bmm_av.b{}.t{}.hd{}", bh, t, hd), bh, t, hd, t);
      }
  for (double size = 64.0 * 1024; size <= 64.0 * 1024 * 1024; size *= 4)
    for (int reads : {1, 2}) {
      Op op;
      op.name = fmt::format("sweep.{}.{:.0f}", reads == 1 ? "copy" : "add", size);
      op.pass = Pass::Fwd;
      op.cls = OpClass::Memory;
      op.bytes = size * (reads + 1);
      out.push_back({op, 0});
    }
  return out;
}

double op_sample_time(const vitsim::Op& op, const DeviceFigures& f) { return run_ops({op}, f).end_s; }

namespace {

// Grids of the discrete figures (README "vitsim calibrate"): square tiles, and the short-K half point.
constexpr int kTiles[] = {8, 16, 32, 64, 128};
constexpr double kKHalves[] = {0, 8, 16, 32, 64, 128, 256, 512, 1024};
// Bounds of the continuous figures: efficiencies in [1e-6, 1], host time per op in [1e-9 s, 1 s].
constexpr double kMinEff = 1e-6, kMinHost = 1e-9, kMaxHost = 1.0;

// The four continuous figures as logarithms: ln gemm_eff, ln attn_eff, ln mem_eff, ln host_op_s.
constexpr int kParams = 4;
using Params = std::array<double, kParams>;

// One sample with its grid point's shape efficiency folded in: predicted =
// max(compute / eff_class, memory / eff_mem) + host x kernels + fixed.
struct Prepared {
  int cls = 2;          // 0 gemm, 1 attn, 2 memory (the parameter index of its efficiency)
  double compute = 0;   // flops / (peak x shape efficiency); 0 for memory ops
  double memory = 0;    // bytes / mem_bw
  double kernels = 1;
  double fixed = 0;     // kernels x kernel_s (+ sync_s)
  double log_measured = 0;
};

int class_index(OpClass c) { return c == OpClass::Gemm ? 0 : c == OpClass::AttnMatmul ? 1 : 2; }

double predict(const Prepared& s, const Params& p) {
  const double mem = s.memory / std::exp(p[2]);
  const double cmp = s.cls < 2 ? s.compute / std::exp(p[s.cls]) : 0;
  return std::max(mem, cmp) + std::exp(p[3]) * s.kernels + s.fixed;
}

double cost_of(const std::vector<Prepared>& v, const Params& p) {
  double c = 0;
  for (const auto& s : v) {
    const double r = std::log(predict(s, p)) - s.log_measured;
    c += r * r;
  }
  return c;
}

void clamp_params(Params& p) {
  for (int i = 0; i < 3; ++i) p[i] = std::min(0.0, std::max(std::log(kMinEff), p[i]));
  p[3] = std::min(std::log(kMaxHost), std::max(std::log(kMinHost), p[3]));
}

// Solves the small symmetric system a x = b (Gaussian elimination with partial pivoting) over the
// free parameters; fixed ones get 0.
Params solve(std::array<std::array<double, kParams>, kParams> a, Params b, const std::array<bool, kParams>& free) {
  for (int i = 0; i < kParams; ++i)
    if (!free[i]) {
      for (int j = 0; j < kParams; ++j) a[i][j] = a[j][i] = 0;
      a[i][i] = 1;
      b[i] = 0;
    }
  for (int c = 0; c < kParams; ++c) {
    int piv = c;
    for (int r = c + 1; r < kParams; ++r)
      if (std::abs(a[r][c]) > std::abs(a[piv][c])) piv = r;
    std::swap(a[c], a[piv]);
    std::swap(b[c], b[piv]);
    if (std::abs(a[c][c]) < 1e-300) a[c][c] = 1e-300;
    for (int r = c + 1; r < kParams; ++r) {
      const double f = a[r][c] / a[c][c];
      for (int k = c; k < kParams; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  Params x{};
  for (int c = kParams - 1; c >= 0; --c) {
    double v = b[c];
    for (int k = c + 1; k < kParams; ++k) v -= a[c][k] * x[k];
    x[c] = v / a[c][c];
  }
  return x;
}

// Levenberg-Marquardt on the log residuals from `p`, the parameters kept inside their bounds.
double levenberg_marquardt(const std::vector<Prepared>& v, Params& p, const std::array<bool, kParams>& free) {
  clamp_params(p);
  double cost = cost_of(v, p), lambda = 1e-3;
  int stalled = 0;  // accepted steps in a row that gained next to nothing
  for (int it = 0; it < 500 && lambda < 1e12 && stalled < 3 && cost > 1e-28; ++it) {
    std::array<std::array<double, kParams>, kParams> jtj{};
    Params jtr{};
    for (const auto& s : v) {
      const double mem = s.memory / std::exp(p[2]);
      const double cmp = s.cls < 2 ? s.compute / std::exp(p[s.cls]) : 0;
      const double host = std::exp(p[3]) * s.kernels;
      const double pred = std::max(mem, cmp) + host + s.fixed;
      const double r = std::log(pred) - s.log_measured;
      Params j{};  // d ln(pred) / d p
      if (s.cls < 2 && cmp >= mem)
        j[s.cls] = -cmp / pred;
      else
        j[2] = -mem / pred;
      j[3] = host / pred;
      for (int a = 0; a < kParams; ++a) {
        jtr[a] += j[a] * r;
        for (int b = 0; b < kParams; ++b) jtj[a][b] += j[a] * j[b];
      }
    }
    bool improved = false;
    while (lambda < 1e12) {
      auto m = jtj;
      Params rhs{};
      for (int a = 0; a < kParams; ++a) {
        m[a][a] += lambda * (jtj[a][a] + 1e-12);
        rhs[a] = -jtr[a];
      }
      const Params step = solve(m, rhs, free);
      Params q = p;
      for (int a = 0; a < kParams; ++a) q[a] += step[a];
      clamp_params(q);
      const double c = cost_of(v, q);
      if (c < cost) {
        const double gain = cost - c;
        p = q;
        cost = c;
        lambda = std::max(lambda / 3, 1e-12);
        improved = true;
        stalled = gain <= 1e-12 * cost ? stalled + 1 : 0;
        break;
      }
      lambda *= 4;
    }
    if (!improved) break;
  }
  return cost;
}

}  // namespace

OpModelCalibration fit_op_model(const std::vector<OpSample>& samples, DeviceFigures start) {
  if (samples.empty()) throw Error("op model fit: no op sample");
  bool has[3] = {false, false, false};
  for (const auto& s : samples) {
    if (!(s.seconds > 0) || !std::isfinite(s.seconds))
      throw Error(fmt::format("op model fit: op {} measured in {} s; times must be positive", s.op.name, s.seconds));
    if (s.op.kernels < 1) throw Error(fmt::format("op model fit: op {} has {} kernels", s.op.name, s.op.kernels));
    const bool matmul = s.op.cls != OpClass::Memory && s.op.flops > 0;
    if (matmul && !(start.peak_flops > 0))
      throw Error(fmt::format("op model fit: device {} needs a positive peak_flops for its matmul samples", start.device_type));
    if (!(start.mem_bw > 0))
      throw Error(fmt::format("op model fit: device {} needs a positive mem_bw", start.device_type));
    has[matmul ? class_index(s.op.cls) : 2] = true;
  }
  const std::array<bool, kParams> free{has[0], has[1], has[2], true};
  auto eff0 = [](double e) { return std::log(std::min(1.0, std::max(kMinEff, e > 0 ? e : 1.0))); };

  std::vector<int> tiles;
  std::vector<double> k_halves;
  if (has[0] || has[1]) {
    tiles.assign(std::begin(kTiles), std::end(kTiles));
    k_halves.assign(std::begin(kKHalves), std::end(kKHalves));
  } else {
    tiles = {start.tile_m};
    k_halves = {start.gemm_k_half};
  }

  double best_cost = INFINITY;
  DeviceFigures best = start;
  for (int tile : tiles)
    for (double kh : k_halves) {
      DeviceFigures f = start;
      if (has[0] || has[1]) {
        f.tile_m = f.tile_n = tile;
        f.gemm_k_half = kh;
      }
      std::vector<Prepared> v;
      v.reserve(samples.size());
      for (const auto& s : samples) {
        Prepared pr;
        const bool matmul = s.op.cls != OpClass::Memory && s.op.flops > 0;
        pr.cls = matmul ? class_index(s.op.cls) : 2;
        if (matmul) pr.compute = s.op.flops / (f.peak_flops * shape_efficiency(s.op, f));
        pr.memory = s.op.bytes / f.mem_bw;
        pr.kernels = s.op.kernels;
        pr.fixed = s.op.kernels * f.kernel_s + (s.op.host_sync ? f.sync_s : 0);
        pr.log_measured = std::log(s.seconds);
        v.push_back(pr);
      }
      // Start: host time a tenth of the fastest op per kernel; each efficiency the median of what its
      // class's samples need with that host time.
      double fastest = INFINITY;
      for (size_t i = 0; i < v.size(); ++i) fastest = std::min(fastest, samples[i].seconds / v[i].kernels);
      Params p{eff0(start.gemm_efficiency), eff0(start.attn_efficiency), eff0(start.mem_efficiency),
               std::log(std::max(kMinHost, 0.1 * fastest))};
      for (int c = 0; c < 3; ++c) {
        if (!free[c]) continue;
        std::vector<double> need;
        for (size_t i = 0; i < v.size(); ++i) {
          if (v[i].cls != c) continue;
          const double left = samples[i].seconds - std::exp(p[3]) * v[i].kernels - v[i].fixed;
          const double work = c < 2 ? v[i].compute : v[i].memory;
          if (left > 0 && work > 0) need.push_back(work / left);
        }
        if (!need.empty()) p[c] = eff0(spread_of(need).median);
      }
      const double cost = levenberg_marquardt(v, p, free);
      if (cost < best_cost) {
        best_cost = cost;
        best = f;
        if (free[0]) best.gemm_efficiency = std::exp(p[0]);
        if (free[1]) best.attn_efficiency = std::exp(p[1]);
        if (free[2]) best.mem_efficiency = std::exp(p[2]);
        best.host_op_s = std::exp(p[3]);
      }
    }

  OpModelCalibration out;
  out.figures = best;
  out.samples = static_cast<int>(samples.size());
  std::vector<double> rel;
  for (const auto& s : samples) rel.push_back(std::abs(op_sample_time(s.op, best) - s.seconds) / s.seconds);
  const Spread sp = spread_of(rel);
  out.median_rel_residual = sp.median;
  out.max_rel_residual = sp.max;
  return out;
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
