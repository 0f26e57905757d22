// NCCL's tuner (core/model/nccl_tuning.hpp): every (algorithm, protocol) time against NCCL's formula worked
// by hand from the version tables (docs/sources.md "NCCL's tuner": tuning.cc at v2.18.3-1 and v2.23.4-1),
// NCCL's choice over sizes x ranks x topologies, channels and threads, NCCL_ALGO / NCCL_PROTO, bad input.
//
// Notation in the comments: bus = channels x per-channel GB/s; an algorithm bandwidth bw = bus x ratio; the
// time t = lat + bytes / (1000 bw) in us; "18:" and "23:" are tuning.cc's lines at the two tags. Tables:
// baseLat, hwLat[NVLink|PCI|NET], llMaxBws, perChMax*Bws, treeCorrectionFactor
// (core/src/model/nccl_versions.cpp).
#include <catch2/catch.hpp>

#include "test_util.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/model/nccl_tuning.hpp"

using namespace vitsim;
using A = NcclAlgo;
using P = NcclProto;
using F = NcclFunc;

namespace {

constexpr std::uint64_t KiB = 1ULL << 10, MiB = 1ULL << 20, GiB = 1ULL << 30;

NcclGraph graph(int channels, double bw, NcclPath intra, NcclPath inter) {
  NcclGraph g;
  g.n_channels = channels;
  g.bw_intra = g.bw_inter = bw;
  g.type_intra = intra;
  g.type_inter = inter;
  return g;
}

// The topologies as NCCL's search leaves them (the graphs its NCCL_DEBUG=INFO prints); nccl_topo's
// approximation of the search is tested on its own below.
// 8 H100 SXM on one NVSwitch: ring and tree 12 channels x 30 GB/s, NVLS 8 x 40, 24 channels, 16 NVLS.
NcclTopo h100x8() {
  NcclTopo t;
  t.nranks = 8;
  t.nnodes = 1;
  t.sm_min = t.sm_max = 90;
  t.ring = t.tree = graph(12, 30, NcclPath::Nvl, NcclPath::Pix);
  t.nvls = graph(8, 40, NcclPath::Nvl, NcclPath::Pix);
  t.comm_channels = 24;
  t.nvls_channels = 16;
  t.nvswitch = true;
  return t;
}
// `nodes` x 8 H100 with 8 IB NICs per node: 8 channels x 45 GB/s, NVLS(Tree) 8 x 45, 16 channels.
NcclTopo h100(int nodes) {
  NcclTopo t = h100x8();
  t.nnodes = nodes;
  t.nranks = 8 * nodes;
  t.ring = t.tree = t.nvls = graph(8, 45, NcclPath::Nvl, NcclPath::Pxb);
  t.comm_channels = 16;
  return t;
}
// 128 nodes of one A100 and one NIC: 1 channel x 24 GB/s; one GPU per node makes the tree the plain TREE
// pattern (search.cc: ngpus == 1), so Tree's bandwidth gets x .85.
NcclTopo a100x128() {
  NcclTopo t;
  t.nranks = t.nnodes = 128;
  t.sm_min = t.sm_max = 80;
  t.ring = t.tree = graph(1, 24, NcclPath::Loc, NcclPath::Pxb);
  t.tree.tree_pattern = true;
  t.comm_channels = 2;
  return t;
}
// 4 T4 (sm75) on PCIe through the CPU: 1 channel x 12 GB/s, 2 channels.
NcclTopo t4x4() {
  NcclTopo t;
  t.nranks = 4;
  t.nnodes = 1;
  t.sm_min = t.sm_max = 75;
  t.ring = t.tree = graph(1, 12, NcclPath::Phb, NcclPath::Pix);
  t.comm_channels = 2;
  return t;
}

const NcclCost& cost(const NcclChoice& c, A a, P p) {
  for (const auto& e : c.table)
    if (e.algo == a && e.proto == p) return e;
  FAIL("no table entry " << nccl_algo_name(a) << "/" << nccl_proto_name(p));
  return c.table.front();
}

void check_cost(const NcclChoice& c, A a, P p, double lat, double bw) {
  INFO(nccl_algo_name(a) << "/" << nccl_proto_name(p));
  const NcclCost& e = cost(c, a, p);
  CHECK(e.latency_us == Approx(lat).epsilon(1e-6));
  CHECK(e.bandwidth == Approx(bw).epsilon(1e-6));
  CHECK(e.time_us == Approx(lat + c.bytes / (1000.0 * bw)).epsilon(1e-6));
}

}  // namespace

TEST_CASE("nccl tuner 2.18: every algorithm x protocol of an all-reduce on 8 H100", "[nccl]") {
  // 8 ranks, 1 node: nsteps = 2(8-1) = 14; Hopper, 1 node: llMaxBw 87.7, perChMaxTreeBw 38.7,
  // perChMaxRing/TreeLL128Bw 36.7 (18:86-106). bus = 12 x 30 = 360. 1 MiB: log2i(2^20 >> 6) = 14, tree
  // corrections LL .5, LL128 .6, Simple .5 (18:375-379).
  const auto& v = nccl_version("2.18");
  const NcclChoice c = nccl_choose(F::AllReduce, MiB, h100x8(), v);
  // Ring (ratio 8/14): LL min(87.7, 360/4) = 87.7 -> 50.114; lat 6.6 + 14 x .6 = 15.0.
  check_cost(c, A::Ring, P::LL, 15.0, 87.7 * 8 / 14);
  // LL128: min(360 x .92, 12 x 36.7) = 331.2 -> 189.257; lat 14.0 + 14 x 1.9 = 40.6.
  check_cost(c, A::Ring, P::LL128, 40.6, 331.2 * 8 / 14);
  // Simple: 360 -> 205.714; lat 8.4 + 14 x 3.4 = 56.0.
  check_cost(c, A::Ring, P::Simple, 56.0, 360.0 * 8 / 14);
  // Tree (ratio .5): min(360 x .92, 12 x 38.7) = 331.2; LL min(331.2 / 3.8, 87.7) = 87.158 x .5 x .5;
  // lat 6.8 + 2 (7 x .6 + log2(1) x 5) = 15.2.
  check_cost(c, A::Tree, P::LL, 15.2, 331.2 / 3.8 * .5 * .5);
  // LL128: min(331.2 x 7/9, 12 x 36.7) = 257.6 x .5 x .6; lat 14.0 + 2 x 7 x 1.25 = 31.5.
  check_cost(c, A::Tree, P::LL128, 31.5, 257.6 * .5 * .6);
  // Simple: 331.2 x .5 x .5; lat 0 + 2 x 7 x 4 = 56.
  check_cost(c, A::Tree, P::Simple, 56.0, 331.2 * .5 * .5);
  // NVLS (Simple only): 8 x 40 x 5/6 = 266.667; lat baseLat 23.0, no network.
  check_cost(c, A::Nvls, P::Simple, 23.0, 320.0 * 5 / 6);
  // NVLSTree is off on one node, CollNet undeclared: not available.
  CHECK(cost(c, A::NvlsTree, P::Simple).time_us < 0);
  CHECK(cost(c, A::Ring, P::LL).time_us == Approx(15.0 + 1048.576 / (87.7 * 8 / 14)));
  // The fastest: NVLS 23 + 1048.576 / 266.667 = 26.93 us, before Ring/LL 35.92 and Tree/LL128 45.07.
  CHECK(c.algo == A::Nvls);
  CHECK(c.proto == P::Simple);
  CHECK(c.time_us == Approx(23.0 + 1048.576 / (320.0 * 5 / 6)));
  CHECK(c.n_channels == 16);  // NVLS: comm->nvlsChannels
  CHECK(c.n_threads == 640);  // NCCL_MAX_NTHREADS
}

TEST_CASE("nccl tuner 2.23: the same all-reduce, where Ring/LL now beats NVLS", "[nccl]") {
  const auto& v = nccl_version("2.23");
  const NcclChoice c = nccl_choose(F::AllReduce, MiB, h100x8(), v);
  // Ring/LL: 23:187 min(llMaxBw, bus x .5), Hopper's llMaxBw now 141: min(141, 180) = 141 -> x 8/14.
  check_cost(c, A::Ring, P::LL, 15.0, 141.0 * 8 / 14);
  check_cost(c, A::Ring, P::LL128, 40.6, 331.2 * 8 / 14);
  check_cost(c, A::Ring, P::Simple, 56.0, 360.0 * 8 / 14);
  check_cost(c, A::Tree, P::LL, 15.2, 331.2 / 3.8 * .5 * .5);  // min(87.158, 141)
  check_cost(c, A::Tree, P::LL128, 31.5, 257.6 * .5 * .6);
  // Tree/Simple: baseLat is 8.4 in 2.23: 8.4 + 2 x 7 x 4.0 = 64.4.
  check_cost(c, A::Tree, P::Simple, 64.4, 331.2 * .5 * .5);
  // NVLS: bw min(40, 40) x 8 x 5/6; latency = hwLat[NVLink][NVLS][Simple] = 25 (23:272).
  check_cost(c, A::Nvls, P::Simple, 25.0, 320.0 * 5 / 6);
  // Ring/LL 15 + 1048.576 / 80.571 = 28.01 us < NVLS 25 + 3.932 = 28.93 us.
  CHECK(c.algo == A::Ring);
  CHECK(c.proto == P::LL);
  // Channels: 1 MiB >= 24 x 512 x (8 x 8 ranks) = 786,432 B: all 24 channels, LL's 512 threads.
  CHECK(c.n_channels == 24);
  CHECK(c.n_threads == 512);
  // At 1 GiB NVLS wins: 25 + 1073741.824 / 266.667 = 4051.5 us < Ring/Simple 56 + 1073741.824 / 205.714.
  const NcclChoice big = nccl_choose(F::AllReduce, GiB, h100x8(), v);
  CHECK(big.algo == A::Nvls);
  CHECK(big.time_us == Approx(25.0 + 1073741.824 / (320.0 * 5 / 6)));
}

// 8 B200 on NVSwitch (sm100): ring and tree 16 channels x 45 GB/s, NVLS 8 x 90, 32 channels, 24 NVLS
// (2.27's Blackwell count inside one NVLink domain).
NcclTopo b200x8() {
  NcclTopo t = h100x8();
  t.sm_min = t.sm_max = 100;
  t.ring = t.tree = graph(16, 45, NcclPath::Nvl, NcclPath::Pix);
  t.nvls = graph(8, 90, NcclPath::Nvl, NcclPath::Pix);
  t.comm_channels = 32;
  t.nvls_channels = 24;
  return t;
}

TEST_CASE("nccl tuner 2.27: Blackwell's rows, LL128 on every architecture, NVLS gathers, PAT", "[nccl]") {
  const auto& v23 = nccl_version("2.23");
  const auto& v27 = nccl_version("2.27");
  // 8 H100, all-reduce: 2.27's tables and all-reduce formulas are 2.23's (27:134-156, 265-378).
  NcclChoice c = nccl_choose(F::AllReduce, MiB, h100x8(), v27);
  check_cost(c, A::Ring, P::LL, 15.0, 141.0 * 8 / 14);
  check_cost(c, A::Tree, P::Simple, 64.4, 331.2 * .5 * .5);
  check_cost(c, A::Nvls, P::Simple, 25.0, 320.0 * 5 / 6);
  CHECK(c.algo == A::Ring);
  // 8 B200, 1 MiB all-reduce, 2.27: Blackwell's row (27:165-189): llMaxBw 282, perChMaxRingLL128Bw 73.4,
  // perChMaxTreeBw 77.4. bus 16 x 45 = 720. Ring/LL min(282, 720 x .5) x 8/14 = 161.14, lat 15.0;
  // LL128 on (sm >= 90, NICs up to PXN): min(720 x .92, 16 x 73.4) = 662.4 x 8/14, lat 40.6; NVLS 8 x 90
  // x 5/6 = 600, lat 25. Ring/LL 15 + 1048.576/161.14 = 21.51 < NVLS 25 + 1.748 = 26.75.
  c = nccl_choose(F::AllReduce, MiB, b200x8(), v27);
  check_cost(c, A::Ring, P::LL, 15.0, 282.0 * 8 / 14);
  check_cost(c, A::Ring, P::LL128, 40.6, 662.4 * 8 / 14);
  check_cost(c, A::Tree, P::Simple, 64.4, 662.4 * .5 * .5);  // min(662.4, 16 x 77.4)
  check_cost(c, A::Nvls, P::Simple, 25.0, 600.0);
  CHECK(c.algo == A::Ring);
  CHECK(c.proto == P::LL);
  // 2.23 rates sm100 with Hopper's row (Ring/LL min(141, 360) x 8/14 = 80.57: 15 + 13.01 = 28.01) and
  // leaves LL128 off (its rule knows 70, 80 and 90 only): NVLS 26.75 wins.
  c = nccl_choose(F::AllReduce, MiB, b200x8(), v23);
  check_cost(c, A::Ring, P::LL, 15.0, 141.0 * 8 / 14);
  CHECK(cost(c, A::Ring, P::LL128).time_us < 0);
  CHECK(c.algo == A::Nvls);
  // 2.27 NVLS all-gather (27:267-273): bw min(40 x 7/8, 40 x .9) = 35 x 8 = 280, no ratio; 2.23: 320.
  check_cost(nccl_choose(F::AllGather, MiB, h100x8(), v27), A::Nvls, P::Simple, 25.0, 280.0);
  check_cost(nccl_choose(F::AllGather, MiB, h100x8(), v23), A::Nvls, P::Simple, 25.0, 320.0);
  // PAT at .75 (27:285): 1 x 24 x .75 = 18; the latency as 2.23's, 394.4. Still PAT at 1 KiB.
  c = nccl_choose(F::AllGather, KiB, a100x128(), v27);
  check_cost(c, A::Pat, P::Simple, 394.4, 18.0);
  CHECK(c.algo == A::Pat);
}

TEST_CASE("nccl tuner 2.27: NCCL_ALGO and NCCL_PROTO per function", "[nccl]") {
  const auto& v23 = nccl_version("2.23");
  const auto& v27 = nccl_version("2.27");
  // "ring;allreduce:tree": every function the ring, all-reduce the tree (parseList, 27:34-52).
  const NcclOverrides o{"ring;allreduce:tree", ""};
  CHECK(nccl_choose(F::AllReduce, GiB, h100x8(), v27, o).algo == A::Tree);
  CHECK(nccl_choose(F::AllGather, MiB, h100x8(), v27, o).algo == A::Ring);
  CHECK(nccl_choose(F::Broadcast, MiB, h100x8(), v27, o).algo == A::Ring);
  // "^LL128;allreduce:LL128": LL128 only for all-reduce, everything but LL128 elsewhere.
  const NcclOverrides q{"", "^LL128;allreduce:LL128"};
  CHECK(nccl_choose(F::AllReduce, KiB, h100x8(), v27, q).proto == P::LL128);
  CHECK(cost(nccl_choose(F::AllGather, 16 * MiB, h100x8(), v27, q), A::Ring, P::LL128).time_us < 0);
  // 2.23 has no prefixes; malformed lists are refused.
  CHECK_THROWS_WITH(nccl_enable(o, v23), Catch::Contains("unknown name 'ring;allreduce:tree'"));
  CHECK_THROWS_WITH(nccl_enable({"allscatter:ring", ""}, v27),
                    "NCCL_ALGO='allscatter:ring': unknown function 'allscatter'; valid: Broadcast, Reduce, "
                    "AllGather, ReduceScatter, AllReduce");
  CHECK_THROWS_WITH(nccl_enable({"ring;tree", ""}, v27),
                    Catch::Contains("every entry but the first needs a function"));
  CHECK_THROWS_WITH(nccl_enable({"allreduce:rung", ""}, v27), Catch::Contains("unknown name 'rung'"));
  // 2.27 dropped the ring fallback: an all-gather with NCCL_ALGO=tree has nothing left and fails.
  CHECK_THROWS_WITH(nccl_choose(F::AllGather, MiB, h100(2), v27, {"tree", ""}),
                    Catch::Contains("no algorithm/protocol available for AllGather"));
}

TEST_CASE("nccl tuner: network latencies, the ring plateau, NVLSTree and PAT", "[nccl]") {
  const auto& v18 = nccl_version("2.18");
  const auto& v23 = nccl_version("2.23");
  // 2 x 8 H100, 2.23, 1 KiB: 16 ranks, nsteps 30, 2 nodes: llMaxBw[Intel][2 nodes] = 39.0, perChMaxTreeBw
  // 41.4. Ring/LL: bus min(39, 8 x 45 x .5) = 39 x 16/30 = 20.8; latency: intra max(.6, net overhead 1.0)
  // = 1.0 over 30 - 2(2-1) = 28 steps, network 2.7 over 2 steps: 6.6 + 28 + 5.4 = 40.0 (2.18 counts 2 x 2
  // = 4 network steps: 6.6 + 26 + 10.8 = 43.4).
  const NcclChoice r23 = nccl_choose(F::AllReduce, KiB, h100(2), v23);
  check_cost(r23, A::Ring, P::LL, 40.0, 20.8);
  check_cost(nccl_choose(F::AllReduce, KiB, h100(2), v18), A::Ring, P::LL, 43.4, 20.8);
  // Tree/LL: min(360 x .92, 8 x 41.4) = 331.2 / 3.8 = 87.16 -> min(87.16, 39) = 39 x .5 = 19.5, x .9
  // (log2i(16) = 4); lat 6.8 + 2 (7 x .6 + 1 x 5.0) = 25.2. The fastest: 25.2 + 1.024 / 17.55 = 25.26 us.
  check_cost(r23, A::Tree, P::LL, 25.2, 19.5 * .9);
  CHECK(r23.algo == A::Tree);
  CHECK(r23.proto == P::LL);
  // NVLSTree 2.23 (23:183, 224, 275): bw min(45, 45) x 8 x 5/6 = 300; lat 0 + 25 + 2 log2(2) x 14 = 53.
  check_cost(r23, A::NvlsTree, P::Simple, 53.0, 300.0);
  // NVLSTree 2.18 (18:174, 198, 238): 8 x 45 x .7 x 2 / (2 x 1) = 252; lat 23 + 2 (2-1) x 19 = 61.
  check_cost(nccl_choose(F::AllReduce, KiB, h100(2), v18), A::NvlsTree, P::Simple, 61.0, 252.0);
  // 16 x 8 H100, 2.18, 1 GiB, Ring/Simple: lat 8.4 + (254 - 2 x 16) x max(3.4, 1 x 3) + 32 x 14 = 1211.2,
  // and 1 GiB / (16 channels x 128 ranks) >= 64 B: the plateau x 1.4 = 1695.68; bw 360 x 128/254.
  const NcclChoice p18 = nccl_choose(F::AllReduce, GiB, h100(16), v18);
  check_cost(p18, A::Ring, P::Simple, 1211.2 * 1.4, 360.0 * 128 / 254);
  // 128 x 1 A100, 2.23 all-gather 1 KiB: PAT (one GPU per node, 23:109-115), latency 8 + log2(128) x
  // interLat / 3.5 + 128 x 2.8 (23:278-280), interLat with ppn 1 the tree's network Simple latency 14:
  // 8 + 7 x 4 + 358.4 = 394.4; bw 1 x 24 x .85 = 20.4, no ratio for a gather that is not a ring.
  const NcclChoice pat = nccl_choose(F::AllGather, KiB, a100x128(), v23);
  check_cost(pat, A::Pat, P::Simple, 394.4, 20.4);
  // Ring/LL: lat 6.6 + 127 steps over the network at the tree's 5.0 (ppn 1) = 641.6 > 394.4: PAT.
  check_cost(pat, A::Ring, P::LL, 641.6, 12.0 * 128 / 127);
  CHECK(pat.algo == A::Pat);
  CHECK(pat.n_threads == 640);  // 23: PAT always runs NCCL_MAX_NTHREADS
  // 2.18 has no PAT: the all-gather is a ring.
  CHECK(nccl_choose(F::AllGather, KiB, a100x128(), v18).algo == A::Ring);
}

TEST_CASE("nccl tuner: CollNet only when declared, and NVLS across nodes with it", "[nccl]") {
  const auto& v18 = nccl_version("2.18");
  const auto& v23 = nccl_version("2.23");
  NcclTopo sharp = h100(2);
  // Without CollNet getAlgoInfo weighs neither CollNet nor NVLS across nodes: Tree, Ring, NVLSTree, PAT.
  for (const auto& e : nccl_choose(F::AllReduce, MiB, sharp, v23).table)
    CHECK((e.algo == A::Tree || e.algo == A::Ring || e.algo == A::NvlsTree || e.algo == A::Pat));
  sharp.collnet = true;
  sharp.collnet_direct = sharp.collnet_chain = sharp.ring;
  sharp.collnet_heads = 8;
  const NcclChoice c = nccl_choose(F::AllReduce, MiB, sharp, v23);
  // CollNetDirect/Simple (23:196-217): bw = bwIntra 45 (CollNet), bus 8 x 45 = 360, GPUs per NIC 8 / 8
  // = 1 (factor 1), Hopper x .85 = 306, x .5 = 153; lat 0 + 2 (min(1, 7) x 3.7 + 7 x .4) + 31 = 44.
  check_cost(c, A::CollNetDirect, P::Simple, 44.0, 153.0);
  // CollNetChain/Simple: 360 x .5 = 180; lat 0 + 2 x 7 x 2.8 + 30 = 69.2.
  check_cost(c, A::CollNetChain, P::Simple, 69.2, 180.0);
  // NVLS across nodes (CollNet): min(45, 45) x 8 x 5/6 = 300; lat 25 + 18 = 43: the fastest at 1 MiB,
  // 43 + 1048.576/300 = 46.5 < CollNetDirect 44 + 1048.576/153 = 50.9 < NVLSTree 56.5.
  check_cost(c, A::Nvls, P::Simple, 43.0, 300.0);
  CHECK(c.algo == A::Nvls);
  CHECK(c.n_channels == 16);
  // 2.18's CollNetDirect: lat 0 + 2 (8.0 + 7 x .5) + 10.7 = 33.7, same bandwidth.
  check_cost(nccl_choose(F::AllReduce, MiB, sharp, v18), A::CollNetDirect, P::Simple, 33.7, 153.0);
  // NCCL_ALGO=CollNetDirect: CollNet's channel loop (23:1863-1873), 640 threads, 8 heads, threshold 512:
  // from 16 channels, 1 MiB < nc x 640 x 8 x 512 brings nc to 8 (halving the threshold to 256 at 12), to 4
  // (128 at 6), to 2 (64 at 3); at 2, 1 MiB >= 2 x 640 x 8 x 64 = 655,360 stops it. Threads stay 640.
  const NcclChoice d = nccl_choose(F::AllReduce, MiB, sharp, v23, {"CollNetDirect", ""});
  CHECK(d.algo == A::CollNetDirect);
  CHECK(d.n_channels == 2);
  CHECK(d.n_threads == 640);
}

TEST_CASE("nccl tuner: NCCL's choice over sizes x ranks x topologies", "[nccl]") {
  struct Case {
    const char* version;
    const char* topo;
    F func;
    std::uint64_t bytes;
    A algo;
    P proto;
  };
  auto topo = [](const std::string& name) {
    if (name == "h100x8") return h100x8();
    if (name == "2x8") return h100(2);
    if (name == "16x8") return h100(16);
    if (name == "128x1") return a100x128();
    return t4x4();
  };
  // Each winner against the runner-up, t = lat + bytes / (1000 bw), from the formulas of the tests above:
  const Case cases[] = {
      // 8 H100, 1 KiB: Ring/LL 15 + 1.024/50.1 = 15.02 < Tree/LL 15.2 + 1.024/(87.16 x .5 x .9) = 15.23.
      {"2.18", "h100x8", F::AllReduce, KiB, A::Ring, P::LL},
      // 1 GiB: NVLS 23 + 1073741.8/266.7 = 4049.5 < Ring/Simple 56 + 1073741.8/205.7 = 5275.6.
      {"2.18", "h100x8", F::AllReduce, GiB, A::Nvls, P::Simple},
      // 2 x 8, 1 MiB: Tree/LL128 48.5 + 1048.6/(min(331.2 x 120/128, 8 x 36.7) x .5 x .6 = 88.08) = 60.4 <
      // NVLSTree
      // 61 + 1048.6/252 = 65.2 (18); in 2.23 NVLSTree 53 + 1048.6/300 = 56.5 wins.
      {"2.18", "2x8", F::AllReduce, MiB, A::Tree, P::LL128},
      {"2.23", "2x8", F::AllReduce, MiB, A::NvlsTree, P::Simple},
      // 1 GiB: NVLSTree 61 + 1073741.8/252 = 4321.9 < Ring/Simple (8.4 + 26 x 3.4 + 4 x 14) x 1.4 + 5592.4.
      {"2.18", "2x8", F::AllReduce, GiB, A::NvlsTree, P::Simple},
      // 16 x 8, 1 KiB: Tree/LL lat 6.8 + 2 (7 x .6 + 4 x 5) = 55.2, bw min(min(360 x .92, 8 x 36.0) / 3.8,
      // 20.4 (llMaxBw, > 2 Intel nodes)) x .5 x .9 = 9.18: 55.3 < Tree/LL128 14 + 2 (7 x 1.25 + 4 x 8.5)
      // = 99.5.
      {"2.23", "16x8", F::AllReduce, KiB, A::Tree, P::LL},
      // 64 MiB, 2.18: Tree/LL128 99.5 + 67108.9/(min(288 x 120/128, 8 x 29.0) x .5 x .9 = 104.4) = 742.3 <
      // Tree/Simple 2 (7 x 4 + 4 x 14) = 168 + 67108.9/(288 x .5 x .8 = 115.2) = 750.5 (288 = min(331.2, 8 x
      // 36)).
      {"2.18", "16x8", F::AllReduce, 64 * MiB, A::Tree, P::LL128},
      // 2.23: NVLSTree bw min(45, 45/2) x 8 x 5/6 = 150, lat 25 + 2 x 4 x 14 = 137: 137 + 447.4 = 584.4.
      {"2.23", "16x8", F::AllReduce, 64 * MiB, A::NvlsTree, P::Simple},
      // 1 GiB, 2.18: Ring/Simple 1695.7 + 1073741.8/181.4 = 7614.3 < Tree/Simple 168 + 1073741.8/144 =
      // 7624.5.
      {"2.18", "16x8", F::AllReduce, GiB, A::Ring, P::Simple},
      // 128 x 1 A100, 1 KiB: Tree/LL lat 6.8 + 2 (0 + 7 x 5.0) = 76.8, bw min(24 x .92, 17.8) = 17.8 / 3.8
      // = 4.684 -> min(4.684, 20.4) x .85 x .5 x .9 = 1.79: 77.37 < Tree/LL128 14 + 2 x 7 x 8.5 = 133.
      {"2.23", "128x1", F::AllReduce, KiB, A::Tree, P::LL},
      // 1 MiB: Tree/LL128 133 + 1048.6/(min(17.8 x 120/128, 1 x 20) x .85 x .5 x .6 = 4.255) = 379.4 <
      // Tree/Simple
      // 204.4 + 1048.6/(17.8 x .85 x .5 x .5) = 481.6.
      {"2.23", "128x1", F::AllReduce, MiB, A::Tree, P::LL128},
      // 1 GiB: Ring/Simple: all 2 (128 - 1) = 254 steps cross the network (2.23): (8.4 + 254 x 14) x 1.4 =
      // 4990.2 + 1073741.8/(24 x 128/254 = 12.09) = 93770 < Ring/LL128 (14 + 254 x 8.5) + 1073741.8/10.08.
      {"2.23", "128x1", F::AllReduce, GiB, A::Ring, P::Simple},
      // 1 GiB all-gather: Ring/Simple 1786.4 + 1073741.8/24.19 = 46176 < PAT 394.4 + 1073741.8/20.4 = 53029.
      {"2.23", "128x1", F::AllGather, GiB, A::Ring, P::Simple},
      {"2.23", "128x1", F::ReduceScatter, MiB, A::Pat, P::Simple},  // 445.8 < Ring/LL 728.3 (as all-gather)
      // 4 T4 on PCIe, LL128 off (sm75): 1 KiB Ring/LL (2.23) 12.6 + 1.024/4 = 12.86 < Tree/LL 13.58.
      {"2.23", "t4", F::AllReduce, KiB, A::Ring, P::LL},
      // 1 MiB: Ring/Simple 8.4 + 6 x 5.7 = 42.6 + 1048.6/8 = 173.7 < Ring/LL 12.6 + 1048.6/4 = 274.7.
      {"2.23", "t4", F::AllReduce, MiB, A::Ring, P::Simple},
      // Broadcast (ring only), 8 H100, 1 KiB: Ring/LL 6.6 + .6 = 7.2 + 1.024/min(87.7, 360/3) < Simple 11.8.
      {"2.18", "h100x8", F::Broadcast, KiB, A::Ring, P::LL},
      // 16 MiB: Simple 8.4 + 3.4 = 11.8 + 16777.2/360 = 58.4 < LL128 14 + 1.9 + 16777.2/331.2 = 66.6.
      {"2.18", "h100x8", F::Broadcast, 16 * MiB, A::Ring, P::Simple},
      // Reduce-scatter on 2 x 8, 1 MiB: Ring/LL128 14 + 14 x max(1.9, 1.0) + 1 x 4.0 = 44.6, bw min(331.2,
      // 8 x 36.7) x 16/15 = 313.2: 47.9 < Ring/LL 6.6 + 14 x 1.0 + 2.7 = 23.3 + 1048.6/41.6 = 48.5.
      {"2.23", "2x8", F::ReduceScatter, MiB, A::Ring, P::LL128},
  };
  for (const Case& c : cases) {
    const NcclChoice got = nccl_choose(c.func, c.bytes, topo(c.topo), nccl_version(c.version));
    INFO(c.version << " " << c.topo << ": " << got.why());
    CHECK(got.algo == c.algo);
    CHECK(got.proto == c.proto);
  }
}

TEST_CASE("nccl tuner: channels and threads as getAlgoInfo sets them", "[nccl]") {
  const auto& v18 = nccl_version("2.18");
  const auto& v23 = nccl_version("2.23");
  // 8 H100, 64 KiB, Ring/LL: nc drops from 24 while 65536 < nc x 512 x 64: to 2 (2 x 32768 = 65536).
  NcclChoice c = nccl_choose(F::AllReduce, 64 * KiB, h100x8(), v23);
  CHECK(c.algo == A::Ring);
  CHECK(c.n_channels == 2);
  CHECK(c.n_threads == 512);
  // 1 KiB: 1 channel, then threads halve while 1024 < 1 x nt x 64 and nt % 128 == 0: 512, 256, 128, 64;
  // LL adds no warp; fewer than 3 warps become 96.
  c = nccl_choose(F::AllReduce, KiB, h100x8(), v23);
  CHECK(c.n_channels == 1);
  CHECK(c.n_threads == 96);
  // 2.18, 8 H100, 16 MiB broadcast Ring/Simple: 16 MiB >= 24 x 512 x 64: 24 channels, 512 + one sync warp.
  c = nccl_choose(F::Broadcast, 16 * MiB, h100x8(), v18);
  CHECK(c.n_channels == 24);
  CHECK(c.n_threads == 544);
  // T4 ring at 12 GB/s <= PCI_BW 12: Simple starts at 256 threads (18:121): 1 MiB >= 2 x 256 x 64: 2
  // channels, 256 + 32.
  c = nccl_choose(F::AllReduce, MiB, t4x4(), v23);
  CHECK(c.n_channels == 2);
  CHECK(c.n_threads == 288);
  // 2 x 8, 1 KiB, Tree/LL: 2.18 drops to 1 channel, then halves 512 threads while 1024 < 1 x nt x 8:
  // 256, 128 (1024 is not below 1024); 2.23 runs trees at 640 always.
  CHECK(nccl_choose(F::AllReduce, KiB, h100(2), v18).n_threads == 128);
  CHECK(nccl_choose(F::AllReduce, KiB, h100(2), v23).n_threads == 640);
}

TEST_CASE("nccl tuner: NCCL_ALGO and NCCL_PROTO are honoured", "[nccl]") {
  const auto& v18 = nccl_version("2.18");
  const auto& v23 = nccl_version("2.23");
  // NVLS wins 1 GiB on 8 H100 (above); "ring" leaves the ring: Simple 56 + 5219.6.
  NcclChoice c = nccl_choose(F::AllReduce, GiB, h100x8(), v23, {"ring", ""});
  CHECK(c.algo == A::Ring);
  CHECK(c.proto == P::Simple);
  CHECK(cost(c, A::Nvls, P::Simple).time_us < 0);
  // "^nvls" the same; "Tree,Ring" (any case) too; "^NVLS,Ring" leaves Tree.
  CHECK(nccl_choose(F::AllReduce, GiB, h100x8(), v23, {"^nvls", ""}).algo == A::Ring);
  CHECK(nccl_choose(F::AllReduce, GiB, h100x8(), v23, {"TREE,ring", ""}).algo == A::Ring);
  CHECK(nccl_choose(F::AllReduce, GiB, h100x8(), v23, {"^NVLS,Ring", ""}).algo == A::Tree);
  // NCCL_PROTO: 8 H100, 1 MiB, 2.23 picks Ring/LL; "^LL" leaves NVLS (28.93 < Tree/LL128 45.07).
  CHECK(nccl_choose(F::AllReduce, MiB, h100x8(), v23, {"", "^LL"}).algo == A::Nvls);
  c = nccl_choose(F::AllReduce, MiB, h100x8(), v23, {"ring", "LL128"});
  CHECK((c.algo == A::Ring && c.proto == P::LL128));
  // Naming LL128 enables it even where NCCL's default rule would not (T4): parseList sets it to 1.
  CHECK(cost(nccl_choose(F::AllReduce, MiB, t4x4(), v23), A::Ring, P::LL128).time_us < 0);
  CHECK(cost(nccl_choose(F::AllReduce, MiB, t4x4(), v23, {"", "LL128"}), A::Ring, P::LL128).time_us > 0);
  // 2.18 never disables the ring for a function other than all-reduce (18:296-297): NCCL_ALGO=Tree
  // leaves an all-gather on the ring.
  c = nccl_choose(F::AllGather, MiB, h100x8(), v18, {"tree", ""});
  CHECK(c.algo == A::Ring);
  CHECK_FALSE(c.backup);
  // 2.23 disables it; a function left with nothing gets the ring's bandwidths back (23:342-356).
  c = nccl_choose(F::AllGather, MiB, h100(2), v23, {"tree", ""});
  CHECK(c.algo == A::Ring);
  CHECK_FALSE(c.backup);
  // With CollNet, NVLS keeps a bandwidth on 2 nodes, but getAlgoInfo does not weigh NVLS all-gathers
  // across nodes (23:1797): nothing is left but the disabled ring, run as the backup (23:445-452, 1849).
  NcclTopo sharp = h100(2);
  sharp.collnet = true;
  sharp.collnet_direct = sharp.collnet_chain = sharp.ring;
  c = nccl_choose(F::AllGather, MiB, sharp, v23, {"NVLS", ""});
  CHECK(c.algo == A::Ring);
  CHECK(c.backup);
  // NCCL_ALGO=CollNetDirect without CollNet is ignored: ring and tree come back (18:267-272).
  CHECK(nccl_choose(F::AllReduce, KiB, h100(2), v18, {"CollNetDirect", ""}).algo == A::Tree);
}

TEST_CASE("nccl tuner: bad overrides and versions are refused", "[nccl]") {
  const auto& v18 = nccl_version("2.18");
  const auto& v23 = nccl_version("2.23");
  CHECK_THROWS_WITH(nccl_enable({"rng", ""}, v23),
                    "NCCL_ALGO='rng': unknown name 'rng'; valid: Tree, Ring, CollNetDirect, CollNetChain, "
                    "NVLS, NVLSTree, PAT");
  // PAT arrived in 2.23.
  CHECK_THROWS_WITH(nccl_enable({"PAT", ""}, v18),
                    "NCCL_ALGO='PAT': unknown name 'PAT'; valid: Tree, Ring, CollNetDirect, CollNetChain, "
                    "NVLS, NVLSTree");
  CHECK_NOTHROW(nccl_enable({"PAT", ""}, v23));
  CHECK_THROWS_WITH(nccl_enable({"", "^LL129"}, v23),
                    "NCCL_PROTO='^LL129': unknown name 'LL129'; valid: LL, LL128, Simple");
  CHECK_THROWS_WITH(nccl_enable({"Ring;Tree", ""}, v23), Catch::Contains("unknown name 'Ring;Tree'"));
  // Every protocol off: NCCL's own error.
  CHECK_THROWS_WITH(nccl_choose(F::AllReduce, MiB, h100x8(), v23, {"", "^LL,LL128,Simple"}),
                    Catch::Contains("no algorithm/protocol available for AllReduce"));
  CHECK_THROWS_WITH(nccl_version("2.99"),
                    "unknown NCCL version '2.99'; valid: 2.18, 2.23, 2.27 (the tuner's "
                    "tables, docs/model.md)");
  CHECK(nccl_version("v2.18.3-1").name == "2.18");
  CHECK(nccl_version("2.23.4").tag == "v2.23.4-1");
  CHECK(nccl_newest_version().name == "2.27");
  CHECK_THROWS_WITH(nccl_func("all_scatter"), Catch::Contains("unknown collective 'all_scatter'"));
  CHECK(nccl_func("all_reduce") == F::AllReduce);
  CHECK(nccl_func("ReduceScatter") == F::ReduceScatter);
}

TEST_CASE("nccl tuner: protocol payload fractions", "[nccl]") {
  CHECK(nccl_payload_fraction(P::LL) == 0.5);             // 4 data bytes per 8-byte line
  CHECK(nccl_payload_fraction(P::LL128) == 120.0 / 128);  // 15 of 16 8-byte words
  CHECK(nccl_payload_fraction(P::Simple) == 1.0);
}

TEST_CASE("nccl tuner: all-to-all is p2p, one rank is a copy", "[nccl]") {
  const NcclChoice a2a = nccl_choose(F::AllToAll, MiB, h100(2), nccl_newest_version());
  CHECK(a2a.p2p);
  CHECK(a2a.table.empty());
  CHECK_THAT(a2a.why(), Catch::Contains("not tuned"));
  NcclTopo one = h100x8();
  one.nranks = 1;
  const NcclChoice c = nccl_choose(F::AllReduce, MiB, one, nccl_newest_version());
  CHECK((c.algo == A::Ring && c.proto == P::Simple && c.time_us == 0));
}

TEST_CASE("nccl tuner: the search approximated from a platform", "[nccl]") {
  // DGX H100: 18 NVLinks x SM90_NVLINK_BW (2.18: 20.0) = 360 GB/s. The sm90 intra speeds start at 60
  // (<= 360, 60 x 1 <= 360): 360 / 60 = 6 channels carry 360 = totalBw, done; 60 >= 25 and not (sm > 80
  // and < 50): duplicated to 12 x 30; the communicator doubles to 24.
  NcclPlatform p;
  p.gpus_per_node = 8;
  p.sm = 90;
  p.intra = NcclIntra::NvSwitch;
  p.nvlinks_per_gpu = 18;
  p.pcie_bw = 48;
  p.nvls = true;
  NcclTopo t = nccl_topo(p, nccl_version("2.18"));
  CHECK(t.ring.n_channels == 12);
  CHECK(t.ring.bw_intra == Approx(30.0));
  CHECK(t.tree.n_channels == 12);
  CHECK(t.comm_channels == 24);
  // NVLS: 8 channels (one per GPU) at the first speed with 8 s <= 360 x 8/7 = 411.4: 40.
  CHECK(t.nvls.n_channels == 8);
  CHECK(t.nvls.bw_intra == Approx(40.0));
  CHECK(t.nvls_channels == 16);
  // 2 nodes, 8 NICs of 50 GB/s: inter speeds 48 (7 channels by the GPU's 360 = 336), 45 (8 NICs x 1, 360 /
  // 45 = 8: 360 >= totalBw): 8 x 45; 45 < 50 with 8 > 4 channels: no duplication; 16 channels (ring 45 is
  // not above 45: no Hopper doubling).
  p.nodes = 2;
  p.nics_per_node = 8;
  p.nic_bw = 50;
  t = nccl_topo(p, nccl_version("2.18"));
  CHECK(t.ring.n_channels == 8);
  CHECK(t.ring.bw_inter == Approx(45.0));
  CHECK(t.comm_channels == 16);
  // DGX A100: 12 NVLinks x 20 = 240; intra speeds 40: 6 channels = 240 done; duplicated (sm 80) to 12 x 20.
  NcclPlatform a;
  a.gpus_per_node = 8;
  a.sm = 80;
  a.nvlinks_per_gpu = 12;
  t = nccl_topo(a, nccl_version("2.23"));
  CHECK(t.ring.n_channels == 12);
  CHECK(t.ring.bw_intra == Approx(20.0));
  CHECK(t.comm_channels == 24);
  CHECK(t.nvls.n_channels == 0);  // no NVLS before Hopper
  // DGX B200, 2.27: 18 NVLinks x SM100_NVLINK_BW 40.1 = 721.8; sm100 intra speeds 90 (8 channels = 720,
  // short of 721.8), 80 (9 = 720), 70 (700), 60 (720), 50 (700), then 40 / 90 <= .49 stops: 8 x 90,
  // duplicated (90 >= 50) to 16 x 45; 32 channels; NVLS 8 x 90 (8 x 90 <= 721.8 x 8/7), 24 channels.
  NcclPlatform bw = p;
  bw.nodes = 1;
  bw.sm = 100;
  t = nccl_topo(bw, nccl_version("2.27"));
  CHECK(t.ring.n_channels == 16);
  CHECK(t.ring.bw_intra == Approx(45.0));
  CHECK(t.comm_channels == 32);
  CHECK(t.nvls.n_channels == 8);
  CHECK(t.nvls.bw_intra == Approx(90.0));
  CHECK(t.nvls_channels == 24);
  // 4 T4 on PCIe Gen3 (12): speed 12, 1 channel = 12 done, no duplication below 25: 1 x 12, 2 channels.
  NcclPlatform pc;
  pc.gpus_per_node = 4;
  pc.sm = 75;
  pc.intra = NcclIntra::Pcie;
  pc.pcie_bw = 12;
  pc.pcie_path = NcclPath::Phb;
  t = nccl_topo(pc, nccl_version("2.23"));
  CHECK(t.ring.n_channels == 1);
  CHECK(t.ring.bw_intra == Approx(12.0));
  CHECK(t.ring.type_intra == NcclPath::Phb);
  CHECK(t.comm_channels == 2);
  // 128 nodes x 1 A100 with a 25 GB/s NIC on PCIe Gen4 (24): speed 24, 1 channel; the tree pattern.
  NcclPlatform one;
  one.nodes = 128;
  one.sm = 80;
  one.intra = NcclIntra::Pcie;
  one.pcie_bw = 24;
  one.nics_per_node = 1;
  one.nic_bw = 25;
  t = nccl_topo(one, nccl_version("2.23"));
  CHECK(t.ring.n_channels == 1);
  CHECK(t.ring.bw_inter == Approx(24.0));
  CHECK(t.tree.tree_pattern);
  CHECK(t.ring.type_intra == NcclPath::Loc);
  CHECK_THROWS_WITH(nccl_topo(NcclPlatform{2, 8, 90, NcclIntra::NvSwitch, 18}, nccl_version("2.23")),
                    Catch::Contains("2 nodes need NICs"));
}

TEST_CASE("nccl tuner: NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS bound the communicator's channels",
          "[nccl]") {
  // ncclTopoPostset (src/graph/connect.cc 18:416-417): nChannels = min(NCCL_MAX_NCHANNELS, nChannels), then
  // copyChannels up to NCCL_MIN_NCHANNELS. The 4 T4s above: 2 channels.
  NcclPlatform pc;
  pc.gpus_per_node = 4;
  pc.sm = 75;
  pc.intra = NcclIntra::Pcie;
  pc.pcie_bw = 12;
  pc.pcie_path = NcclPath::Phb;
  const NcclVersion& v = nccl_version("2.18");
  const auto channels = [&](int min, int max) {
    NcclTopo t = nccl_topo(pc, v);
    nccl_limit_channels(t, v, {"", "", min, max});
    return t.comm_channels;
  };
  CHECK(channels(0, 0) == 2);  // no bound: NCCL's own
  CHECK(channels(8, 8) ==
        8);  // the GCP runs' NCCL_MIN_NCHANNELS=NCCL_MAX_NCHANNELS=8 (bench/data/nccl_tests)
  CHECK(channels(0, 1) == 1);
  CHECK(channels(4, 0) == 4);
  CHECK(channels(1, 0) == 2);  // a minimum below NCCL's own changes nothing
  CHECK(channels(6, 1) == 6);  // "combining max, then min": the first channel, copied to 6
  // Beyond MAXCHANNELS (2.18: 32, device.h; 2.27: 64) or negative: refused, where NCCL clamps with a warning.
  NcclTopo t = nccl_topo(pc, v);
  CHECK_THROWS_WITH(nccl_limit_channels(t, v, {"", "", 0, 40}),
                    Catch::Contains("NCCL_MAX_NCHANNELS 40: NCCL 2.18 runs 1 to 32 channels (MAXCHANNELS)"));
  CHECK_THROWS_WITH(nccl_limit_channels(t, v, {"", "", -1, 0}), Catch::Contains("NCCL_MIN_NCHANNELS -1"));
  CHECK_NOTHROW(nccl_limit_channels(t, nccl_version("2.27"), {"", "", 0, 40}));
  // The scenario keys, checked against the point's NCCL version.
  vt::TempDir d;
  const std::string base = R"(<scenario name="n">
  <cluster platform="p.xml" nodes="1" gpus_per_node="2"/>
  <model preset="vit_b_16"/>
  <dataset name="cifar10" resize="224"/>
  <training micro_batch="32"/>
)";
  auto pts = expand(read_scenario_file(
      d.file("a.xml", base + "<nccl min_channels=\"8\" max_channels=\"8\"/>\n</scenario>\n")));
  CHECK(pts[0].nccl.min_channels == 8);
  CHECK(pts[0].nccl.max_channels == 8);
  CHECK_THROWS_WITH(expand(read_scenario_file(d.file(
                        "b.xml", base + "<nccl version=\"2.18\" max_channels=\"40\"/>\n</scenario>\n"))),
                    Catch::Contains("NCCL 2.18 runs 1 to 32 channels"));
}

TEST_CASE("nccl tuner: the scenario's nccl keys are stored, checked and default to the newest", "[nccl]") {
  vt::TempDir d;
  const std::string base = R"(<scenario name="n">
  <cluster platform="p.xml" nodes="1" gpus_per_node="2"/>
  <model preset="vit_b_16"/>
  <dataset name="cifar10" resize="224"/>
  <training micro_batch="32"/>
)";
  auto pts = expand(read_scenario_file(d.file("a.xml", base + "</scenario>\n")));
  REQUIRE(pts.size() == 1);
  CHECK(pts[0].nccl.version == nccl_newest_version().name);
  CHECK(pts[0].nccl.algo.empty());
  CHECK(pts[0].nccl.proto.empty());
  pts = expand(read_scenario_file(d.file(
      "b.xml", base + "<nccl version=\"2.18.3\" algo=\"^tree\" proto=\"LL128,Simple\"/>\n</scenario>\n")));
  CHECK(pts[0].nccl.version == "2.18");
  CHECK(pts[0].nccl.algo == "^tree");
  CHECK(pts[0].nccl.proto == "LL128,Simple");
  // --set takes them too; a comma list there is a sweep, one point per name.
  auto f = read_scenario_file(d.file("s.xml", base + "</scenario>\n"));
  apply_override(f, "nccl.version=2.18");
  apply_override(f, "nccl.algo=Tree,Ring");
  pts = expand(f);
  REQUIRE(pts.size() == 2);
  CHECK(pts[0].nccl.version == "2.18");
  CHECK(pts[0].nccl.algo == "Tree");
  CHECK(pts[1].nccl.algo == "Ring");
  CHECK_THROWS_WITH(
      expand(read_scenario_file(d.file("c.xml", base + "<nccl version=\"2.12\"/>\n</scenario>\n"))),
      Catch::Contains("unknown NCCL version '2.12'; valid: 2.18, 2.23, 2.27"));
  CHECK_THROWS_WITH(expand(read_scenario_file(
                        d.file("e.xml", base + "<nccl algo=\"PAT\" version=\"2.18\"/>\n</scenario>\n"))),
                    Catch::Contains("NCCL_ALGO='PAT': unknown name 'PAT'"));
}

TEST_CASE("nccl tuner: the net plugin's latency enters the choice, an unseen cost only the call", "[nccl]") {
  const auto& v23 = nccl_version("2.23");
  // aws-ofi-nccl states 75 us (platform-aws.cpp, p4d/p5): search.cc sets every graph's latencyInter to it and
  // tuning.cc adds it to each network step's latency (twice for Simple: the flush). 2 x 8 H100, 1 KiB:
  // Tree/LL 6.8 + 2 (7 x .6 + 1 x (5.0 + 75)) = 175.2; Ring/LL 6.6 + 28 x 1.0 + 2 x (2.7 + 75) = 190.0 (the
  // figures of "network latencies" above, each network step raised by 75).
  NcclTopo efa = h100(2);
  for (NcclGraph* g : {&efa.ring, &efa.tree, &efa.nvls}) g->latency_inter_us = 75;
  const NcclChoice e = nccl_choose(F::AllReduce, KiB, efa, v23);
  check_cost(e, A::Tree, P::LL, 175.2, 19.5 * .9);
  check_cost(e, A::Ring, P::LL, 190.0, 20.8);
  CHECK(e.unseen_us == 0);
  // A cost the plugin does not state (GPUDirect-TCPX states 0): NCCL weighs the same table and picks the
  // same Tree/LL at 25.2 us; the call then pays it on each of the tree's 2 x log2(2 nodes) = 2 network
  // steps: 25.2 + 2 x 40 = 105.2.
  NcclTopo tcpx = h100(2);
  for (NcclGraph* g : {&tcpx.ring, &tcpx.tree, &tcpx.nvls}) g->latency_unseen_us = 40;
  const NcclChoice u = nccl_choose(F::AllReduce, KiB, tcpx, v23);
  check_cost(u, A::Ring, P::LL, 40.0, 20.8);  // the table is NCCL's
  CHECK(u.algo == A::Tree);
  CHECK(u.proto == P::LL);
  CHECK(u.unseen_us == Approx(80.0));
  CHECK(u.latency_us == Approx(105.2));
  CHECK_THAT(u.why(), Catch::Contains("of which 80.0 us the net plugin does not state"));
  // A ring all-reduce at 1 GiB crosses the network 2 (nodes - 1) = 2 times: + 80 as well.
  const NcclChoice ring = nccl_choose(F::AllReduce, GiB, tcpx, v23, {"ring", "simple"});
  CHECK(ring.unseen_us == Approx(80.0));
  // From a platform: nccl_topo carries the plugin's latency and the unseen cost to every graph, on several
  // nodes only.
  NcclPlatform p;
  p.nodes = 2;
  p.gpus_per_node = 8;
  p.sm = 80;
  p.nvlinks_per_gpu = 12;
  p.nics_per_node = 4;
  p.nic_bw = 25;
  p.net_latency_us = 75;
  p.net_unseen_latency_us = 40;
  const NcclTopo t = nccl_topo(p, v23);
  for (const NcclGraph* g : {&t.ring, &t.tree}) {
    CHECK(g->latency_inter_us == 75);
    CHECK(g->latency_unseen_us == 40);
  }
  p.nodes = 1;
  CHECK(nccl_topo(p, v23).ring.latency_inter_us == 0);
}

TEST_CASE("nccl tuner: CollNet graphs from a platform with SHARP", "[nccl]") {
  // 2 x 8 A100 (12 NVLinks x 20 = 240 GB/s, PCIe Gen4 24), 4 HDR NICs (25 GB/s) a node, 2.23. Ring: the
  // first speed <= min(NIC 25, PCIe 24) is 24: min(240 / 24 = 10, 4 NICs x 1) = 4 channels = 96; slower
  // speeds to 12 (8 channels, 96: not more), then 11 / 24 <= .49 stops: 4 x 24, not duplicated (< 25).
  NcclPlatform p;
  p.nodes = 2;
  p.gpus_per_node = 8;
  p.sm = 80;
  p.nvlinks_per_gpu = 12;
  p.nics_per_node = 4;
  p.nic_bw = 25;
  const auto& v23 = nccl_version("2.23");
  NcclTopo t = nccl_topo(p, v23);
  CHECK_FALSE(t.collnet);
  CHECK(t.collnet_direct.n_channels == 0);
  p.collnet = true;
  t = nccl_topo(p, v23);
  CHECK(t.collnet);
  CHECK(t.ring.n_channels == 4);
  // CollNetChain: the tree pattern held to the ring's 4 channels (init.cc 23:913-914).
  CHECK(t.collnet_chain.n_channels == 4);
  CHECK(t.collnet_chain.bw_intra == Approx(24.0));
  // CollNetDirect: a head per NIC with a GPU beside it, 4 (search.cc 23:974-975): 4 channels at 24.
  CHECK(t.collnet_heads == 4);
  CHECK(t.collnet_direct.n_channels == 4);
  CHECK(t.collnet_direct.bw_intra == Approx(24.0));
  // One node: no CollNet (NCCL_COLLNET_NODE_THRESHOLD = 2).
  p.nodes = 1;
  CHECK_FALSE(nccl_topo(p, v23).collnet);
  // The tuner then weighs CollNet: 4 x 8 A100 with 8 NICs at 256 MiB, 2.27: CollNetChain/Simple where
  // NCCL without SHARP runs the ring or the tree.
  p.nodes = 4;
  p.nics_per_node = 8;
  const auto& v27 = nccl_version("2.27");
  const NcclChoice with = nccl_choose(F::AllReduce, 256 * MiB, nccl_topo(p, v27), v27);
  CHECK((with.algo == A::CollNetChain || with.algo == A::CollNetDirect));
  p.collnet = false;
  const NcclChoice without = nccl_choose(F::AllReduce, 256 * MiB, nccl_topo(p, v27), v27);
  CHECK((without.algo == A::Ring || without.algo == A::Tree));
}
