// The op benchmarks (measure_ops): every op of the list timed alone with the LibTorch kernel that stands for
// it (kernel_maker.hpp), in rounds over the list, operands cold.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "bench/kernel_maker.hpp"
#include "harness/torch_util.hpp"
#include "vitsim/core/base/system.hpp"

namespace vitsim::calibrate {
namespace {

// Cold operands: the op runs over `copies` sets of its own inputs in turn, together at least
// cold_bytes, so that each run finds its operands out of the cache (the code and the allocator's
// blocks stay warm, as in a pass). A training pass's activations are many times the last-level
// cache: each op reads operands written long before (or evicted by the ops since) and writes its
// output to memory, where one op in a loop keeps its few megabytes in the cache: memory-bound ops
// ran 2-4x faster alone than inside the pass, GEMMs ~10% faster.
class InputRing {
 public:
  InputRing(KernelMaker& maker, const OpBenchmark& ob, Kernel first, const torch::Device& dev,
            double cold_bytes)
      : dev_(dev), ring_{std::move(first)} {
    constexpr int kMaxCopies = 64;  // copies of one op's inputs, at most
    if (!dev.is_cuda() && cold_bytes > 0 && ob.op.bytes > 0) {
      const int copies = static_cast<int>(std::min<double>(kMaxCopies, std::ceil(cold_bytes / ob.op.bytes)));
      std::string how;
      for (int c = 1; c < copies; ++c) ring_.push_back(maker.make(ob, how));
    }
  }
  int size() const { return static_cast<int>(ring_.size()); }
  // One run of the next input set between two clock reads (seconds).
  double timed() {
    Kernel& run = ring_[next_];
    next_ = (next_ + 1) % ring_.size();
    auto a = mark(dev_);
    run();
    auto b = mark(dev_);
    return seconds(a, b);
  }

 private:
  torch::Device dev_;
  std::vector<Kernel> ring_;
  size_t next_ = 0;
};

// Timed runs per round, from the fastest warm-up run: at least `iters` in all, more for ops under 1 ms
// so each gets ~20 ms of runs, fewer for slow ones so each takes at most ~0.25 s, never under 3 a round.
int runs_per_round(double fastest, int iters, int rounds) {
  constexpr double kTarget = 0.02, kCap = 0.25;  // seconds of timed runs per op: aimed at, at most
  int runs = std::max(iters, static_cast<int>(std::min(10.0 * iters, kTarget / fastest)));
  runs = std::max(3, std::min(runs, static_cast<int>(kCap / fastest)));
  return std::max(3, (runs + rounds - 1) / rounds);
}

}  // namespace

std::vector<OpTiming> measure_ops(const Scenario& s, const DeviceInfo& info,
                                  const std::vector<OpBenchmark>& list, const Repeats& repeats,
                                  double cold_bytes, int rounds) {
  const torch::Device dev = device_of(info);
  torch::NoGradGuard no_grad;
  torch::manual_seed(s.training.seed);
  KernelMaker maker(s, dev);
  rounds = std::max(1, rounds);
  std::vector<OpTiming> out(list.size());
  std::vector<std::vector<double>> all(list.size()), round_means(list.size());
  std::vector<int> runs_of(list.size(), 0);
  for (int round = 0; round < rounds; ++round)
    for (size_t i = 0; i < list.size(); ++i) {
      const OpBenchmark& ob = list[i];
      OpTiming& t = out[i];
      if (t.skipped) continue;
      Kernel k = maker.make(ob, t.how);
      if (!k) {
        t.skipped = true;
        t.how = "none";
        continue;
      }
      InputRing ring(maker, ob, std::move(k), dev, cold_bytes);
      double first = ring.timed();  // also the first warm-up run
      for (int w = 1; w < std::max<int>(repeats.warmup, ring.size()); ++w)
        first = std::min(first, ring.timed());
      first = std::max(first, 1e-7);
      if (round == 0)
        runs_of[i] = runs_per_round(first, repeats.iters, rounds);  // from the first round's warm-up
      double sum = 0;
      for (int r = 0; r < runs_of[i]; ++r) {
        const double x = ring.timed();
        all[i].push_back(x);
        sum += x;
      }
      round_means[i].push_back(sum / runs_of[i]);
      t.copies = ring.size();
    }
  for (size_t i = 0; i < list.size(); ++i) {
    if (out[i].skipped) continue;
    out[i].seconds = spread_of(all[i]);
    out[i].round_median = spread_of(round_means[i]).median;
    out[i].rounds = static_cast<int>(round_means[i].size());
  }
  return out;
}

}  // namespace vitsim::calibrate
