// Loader phase of `vitsim calibrate`: one loader worker's images per second for the scenario's dataset,
// resize and augmentation, on every rank.
#include <algorithm>

#include <fmt/format.h>

#include "harness/phases.hpp"
#include "vitsim/core/base/system.hpp"
#include "vitsim/real/data.hpp"

namespace vitsim::calibrate {

LoaderCalibration loader_phase(RunContext& x) {
  const Scenario& s = x.s;
  x.world.barrier("calibrate loader barrier");
  real::DatasetSplit set = real::open_dataset(s.dataset, s.model, "train");
  real::Transform tf{s.model.image_size, s.run.augment, set.norm, static_cast<uint64_t>(s.training.seed)};
  const int mb = s.training.micro_batch;
  long long batches = x.o.loader_batches > 0 ? x.o.loader_batches : (2048 + mb - 1) / mb;
  batches =
      std::max(1LL, std::min<long long>(batches, static_cast<long long>(set.source->size()) / x.nranks / mb));
  // One warm-up pass (page cache, allocator), three timed; each pass its own shuffle (epoch `rep`).
  int rep = 0;
  const std::vector<double> rates = timed_runs(Repeats{1, 3}, [&] {  // images/s of each pass
    auto idx = real::shard_indices(set.source->size(), x.rank, x.nranks, s.training.seed, rep, true, true);
    idx.resize(static_cast<size_t>(batches * mb));
    auto a = Clock::now();
    real::Loader loader(*set.source, tf, idx, mb, rep, 0, /*workers=*/1, s.loader.prefetch);
    long long images = 0;
    while (auto b = loader.next()) images += b->size;
    auto e = Clock::now();
    ++rep;
    return images / seconds(a, e);
  });
  auto all = x.world.allgather({median_of(rates)}, "calibrate loader gather");  // images/s, one per rank
  LoaderCalibration loader_cal;
  loader_cal.dataset = s.dataset.name;
  loader_cal.resize = s.model.image_size;
  loader_cal.images_per_s_per_worker = median_of(all);
  Spread sp = spread_of(all);
  x.say(fmt::format(
      "loader: {} at {} px, one worker, {} batches of {}: {:.0f} images/s (ranks: [{:.0f}, {:.0f}])\n",
      s.dataset.name, s.model.image_size, batches, mb, sp.median, sp.min, sp.max));
  x.details["loader"] = {{"dataset", s.dataset.name},
                         {"resize", s.model.image_size},
                         {"batches", batches},
                         {"micro_batch", mb},
                         {"images_per_s_per_rank", all}};
  return loader_cal;
}

}  // namespace vitsim::calibrate
