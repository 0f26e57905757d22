// The statistics of a rank's steps and the report point's figures from every rank's (point_measure.hpp).
#include "trainer/point_measure.hpp"

#include <algorithm>

#include "vitsim/core/formats/placement.hpp"
#include "vitsim/core/model/ops.hpp"
#include "vitsim/core/model/vit.hpp"
#include "vitsim/core/platform/platform.hpp"

namespace vitsim::real {

namespace {

// The steps after the first `warmup` (all of them when there are no more than that).
std::vector<double> after_warmup(const std::vector<StepTimes>& steps, int warmup,
                                 double (*get)(const StepTimes&)) {
  std::vector<double> v;
  for (size_t i = 0; i < steps.size(); ++i)
    if (static_cast<int>(i) >= warmup || steps.size() <= static_cast<size_t>(warmup))
      v.push_back(get(steps[i]));
  return v;
}

double mean_after_warmup(const std::vector<StepTimes>& steps, int warmup, double (*get)(const StepTimes&)) {
  auto v = after_warmup(steps, warmup, get);
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0.0 : sum / v.size();
}

}  // namespace

RankMeasure measure_rank(const std::vector<StepTimes>& steps, int warmup,
                         const std::vector<double>& epoch_times, double peak_memory_bytes) {
  RankMeasure m;
  m.step_time_s = step_stats(after_warmup(steps, warmup, [](const StepTimes& t) { return t.total; }));
  Breakdown& b = m.breakdown_s;
  b.data = mean_after_warmup(steps, warmup, [](const StepTimes& t) { return t.b.data; });
  b.h2d = mean_after_warmup(steps, warmup, [](const StepTimes& t) { return t.b.h2d; });
  b.compute_fwd = mean_after_warmup(steps, warmup, [](const StepTimes& t) { return t.b.compute_fwd; });
  b.compute_bwd = mean_after_warmup(steps, warmup, [](const StepTimes& t) { return t.b.compute_bwd; });
  b.optimizer = mean_after_warmup(steps, warmup, [](const StepTimes& t) { return t.b.optimizer; });
  b.comm_total = mean_after_warmup(steps, warmup, [](const StepTimes& t) { return t.b.comm_total; });
  b.comm_exposed = mean_after_warmup(steps, warmup, [](const StepTimes& t) { return t.b.comm_exposed; });
  for (double e : epoch_times) m.epoch_mean_s += e / epoch_times.size();
  m.peak_memory_bytes = peak_memory_bytes;
  return m;
}

RankSummary fill_ranks(const std::vector<RankMeasure>& all, const std::vector<std::string>& rank_names,
                       ReportPoint& p) {
  const int nranks = static_cast<int>(all.size());
  RankSummary sum;
  int slowest = 0;
  for (int r = 0; r < nranks; ++r) {
    const RankMeasure& m = all[static_cast<size_t>(r)];
    RankReport rr;
    rr.rank = r;
    if (!rank_names.empty()) {
      auto nl = rank_names[r].find('\n');
      rr.host = rank_names[r].substr(0, nl);
      rr.device = rank_names[r].substr(nl + 1);
    }
    rr.step_time_s = m.step_time_s;
    rr.breakdown_s = m.breakdown_s;
    p.breakdown_s.data += m.breakdown_s.data / nranks;
    p.breakdown_s.h2d += m.breakdown_s.h2d / nranks;
    p.breakdown_s.compute_fwd += m.breakdown_s.compute_fwd / nranks;
    p.breakdown_s.compute_bwd += m.breakdown_s.compute_bwd / nranks;
    p.breakdown_s.optimizer += m.breakdown_s.optimizer / nranks;
    p.breakdown_s.comm_total += m.breakdown_s.comm_total / nranks;
    p.breakdown_s.comm_exposed += m.breakdown_s.comm_exposed / nranks;
    sum.epoch_max_s = std::max(sum.epoch_max_s, m.epoch_mean_s);
    sum.memory_max_bytes = std::max(sum.memory_max_bytes, m.peak_memory_bytes);
    if (m.step_time_s.mean > all[static_cast<size_t>(slowest)].step_time_s.mean) slowest = r;
    p.per_rank.push_back(rr);
  }
  p.step_time_s = all[static_cast<size_t>(slowest)].step_time_s;
  return sum;
}

void set_model_flops(const Scenario& s, int micro, int accum, int nranks, ReportPoint& p) {
  double flops = 0;
  for (const Op& op : pass_ops(build_workload(s.model), micro, OpOptions{s.training.precision}))
    flops += op.flops;
  p.model_flops = flops * accum;
  try {
    const PlatformFacts facts = read_platform_facts(s.cluster.platform);
    p.peak_flops = mean_peak_flops(place_ranks(s, facts, nranks), facts, s.training.precision);
  } catch (const std::exception&) {
    p.peak_flops = 0;
  }
}

}  // namespace vitsim::real
