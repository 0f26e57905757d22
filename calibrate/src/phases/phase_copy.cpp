// Host-to-device copy phase of `vitsim calibrate`: one batch of the largest micro-batch, as the loader hands
// it over, on every rank; the median over the ranks.
#include <algorithm>

#include <fmt/format.h>

#include "harness/phases.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/real/gather.hpp"

namespace vitsim::calibrate {

using real::allgather_record;

HostToDevice copy_phase(RunContext& x) {
  const double batch_bytes =
      4.0 * x.mbs.back() * x.s.model.channels * x.s.model.image_size * x.s.model.image_size;
  CopySample copy = measure_copy(x.dev, std::max(batch_bytes, 1024.0 * 1024.0), x.repeats());
  const std::vector<CopyRates> rates = allgather_record(
      x.world, CopyRates{copy.bytes / copy.pinned_s.median, copy.bytes / copy.pageable_s.median},
      "calibrate copy gather");
  std::vector<double> pinned_bw, pageable_bw;
  for (const CopyRates& r : rates) {
    pinned_bw.push_back(r.pinned);
    pageable_bw.push_back(r.pageable);
  }
  HostToDevice h2d;
  h2d.median = {median_of(pinned_bw), median_of(pageable_bw)};
  h2d.on_cpu = copy.on_cpu;
  x.say(fmt::format(
      "host-to-device: {} per copy, pinned {} pageable {} (median over ranks){}\n",
      units::format_bytes(copy.bytes), units::format_bandwidth(h2d.median.pinned),
      units::format_bandwidth(h2d.median.pageable),
      copy.on_cpu ? "; CPU device: a memcpy into a freshly allocated tensor, pinned = pageable" : ""));
  x.details["h2d"] = {{"bytes", copy.bytes},
                      {"on_cpu", copy.on_cpu},
                      {"pinned_bw_per_rank", pinned_bw},
                      {"pageable_bw_per_rank", pageable_bw},
                      {"rank0_pinned_s", spread_json(copy.pinned_s)},
                      {"rank0_pageable_s", spread_json(copy.pageable_s)}};
  return h2d;
}

}  // namespace vitsim::calibrate
