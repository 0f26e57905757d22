// All-reduce phase of `vitsim calibrate`: time against message size with the trainer's own communicator (MPI
// on CPU ranks), reported as nccl-tests does (algbw, busbw) and fitted to the ring's t = 2(n-1) a + 2(n-1)/n
// S / B.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "harness/phases.hpp"
#include "vitsim/core/base/system.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/real/gather.hpp"

namespace vitsim::calibrate {

using real::allgather_records;

namespace {

// The message sizes: --sizes, else 4 KiB .. 64 MiB x4 plus one bucket and the whole gradient, each
// measured exactly, so the fit holds where it is used.
std::vector<double> allreduce_sizes(const Options& o, double bucket, double gradient) {
  std::vector<double> sizes = o.sizes;
  if (sizes.empty()) {
    for (double b = 4096; b <= 64.0 * 1024 * 1024; b *= 4) sizes.push_back(b);
    sizes.push_back(std::floor(bucket / 4) * 4);
    sizes.push_back(std::floor(gradient / 4) * 4);
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  }
  return sizes;
}

// One size: warm-up, then timed all-reduces each after a barrier; a run's time is the slowest rank's.
Spread time_allreduce(RunContext& x, real::Communicator& comm, size_t floats) {
  std::vector<float> buf(floats, 1.0f);
  const Repeats repeats{kAllreduceWarmup, std::max(kAllreduceMinIters, x.o.iters)};
  const std::vector<double> times = timed_runs(repeats, [&] {
    x.world.barrier("calibrate all-reduce barrier");
    auto a = Clock::now();
    comm.allreduce_sum(buf.data(), floats, comm.mark_ready());
    auto e = Clock::now();
    return seconds(a, e);
  });
  const auto all = allgather_records(x.world, times, "calibrate all-reduce gather");
  std::vector<double> slowest(times.size(), 0);
  for (const auto& rank_times : all)
    for (size_t i = 0; i < times.size(); ++i) slowest[i] = std::max(slowest[i], rank_times[i]);
  return spread_of(slowest);
}

// The sizes the fit uses: those up to fit_max, and at least the two smallest, so a fit always exists.
std::vector<AllreduceSample> fitted_samples(const std::vector<AllreduceSample>& samples, double fit_max) {
  std::vector<AllreduceSample> fitted;
  for (const auto& smp : samples)
    if (smp.bytes <= fit_max * 1.0001) fitted.push_back(smp);
  if (fitted.size() < 2)
    fitted.assign(samples.begin(), samples.begin() + std::min<size_t>(2, samples.size()));
  return fitted;
}

// The table's row of each size, with the fit's residual there.
void print_sizes(const RunContext& x, const std::vector<AllreduceSample>& samples,
                 const std::vector<Spread>& spreads, const RingFit& fit) {
  for (size_t i = 0; i < samples.size(); ++i) {
    const auto& sp = spreads[i];
    const double b = samples[i].bytes;
    x.say(fmt::format("{:>12.0f} {:>12.6g} {:>12.6g} {:>12.6g} {:>12} {:>12} {:>+9.1f}%\n", b, sp.median,
                      sp.min, sp.max, units::format_bandwidth(algbw(b, sp.median)),
                      units::format_bandwidth(busbw_allreduce(b, sp.median, x.nranks)),
                      100 * (ring_allreduce_time(fit, b, x.nranks) / sp.median - 1)));
  }
}

}  // namespace

AllreducePhase allreduce_phase(RunContext& x) {
  AllreducePhase out;
  if (x.nranks < 2) return out;
  // What the scenario's trainer reduces per step: the whole fp32 gradient (fp32 whatever the
  // precision), in buckets of at most bucket_size sent back to back. The fit runs up to the whole
  // gradient, so that it describes the sustained rate of a step's all-reduces, not the burst of one
  // small message (a token-bucket-shaped link passes a lone 4 KiB message at several times its rate).
  const double gradient = 4.0 * x.workload.total_params();
  const double bucket = std::min(x.s.parallel.bucket_bytes, gradient);
  const std::vector<double> sizes = allreduce_sizes(x.o, bucket, gradient);
  auto comm = real::make_mpi_communicator(x.world);
  const std::string link_class = !x.o.link_class.empty() ? x.o.link_class
                                 : x.world.nodes() > 1   ? "inter_node"
                                                         : "intra_node";
  x.say(fmt::format(
      "all-reduce ({}, {} ranks, class {}): per size {} warm-up + {} timed, each after a barrier; "
      "time = the slowest rank's\n{:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10}\n",
      comm->name(), x.nranks, link_class, kAllreduceWarmup, std::max(kAllreduceMinIters, x.o.iters), "bytes",
      "median_s", "min_s", "max_s", "algbw", "busbw", "fit"));
  std::vector<AllreduceSample> samples;
  std::vector<Spread> spreads;
  json jar = json::array();
  for (double bytes : sizes) {
    const size_t n = std::max<size_t>(1, static_cast<size_t>(bytes / sizeof(float)));
    const Spread sp = time_allreduce(x, *comm, n);
    const double real_bytes = n * sizeof(float);
    samples.push_back({real_bytes, sp.median});
    spreads.push_back(sp);
    jar.push_back({{"bytes", real_bytes},
                   {"time_s", spread_json(sp)},
                   {"algbw", algbw(real_bytes, sp.median)},
                   {"busbw", busbw_allreduce(real_bytes, sp.median, x.nranks)}});
  }
  const std::vector<AllreduceSample> fitted =
      fitted_samples(samples, x.o.fit_max_bytes > 0 ? x.o.fit_max_bytes : gradient);
  const RingFit fit = fit_ring_allreduce(fitted, x.nranks);
  print_sizes(x, samples, spreads, fit);
  x.say(fmt::format(
      "fit t = 2(n-1) a + 2(n-1)/n S/B (least squares, relative residuals) over the {} sizes up to {} "
      "(a step's whole gradient): a = {}, B = {}; largest residual there {}\n",
      fitted.size(), units::format_bytes(fitted.back().bytes), units::format_time(fit.latency_s),
      units::format_bandwidth(fit.bandwidth), pct(fit.max_rel_residual)));
  out.links.push_back({link_class, fit.bandwidth, fit.latency_s, x.nranks});
  out.fit = fit;
  x.details["allreduce"] = {{"communicator", comm->name()},
                            {"link_class", link_class},
                            {"samples", jar},
                            {"fit",
                             {{"latency_s", fit.latency_s},
                              {"bandwidth", fit.bandwidth},
                              {"max_rel_residual", fit.max_rel_residual},
                              {"fitted_up_to_bytes", fitted.back().bytes}}}};
  return out;
}

}  // namespace vitsim::calibrate
