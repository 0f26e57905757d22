// `vitsim collective` (issue 25 item 3): a predicted nccl-tests table that calibrate's nccl-tests reader
// reads, with the ring's closed form on a homogeneous platform, nccl-tests' counts and busbw factors per
// collective, JSON output, and bad command lines.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_util.hpp"
#include "vitsim/calibrate/imports.hpp"
#include "vitsim/core/results/nccl_table.hpp"
#include "vitsim/sim/collectives/collective.hpp"
#include "vitsim/sim/predict/collective_bench.hpp"

namespace {

// One node of n GPUs, each behind its own 10 GB/s, 1 us link to a FATPIPE backbone that never limits
// (tests/test_util.hpp platform_xml): between two GPUs a route of B = 10 GB/s and a = 2 us (up and down).
constexpr double kB = 10e9, kA = 2e-6;

std::string one_node(const vt::TempDir& d, int n) {
  return d.file(fmt::format("node{}.xml", n), vt::platform_xml(1, n, "10GBps", "1us", {}, {"1Tf"}));
}

// The alpha-beta times of vitsim's collectives on that platform (docs/model.md "Collectives").
double ring_all_reduce(int n, double s) {
  return 2 * (n - 1) * kA + 2.0 * (n - 1) / n * s / kB;
}
double expected_time(vitsim::NcclTest f, int n, double s) {
  switch (f) {
    case vitsim::NcclTest::AllReduce:
      return ring_all_reduce(n, s);
    case vitsim::NcclTest::ReduceScatter:
    case vitsim::NcclTest::AllGather:
      return ring_all_reduce(n, s) / 2;  // one of the all-reduce's two ring phases
    case vitsim::NcclTest::AllToAll:
      return kA + (n - 1.0) / n * s / kB;  // every rank's link sends (n-1)/n of its buffer at once
    case vitsim::NcclTest::Broadcast:
      return (n - 1) * kA + s / kB;  // a pipelined chain: n-1 hops' latency, the bytes once
  }
  return 0;
}

}  // namespace

TEST_CASE(
    "collective: all_reduce_perf's table, read by calibrate's nccl-tests reader, is the ring's closed form",
    "[collective][nccl-tests]") {
  vt::TempDir d;
  for (int n : {2, 4, 8}) {
    const std::string p = one_node(d, n);
    for (const char* algo : {"ring", "topology"}) {  // topology is the ring on one node (docs/model.md)
      INFO("n = " << n << ", " << algo);
      const auto r = vt::vitsim(fmt::format("collective {} --collective {} -b 4K -e 256M -f 4 -q", p, algo));
      REQUIRE(r.status == 0);
      const vitsim::calibrate::NcclTestsLog log = vitsim::calibrate::parse_nccl_tests("out", r.out);
      CHECK(log.ranks == n);
      CHECK(log.hosts == std::vector<std::string>{"n0"});
      CHECK(log.device == "G1Tf");
      REQUIRE(log.rows.size() == 9);  // 4K, 16K, ..., 256M
      double busbw_sum = 0;
      for (size_t k = 0; k < log.rows.size(); ++k) {
        const auto& row = log.rows[k];
        const double s = 4096.0 * std::pow(4.0, static_cast<double>(k));
        CHECK(row.bytes == s);
        CHECK(row.count == static_cast<long long>(s / 4));  // float
        // Printed in us with two decimals (and at most 7 characters): 0.005 us or 1e-4 relative.
        CHECK(row.oop_time_s == Approx(ring_all_reduce(n, s)).epsilon(1e-4).margin(0.005e-6));
        CHECK(row.ip_time_s == row.oop_time_s);  // the model: in-place = out-of-place
        CHECK(row.oop_busbw == Approx(row.oop_algbw * 2 * (n - 1) / n).epsilon(0.01).margin(0.01e9));
        busbw_sum += 2 * s / ring_all_reduce(n, s) * (n - 1) / n;
      }
      CHECK(log.avg_busbw == Approx(busbw_sum / log.rows.size()).epsilon(1e-4));
      // Fitted back as a measured log is, the platform's own a and B come out.
      const vitsim::calibrate::NcclImport imp = vitsim::calibrate::import_nccl_tests(log, 0, "");
      CHECK(imp.link.link_class == "intra_node");
      CHECK(imp.fit.bandwidth == Approx(kB).epsilon(1e-3));
      CHECK(imp.fit.latency_s == Approx(kA).epsilon(1e-2));
    }
  }
}

TEST_CASE("collective: nccl-tests' counts, busbw factors and closed forms for every collective",
          "[collective][nccl-tests]") {
  vt::TempDir d;
  const int n = 4;
  const std::string p = one_node(d, n);
  for (const std::string& name : vitsim::nccl_test_names()) {
    const vitsim::NcclTest f = vitsim::nccl_test(name);
    INFO(name);
    const auto r = vt::vitsim(fmt::format(
        "collective {} --func {} --collective ring -b 1M -e 64M -f 8 -d half --format json -q", p, name));
    REQUIRE(r.status == 0);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    CHECK(j["schema"] == "vitsim.collective/1");
    CHECK(j["test"] == name + "_perf");
    CHECK(j["config"]["ranks"] == n);
    REQUIRE(j["results"].size() == 3);  // 1M, 8M, 64M
    // src/<collective>.cu GetBw: all_reduce 2(n-1)/n, reduce_scatter, all_gather, alltoall (n-1)/n,
    // broadcast 1.
    const double factor = f == vitsim::NcclTest::AllReduce   ? 2.0 * (n - 1) / n
                          : f == vitsim::NcclTest::Broadcast ? 1.0
                                                             : (n - 1.0) / n;
    CHECK(vitsim::nccl_bus_factor(f, n) == factor);
    double size = 1 << 20;
    for (const auto& row : j["results"]) {
      // 2-byte elements: the buffers nccl-tests divides by the ranks stay whole (2^k elements, 4 ranks).
      CHECK(row["size"].get<double>() == size);
      const bool per_rank = f == vitsim::NcclTest::ReduceScatter || f == vitsim::NcclTest::AllGather ||
                            f == vitsim::NcclTest::AllToAll;
      CHECK(row["count"].get<double>() == (per_rank ? size / 2 / n : size / 2));
      CHECK(row["type"] == "half");
      CHECK(row["redop"] == (vitsim::nccl_test_reduces(f) ? "sum" : "none"));
      CHECK(row["root"] == (f == vitsim::NcclTest::Broadcast ? 0 : -1));
      for (const char* half : {"out_of_place", "in_place"}) {
        const double us = row[half]["time"], alg = row[half]["alg_bw"], bus = row[half]["bus_bw"];
        CHECK(us * 1e-6 == Approx(expected_time(f, n, size)).epsilon(1e-6));
        CHECK(alg == Approx(size / (us * 1e-6) / 1e9).epsilon(1e-12));
        CHECK(bus == Approx(alg * factor).epsilon(1e-12));
      }
      size *= 8;
    }
  }
}

TEST_CASE("collective: counts rounded as nccl-tests rounds them", "[collective][nccl-tests]") {
  using vitsim::NcclTest;
  // all_reduce: count = size / sizeof(type), rounded down; size printed is count x sizeof.
  CHECK(vitsim::nccl_counts(NcclTest::AllReduce, 10, 4, 3).count == 2);
  CHECK(vitsim::nccl_counts(NcclTest::AllReduce, 10, 4, 3).bytes == 8);
  // reduce_scatter over 3 ranks of floats at 1000 B: 250 elements, 83 per rank, down to a multiple of 16 B
  // (4 floats): 80; the printed size is the send buffer 80 x 3 x 4 B.
  CHECK(vitsim::nccl_counts(NcclTest::ReduceScatter, 1000, 4, 3).count == 80);
  CHECK(vitsim::nccl_counts(NcclTest::ReduceScatter, 1000, 4, 3).bytes == 960);
  CHECK(vitsim::nccl_counts(NcclTest::AllGather, 1000, 4, 3).bytes == 960);
  CHECK(vitsim::nccl_counts(NcclTest::AllToAll, 1000, 1, 3).count == 320);  // 333 & ~15
  CHECK(vitsim::nccl_counts(NcclTest::Broadcast, 1000, 8, 3).count == 125);
  // Sizes: nccl-tests' parsesize is binary; -i steps in bytes.
  CHECK(vitsim::parse_nccl_size("8G") == 8.0 * (1 << 30));
  CHECK(vitsim::parse_nccl_size("1.5K") == 1536);
  CHECK(vitsim::nccl_sizes({8, 64, 2, 0}) == std::vector<double>{8, 16, 32, 64});
  CHECK(vitsim::nccl_sizes({100, 350, 1, 100}) == std::vector<double>{100, 200, 300});
}

TEST_CASE("collective: the text layout is nccl-tests 2.19's", "[collective][nccl-tests]") {
  vt::TempDir d;
  const auto r = vt::vitsim(fmt::format("collective {} --func broadcast -r 1 -b 8 -e 8 -q", one_node(d, 3)));
  REQUIRE(r.status == 0);
  // src/util.cu writeResultHeader, and a row of writeBenchmarkLinePreamble and writeBenchmarkLineBody.
  // (its format strings, evaluated: "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s
  // %*s\n")
  CHECK(r.out.find(
            "\n#       size         count      type   redop    root     time   algbw   busbw  #wrong     "
            "time   algbw   busbw  #wrong \n#        (B)    (elements)                               (us)  "
            "(GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         \n") != std::string::npos);
  // The chain's 4 us is below the host's launch of the call (collective_bench.hpp kNcclLaunchPerGpuS), which
  // the size then takes.
  const double us =
      std::max(expected_time(vitsim::NcclTest::Broadcast, 3, 8), vitsim::sim::kNcclLaunchPerGpuS) * 1e6;
  const std::string row = fmt::format(
      "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}  {:7.2f}    0.00    0.00    N/A  {:7.2f}    "
      "0.00    0.00    N/A\n",
      8, 2, "float", "none", 1, us, us);
  CHECK(r.out.find("\n" + row) != std::string::npos);
  CHECK(r.out.find("\n# Avg bus bandwidth    : 0.00") != std::string::npos);
  CHECK(r.out.find("# in-place equals out-of-place") != std::string::npos);
  CHECK(r.out.find("#  Rank  2 Group  0 Pid      0 on         n0 device  2 [n0-gpu2] G1Tf\n") !=
        std::string::npos);
}

TEST_CASE("collective: --out holds what stdout would, and nothing is written on failure",
          "[collective][cli]") {
  vt::TempDir d;
  const std::string p = one_node(d, 2);
  const auto printed = vt::vitsim(fmt::format("collective {} -e 1M -q", p));
  REQUIRE(printed.status == 0);
  const auto written = vt::vitsim(fmt::format("collective {} -e 1M -q --out {}", p, d / "t.txt"));
  CHECK(written.status == 0);
  CHECK(written.out.empty());
  std::ifstream in(d / "t.txt");
  CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == printed.out);
  const auto failed = vt::vitsim(fmt::format("collective {} -g 3 --out {}", p, d / "f.txt"));
  CHECK(failed.status == 1);
  CHECK_FALSE(std::filesystem::exists(d / "f.txt"));
}

TEST_CASE("collective: bad command lines exit 2, bad inputs 1, each with one line",
          "[collective][cli][negative]") {
  vt::TempDir d;
  const std::string p = one_node(d, 2);
  struct Case {
    std::string args;
    int status;
    std::string message;
  };
  const std::vector<Case> cases{
      {"-b 8X", 2, "--minbytes: '8X' is not a size: expected bytes with an optional K, M or G"},
      {"-e 1T", 2, "--maxbytes: '1T' is not a size"},
      {"-d float33", 2,
       "--datatype: unknown datatype 'float33'; valid: " + vt::join(vitsim::nccl_type_names())},
      {"-o sum2", 2, "--op: unknown reduction op 'sum2'; valid: sum, prod, max, min, avg, mulsum"},
      {"--func allreduce", 2,
       "--func: unknown collective function 'allreduce'; valid: " + vt::join(vitsim::nccl_test_names())},
      {"--collective butterfly", 2,
       "--collective: unknown collective 'butterfly'; valid: " + vt::join(vitsim::sim::collective_names())},
      {"-f 2 -i 1M", 2, "-i 1M steps by bytes and -f 2 by a factor"},
      {"-b 1G -e 1M", 2, "invalid sizes for minbytes and maxbytes"},
      {"-b 0 -e 8", 2, "minbytes 0 times step factor 2 stays 0"},
      {"--nodes 1 --hosts n0", 2, "excludes"},
      {"--nodes 2", 1, "--nodes 2: " + p + " has 1 node(s)"},
      {"--hosts n7", 1, "--hosts: " + p + ": no node 'n7'; nodes: n0"},
      {"-g 3", 1, "-g 3: node 'n0' of " + p + " has 2 GPU(s)"},
      {"-g 1", 1, "1 rank: a collective over one GPU moves nothing"},
      {"--func broadcast -r 2", 1, "-r 2: the root is a rank, 0 to 1"},
      // A flag that would change nothing (issue 36): NCCL_ALGO / NCCL_PROTO steer only NCCL's tuner.
      {"--collective ring --nccl-algo tree", 1, "--nccl-algo applies to NCCL's tuner (--collective auto)"},
      {"--collective tree --nccl-proto ll", 1, "--nccl-proto applies to NCCL's tuner (--collective auto)"},
      // Issue 39 item 15: --nccl-version was ignored with a named algorithm, and the tuner's flags with the
      // functions NCCL runs without it.
      {"--collective ring --nccl-algo tree --nccl-version 2.18", 1,
       "--nccl-algo applies to NCCL's tuner (--collective auto)"},
      {"--collective ring --nccl-version 2.18", 1,
       "--nccl-version applies to NCCL's tuner (--collective auto)"},
      {"--func alltoall --nccl-algo ring", 1, "--nccl-algo with --func alltoall: NCCL runs alltoall"},
      {"--func broadcast --nccl-version 2.18", 1, "--nccl-version with --func broadcast"},
      // Item 16: buffers beyond the GPU's memory (tests/test_util.hpp gpu_props: 80 GiB): nccl-tests
      // allocates a send and a receive buffer of the largest size, 2 x 64 GiB here, and stops.
      {"-e 64G", 1,
       "-e 64.00 GiB: nccl-tests allocates a send and a receive buffer of the largest size on every GPU"},
      // Item 2: the estimate before anything is built, against --max-memory.
      {"--max-memory 1KiB", 1,
       "above the limit of 1.00 KiB; use fewer ranks (--nodes, -g) or raise the limit "
       "with --max-memory SIZE"},
      {"--max-memory 0", 2, "--max-memory"},
      // A host thread drives GPUs of its own node, those -g uses (2 here), and a launch takes no less than 0.
      {"--gpus-per-thread 3", 1, "--gpus-per-thread 3: a host thread drives 1 to 2 GPU(s)"},
      {"--gpus-per-thread 0", 2, "--gpus-per-thread: 0 is out of range"},
      {"--launch-cost -1us", 2, "--launch-cost: bad time '-1us'"},
      {"--launch-cost 4.2", 2, "--launch-cost"},
  };
  for (const auto& c : cases) {
    INFO(c.args);
    const auto r = vt::vitsim(fmt::format("collective {} {} -q", p, c.args));
    CHECK(r.status == c.status);
    CHECK(r.out.rfind("vitsim: error: ", 0) == 0);
    CHECK(r.out.find(c.message) != std::string::npos);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  }
  // Item 2: alltoall on 4,096 ranks (512 nodes x 8 H100s) keeps 4096 x 4095 transfers in flight, about 48
  // GiB at 3 KiB each (collective_bench.cpp kBytesPerFlow): refused before the engine is built, where it ran
  // into std::bad_alloc (exit 134).
  const std::string big = d / "big.xml";
  REQUIRE(
      vt::vitsim(
          fmt::format("platform --nodes 512 --gpus-per-node 8 --gpu h100-sxm --nic-speed ndr --out {}", big))
          .status == 0);
  const auto a2a = vt::vitsim(fmt::format("collective {} --func alltoall --max-memory 8GiB -q", big));
  CHECK(a2a.status == 1);
  CHECK(a2a.out.find("alltoall on 4096 ranks keeps 1.68e+07 transfers in flight at once: about 48.") !=
        std::string::npos);
  CHECK(std::count(a2a.out.begin(), a2a.out.end(), '\n') == 1);
  const auto missing = vt::vitsim(fmt::format("collective {} -q", d / "none.xml"));
  CHECK(missing.status == 1);
  CHECK(missing.out.find("none.xml") != std::string::npos);
  const auto no_platform = vt::vitsim("collective -q");
  CHECK(no_platform.status == 2);
  // NVLS forced on GPUs that cannot run it (an A100 has no NVLink SHARP): NCCL's own refusal, one line,
  // before any rank runs (it was an exception inside a simulated rank).
  const std::string a100 = d / "a100.xml";
  REQUIRE(vt::vitsim("platform --nodes 1 --gpus-per-node 8 --gpu a100-sxm-80gb --out " + a100).status == 0);
  const auto nvls = vt::vitsim(fmt::format("collective {} --nccl-algo nvls -b 1M -e 1M -q", a100));
  CHECK(nvls.status == 1);
  CHECK(nvls.out.rfind("vitsim: error: NCCL 2.27: no algorithm/protocol available for AllReduce", 0) == 0);
  CHECK(std::count(nvls.out.begin(), nvls.out.end(), '\n') == 1);
}

TEST_CASE("collective: docs/collective.md's sample is what the command prints", "[collective][docs]") {
  const std::string command =
      "vitsim collective platforms/h100-16x8-ndr.xml --nodes 2 -b 1M -e 1G -f 4 --collective ring";
  // From the source folder, so that the platform's path is printed as the page gives it.
  const auto r = vt::run(fmt::format("cd {} && {} {} -q", vt::source(""), VITSIM_BINARY, command.substr(7)));
  REQUIRE(r.status == 0);
  const std::string sample = "```\n$ " + command + "\n" + r.out + "```\n";
  CHECK(vt::doc_section(vt::source("docs/collective.md"), "collective-sample", sample) == sample);
}

TEST_CASE("collective: docs/collective.md's nccl sample is what the command prints",
          "[collective][docs][nccl]") {
  const std::string command =
      "vitsim collective platforms/h100-16x8-ndr.xml --nodes 2 -b 4K -e 1G -f 16 --collective auto";
  const auto r = vt::run(fmt::format("cd {} && {} {} -q", vt::source(""), VITSIM_BINARY, command.substr(7)));
  REQUIRE(r.status == 0);
  // Every size's note names NCCL's choice.
  CHECK(r.out.find("# 4 KiB all-reduce on 16 ranks: NCCL 2.27 Tree/LL") != std::string::npos);
  const std::string sample = "```\n$ " + command + "\n" + r.out + "```\n";
  CHECK(vt::doc_section(vt::source("docs/collective.md"), "collective-nccl-sample", sample) == sample);
  // --nccl-algo and --nccl-proto as NCCL_ALGO and NCCL_PROTO; a name NCCL does not know is refused.
  const auto ring = vt::run(fmt::format("cd {} && {} {} --nccl-algo ring --nccl-proto ^LL,LL128 -q",
                                        vt::source(""), VITSIM_BINARY, command.substr(7)));
  REQUIRE(ring.status == 0);
  CHECK(ring.out.find("4 KiB all-reduce on 16 ranks: NCCL 2.27 Ring/Simple") != std::string::npos);
  const auto old = vt::run(
      fmt::format("cd {} && {} {} --nccl-version 2.18 -q", vt::source(""), VITSIM_BINARY, command.substr(7)));
  REQUIRE(old.status == 0);
  CHECK(old.out.find("on 16 ranks: NCCL 2.18 ") != std::string::npos);
  CHECK(vt::run(fmt::format("cd {} && {} {} --nccl-algo bogus -q", vt::source(""), VITSIM_BINARY,
                            command.substr(7)))
            .status != 0);
}

TEST_CASE("collective: --hosts orders the nodes, -i steps by bytes, and two nodes read as inter_node",
          "[collective][cli]") {
  vt::TempDir d;
  // Two nodes of two GPUs joined by 10 GB/s NICs (tests/test_util.hpp platform_xml).
  const std::string p =
      d.file("two.xml", vt::platform_xml(2, 2, "10GBps", "1us", {"10GBps", "10GBps"}, {"1Tf", "1Tf"}));
  const auto r = vt::vitsim(fmt::format("collective {} --hosts n1,n0 -b 1M -e 3M -i 1M -q", p));
  REQUIRE(r.status == 0);
  CHECK(r.out.find("#  Rank  0 Group  0 Pid      0 on         n1 device  0 [n1-gpu0] G1Tf\n") !=
        std::string::npos);
  CHECK(r.out.find("#  Rank  3 Group  0 Pid      0 on         n0 device  1 [n0-gpu1] G1Tf\n") !=
        std::string::npos);
  CHECK(r.out.find("step: 1048576(bytes)") != std::string::npos);
  const vitsim::calibrate::NcclTestsLog log = vitsim::calibrate::parse_nccl_tests("out", r.out);
  REQUIRE(log.rows.size() == 3);  // 1M, 2M, 3M
  CHECK(log.rows[2].bytes == 3 << 20);
  CHECK(log.hosts == std::vector<std::string>{"n1", "n0"});
  CHECK(vitsim::calibrate::import_nccl_tests(log, 0, "").link.link_class == "inter_node");
  // -g 1 --nodes 2: one GPU on each node.
  const auto one = vt::vitsim(fmt::format("collective {} --nodes 2 -g 1 -e 8 -q", p));
  REQUIRE(one.status == 0);
  CHECK(one.out.find("#  Rank  1 Group  0 Pid      0 on         n1 device  0 [n1-gpu0] G1Tf\n") !=
        std::string::npos);
}

TEST_CASE("collective: every size of a sweep takes the time of its collective run alone (tree, 3 nodes)",
          "[collective][tree]") {
  // tests/sim/test_sim_collectives.cpp's node-aware tree: lanes 100 GB/s, NICs 1 GB/s, every link 1 us, so
  // a_node = 2 us, a_net = 4 us; on N = 3 nodes (node-tree depth 1) of G = 2 GPUs an all-reduce takes
  // 2 (S / B_net + (G-1) a_node + a_net). The sizes run one after the other: none may carry time into the
  // next.
  vt::TempDir d;
  const std::string p = d.file(
      "n.xml", vt::platform_xml(3, 2, "100GBps", "1us", {"1GBps", "1GBps", "1GBps"}, {"1Tf", "1Tf", "1Tf"}));
  const auto r = vt::vitsim(fmt::format("collective {} --collective tree -b 16M -e 64M --format json -q", p));
  REQUIRE(r.status == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  REQUIRE(j["results"].size() == 3);
  for (const auto& row : j["results"]) {
    const double s = row["size"].get<double>();
    INFO(s);
    CHECK(row["out_of_place"]["time"].get<double>() * 1e-6 ==
          Approx(2 * (s / 1e9 + 2e-6 + 4e-6)).epsilon(1e-6));
  }
}

TEST_CASE(
    "collective: NVLink runs at NCCL's rating of a link (topo.h), an NVSwitch node's ring busbw is links x "
    "rating",
    "[collective][nvlink]") {
  // NcclVersion::nvlink_bw of the newest table per link (SM80 20, SM90 20.6 GB/s) times the GPU's links
  // (datasheet per-direction bandwidth over 25 GB/s a link: A100 300 -> 12, H100 450 -> 18). At 4 GiB the
  // ring's latencies (2(n-1) = 14 hops of about 7 us: lane, backbone and lane) are 0.3% of the time.
  vt::TempDir d;
  const struct {
    const char* gpu;
    double busbw;  // GB/s
    const char* note;
  } cases[] = {{"a100-sxm-80gb", 12 * 20.0, "20 of 25 GB/s per link (SM 80"},
               {"h100-sxm", 18 * 20.6, "20.6 of 25 GB/s per link (SM 90"}};
  for (const auto& c : cases) {
    INFO(c.gpu);
    const std::string p = d / (std::string(c.gpu) + ".xml"), out = d / (std::string(c.gpu) + ".json");
    REQUIRE(
        vt::vitsim(fmt::format("platform --nodes 1 --gpus-per-node 8 --gpu {} --out {}", c.gpu, p)).status ==
        0);
    const auto r = vt::vitsim(
        fmt::format("collective {} --collective ring -b 4G -e 4G -q --format json --out {}", p, out));
    REQUIRE(r.status == 0);
    std::ifstream in(out);
    const auto j = nlohmann::json::parse(in);
    const double t = j["results"][0]["out_of_place"]["time"].get<double>() * 1e-6;  // nccl-tests' us
    const double busbw = 4.0 * (1u << 30) / t * 2.0 * 7 / 8 / 1e9;
    CHECK(busbw == Approx(c.busbw).epsilon(0.005));
    bool named = false;
    for (const auto& n : j["notes"]) named = named || n.get<std::string>().find(c.note) != std::string::npos;
    CHECK(named);
  }
}

namespace {

// `vitsim collective` over two nodes of `gpus` A100s with `nics` HDR NICs each, written as one link per NIC
// (rail-optimised) or as one link of their sum, at one size: the out-of-place time (s) and the notes.
struct RailsRun {
  double time_s = 0;
  std::string notes;
};
RailsRun rails_run(const vt::TempDir& d, int gpus, int nics, bool rails, const std::string& flags) {
  const std::string p = d / fmt::format("a100_{}x{}_{}.xml", gpus, nics, rails ? "rails" : "one");
  const auto w = vt::vitsim(
      fmt::format("platform --nodes 2 --gpus-per-node {} --gpu a100-sxm-80gb --nics {} --nic-speed hdr {} "
                  "--out {}",
                  gpus, nics, rails ? "--rail-optimised" : "", p));
  INFO(w.out);
  REQUIRE(w.status == 0);
  const auto r = vt::vitsim(fmt::format("collective {} {} --format json -q", p, flags));
  INFO(r.out);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  RailsRun out;
  out.time_s = j["results"][0]["out_of_place"]["time"].get<double>() * 1e-6;  // nccl-tests' us
  for (const auto& n : j["notes"]) out.notes += n.get<std::string>() + "\n";
  return out;
}

// The number a note prints after `lead` ("latency 184.24 us" -> 184.24).
double number_after(const std::string& notes, const std::string& lead) {
  const size_t at = notes.find(lead);
  REQUIRE(at != std::string::npos);
  return std::stod(notes.substr(at + lead.size()));
}

}  // namespace

TEST_CASE(
    "collective: auto on rail-optimised nodes runs NCCL's channels as a ring per rail: busbw = the rails' "
    "sum, "
    "as one aggregate NIC link gives",
    "[collective][rails]") {
  // Two nodes of G A100s (NVSwitch: 300 GB/s lanes, NCCL's rating of 240 GB/s inside the node) and R HDR NICs
  // each: 200 Gb/s = 25 GB/s a NIC, InfiniBand at MTU 4096 carrying x 4096/4122 of it (ib_framing, docs/
  // platforms.md "Link transports"): B = 25e9 x 4096/4122. NCCL's Ring/Simple on C channels runs as
  // k = min(C, R) rings (rails.hpp), ring r crossing each node through rail r, so each NIC carries one ring's
  // crossing, 2(n-1)/n S / k each way: t = L + 2(n-1)/n S / (k B), busbw = k B, on n = 2G ranks, with NCCL's
  // latency term L (the note's; the transfers run over routes without latency). Written as one link of R B,
  // the nodes give the one ring 2(n-1)/n S at R B: the same time where k = R (C >= R: NCCL 2.27's tables give
  // these nodes 2R channels). The lanes never limit: a GPU's crossing transfer shares its lane with at most
  // its share inside the node, k B <= 200 GB/s of 300.
  vt::TempDir d;
  const double S = 1 << 30, B = 25e9 * 4096 / 4122;
  const std::string ring = "--nccl-algo ring --nccl-proto simple -b 1G -e 1G";
  for (const auto& [G, R] : {std::pair{8, 8}, {8, 4}, {4, 2}, {2, 2}}) {
    INFO("G " << G << ", R " << R);
    const RailsRun rails = rails_run(d, G, R, true, ring), one = rails_run(d, G, R, false, ring);
    INFO(rails.notes << one.notes);
    const int n = 2 * G;
    const int channels = static_cast<int>(number_after(rails.notes, "Ring/Simple, "));
    const int k = std::min(channels, R);
    CHECK(k == R);
    CHECK(rails.notes.find(fmt::format("over {} NIC rails (a ring per rail)", R)) != std::string::npos);
    const double L = number_after(rails.notes, "(latency ") * 1e-6;  // printed to 0.01 us: 1e-6 of t
    CHECK(rails.time_s == Approx(L + 2.0 * (n - 1) / n * S / (k * B)).epsilon(1e-5));
    CHECK(2.0 * (n - 1) / n * S / (rails.time_s - L) == Approx(R * B).epsilon(1e-5));  // busbw = R B
    CHECK(rails.time_s == Approx(one.time_s).epsilon(1e-9));
    CHECK(one.notes.find("NIC rails") == std::string::npos);
  }
}

TEST_CASE(
    "collective: 2 x 8 A100 with 8 HDR rails, NCCL's own choice: within a few % of the same NICs as one link",
    "[collective][rails]") {
  // issue 36's case: one ring crossing each node through one rail predicted 81 ms at 1 GiB (busbw 24.8 GB/s,
  // one NIC's); the same nodes with their NICs as one link 10.3 ms, and nccl-tests measured 11.06 ms on them
  // (bench/data/nccl_tests/azure_ndm_a100_v4_2x8_hdr.txt). At the sizes where the tuner picks Tree/LL128
  // (4 MiB), Ring/LL128 (16 MiB) and Ring/Simple (1 GiB), all on 16 channels: its channels over the 8 rails.
  vt::TempDir d;
  for (const char* size : {"1G", "16M", "4M"}) {
    INFO(size);
    const std::string flags = fmt::format("-b {} -e {}", size, size);
    const RailsRun rails = rails_run(d, 8, 8, true, flags), one = rails_run(d, 8, 8, false, flags);
    INFO(rails.notes << one.notes);
    CHECK(rails.time_s == Approx(one.time_s).epsilon(0.05));
  }
  const RailsRun big = rails_run(d, 8, 8, true, "-b 1G -e 1G");
  CHECK(big.time_s < 11.06e-3 * 1.10);  // not one rail's 81 ms: within 10% of the measured 11.06 ms
  CHECK(big.notes.find("Ring/Simple, 16 channels, over 8 NIC rails") != std::string::npos);
}

TEST_CASE(
    "collective: an iteration takes at least the host's launches of its GPUs' calls (--gpus-per-thread)",
    "[collective][launch]") {
  // One node of 8 GPUs (one_node: a = 2 us, B = 10 GB/s between two GPUs), the ring named: an all-reduce of
  // S takes 14 a + 14/8 S / B (ring_all_reduce): 28.0 us at 8 B, 39.5 us at 64 KiB. nccl-tests' loop with
  // one thread driving G GPUs launches G calls an iteration, kNcclLaunchPerGpuS each (collective_bench.hpp,
  // docs/sources.md), so a size takes max(ring, G x the launch cost).
  vt::TempDir d;
  const std::string p = one_node(d, 8);
  const double launch = vitsim::sim::kNcclLaunchPerGpuS;
  CHECK(launch == 4.2e-6);  // NVIDIA/nccl-tests#123: 33.7 us an iteration over 8 GPUs
  struct Case {
    std::string flags;
    double floor_s;  // G x the launch cost
  };
  for (const Case& c : std::vector<Case>{{"", launch},                         // 4.2 us: binds nowhere
                                         {"--gpus-per-thread 4", 4 * launch},  // 16.8 us: nowhere
                                         {"--gpus-per-thread 8", 8 * launch},  // 33.6 us: at 8 B
                                         {"--gpus-per-thread 8 --launch-cost 0us", 0},
                                         {"--gpus-per-thread 4 --launch-cost 10us", 40e-6}}) {  // 8 B, 64 KiB
    INFO(c.flags);
    const auto r = vt::vitsim(
        fmt::format("collective {} --collective ring -b 8 -e 512M -f 8192 {} --format json -q", p, c.flags));
    REQUIRE(r.status == 0);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    REQUIRE(j["results"].size() == 3);  // 8 B, 64 KiB, 512 MiB
    int bound = 0;
    for (const auto& row : j["results"]) {
      const double s = row["size"].get<double>(), ring = ring_all_reduce(8, s);
      INFO(s);
      bound += ring < c.floor_s;
      CHECK(row["out_of_place"]["time"].get<double>() * 1e-6 ==
            Approx(std::max(ring, c.floor_s)).epsilon(1e-6));
    }
    CHECK(bound == (c.floor_s == 40e-6 ? 2 : c.floor_s == 8 * launch ? 1 : 0));
    CHECK((r.out.find("host launches: ") != std::string::npos) == (bound > 0));
  }
}
