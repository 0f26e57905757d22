// `vitsim collective` (collective_bench.hpp): the ranks placed as a point's are (core's place_ranks), the
// engine prepared as a point's is (prepare_engine), then one actor per rank runs the sweep's sizes in turn.
#include "vitsim/sim/predict/collective_bench.hpp"

#include <fmt/format.h>

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <set>

#include "collectives/nccl_comm.hpp"
#include "collectives/transfers.hpp"
#include "point/point_setup.hpp"
#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/identity.hpp"
#include "vitsim/core/formats/placement.hpp"
#include "vitsim/sim/collectives/collective.hpp"
#include "vitsim/sim/engine/engine.hpp"
#include "vitsim/sim/engine/process_pool.hpp"

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {

namespace {

int payload = 0;  // transfers carry no data: the simulator only needs the sizes

// The bench's ranks as a scenario's cluster: the nodes (--hosts, else the platform's order, --nodes of them)
// and the GPUs used on each (-g, else every GPU of the first node), checked here so that messages name the
// command's flags; place_ranks (core) then places them as it places a point's.
Scenario bench_cluster(const CollectiveBench& b, const PlatformFacts& facts) {
  Scenario s;
  s.name = "collective";
  s.file = b.platform;
  s.cluster.platform = b.platform;
  s.cluster.hosts = b.hosts;
  // The NCCL environment the engine reads too (the sockets each NIC link opens: nccl_net_connections).
  s.nccl = {b.nccl_version, b.nccl_algo, b.nccl_proto, b.nccl_min_channels, b.nccl_max_channels};
  std::vector<const NodeFacts*> order;
  std::set<std::string> seen;
  for (const auto& name : b.hosts) {
    try {
      order.push_back(&facts.node(name));
    } catch (const Error& e) {
      throw Error(fmt::format("--hosts: {}", e.what()));
    }
    if (!seen.insert(name).second) throw Error(fmt::format("--hosts: node '{}' is listed twice", name));
  }
  if (b.hosts.empty())
    for (const auto& n : facts.nodes) order.push_back(&n);
  const int available = static_cast<int>(order.size());
  s.cluster.nodes = b.nodes > 0 ? b.nodes : available;
  if (s.cluster.nodes > available)
    throw Error(fmt::format("--nodes {}: {} has {} node(s)", b.nodes, facts.path, available));
  if (order.empty()) throw Error(fmt::format("{}: no GPU nodes", facts.path));
  s.cluster.gpus_per_node = b.gpus_per_node > 0 ? b.gpus_per_node : static_cast<int>(order[0]->gpus.size());
  for (int k = 0; k < s.cluster.nodes; ++k)
    if (s.cluster.gpus_per_node > static_cast<int>(order[static_cast<size_t>(k)]->gpus.size()))
      throw Error(fmt::format("-g {}: node '{}' of {} has {} GPU(s)", s.cluster.gpus_per_node,
                              order[static_cast<size_t>(k)]->name, facts.path,
                              order[static_cast<size_t>(k)]->gpus.size()));
  if (s.ranks() < 2)
    throw Error(
        fmt::format("{} rank: a collective over one GPU moves nothing over the platform's links; give "
                    "2 or more ranks (--nodes, -g)",
                    s.ranks()));
  if (nccl_test_rooted(b.func) && (b.root < 0 || b.root >= s.ranks()))
    throw Error(fmt::format("-r {}: the root is a rank, 0 to {}", b.root, s.ranks() - 1));
  return s;
}

// Broadcast as NCCL runs it (a ring only, NCCL's tuning tables): a pipelined chain from the root through the
// ranks in ring order. Fused as the ring is (transfers.cpp, fused_ring_steps): every edge of the chain
// carries all `bytes` in one flow, all at once, then the chain's other n-2 hops' latencies are added: on
// identical links (n-1) a + S/B, the pipeline's time in the limit of small chunks.
void chain_broadcast(const Group& g, int me, int root, double bytes, double hop_latency) {
  const int n = g.size();
  const int pos = (me - root + n) % n, next = (me + 1) % n, prev = (me + n - 1) % n;
  void* got = nullptr;
  sg4::CommPtr recv;
  if (pos > 0) recv = g.mailbox(prev, me)->get_async(&got);
  if (pos < n - 1) {
    if (double lat = g.latency(me, next); lat > 0) sg4::this_actor::sleep_for(lat);
    g.mailbox(me, next)->put_async(&payload, static_cast<uint64_t>(bytes))->wait();
  }
  g.barrier()->wait();
  if (recv) recv->wait();
  if (n > 2 && hop_latency > 0) sg4::this_actor::sleep_for((n - 2) * hop_latency);
}

// The largest latency between successive ranks of the chain from `root`.
double chain_hop_latency(const Group& g, int root) {
  double lat = 0;
  for (int k = 0; k + 1 < g.size(); ++k)
    lat = std::max(lat, g.latency((root + k) % g.size(), (root + k + 1) % g.size()));
  return lat;
}

CollOp coll_op(NcclTest f) {
  return f == NcclTest::ReduceScatter ? CollOp::ReduceScatter
         : f == NcclTest::AllGather   ? CollOp::AllGather
                                      : CollOp::AllReduce;
}

// What ran, as comment lines under the table.
std::vector<std::string> bench_notes(const CollectiveBench& b, const std::vector<std::string>& engine_notes,
                                     const Collective& chosen) {
  std::vector<std::string> notes;
  switch (b.func) {
    case NcclTest::AllToAll:
      notes.push_back(
          "alltoall: every pair at once (NCCL's grouped send/receive), whatever --collective says");
      break;
    case NcclTest::Broadcast:
      notes.push_back(
          "broadcast: a pipelined chain from the root in rank order (NCCL broadcasts over its ring only); "
          "--collective does not apply");
      break;
    default:
      if (b.algorithm == "auto") {
        notes.push_back(fmt::format("{}: collective 'auto': NCCL's tuner picks per size, as listed below",
                                    nccl_test_name(b.func)));
        for (auto& line : chosen.run_notes()) notes.push_back(std::move(line));
      } else {
        notes.push_back(fmt::format(
            "{}: collective '{}' for every size (listed by `vitsim predict --list collectives`{})",
            nccl_test_name(b.func), b.algorithm,
            b.algorithm == "topology" ? "; topology picks by the placement, not by size" : ""));
      }
  }
  notes.push_back(
      "times: from the instant every rank is there to the last rank's end, latencies as pure delays "
      "(alpha-beta); one run per size, no warm-up, no spread");
  for (const auto& n : engine_notes) notes.push_back(n);
  return notes;
}

// The ranks' "# Rank" lines: each runs on its node (the host nccl-tests names), its index there as the
// device, its platform host in place of the PCI bus id.
std::vector<NcclDevice> bench_devices(const RankPlacement& place, const PlatformFacts& facts, int per_node) {
  std::vector<NcclDevice> out;
  for (size_t r = 0; r < place.hosts.size(); ++r)
    out.push_back({static_cast<int>(r), facts.nodes[static_cast<size_t>(place.node[r])].name,
                   static_cast<int>(r) % per_node, place.hosts[r], facts.gpu.at(place.hosts[r]).model});
  return out;
}

// Runs every size on the prepared engine: each rank waits for all at a barrier, runs the collective and
// records its end; returns each size's time (the last end after the common start).
std::vector<double> simulate_sizes(sg4::Engine& e, const CollectiveBench& b, const Group& g,
                                   const Collective& chosen, const std::vector<double>& bytes) {
  const int n = g.size();
  const double hop = b.func == NcclTest::Broadcast ? chain_hop_latency(g, b.root) : 0.0;
  std::vector<double> start(bytes.size(), 0.0), end(bytes.size(), 0.0);
  sg4::BarrierPtr sizes = sg4::Barrier::create(static_cast<unsigned>(n));
  ProgressLine progress("vitsim collective", b.progress);
  for (int me = 0; me < n; ++me)
    sg4::Actor::create(fmt::format("rank{}", me), g.host(me), [&, me] {
      for (size_t k = 0; k < bytes.size(); ++k) {
        sizes->wait();
        if (me == 0) {
          start[k] = sg4::Engine::get_clock();
          if (k > 0) progress.update(k, bytes.size(), "sizes");
        }
        if (b.func == NcclTest::AllToAll)
          all_to_all(g, me, bytes[k]);
        else if (b.func == NcclTest::Broadcast)
          chain_broadcast(g, me, b.root, bytes[k], hop);
        else
          chosen.run(g, me, bytes[k], coll_op(b.func));  // "auto" picks per size itself
        end[k] = std::max(end[k], sg4::Engine::get_clock());
      }
    });
  e.run();
  progress.update(bytes.size(), bytes.size(), "sizes");
  std::vector<double> time(bytes.size());
  for (size_t k = 0; k < bytes.size(); ++k) time[k] = end[k] - start[k];
  return time;
}

// What one transfer in flight takes in the simulation (its SimGrid communication, network action and max-min
// variable, its mailbox, kept over the sizes for alltoall's pairs) and its CPU: SimGrid's max-min solver
// revisits every flow in flight at each flow's end, so one size costs about c x flows^2. Measured here
// (docs/benchmarks.md "vitsim collective's cost": alltoall of 1 MiB on 64, 128 and 256 H100 ranks, peak
// resident memory and user CPU time: 53.8 MB / 0.16 s, 92.3 MB / 2.07 s, 232 MB / 32.5 s): 2.9 KiB per flow
// between 128 and 256 ranks (3 KiB here), c = 7.8e-9 s at 128 and 7.6e-9 s at 256 ranks (8e-9 here); the
// issue's 1,024 ranks took 2.85 GB, 2.7 KiB a flow. ASSUMPTION that both hold past 256 ranks:
// bench/collective_cost.sh on a larger machine replaces them.
constexpr double kBytesPerFlow = 3 * 1024.0;
constexpr double kCpuSecondsPerFlowSquared = 8e-9;

// A point's checks that nccl-tests would fail on: its buffers on every GPU used (src/common.cu
// AllocateBuffs: a send and a receive buffer of the largest size, cudaMalloc each, and with its data check,
// -c 1 by default, a third of the receive size; beyond the GPU's memory it stops with "out of memory").
void check_buffers(const RankPlacement& place, const PlatformFacts& facts, double largest_bytes) {
  const double need = 2 * largest_bytes;
  for (const std::string& host : place.hosts) {
    const GpuFacts& g = facts.gpu.at(host);
    if (g.mem_bytes > 0 && need > g.mem_bytes)
      throw Error(fmt::format(
          "-e {}: nccl-tests allocates a send and a receive buffer of the largest size on every GPU ({} + "
          "{}, "
          "and a third for its data check with -c 1), above the {} of {} ({}): all_reduce_perf and the "
          "others stop there with a CUDA 'out of memory'; give -e {} or less",
          units::format_bytes(largest_bytes), units::format_bytes(largest_bytes),
          units::format_bytes(largest_bytes), units::format_bytes(g.mem_bytes), g.model, host,
          units::format_bytes(std::exp2(std::floor(std::log2(g.mem_bytes / 2))))));
  }
}

// Each size's time: the longer of its collective and the host's launches of its calls (kNcclLaunchPerGpuS):
// nccl-tests' loop issues the next iteration's calls without waiting, one a GPU its thread drives. Returns
// the note that counts the sizes the launches bound ("" where none).
std::string set_times(NcclTable& t, const CollectiveBench& b, const std::vector<double>& time) {
  const double launches = b.gpus_per_thread * b.launch_cost_s;
  int host_bound = 0;
  for (size_t k = 0; k < t.rows.size(); ++k) {
    host_bound += time[k] < launches;
    t.rows[k].time_s = t.rows[k].in_place_time_s = std::max(time[k], launches);
  }
  if (host_bound == 0) return "";
  return fmt::format(
      "host launches: {} took the host's launches of its calls, {} GPU(s) a thread x {} = {} "
      "(--gpus-per-thread, --launch-cost), longer than the collective",
      host_bound == static_cast<int>(t.rows.size()) ? std::string("every size")
                                                    : count_noun(host_bound, "size"),
      b.gpus_per_thread, units::format_time(b.launch_cost_s), units::format_time(launches));
}

}  // namespace

BenchCost estimated_bench_cost(NcclTest func, int ranks, int platform_hosts, size_t sizes) {
  const double n = ranks;
  BenchCost c;
  // alltoall: every ordered pair at once (all_to_all, transfers.cpp); the algorithms of the registry keep a
  // few flows per rank (a ring or chain one, a tree two, the hierarchical and rail forms one per level):
  // 4 per rank bounds them.
  c.flows = func == NcclTest::AllToAll ? n * (n - 1) : 4 * n;
  c.memory_bytes = n * kSimBytesPerRank + platform_hosts * kSimBytesPerHost + c.flows * kBytesPerFlow;
  c.cpu_s = static_cast<double>(sizes) * c.flows * c.flows * kCpuSecondsPerFlowSquared;
  return c;
}

NcclTable run_collective_bench(const CollectiveBench& b) {
  const int type_bytes = nccl_type_bytes(b.type);
  if (nccl_test_reduces(b.func)) check_nccl_redop(b.redop);
  std::unique_ptr<Collective> chosen;
  try {
    chosen = make_collective(b.algorithm);
  } catch (const Error& e) {
    throw Error(fmt::format("--collective: {}", e.what()));
  }
  // NCCL_ALGO / NCCL_PROTO / NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS steer NCCL's tuner, which only `auto`
  // runs: with a named algorithm they would change nothing (issue 36, bad input).
  const char* nccl_flag = !b.nccl_algo.empty()       ? "--nccl-algo"
                          : !b.nccl_proto.empty()    ? "--nccl-proto"
                          : b.nccl_min_channels != 0 ? "--nccl-min-channels"
                          : b.nccl_max_channels != 0 ? "--nccl-max-channels"
                                                     : nullptr;
  if (b.algorithm != "auto" && nccl_flag)
    throw Error(fmt::format(
        "{} applies to NCCL's tuner (--collective auto); --collective {} runs its own algorithm for every "
        "size, so it would change nothing: drop one",
        nccl_flag, b.algorithm));
  // --nccl-version picks the tables of NCCL's tuner, which only `auto` runs (issue 39 item 15: ignored
  // with a named algorithm); alltoall and broadcast run as NCCL runs them whatever the tuner says.
  if (b.algorithm != "auto" && !b.nccl_version.empty())
    throw Error(
        fmt::format("--nccl-version applies to NCCL's tuner (--collective auto); --collective {} runs "
                    "its own algorithm for every size, so it would change nothing: drop one",
                    b.algorithm));
  if ((b.func == NcclTest::AllToAll || b.func == NcclTest::Broadcast) &&
      (!b.nccl_version.empty() || nccl_flag))
    throw Error(fmt::format(
        "{} with --func {}: NCCL runs {} without its tuner's choice, so it would change "
        "nothing: drop it",
        !b.nccl_version.empty() ? "--nccl-version" : nccl_flag, nccl_test_name(b.func),
        b.func == NcclTest::AllToAll ? "alltoall as grouped sends and receives" : "broadcast over its ring"));
  const std::vector<double> sizes = nccl_sizes(b.sweep);
  const PlatformFacts facts = read_platform_facts(b.platform);
  Scenario s = bench_cluster(b, facts);
  // A thread drives GPUs of its own node (nccl-tests: a process's GPUs are local), at most those used there.
  if (b.gpus_per_thread < 1 || b.gpus_per_thread > s.cluster.gpus_per_node)
    throw Error(
        fmt::format("--gpus-per-thread {}: a host thread drives 1 to {} GPU(s), those used on its node (-g)",
                    b.gpus_per_thread, s.cluster.gpus_per_node));
  if (!(b.launch_cost_s >= 0) || !std::isfinite(b.launch_cost_s))
    throw Error(fmt::format("--launch-cost {}: want a time of 0 or more", b.launch_cost_s));
  const RankPlacement place = place_ranks(s, facts);
  check_buffers(place, facts, nccl_counts(b.func, sizes.back(), type_bytes, s.ranks()).bytes);
  // Before anything is built: the memory and time the sizes will take (predict's simulation.max_memory).
  {
    s.simulation.max_memory = b.max_memory;
    const BenchCost cost =
        estimated_bench_cost(b.func, s.ranks(), static_cast<int>(facts.gpu.size()), sizes.size());
    double need = cost.memory_bytes;
    const double limit = memory_limit(s, need);
    if (need > limit)
      throw Error(fmt::format(
          "{} on {} ranks keeps {:.3g} transfers in flight at once: about {} of memory (~{} B per transfer, "
          "{} KiB per rank) and {} of CPU for {}, above the limit of {}{}; use fewer ranks (--nodes, -g) or "
          "raise the limit with --max-memory SIZE",
          nccl_test_name(b.func), s.ranks(), cost.flows, units::format_bytes(need), kBytesPerFlow,
          kSimBytesPerRank / 1024, units::format_time(cost.cpu_s),
          count_noun(static_cast<long long>(sizes.size()), "size"), units::format_bytes(limit),
          b.max_memory > 0 ? "" : " (half of this machine's memory, or 90% of ulimit -v)"));
    if (b.progress && cost.cpu_s > 60)
      fmt::print(stderr,
                 "vitsim collective: {} on {} ranks: about {} of CPU ({:.3g} transfers in flight at once)\n",
                 nccl_test_name(b.func), s.ranks(), units::format_time(cost.cpu_s), cost.flows);
  }
  try {
    chosen->configure({&facts, b.nccl_version, b.nccl_algo, b.nccl_proto, place.hosts, b.nccl_min_channels,
                       b.nccl_max_channels});
  } catch (const Error& e) {
    throw Error(fmt::format("--collective {}: {}", b.algorithm, e.what()));
  }

  NcclTable t;
  t.func = b.func;
  t.type = b.type;
  t.redop = b.redop;
  t.root = b.root;
  t.ranks = s.ranks();
  t.gpus_per_node = s.cluster.gpus_per_node;
  t.sweep = b.sweep;
  t.preamble.push_back(
      fmt::format("vitsim {} collective: predicted, not measured: {} ranks ({} node(s) x {} GPU(s)) of {}",
                  vitsim_version(), t.ranks, s.cluster.nodes, s.cluster.gpus_per_node, b.platform));
  t.devices = bench_devices(place, facts, s.cluster.gpus_per_node);
  std::vector<double> bytes;
  for (double size : sizes) {
    const NcclCounts c = nccl_counts(b.func, size, type_bytes, t.ranks);
    t.rows.push_back({c.bytes, c.count, 0, 0});
    bytes.push_back(c.bytes);
  }

  std::unique_ptr<PreparedEngine> pe = prepare_engine(s, facts);
  if (pe->error) std::rethrow_exception(pe->error);
  pe->used = true;
  const LatencyModel& latency = *pe->latency;  // made with the engine, after the transports
  const Group g("collective", rank_hosts(*pe->engine, place, facts), place.node, latency);
  // NCCL's choice for every size before any rank runs: where the overrides or the topology leave none (NVLS
  // on GPUs without it), the refusal is one line, not an exception inside a simulated rank.
  if (b.algorithm == "auto" && b.func != NcclTest::AllToAll && b.func != NcclTest::Broadcast)
    if (const auto comm = nccl_comm(g, {&facts, b.nccl_version, b.nccl_algo, b.nccl_proto, place.hosts,
                                        b.nccl_min_channels, b.nccl_max_channels}))
      for (double x : bytes) (void)comm->choose(nccl_func_of(coll_op(b.func)), x);
  const std::vector<double> time = simulate_sizes(*pe->engine, b, g, *chosen, bytes);
  const std::string launch_note = set_times(t, b, time);
  t.notes = bench_notes(b, pe->notes, *chosen);
  if (!launch_note.empty()) t.notes.push_back(launch_note);
  return t;
}

}  // namespace vitsim::sim
