#pragma once
// The gradient reduction's regime at one point (issue 25 item 6; docs/plan.md "Communication advice"): per
// optimizer step, the calls that reduce the gradient buckets, each a latency and a transfer by the formulas
// the simulation uses, and the bucket size at which a call's latency falls under a stated share of its
// transfer. sim fills it after a point's run (sim/src/point/comm_regime.cpp); the plan's explanation reads it
// (core/src/results/plan_advice.cpp).
//
// A call of S bytes over n ranks:
//   ring (`ring`, `ring_msg`; and every reduce-scatter of a named collective, which runs as the fused ring):
//     latency = steps x a, steps = 2(n-1) for an all-reduce, n-1 for a reduce-scatter, a the largest route
//     latency between ring neighbours (Group::ring_max_latency, sim/src/collectives/transfers.cpp);
//     transfer = steps x (S/n) / B, B the ring's slowest edge: the narrowest link on its route, shared
//     max-min with the ring's other edges that cross it (the rate SimGrid gives the ring's slowest flow).
//   `auto`: latency = NCCL's latency for the algorithm and protocol it picks at S (NcclChoice::latency_us,
//     core/model/nccl_tuning.hpp: what sim/src/collectives/collective_nccl.cpp adds per call); transfer = the
//     ring's term above on S / payload fraction of the protocol (the bytes NCCL's protocol puts on the wire).
#include <string>

namespace vitsim {

// The share of a call's transfer that its latency may take at the recommended bucket: ASSUMPTION, a tenth
// (latency then costs under 10% of the reduction; any share in 5-25% gives the same order of bucket, which
// scales as 1/share). A user's own target replaces it only through this constant.
inline constexpr double kLatencyShareTarget = 0.1;
// The largest bucket the recommendation searches (`auto`): 16 GiB, past any ViT's gradients.
inline constexpr double kLargestBucketBytes = 16.0 * 1024 * 1024 * 1024;

// The ring's steps for a call: 2(n-1) for an all-reduce, n-1 for a reduce-scatter or all-gather.
int ring_steps(int n, bool all_reduce);
// The ring's transfer term for `bytes` over n ranks on a slowest edge of `bw` bytes/s: steps x bytes/n / bw.
double ring_transfer_s(int n, double bytes, double bw, bool all_reduce);
// The smallest bucket whose ring latency (steps x a) is at most `share` of its transfer: the steps cancel,
// S = n x a x bw / share, for an all-reduce and a reduce-scatter alike.
double ring_bucket_for_share(int n, double a, double bw, double share);

// A recommended bucket as a scenario value: `bytes` rounded up to two significant digits of KB, MB or GB
// (decimal, as parallelism.bucket_size reads them): 2.37e8 -> "240MB"; and its bytes (2.4e8).
std::string bucket_setting(double bytes);
double bucket_setting_bytes(double bytes);

struct CommRegime {
  // The gradient reduction as the point ran it.
  std::string collective;     // parallelism.collective: "ring", "auto", "tree", ...
  std::string op;             // "all-reduce" or "reduce-scatter"
  int ranks = 0;              // the data-parallel group (0: no regime: one rank, or nothing reduced)
  int calls = 0;              // gradient buckets reduced per optimizer step
  double bucket_bytes = 0;    // the largest bucket
  double gradient_bytes = 0;  // every bucket together
  double cap_bytes = 0;       // parallelism.bucket_size
  bool cap_moves = true;  // false: the bucket rule makes one bucket whatever the cap (DeepSpeed's flat bf16)
  // How the call's latency is modelled: "ring" (route latencies), "nccl" (NCCL's latency under `auto`), ""
  // (a named tree, hierarchical or rail all-reduce: no per-call figures here).
  std::string model;
  int ring_steps = 0;           // "ring"
  double step_latency_s = 0;    // "ring": a
  std::string nccl_choice;      // "nccl": at the largest bucket, "2.27 Ring/LL128, 4 channels"
  double payload_fraction = 1;  // "nccl": of that protocol (1 for the ring)
  double bottleneck_bw = 0;     // B, bytes/s
  std::string bottleneck;       // the link that sets it
  // Per call at the largest bucket, and per step summed over the calls.
  double call_latency_s = 0, call_transfer_s = 0;
  double latency_s = 0, transfer_s = 0;
  // The smallest bucket at which a call's latency is at most share x its transfer (0: none up to
  // kLargestBucketBytes), and the calls per step at that cap.
  double share = kLatencyShareTarget;
  double recommended_bytes = 0;
  int recommended_calls = 0;
  // A named collective against what NCCL would pick at the largest bucket ("" under `auto`, on CPU ranks, or
  // where NCCL's choice is unknown): its algorithm/protocol, whether it is the named one's algorithm, and
  // NCCL's estimates of its pick and of the named algorithm's fastest protocol (0: NCCL has none for it).
  std::string nccl_would;
  bool nccl_same = false;
  double nccl_estimate_s = 0, named_estimate_s = 0;

  bool known() const { return ranks >= 2 && calls > 0; }
  bool has_figures() const { return known() && !model.empty() && bottleneck_bw > 0; }
  bool latency_bound() const { return has_figures() && latency_s >= transfer_s; }
};

}  // namespace vitsim
