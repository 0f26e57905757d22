// NCCL's choice for one call (core/include/vitsim/core/model/nccl_tuning.hpp): ncclTopoGetAlgoTime
// (src/graph/tuning.cc), getAlgoInfo (v2.18.3-1 src/enqueue.cc:1153-1223) and updateCollCostTable /
// topoGetAlgoInfo (v2.23.4-1 src/enqueue.cc:1778-1904, v2.27.7-1 src/enqueue.cc:1753-1878, the same
// channel and thread rules). "18:", "23:" and "27:" are lines at those tags.
#include <fmt/format.h>

#include <algorithm>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/model/nccl_tuning.hpp"

namespace vitsim {
namespace {

using A = NcclAlgo;
using P = NcclProto;
using F = NcclFunc;

// WARP_SIZE and NCCL_MAX_NTHREADS: v2.18.3-1 src/include/devcomm.h:51-53, v2.23.4-1
// src/include/device.h:61-64, v2.27.7-1 src/include/device.h:86-89.
constexpr int kWarp = 32;           // WARP_SIZE
constexpr int kMaxThreads = 640;    // NCCL_MAX_NTHREADS
constexpr int kMaxLocalDirect = 8;  // NCCL_MAX_DIRECT_ARITY + 1 (device.h 23:174; enqueue.cc 23:1793)
constexpr int kMaxNvlsArity = 32;   // NCCL_MAX_NVLS_ARITY (v2.27.7-1 src/include/device.h:206)

int idx(A a) {
  return static_cast<int>(a);
}
int idx(P p) {
  return static_cast<int>(p);
}
bool is_nvls(A a) {
  return a == A::Nvls || a == A::NvlsTree;
}

// ncclTopoGetAlgoTime (tuning.cc 18:381-398, 23:441-467) for one op alone (numPipeOps 1: the latency once).
NcclCost algo_time(const NcclTuning& tu, const NcclTopo& t, const NcclVersion& v, F f, A a, P p,
                   std::uint64_t bytes) {
  const bool v18 = v.rules == NcclRules::V2_18;
  const int fi = static_cast<int>(f);
  NcclCost c{a, p, tu.latency_us[fi][idx(a)][idx(p)], tu.bandwidth[fi][idx(a)][idx(p)], -1, false};
  if (v.rules == NcclRules::V2_23 && a == A::Ring && c.bandwidth == 0) {
    c.bandwidth = tu.ring_backup_bw[fi][idx(p)];  // 23:445-452: the ring as a backup
    c.backup = true;
  }
  if (c.bandwidth == 0) return c;
  // The tree's correction for medium sizes, powers of two from 64 B (18: log2i(0) is 0; 23: -1, skipped).
  long log_size = -1;
  if (bytes >> 6) {
    log_size = 0;
    for (std::uint64_t n = bytes >> 6; n >>= 1;) log_size++;
  } else if (v18) {
    log_size = 0;
  }
  if (a == A::Tree && (v18 || f == F::AllReduce) && log_size >= 0 && log_size < 23)
    c.bandwidth *= v.tree_correction[idx(p)][log_size];
  // The ring's plateau: Simple all-reduce over the network once each rank's slice per channel is >= 64 B.
  if (a == A::Ring && p == P::Simple && t.nnodes > 1 && f == F::AllReduce &&
      bytes / (static_cast<std::uint64_t>(t.comm_channels) * t.nranks) >= 64)
    c.latency_us *= t.sm_min < 80 ? 1.9 : 1.4;
  c.time_us = c.latency_us + static_cast<double>(bytes) / (1000 * c.bandwidth);
  return c;
}

// Whether getAlgoInfo weighs (f, a) at all (18:1167-1170; 23:1789-1800; 27:1764-1772). Data types and
// reduction ops are taken as NVLS- and CollNet-capable (fp16/bf16/fp32 sums).
bool weighed(const NcclTopo& t, const NcclVersion& v, F f, A a) {
  if ((a == A::CollNetDirect || a == A::CollNetChain) && !t.collnet) return false;
  if (a == A::Nvls && !t.collnet && t.nnodes > 1) return false;
  if (v.rules == NcclRules::V2_18) return true;
  if (a == A::CollNetDirect && t.ranks_per_node() > kMaxLocalDirect) return false;
  if (v.rules == NcclRules::V2_27)  // NVLS: its support, and at most 32 local GPUs but for all-reduce
    return !is_nvls(a) || (t.nvls_channels > 0 && (f == F::AllReduce || t.ranks_per_node() <= kMaxNvlsArity));
  if (is_nvls(a) && t.nvls_channels == 0 && f != F::AllGather) return false;
  if (a == A::Nvls && (f == F::AllGather || f == F::ReduceScatter) && t.nnodes > 1) return false;
  return true;
}

// Channels and threads for the chosen pair (18:1189-1222, 23:1861-1900).
void channels_threads(NcclChoice& out, const NcclTuning& tu, const NcclTopo& t, const NcclVersion& v) {
  const bool v18 = v.rules == NcclRules::V2_18;
  const auto bytes = static_cast<double>(out.bytes);
  int nc = t.comm_channels;
  int nt = tu.max_threads[idx(out.algo)][idx(out.proto)];
  double threshold = tu.thread_threshold[idx(out.algo)][idx(out.proto)];
  if (out.algo == A::CollNetDirect) {
    bool more = true;
    for (int sw = 16; sw >= 1 && more; sw /= 2) {
      while ((more = bytes < 1.0 * nc * nt * t.collnet_heads * threshold) && nc > sw) {
        if (nc == sw + sw / 2) threshold /= 2;
        nc--;
      }
    }
  } else if (is_nvls(out.algo)) {
    nc = t.nvls_channels;  // "NVLS should not need more than 16 channels to get peak BW"
  } else if (v18) {
    while (bytes < 1.0 * nc * nt * threshold) {
      if (nc >= 2)
        nc--;
      else if (nt % 128 == 0)
        nt /= 2;
      else
        break;
    }
  } else {
    while (bytes < 1.0 * nc * nt * threshold && nc >= 2) nc--;
    while (bytes < 1.0 * nc * nt * threshold && nt % 128 == 0) nt /= 2;
  }
  if (out.proto == P::Simple) {
    if (out.algo == A::Ring) nt += kWarp;      // an extra warp for sync
    if (out.algo == A::Tree) nt += 4 * kWarp;  // the split thread model
  }
  if (nt / kWarp < 3) nt = 3 * kWarp;
  if (!v18 && (out.algo == A::Tree || out.algo == A::Pat)) nt = kMaxThreads;
  out.n_channels = nc;
  out.n_threads = nt;
}

std::string bytes_text(std::uint64_t b) {
  if (b >= (1ULL << 30) && b % (1ULL << 30) == 0) return fmt::format("{} GiB", b >> 30);
  if (b >= (1ULL << 20) && b % (1ULL << 20) == 0) return fmt::format("{} MiB", b >> 20);
  if (b >= (1ULL << 10) && b % (1ULL << 10) == 0) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} B", b);
}

}  // namespace

std::string NcclChoice::why() const {
  const std::string what = fmt::format("{} {}", nccl_func_name(func), bytes_text(bytes));
  if (p2p) return what + ": send/recv (p2p), not tuned by NCCL's collective model";
  std::string next;
  double best_other = -1;
  for (const auto& c : table) {
    if (c.time_us < 0 || (c.algo == algo && c.proto == proto)) continue;
    if (best_other < 0 || c.time_us < best_other) {
      best_other = c.time_us;
      next =
          fmt::format(" (next {}/{} {:.1f} us)", nccl_algo_name(c.algo), nccl_proto_name(c.proto), c.time_us);
    }
  }
  const std::string unseen =
      unseen_us > 0 ? fmt::format(" (of which {:.1f} us the net plugin does not state)", unseen_us) : "";
  return fmt::format("{}: {}/{}{} {:.1f} us = {:.1f} us{} + {} / {:.1f} GB/s{}, {} channels x {} threads",
                     what, nccl_algo_name(algo), nccl_proto_name(proto), backup ? " (ring backup)" : "",
                     time_us, latency_us, unseen, bytes_text(bytes), bandwidth, next, n_channels, n_threads);
}

NcclChoice nccl_choose(NcclFunc func, std::uint64_t bytes, const NcclTuning& tu, const NcclTopo& t,
                       const NcclVersion& v) {
  NcclChoice out;
  out.func = func;
  out.bytes = bytes;
  if (func == F::AllToAll) {
    out.p2p = true;
    return out;
  }
  if (t.comm_channels < 1 || t.nranks < 1)
    throw Error(
        fmt::format("NCCL tuner: a communicator of {} ranks and {} channels: need at least one of each",
                    t.nranks, t.comm_channels));
  if (t.nranks == 1) {  // 18:1155-1158, 23:1786-1789: one rank copies, Ring/Simple
    out.algo = A::Ring;
    out.proto = P::Simple;
    out.n_channels = 1;
    out.n_threads = 3 * kWarp;
    return out;
  }
  const NcclCost* best = nullptr;
  const NcclCost* best_backup = nullptr;
  out.table.reserve(kNcclAlgos * kNcclProtos);
  for (A a : v.algos) {
    if (!weighed(t, v, func, a)) continue;
    for (int p = 0; p < kNcclProtos; p++)
      out.table.push_back(algo_time(tu, t, v, func, a, static_cast<P>(p), bytes));
  }
  // The first strictly fastest in NCCL's order wins; 23's backup ring only when nothing else is left.
  for (const auto& c : out.table) {
    if (c.time_us < 0) continue;
    const NcclCost*& slot = c.backup ? best_backup : best;
    if (!slot || c.time_us < slot->time_us) slot = &c;
  }
  if (!best) best = best_backup;
  if (!best)
    throw Error(
        fmt::format("NCCL {}: no algorithm/protocol available for {} (NCCL's \"Error : no "
                    "algorithm/protocol available\"): the overrides or the topology leave none",
                    v.name, nccl_func_name(func)));
  out.algo = best->algo;
  out.proto = best->proto;
  out.time_us = best->time_us;
  out.latency_us = best->latency_us;
  out.bandwidth = best->bandwidth;
  out.backup = best->backup;
  // What the network costs beyond what its plugin told NCCL: not in the choice, in the call's time.
  out.unseen_us = tu.unseen_us[static_cast<int>(func)][idx(out.algo)][idx(out.proto)];
  out.latency_us += out.unseen_us;
  out.time_us += out.unseen_us;
  channels_threads(out, tu, t, v);
  return out;
}

double nccl_payload_fraction(NcclProto p) {
  // union ncclLLFifoLine (v2.18.3-1 src/include/devcomm.h:36-49, v2.23.4-1 src/include/device.h:46-59,
  // v2.27.7-1 device.h:71-84): data1, flag1, data2, flag2. NCCL_LL128_DATAELEMS = LINEELEMS - 1 (18
  // devcomm.h:69-70, 23 device.h:82-83, 27 device.h:107-108).
  switch (p) {
    case P::LL:
      return 0.5;
    case P::LL128:
      return 120.0 / 128.0;
    default:
      return 1.0;
  }
}

NcclChoice nccl_choose(NcclFunc func, std::uint64_t bytes, const NcclTopo& t, const NcclVersion& v,
                       const NcclOverrides& o) {
  return nccl_choose(func, bytes, nccl_tune(t, v, o), t, v);
}

}  // namespace vitsim
