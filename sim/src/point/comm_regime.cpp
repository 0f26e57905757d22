// The point's gradient reduction in numbers (core/model/comm_regime.hpp), read after its run from the
// formulas the run used: the data-parallel group's ring (its steps, the largest route latency between
// neighbours, the slowest edge's share of its narrowest link) or NCCL's choice per bucket under `auto`.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <unordered_map>

#include "collectives/nccl_comm.hpp"
#include "point/point_report.hpp"
#include "vitsim/core/model/buckets.hpp"

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {
namespace {

// The ring's slowest edge (member i to i+1): the narrowest share of a link on its route, each link shared
// max-min by the ring's edges that cross it (FATPIPE links by none): the rate SimGrid gives the ring's
// slowest flow when its flows run alone.
struct Bottleneck {
  double bw = 0;
  std::string link;
};
Bottleneck ring_bottleneck(const Group& g) {
  const int n = g.size();
  std::vector<std::vector<sg4::Link*>> routes(static_cast<size_t>(n));
  std::unordered_map<const sg4::Link*, int> crossings;
  for (int i = 0; i < n; ++i) {
    double ignored = 0;
    g.host(i)->route_to(g.host((i + 1) % n), routes[i], &ignored);
    for (const sg4::Link* l : routes[i])
      if (l->get_sharing_policy() != sg4::Link::SharingPolicy::FATPIPE) ++crossings[l];
  }
  Bottleneck b{std::numeric_limits<double>::infinity(), ""};
  for (const auto& route : routes)
    for (const sg4::Link* l : route) {
      const auto it = crossings.find(l);
      const double share = l->get_bandwidth() / (it == crossings.end() ? 1 : it->second);
      if (share < b.bw) b = {share, l->get_name()};
    }
  if (!std::isfinite(b.bw)) b = {};
  return b;
}

// The smallest bucket at which NCCL's latency for its pick is at most `share` of the ring's transfer of the
// protocol's wire bytes: on a geometric grid (8 sizes per doubling) the smallest size from which every larger
// one passes, then the exact size within the last step where the pick there holds (its latency constant, the
// transfer linear in the size). 0 when the largest size fails.
double nccl_bucket_for_share(const NcclComm& comm, NcclFunc f, int n, double bw, bool all_reduce,
                             double share) {
  auto passes = [&](double bytes, NcclChoice* out = nullptr) {
    const NcclChoice ch = comm.choose(f, bytes);
    if (out) *out = ch;
    return ch.latency_us * 1e-6 <=
           share * ring_transfer_s(n, bytes / nccl_payload_fraction(ch.proto), bw, all_reduce);
  };
  std::vector<double> grid;
  for (double s = 1024; s <= kLargestBucketBytes * (1 + 1e-12); s *= std::pow(2.0, 0.125)) grid.push_back(s);
  int first = -1;
  for (int i = static_cast<int>(grid.size()) - 1; i >= 0 && passes(grid[i]); --i) first = i;
  if (first < 0) return 0;
  NcclChoice at;
  passes(grid[first], &at);
  const double exact =
      at.latency_us * 1e-6 * nccl_payload_fraction(at.proto) * n * bw / (share * ring_steps(n, all_reduce));
  const double below = first > 0 ? grid[first - 1] : 0;
  NcclChoice there;
  if (exact > below && exact <= grid[first] && passes(exact, &there) && there.algo == at.algo &&
      there.proto == at.proto)
    return exact;
  return grid[first];
}

std::string choice_text(const NcclComm& comm, const NcclChoice& ch) {
  return fmt::format("{} {}/{}, {} channel{}", comm.version->name, nccl_algo_name(ch.algo),
                     nccl_proto_name(ch.proto), ch.n_channels, ch.n_channels == 1 ? "" : "s");
}

// Per call and per step, and the recommended bucket, under NCCL's latency (`auto`).
void nccl_figures(CommRegime& c, const NcclComm& comm, NcclFunc f, const std::vector<BackwardBucket>& buckets,
                  bool all_reduce) {
  c.model = "nccl";
  for (const BackwardBucket& b : buckets) {
    const NcclChoice ch = comm.choose(f, b.bytes);
    const double latency = ch.latency_us * 1e-6;
    double transfer =
        ring_transfer_s(c.ranks, b.bytes / nccl_payload_fraction(ch.proto), c.bottleneck_bw, all_reduce);
    if (nccl_rated(ch)) transfer = std::max(transfer, (ch.time_us - ch.latency_us) * 1e-6);  // NCCL's rating
    c.latency_s += latency;
    c.transfer_s += transfer;
    if (b.bytes == c.bucket_bytes && c.nccl_choice.empty()) {
      c.nccl_choice = choice_text(comm, ch);
      c.payload_fraction = nccl_payload_fraction(ch.proto);
      c.call_latency_s = latency;
      c.call_transfer_s = transfer;
    }
  }
  c.recommended_bytes = nccl_bucket_for_share(comm, f, c.ranks, c.bottleneck_bw, all_reduce, c.share);
}

// Per call and per step, and the recommended bucket, by the ring's closed form.
void ring_figures(CommRegime& c, const Group& g, const std::vector<BackwardBucket>& buckets,
                  bool all_reduce) {
  c.model = "ring";
  c.ring_steps = ring_steps(c.ranks, all_reduce);
  c.step_latency_s = g.ring_max_latency();
  c.call_latency_s = c.ring_steps * c.step_latency_s;
  c.call_transfer_s = ring_transfer_s(c.ranks, c.bucket_bytes, c.bottleneck_bw, all_reduce);
  c.latency_s = c.calls * c.call_latency_s;
  for (const BackwardBucket& b : buckets)
    c.transfer_s += ring_transfer_s(c.ranks, b.bytes, c.bottleneck_bw, all_reduce);
  c.recommended_bytes = ring_bucket_for_share(c.ranks, c.step_latency_s, c.bottleneck_bw, c.share);
}

// NCCL's algorithm of a named collective for this operation: a reduce-scatter runs as the fused ring under
// every named collective; an all-reduce is the registry's (CollectiveInfo::nccl_algo: Ring under ring and
// ring_msg, Tree under tree); else none.
bool named_algo(const std::string& collective, bool all_reduce, NcclAlgo& out) {
  const std::optional<NcclAlgo> a =
      all_reduce ? collective_info(collective).nccl_algo : std::optional<NcclAlgo>(NcclAlgo::Ring);
  if (!a) return false;
  out = *a;
  return true;
}

// What NCCL would run for the largest bucket, against the named collective.
void against_nccl(CommRegime& c, const NcclComm& comm, NcclFunc f, bool all_reduce) {
  const NcclChoice ch = comm.choose(f, c.bucket_bytes);
  c.nccl_would =
      fmt::format("{} {}/{}", comm.version->name, nccl_algo_name(ch.algo), nccl_proto_name(ch.proto));
  c.nccl_estimate_s = ch.time_us * 1e-6;
  NcclAlgo named{};
  if (!named_algo(c.collective, all_reduce, named)) return;
  c.nccl_same = ch.algo == named;
  double best = 0;  // NCCL's fastest protocol for the named algorithm
  for (const NcclCost& k : ch.table)
    if (k.algo == named && k.time_us >= 0 && (best == 0 || k.time_us < best)) best = k.time_us;
  c.named_estimate_s = best * 1e-6;
}

}  // namespace

CommRegime comm_regime(const PointRun& run, const PlatformFacts& facts) {
  CommRegime c;
  const Scenario& s = run.s;
  if (!run.group || run.group->size() < 2) return c;
  const Group& g = *run.group;
  const StepShape shape = step_shape(s, run.w);
  if (shape.grad_buckets.empty()) return c;
  const bool all_reduce = shape.grad_reduce_op == CollOp::AllReduce;
  c.collective = s.parallel.collective;
  c.op = all_reduce ? "all-reduce" : "reduce-scatter";
  c.ranks = g.size();
  c.calls = static_cast<int>(shape.grad_buckets.size());
  for (const BackwardBucket& b : shape.grad_buckets) {
    c.gradient_bytes += b.bytes;
    c.bucket_bytes = std::max(c.bucket_bytes, b.bytes);
  }
  c.cap_bytes = s.parallel.bucket_bytes;
  c.cap_moves =
      bucket_rule(s.training.framework, s.parallel.zero, s.training.precision) != BucketRule::DeepSpeedFlat;
  const Bottleneck b = ring_bottleneck(g);
  c.bottleneck_bw = b.bw;
  c.bottleneck = b.link;
  std::optional<NcclComm> comm;
  try {
    comm = nccl_comm(
        g, {&facts, s.nccl.version, s.nccl.algo, s.nccl.proto, {}, s.nccl.min_channels, s.nccl.max_channels});
  } catch (const Error&) {
  }
  const NcclFunc f = nccl_func_of(shape.grad_reduce_op);
  // `auto` on CPU ranks (no NCCL communicator) runs the fused ring with the routes' latencies.
  NcclAlgo named{};
  const bool ring_runs = s.parallel.collective == "auto" ||
                         (named_algo(s.parallel.collective, all_reduce, named) && named == NcclAlgo::Ring);
  if (c.bottleneck_bw > 0 && s.parallel.collective == "auto" && comm)
    nccl_figures(c, *comm, f, shape.grad_buckets, all_reduce);
  else if (c.bottleneck_bw > 0 && ring_runs)
    ring_figures(c, g, shape.grad_buckets, all_reduce);
  if (s.parallel.collective != "auto" && comm) against_nccl(c, *comm, f, all_reduce);
  if (c.recommended_bytes > 0) {
    Scenario t = s;
    t.parallel.bucket_bytes = bucket_setting_bytes(c.recommended_bytes);
    c.recommended_calls = static_cast<int>(gradient_buckets(t).size());
  }
  return c;
}

}  // namespace vitsim::sim
