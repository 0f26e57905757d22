// The shape of an epoch (core/model/epoch.hpp): the one rule the simulator and the trainer count steps by,
// PyTorch's and DeepSpeed's default (padded DistributedSampler, last partial micro-batch and step kept).
#include <catch2/catch.hpp>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/model/epoch.hpp"

using namespace vitsim;

TEST_CASE("epoch shape: padded shards, partial last micro-batch and step, as PyTorch's defaults", "[epoch]") {
  struct Case {
    long long samples;
    int replicas, micro, accum;
    long long per_replica, micro_batches, steps, last_micro;
    int last_step;
  };
  // Each row worked by hand from the rule: per_replica = ceil(samples / replicas), micro_batches =
  // ceil(per_replica / micro), steps = ceil(micro_batches / accum).
  for (Case c : {Case{512, 1, 8, 1, 512, 64, 64, 8, 1},  // divides evenly everywhere
                 Case{100, 1, 8, 1, 100, 13, 13, 4, 1},  // last micro-batch of 100 - 12 x 8 = 4
                 Case{103, 2, 8, 1, 52, 7, 7, 4, 1},     // 103 over 2 ranks: padded to 52 each
                 Case{100, 1, 8, 4, 100, 13, 4, 4, 1},   // 13 micro-batches, accum 4: 3 full steps + 1 of 1
                 Case{60000, 2, 64, 1, 30000, 469, 469, 48, 1},  // Fashion-MNIST on 2 ranks
                 Case{50000, 8, 64, 2, 6250, 98, 49, 42, 2},     // CIFAR-10 on 8 GPUs, accumulation 2
                 Case{16, 2, 8, 1, 8, 1, 1, 8, 1}}) {            // exactly one global batch
    INFO(c.samples << " samples, " << c.replicas << " replicas, micro " << c.micro << ", accum " << c.accum);
    const EpochShape e = epoch_shape(c.samples, c.replicas, c.micro, c.accum);
    CHECK(e.per_replica == c.per_replica);
    CHECK(e.micro_batches == c.micro_batches);
    CHECK(e.steps == c.steps);
    CHECK(e.last_micro_batch == c.last_micro);
    CHECK(e.last_step_micro_batches == c.last_step);
    CHECK(e.exact_steps() == Approx(double(c.micro_batches) / c.accum));
    // The steps take every micro-batch exactly once.
    CHECK((e.steps - 1) * c.accum + e.last_step_micro_batches == e.micro_batches);
  }
}

TEST_CASE("epoch shape: fewer samples than one global batch is an error with one line", "[epoch][negative]") {
  CHECK_THROWS_WITH(
      epoch_shape(5, 1, 8, 1, "dataset.train_samples"),
      "dataset.train_samples: 5 training samples are fewer than one global batch of 8 (micro_batch 8 x "
      "grad_accum 1 x 1 data-parallel ranks)");
  CHECK_THROWS_WITH(
      epoch_shape(15, 2, 8, 1),
      "15 training samples are fewer than one global batch of 16 (micro_batch 8 x grad_accum 1 x 2 "
      "data-parallel ranks)");
  CHECK_THROWS_WITH(
      epoch_shape(1000, 4, 64, 8),
      "1000 training samples are fewer than one global batch of 2048 (micro_batch 64 x grad_accum 8 x 4 "
      "data-parallel ranks)");
  CHECK_THROWS_AS(epoch_shape(0, 1, 1, 1), Error);
  CHECK_THROWS_AS(epoch_shape(100, 0, 8, 1), Error);
}
