// NCCL's tuner (core/include/vitsim/core/model/nccl_tuning.hpp): ncclTopoTuneModel's tables and
// ncclTopoGetAlgoTime (src/graph/tuning.cc), the choice of getAlgoInfo / topoGetAlgoInfo (src/enqueue.cc).
// Line numbers are at the version's tag: "18:" is v2.18.3-1, "23:" is v2.23.4-1.
#include "vitsim/core/model/nccl_tuning.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "vitsim/core/base/enum_names.hpp"
#include "vitsim/core/base/error.hpp"

namespace vitsim {
namespace {

using A = NcclAlgo;
using P = NcclProto;
using F = NcclFunc;

constexpr EnumNames<A, kNcclAlgos> kAlgoNames = {{{A::Tree, "Tree"},
                                                  {A::Ring, "Ring"},
                                                  {A::CollNetDirect, "CollNetDirect"},
                                                  {A::CollNetChain, "CollNetChain"},
                                                  {A::Nvls, "NVLS"},
                                                  {A::NvlsTree, "NVLSTree"},
                                                  {A::Pat, "PAT"}}};
constexpr EnumNames<P, kNcclProtos> kProtoNames = {
    {{P::LL, "LL"}, {P::LL128, "LL128"}, {P::Simple, "Simple"}}};
constexpr EnumNames<F, 6> kFuncNames = {{{F::Broadcast, "Broadcast"},
                                         {F::Reduce, "Reduce"},
                                         {F::AllGather, "AllGather"},
                                         {F::ReduceScatter, "ReduceScatter"},
                                         {F::AllReduce, "AllReduce"},
                                         {F::AllToAll, "AllToAll"}}};

// NCCL's constants outside the version tables, the same at the three tags: thread counts in
// v2.18.3-1 src/include/devcomm.h:53-72, v2.23.4-1 src/include/device.h:64-85, v2.27.7-1 device.h:89-110;
// thread thresholds in src/include/comm.h v2.18.3-1:32-34, v2.23.4-1:37-39, v2.27.7-1:38-40.
constexpr int kMaxThreads = 640;                      // NCCL_MAX_NTHREADS
constexpr int kSimpleMaxThreads = 512;                // NCCL_SIMPLE_MAX_NTHREADS
constexpr int kLLMaxThreads = 512;                    // NCCL_LL_MAX_NTHREADS
constexpr int kLL128MaxThreads = 640;                 // NCCL_LL128_MAX_NTHREADS
constexpr int kLLThreshold = 8, kLL128Threshold = 8;  // NCCL_LL(128)_THREAD_THRESHOLD
constexpr int kSimpleThreshold = 64;                  // NCCL_SIMPLE_THREAD_THRESHOLD
constexpr int kCollNetThreshold = 512;                // tuning.cc 18:345-346, 23:405-406, 27:525-526
enum Hw { kNvlink = 0, kPci = 1, kNet = 2 };

int idx(A a) {
  return static_cast<int>(a);
}
int idx(P p) {
  return static_cast<int>(p);
}
int idx(F f) {
  return static_cast<int>(f);
}
bool is_collnet(A a) {
  return a == A::CollNetDirect || a == A::CollNetChain;
}
bool is_nvls(A a) {
  return a == A::Nvls || a == A::NvlsTree;
}
bool gathers(F f) {
  return f == F::AllGather || f == F::ReduceScatter;
}

// log2i: 18 src/include/utils.h:40 gives 0 for 0; 23's log2Down gives -1 for 0 (hence 23's check >= 0).
long log2i(std::uint64_t n, NcclRules r) {
  if (n == 0) return r == NcclRules::V2_18 ? 0 : -1;
  long l = 0;
  while (n >>= 1) l++;
  return l;
}

const NcclGraph& graph_of(const NcclTopo& t, A a) {
  // graphs[] of ncclTopoTuneModel: 18 src/init.cc:760, 23 src/init.cc:736 (PAT runs on the tree's graph).
  switch (a) {
    case A::Tree:
    case A::Pat:
      return t.tree;
    case A::Ring:
      return t.ring;
    case A::CollNetDirect:
      return t.collnet_direct;
    case A::CollNetChain:
      return t.collnet_chain;
    default:
      return t.nvls;
  }
}

// What ncclTopoTuneModel derives once per communicator (tuning.cc 18:135-155, 23:142-162, 27:228-243).
struct Ctx {
  const NcclTopo& t;
  const NcclVersion& v;
  bool v18, v27;
  int nodes, ranks;
  double ppn;
  double ll_max_bw, tree_bw, ring_ll128_bw, tree_ll128_bw;
};

Ctx make_ctx(const NcclTopo& t, const NcclVersion& v) {
  const int cc = (t.sm_min >= 100 && v.arch_rows > 3) ? 3 : t.sm_min >= 90 ? 2 : t.sm_min >= 80 ? 1 : 0;
  const int by_nodes = t.nnodes <= 2 ? t.nnodes - 1 : 2;
  // LL: on one node the GPU's row, on several the CPU's (an AMD CPU takes the middle row).
  const int ll_row = t.nnodes == 1 ? cc : t.cpu == NcclCpu::AmdX86 ? 1 : 0;
  return Ctx{t,
             v,
             v.rules == NcclRules::V2_18,
             v.rules == NcclRules::V2_27,
             t.nnodes,
             t.nranks,
             t.ranks_per_node(),
             v.ll_max_bw[ll_row][by_nodes],
             v.tree_bw[cc][by_nodes],
             v.ring_ll128_bw[cc][by_nodes],
             v.tree_ll128_bw[cc][by_nodes]};
}

// Whether ncclTopoTuneModel fills (f, a, p) at all (tuning.cc 18:165-172, 23:170-179, 27:255-264).
bool tuned(const Ctx& c, F f, A a, P p) {
  if (is_nvls(a) && p != P::Simple) return false;
  if (f == F::Broadcast || f == F::Reduce) return a == A::Ring;
  if (c.v18) return f == F::AllReduce ? a != A::Pat : a == A::Ring;
  if (gathers(f)) {
    if (a != A::Pat && a != A::Ring && a != A::Nvls && a != A::CollNetDirect) return false;
    // ncclPatEnable (23:109-115, 27:192-199): one GPU per node, a host (not offloaded) network device;
    // 2.27 also sm60 or later.
    if (a == A::Pat)
      return p == P::Simple && c.nodes == c.ranks && c.t.net_device_host && (!c.v27 || c.t.sm_min >= 60);
    return true;
  }
  return a != A::Pat;
}

// The bus bandwidth of (f, a, p) made an algorithm bandwidth (tuning.cc 18:174-200, 23:181-228, 27:265-328).
double algo_bw(const Ctx& c, F f, A a, P p) {
  const NcclGraph& g = graph_of(c.t, a);
  double bw = (c.nodes <= 2 || is_collnet(a)) ? g.bw_intra : g.bw_inter;
  if (!c.v18 && a == A::Nvls) bw = std::min(g.bw_intra, g.bw_inter);
  if (c.v27 && a == A::Nvls && f != F::AllReduce)  // 27:270-273: gathers
    bw = std::min(g.bw_intra * (c.ppn - 1) / c.ppn, g.bw_inter * 0.9);
  if (!c.v18 && a == A::NvlsTree) bw = std::min(g.bw_intra, c.nodes <= 2 ? g.bw_inter : g.bw_inter / 2);
  double bus = g.n_channels * bw;
  const double nch = g.n_channels;
  if (a == A::Ring && p == P::LL) {
    const bool quarter = c.nodes > 1 || f == F::AllReduce || f == F::Reduce;
    bus = std::min(c.ll_max_bw, bus * (c.v18 ? (quarter ? 1.0 / 4.0 : 1.0 / 3.0) : .5));
  }
  if (a == A::Ring && p == P::LL128)
    bus = std::min(bus * (c.v18 && c.ppn < 2 ? 0.7 : 0.92), nch * c.ring_ll128_bw);
  if (a == A::Tree && (c.v18 || f == F::AllReduce)) bus = std::min(bus * .92, nch * c.tree_bw);
  if (a == A::Tree && p == P::LL) bus = std::min(bus * 1.0 / 3.8, c.ll_max_bw);
  if (a == A::Tree && p == P::LL128)
    bus = std::min(bus * (c.nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), nch * c.tree_ll128_bw);
  if (a == A::Tree && g.tree_pattern) bus *= .85;
  if (a == A::Pat) bus *= c.v27 ? .75 : .85;
  if (is_collnet(a) && p != P::Simple) bus = 0;
  if (a == A::CollNetDirect && p == P::Simple) {
    if (c.v27 && gathers(f)) {
      bus = c.ppn * std::min(g.bw_intra, g.bw_inter * 0.9);  // 27:289-290
    } else if (!c.v18 && gathers(f)) {
      // 23:197-210: one NIC per GPU needed across nodes; a measured correction between 1 and 8 GPUs per node.
      bus = c.ppn * bw;
      if (c.nodes > 1 && c.ppn > c.t.collnet_heads) bus = 0;
      const double w = (c.ppn - 1) / (8 - 1);
      bus *= w * 0.85 + (1 - w) * 0.95;
    } else {
      double factor = c.ppn / nch;  // GPUs per NIC
      factor -= (factor - 1) / 2;
      bus /= factor;
      if (c.t.sm_min >= 90) bus *= .85;
    }
  }
  // 27:299-318: an NVLS or CollNetDirect gather across nodes needs CollNet (its plugin's iallgather or
  // ireducescatter, taken as there when CollNet is declared) and a head per local GPU.
  if (c.v27 && (a == A::Nvls || a == A::CollNetDirect) && p == P::Simple && gathers(f) && c.nodes > 1 &&
      (!c.t.collnet || c.ppn > c.t.collnet_heads))
    bus = 0;
  const int nsteps = f == F::AllReduce ? 2 * (c.ranks - 1) : gathers(f) ? c.ranks - 1 : c.ranks;
  if (c.v18) {
    if (a == A::Ring) return bus * c.ranks / nsteps;
    if (a == A::Nvls) return bus * 5.0 / 6.0;
    if (a == A::NvlsTree) return c.nodes > 1 ? bus * .70 * c.nodes / (2 * (c.nodes - 1)) : 0;
    return bus * .5;
  }
  if (a != A::Ring && gathers(f)) return bus;
  if (a == A::Ring) return bus * c.ranks / nsteps;
  return bus * (is_nvls(a) ? 5.0 / 6.0 : .5);
}

// The latency of (f, a, p) in us (tuning.cc 18:202-239, 23:233-282).
double algo_latency(const Ctx& c, F f, A a, P p) {
  const NcclVersion& v = c.v;
  const NcclGraph& g = graph_of(c.t, a);
  const int intra_hw = g.type_intra == NcclPath::Nvl ? kNvlink : kPci;
  const int hw = c.nodes == 1 ? intra_hw : kNet;
  const int ia = idx(a), ip = idx(p);
  double lat = v.base_lat_us[ia][ip];
  double intra = v.hw_lat_us[intra_hw][ia][ip];
  // 23: with one GPU per node the network latencies are fully exposed: the tree's are used.
  double inter = (!c.v18 && c.ppn == 1) ? v.hw_lat_us[kNet][idx(A::Tree)][ip] : v.hw_lat_us[kNet][ia][ip];
  inter += g.latency_inter_us;
  if (p == P::Simple) inter += g.latency_inter_us;  // the flush
  const int nsteps = f == F::AllReduce ? 2 * (c.ranks - 1) : gathers(f) ? c.ranks - 1 : c.ranks;
  const int local = c.ranks / c.nodes;
  const long lognodes = log2i(static_cast<std::uint64_t>(c.nodes), v.rules);
  switch (a) {
    case A::Ring: {
      double step = v.hw_lat_us[hw][ia][ip];
      if (f == F::Reduce || f == F::Broadcast) {
        if (g.same_channels) return lat + step;
        if (p == P::Simple) step = v.hw_lat_us[hw][idx(A::Tree)][ip];
        return lat + nsteps * step;
      }
      // getNetOverhead (18:111-118, 23:120-125): 1 us on Intel, 2 us on AMD, x 3 for Simple.
      double overhead = 0;
      if (c.nodes > 1) overhead = (c.t.cpu == NcclCpu::AmdX86 ? 2.0 : 1.0) * (p == P::Simple ? 3 : 1);
      intra = std::max(intra, overhead);
      int inter_steps = 0;
      if (c.v18)
        inter_steps = f == F::AllReduce ? (c.nodes > 1 ? 2 * c.nodes : 0) : c.nodes - 1;
      else
        inter_steps = c.nodes == 1 ? 0 : f == F::AllReduce ? 2 * (c.nodes - 1) : c.nodes - 1;
      return lat + (nsteps - inter_steps) * intra + inter_steps * inter;
    }
    case A::Tree:
      if (c.v18 || f == F::AllReduce) lat += 2 * ((local - 1) * intra + lognodes * inter);
      return lat;
    case A::CollNetDirect:  // + 0.5 us (18) or 0.4 us (23) of arity serialization per local GPU
      return lat + 2 * (std::min(1, local - 1) * intra + (local - 1) * (c.v18 ? 0.5 : 0.4)) + inter;
    case A::CollNetChain:
      return lat + 2 * (local - 1) * intra + inter;
    case A::Nvls:
      if (c.v18) return lat + (c.nodes > 1 ? v.hw_lat_us[kNet][ia][ip] : 0);
      return intra + (c.nodes > 1 ? inter : 0);
    case A::NvlsTree:
      if (c.v18) return lat + 2 * (c.nodes - 1) * v.hw_lat_us[kNet][ia][ip];
      return lat + intra + 2 * lognodes * inter;
    case A::Pat:  // 23:276-281: base, log of the nodes, and a linear part
      return 8 + lognodes * (inter / 3.5) + c.ranks * 2.8;
  }
  return lat;
}

// LL128's default rule (tuning.cc 18:282-294, 23:324-336): NVLink or close PCIe inside, a close NIC, one
// architecture of 70, 80 or 90. 2.27 (27:457-471) takes any architecture from 70 and, from sm90, NICs up
// to PXN (NCCL_LL128_C2C's default). (All three also refuse sm90 ring all-reduce on 2 ranks under CUDA
// 11.8: not modelled, CUDA 12 assumed.)
bool ll128_default(const Ctx& c, const NcclGraph& g) {
  const NcclTopo& t = c.t;
  bool on = g.type_intra <= NcclPath::Nvb && t.sm_min == t.sm_max;
  if (c.v27) {
    on = on && (t.sm_min >= 90 ? g.type_inter <= NcclPath::Pxn : g.type_inter <= NcclPath::Pxb);
    return on && t.sm_min >= 70;
  }
  on = on && (g.type_inter <= NcclPath::Pxb || (t.sm_min >= 90 && g.type_inter <= NcclPath::Pxn));
  return on && (t.sm_min == 70 || t.sm_min == 80 || t.sm_min == 90);
}

// Algorithms the topology rules out, per function (tuning.cc 18:260-278, 23:303-320, 27:436-452).
void topology_enables(const Ctx& c, NcclEnable& e) {
  const NcclTopo& t = c.t;
  for (auto& algo : e.algo) {
    if (t.nnodes == 1) algo[idx(A::NvlsTree)] = 0;
    if (!t.collnet) {
      algo[idx(A::CollNetDirect)] = algo[idx(A::CollNetChain)] = 0;
      if (t.nnodes > 1) algo[idx(A::Nvls)] = 0;
      // 18, 23: NCCL_ALGO=CollNet without CollNet is ignored (2.27 drops the rule).
      if (!c.v27 && !algo[idx(A::Ring)] && !algo[idx(A::Tree)] && !algo[idx(A::Nvls)] &&
          !algo[idx(A::NvlsTree)])
        algo[idx(A::Ring)] = algo[idx(A::Tree)] = 1;
    }
    if ((t.collnet || c.v27) && !t.nvswitch) algo[idx(A::CollNetDirect)] = 0;
  }
}

void apply_enables(NcclTuning& out, const Ctx& c, NcclEnable e) {
  const NcclTopo& t = c.t;
  topology_enables(c, e);
  for (int f = 0; f < kNcclTunedFuncs; f++)
    for (int a = 0; a < kNcclAlgos; a++)
      for (int p = 0; p < kNcclProtos; p++) {
        int on = e.proto[f][p];
        if (on == 2 && p == idx(P::LL128)) on = ll128_default(c, graph_of(t, static_cast<A>(a)));
        if (!on) out.bandwidth[f][a][p] = 0;
        if (a == idx(A::Ring) && !on) out.ring_backup_bw[f][p] = 0;
        // 18:296-297: ring is never disabled for a function other than AllReduce.
        if (c.v18 && a == idx(A::Ring) && f != idx(F::AllReduce)) continue;
        if (!e.algo[f][a]) out.bandwidth[f][a][p] = 0;
      }
  if (c.v18 || c.v27) return;
  // 23:342-356: a function left with nothing gets the ring back (2.27 drops it: NCCL then fails).
  for (int f = 0; f < kNcclTunedFuncs; f++) {
    bool any = false;
    for (const auto& row : out.bandwidth[f])
      for (double bw : row) any = any || bw != 0;
    if (!any) out.bandwidth[f][idx(A::Ring)] = out.ring_backup_bw[f];
  }
}

// One list of NCCL_ALGO / NCCL_PROTO: parseList (tuning.cc 18:34-52, 23:34-52, 27:53-129); `text` is the
// whole value, for messages.
template <typename Names, size_t N>
std::array<int, N> parse_row(const std::string& text, std::string list, const Names& names,
                             const std::vector<bool>& known, const char* env) {
  int def = 0, set = 1;
  if (list[0] == '^') def = 1, set = 0, list.erase(0, 1);
  std::array<int, N> out;
  out.fill(def);
  std::string valid;
  for (size_t i = 0; i < N; i++)
    if (known[i]) valid += (valid.empty() ? "" : ", ") + std::string(names[i].name);
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string token = list.substr(start, end - start);
    token.erase(0, token.find_first_not_of(" \t"));
    token.erase(token.find_last_not_of(" \t") + 1);
    start = end + 1;
    if (token.empty()) continue;  // strtok skips empty fields too
    bool found = false;
    for (size_t i = 0; i < N && !found; i++) {
      std::string name = names[i].name;
      if (!known[i] || name.size() != token.size()) continue;
      found = std::equal(name.begin(), name.end(), token.begin(),
                         [](char x, char y) { return std::tolower(x) == std::tolower(y); });
      if (found) out[i] = set;
    }
    if (!found) throw Error(fmt::format("{}='{}': unknown name '{}'; valid: {}", env, text, token, valid));
  }
  return out;
}

// The whole value: one list for every function, or (2.27) entries "func:list" separated by ';', only the
// first without a function (27:53-129).
template <typename Names, size_t N>
void parse_enable(const std::string& text, const Names& names, const std::vector<bool>& known,
                  const char* env, bool prefixes, std::array<std::array<int, N>, kNcclTunedFuncs>& out) {
  if (text.empty()) return;
  if (!prefixes) {
    const auto row = parse_row<Names, N>(text, text, names, known, env);
    for (auto& r : out) r = row;
    return;
  }
  size_t start = 0;
  for (int entry = 0; start <= text.size(); entry++) {
    size_t end = text.find(';', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    if (colon == std::string::npos && entry > 0)
      throw Error(
          fmt::format("{}='{}': every entry but the first needs a function ('allreduce:...')", env, text));
    std::string func = colon == std::string::npos ? "" : item.substr(0, colon);
    const auto row = parse_row<Names, N>(text, colon == std::string::npos ? item : item.substr(colon + 1),
                                         names, known, env);
    bool found = func.empty();
    for (int f = 0; f < kNcclTunedFuncs; f++) {
      std::string name = kFuncNames[f].name;
      const bool match = func.size() == name.size() &&
                         std::equal(name.begin(), name.end(), func.begin(),
                                    [](char x, char y) { return std::tolower(x) == std::tolower(y); });
      if (func.empty() || match) out[f] = row;
      found = found || match;
    }
    if (!found)
      throw Error(
          fmt::format("{}='{}': unknown function '{}'; valid: Broadcast, Reduce, AllGather, "
                      "ReduceScatter, AllReduce",
                      env, text, func));
  }
}

}  // namespace

const char* nccl_algo_name(NcclAlgo a) {
  return name_of(kAlgoNames, a);
}
const char* nccl_proto_name(NcclProto p) {
  return name_of(kProtoNames, p);
}
const char* nccl_func_name(NcclFunc f) {
  return name_of(kFuncNames, f);
}

NcclFunc nccl_func(const std::string& name) {
  std::string key;
  for (char ch : name)
    if (ch != '_') key += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (const auto& n : kFuncNames) {
    std::string lower;
    for (const char* p = n.name; *p; ++p) lower += static_cast<char>(std::tolower(*p));
    if (lower == key) return n.value;
  }
  throw Error(fmt::format("unknown collective '{}'; valid: {}", name, valid_names(kFuncNames)));
}

std::string nccl_algo_names(const NcclVersion& v) {
  std::string out;
  for (A a : v.algos) out += (out.empty() ? "" : ", ") + std::string(nccl_algo_name(a));
  return out;
}

NcclEnable::NcclEnable() {
  for (auto& a : algo) a.fill(1);
  for (auto& p : proto) p = {1, 2, 1};
}

NcclEnable nccl_enable(const NcclOverrides& o, const NcclVersion& v) {
  NcclEnable e;
  std::vector<bool> known_algo(kNcclAlgos, false);
  for (A a : v.algos) known_algo[idx(a)] = true;
  const bool prefixes = v.rules == NcclRules::V2_27;
  parse_enable(o.algo, kAlgoNames, known_algo, "NCCL_ALGO", prefixes, e.algo);
  parse_enable(o.proto, kProtoNames, std::vector<bool>(kNcclProtos, true), "NCCL_PROTO", prefixes, e.proto);
  for (auto& row : e.algo)
    for (int a = 0; a < kNcclAlgos; a++)
      if (!known_algo[a]) row[a] = 0;  // an algorithm the version does not have
  return e;
}

// The network cost the plugin does not state, over each algorithm's network steps as NCCL counts them
// (algo_latency with every graph's latencyInter raised by it, LL's count: no Simple flush, which is a read
// on the GPU, not a message). Zero where no graph carries one.
void unseen_latency(NcclTuning& out, const Ctx& c) {
  NcclTopo raised = c.t;
  bool any = false;
  for (NcclGraph* g :
       {&raised.ring, &raised.tree, &raised.nvls, &raised.collnet_direct, &raised.collnet_chain}) {
    g->latency_inter_us += g->latency_unseen_us;
    any = any || g->latency_unseen_us > 0;
  }
  if (!any) return;
  const Ctx r = make_ctx(raised, c.v);
  for (int f = 0; f < kNcclTunedFuncs; f++)
    for (int a = 0; a < kNcclAlgos; a++) {
      const F func = static_cast<F>(f);
      const A algo = static_cast<A>(a);
      const double extra = algo_latency(r, func, algo, P::LL) - algo_latency(c, func, algo, P::LL);
      for (int p = 0; p < kNcclProtos; p++)
        if (out.bandwidth[f][a][p] > 0) out.unseen_us[f][a][p] = extra;
    }
}

NcclTuning nccl_tune(const NcclTopo& t, const NcclVersion& v, const NcclOverrides& o) {
  if (t.nranks < 1 || t.nnodes < 1 || t.nranks % t.nnodes != 0)
    throw Error(
        fmt::format("NCCL tuner: {} ranks on {} nodes: need ranks a multiple of nodes", t.nranks, t.nnodes));
  const NcclEnable enable = nccl_enable(o, v);
  NcclTuning out;
  // maxThreads (18:121-133, 23:128-140): Simple ring at 256 threads when the ring is no faster than PCIe.
  const bool slow_ring = t.ring.bw_intra * t.ring.n_channels <= v.pci_bw;
  for (auto& row : out.max_threads) row = {kLLMaxThreads, kLL128MaxThreads, kMaxThreads};
  out.max_threads[idx(A::Ring)][idx(P::Simple)] = slow_ring ? 256 : kSimpleMaxThreads;
  out.max_threads[idx(A::Tree)][idx(P::Simple)] = kSimpleMaxThreads;
  out.max_threads[idx(A::Pat)][idx(P::Simple)] = 0;  // 23 sets none (the comm is zeroed)
  // threadThresholds (18:339-346, 23:399-406).
  for (auto& row : out.thread_threshold) row = {kLLThreshold, kLL128Threshold, kSimpleThreshold};
  out.thread_threshold[idx(A::Ring)][idx(P::LL)] *= t.nranks;
  out.thread_threshold[idx(A::CollNetDirect)][idx(P::Simple)] = kCollNetThreshold;
  out.thread_threshold[idx(A::CollNetChain)][idx(P::Simple)] = kCollNetThreshold;
  if (t.nranks <= 1) return out;
  const Ctx c = make_ctx(t, v);
  for (int f = 0; f < kNcclTunedFuncs; f++)
    for (int a = 0; a < kNcclAlgos; a++)
      for (int p = 0; p < kNcclProtos; p++) {
        const F func = static_cast<F>(f);
        const A algo = static_cast<A>(a);
        const P proto = static_cast<P>(p);
        if (!tuned(c, func, algo, proto)) continue;
        out.bandwidth[f][a][p] = algo_bw(c, func, algo, proto);
        out.latency_us[f][a][p] = algo_latency(c, func, algo, proto);
        if (algo == A::Ring) out.ring_backup_bw[f][p] = out.bandwidth[f][a][p];
      }
  unseen_latency(out, c);
  apply_enables(out, c, enable);
  return out;
}

}  // namespace vitsim
