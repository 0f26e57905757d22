// Hostile numbers, sizes and platform files (issue 12), each with the one line it must get; the same table
// renders docs/robustness.md (VITSIM_UPDATE_DOCS=1 rewrites it). Plus the steady-state rule of the
// simulated window against closed forms (sim/src/point/steady_state.cpp).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>

#include "test_util.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/calibration.hpp"
#include "vitsim/core/formats/deepspeed.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/sim/point/simulate.hpp"

namespace {

struct BadInput {
  const char* category;
  const char* what;
  std::vector<std::pair<std::string, std::string>> files;  // written into a fresh folder
  std::string args;                                        // vitsim arguments, run in that folder
  std::string message;                                     // the whole output, one line
  int status = 1;
};

// A valid base: tests/test_util.hpp's 2-node platform of 4 GPUs each, and a scenario on it.
std::string platform() {
  return vt::platform_xml(2, 4, "12GBps", "1us", {"1GBps", "1GBps"}, {"8Tf", "8Tf"});
}

std::string scenario(const std::string& extra = "",
                     const std::string& cluster = "nodes=\"1\" gpus_per_node=\"2\"",
                     const std::string& platform_file = "p.xml") {
  return "<scenario>\n  <cluster platform=\"" + platform_file + "\" " + cluster +
         "/>\n  <model preset=\"vit_cifar_tiny\"/>\n  <dataset name=\"cifar10\"/>\n  <training "
         "micro_batch=\"16\"/>\n" +
         extra + "</scenario>\n";
}

const std::string kHead =
    "<?xml version=\"1.0\"?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
    "<platform version=\"4.1\">\n";
std::string gpu() {
  return vt::gpu_props("G", "8Tf");
}
// A one-zone platform of two GPU hosts a and b plus `body` (line 4 onward: <zone> is line 4, a 5, b 6).
std::string two_hosts(const std::string& body, const std::string& zone_attrs = "routing=\"Full\"") {
  return kHead + "<zone id=\"z\" " + zone_attrs + ">\n<host id=\"a\" speed=\"1Gf\">" + gpu() +
         "</host>\n<host id=\"b\" speed=\"1Gf\">" + gpu() + "</host>\n" + body + "</zone></platform>\n";
}
const std::string kLink = "<link id=\"l\" bandwidth=\"1GBps\" latency=\"1us\"/>\n";
const std::string kRoute = "<route src=\"a\" dst=\"b\"><link_ctn id=\"l\"/></route>\n";
// A one-GPU host with `props` added to its GPU properties (for figure checks).
std::string one_gpu(const std::string& props, const std::string& host_attrs = "speed=\"1Gf\"") {
  return kHead + "<zone id=\"z\" routing=\"Full\">\n<host id=\"h\" " + host_attrs + ">\n" + gpu() + "\n" +
         props + "</host>\n</zone></platform>\n";
}
std::string nested(int depth) {
  std::string x = kHead;
  for (int i = 0; i < depth; ++i) x += "<zone id=\"z" + std::to_string(i) + "\" routing=\"Full\">\n";
  x += "<host id=\"h\" speed=\"1Gf\">" + gpu() + "</host>\n";
  for (int i = 0; i < depth; ++i) x += "</zone>\n";
  return x + "</platform>\n";
}
std::string values(int n) {
  std::string v;
  for (int i = 1; i <= n; ++i) v += (i > 1 ? "," : "") + std::to_string(i);
  return v;
}
std::string calib_device(const std::string& type, const std::string& points,
                         const std::string& precision = "fp32") {
  return R"({"device_type": ")" + type + R"(", "precision": ")" + precision +
         R"(", "model": {"image_size": 32, "patch": 4, "channels": 3, "width": 192, "depth": 6, "heads": 3, "mlp_ratio": 4, "classes": 10}, "points": [)" +
         points + "]}";
}
// One device of vit_cifar_tiny (the scenario's model: its calibration is used) with `figures` (e.g.
// "\"peak_flops\": 1e9, ") before its model and `tail` (e.g. an occupancy) after its points.
std::string calib_with(const std::string& type, const std::string& figures, const std::string& points,
                       const std::string& tail = "") {
  return R"({"schema": "vitsim.calibration/2", "devices": [{"device_type": ")" + type +
         R"(", "precision": "fp32", )" + figures +
         R"("model": {"image_size": 32, "patch": 4, "channels": 3, "width": 192, "depth": 6, "heads": 3, "mlp_ratio": 2, "classes": 10}, "points": [)" +
         points + "]" + tail + "}]}";
}
std::string calib(const std::string& devices) {
  return R"({"schema": "vitsim.calibration/2", "devices": [)" + devices + "]}";
}
std::string pt(const std::string& mb, double fwd, double bwd, const std::string& layers = "") {
  return fmt::format(R"({{"micro_batch": {}, "fwd_s": {}, "bwd_s": {}{}}})", mb, fwd, bwd,
                     layers.empty() ? "" : ", \"layers\": [" + layers + "]");
}
const std::string kDs = "  <deepspeed config=\"ds.json\"/>\n";

std::vector<BadInput> cases();

std::string render(const std::vector<BadInput>& all) {
  std::ostringstream o;
  o << "Every row is a case of `tests/cli/test_robustness_numbers.cpp` (issue 12: numbers, sizes and "
       "platform files),\n"
       "which checks the exact output and exit status and regenerates this table\n"
       "(`VITSIM_UPDATE_DOCS=1 build/tests/test_robustness_numbers`). Runs happen in a folder holding a "
       "valid\n"
       "2-node platform `p.xml` (4 GPUs per node) and the files each case writes; long messages are cut here "
       "at\n"
       "300 characters.\n\n"
       "| # | category | bad input | command | exit | message |\n| --- | --- | --- | --- | --- | --- |\n";
  int i = 0;
  for (const auto& c : all) {
    std::string msg = c.message.size() > 300 ? c.message.substr(0, 300) + " ..." : c.message;
    for (size_t p = 0; (p = msg.find('|', p)) != std::string::npos; p += 2) msg.replace(p, 1, "\\|");
    std::string args = c.args.size() > 120 ? c.args.substr(0, 120) + " ..." : c.args;
    for (size_t p = 0; (p = args.find('|', p)) != std::string::npos; p += 2) args.replace(p, 1, "\\|");
    o << "| " << ++i << " | " << c.category << " | " << c.what << " | `vitsim " << args << "` | " << c.status
      << " | `" << msg << "` |\n";
  }
  return o.str();
}

}  // namespace

TEST_CASE("robustness numbers: hostile figures, sizes and platforms get one line each",
          "[robustness][negative]") {
  const auto all = cases();
  CHECK(all.size() >= 50);
  const bool print = std::getenv("VITSIM_PRINT_ACTUAL") != nullptr;
  for (const auto& c : all) {
    INFO(c.category << ": " << c.what);
    vt::TempDir d;
    d.file("p.xml", platform());
    for (const auto& [name, content] : c.files) d.file(name, content);
    auto r = vt::run("cd " + d.path.string() + " && " + VITSIM_BINARY + " " + c.args + " -q");
    if (print) fmt::print("ACTUAL [{}] {}\n", c.what, r.out);
    CHECK(r.status == c.status);
    CHECK(r.out == c.message + "\n");
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    // No flood, whatever the input: the longest message is the list of the 47 zero_optimization keys of
    // DeepSpeed v0.16 (about 1,300 characters).
    CHECK(r.out.size() < 1500);
  }
  const std::string doc = render(all);
  CHECK(vt::doc_section(vt::source("docs/robustness.md"), "test_robustness_numbers", doc) == doc);
}

namespace {
std::vector<BadInput> cases() {
  const std::string S = "predict s.xml";
  const std::string Q = "predict s.xml --set cluster.platform=q.xml";
  const std::string one = scenario("", "nodes=\"1\" gpus_per_node=\"1\"");
  const std::string two = scenario("", "nodes=\"2\" gpus_per_node=\"1\"");
  const std::string big(5000, '9');
  return {
      // --- 1. platform structure: what SimGrid 3.32's parser aborts on, refused first ---
      {"platform",
       "zones nested 300 deep (SimGrid segfaults)",
       {{"q.xml", nested(300)}, {"s.xml", one}},
       Q,
       "vitsim: error: q.xml:36: zones nested 33 deep (limit 32; SimGrid's parser recurses once per level)"},
      {"platform",
       "zones nested 33 deep (one past the limit)",
       {{"q.xml", nested(33)}, {"s.xml", one}},
       Q,
       "vitsim: error: q.xml:36: zones nested 33 deep (limit 32; SimGrid's parser recurses once per level)"},
      {"platform",
       "a route declared in both directions",
       {{"q.xml", two_hosts(kLink + kRoute + "<route src=\"b\" dst=\"a\"><link_ctn id=\"l\"/></route>\n")},
        {"s.xml", two}},
       Q,
       "vitsim: error: q.xml:9: the route from 'b' to 'a' is already declared at line 8 (a route is "
       "symmetrical unless symmetrical=\"NO\": it declares the way back too)"},
      {"platform",
       "the same route twice",
       {{"q.xml", two_hosts(kLink + kRoute + kRoute)}, {"s.xml", two}},
       Q,
       "vitsim: error: q.xml:9: the route from 'a' to 'b' is already declared at line 8"},
      {"platform",
       "an asymmetric pair is fine, its reverse twice is not",
       {{"q.xml",
         two_hosts(kLink +
                   "<route src=\"a\" dst=\"b\" symmetrical=\"NO\"><link_ctn id=\"l\"/></route>\n<route "
                   "src=\"b\" dst=\"a\" symmetrical=\"NO\"><link_ctn id=\"l\"/></route>\n<route src=\"b\" "
                   "dst=\"a\" symmetrical=\"NO\"><link_ctn id=\"l\"/></route>\n")},
        {"s.xml", two}},
       Q,
       "vitsim: error: q.xml:10: the route from 'b' to 'a' is already declared at line 9"},
      {"platform",
       "a symmetrical value that is not YES or NO",
       {{"q.xml",
         two_hosts(kLink +
                   "<route src=\"a\" dst=\"b\" symmetrical=\"maybe\"><link_ctn id=\"l\"/></route>\n")},
        {"s.xml", two}},
       Q,
       "vitsim: error: q.xml:8: <route> symmetrical='maybe'; valid: YES, NO"},
      {"platform",
       "a host declared twice",
       {{"q.xml", two_hosts("<host id=\"a\" speed=\"1Gf\"/>\n")}, {"s.xml", two}},
       Q,
       "vitsim: error: q.xml:7: host 'a' is declared twice (first at line 5); SimGrid needs unique names"},
      {"platform",
       "a link declared twice",
       {{"q.xml", two_hosts(kLink + kLink + kRoute)}, {"s.xml", two}},
       Q,
       "vitsim: error: q.xml:8: link 'l' is declared twice (first at line 7); SimGrid needs unique names"},
      {"platform",
       "a zone id reused by a nested zone",
       {{"q.xml", two_hosts("<zone id=\"z\" routing=\"Full\"/>\n")}, {"s.xml", two}},
       Q,
       "vitsim: error: q.xml:7: zone 'z' is declared twice (first at line 4); SimGrid needs unique names"},
      {"platform",
       "a cluster host named like an existing host",
       {{"q.xml", two_hosts("<cluster id=\"c\" prefix=\"\" suffix=\"\" radical=\"0-1\" speed=\"1Gf\" "
                            "bw=\"1GBps\" lat=\"1us\"/>\n<host id=\"1\" speed=\"1Gf\"/>\n")},
        {"s.xml", two}},
       Q,
       "vitsim: error: q.xml:8: host '1' is declared twice (first at line 7); SimGrid needs unique names"},
      {"platform",
       "a route through a link that does not exist",
       {{"q.xml", two_hosts("<route src=\"a\" dst=\"b\"><link_ctn id=\"nolink\"/></route>\n")},
        {"s.xml", two}},
       Q,
       "vitsim: error: q.xml:7: <link_ctn> names link 'nolink', which is not declared"},
      {"platform",
       "a route to a host that does not exist",
       {{"q.xml", two_hosts(kLink + "<route src=\"a\" dst=\"c\"><link_ctn id=\"l\"/></route>\n" + kRoute)},
        {"s.xml", two}},
       Q,
       "vitsim: error: q.xml:8: <route> dst='c' names no host, router, zone or cluster of this platform"},
      {"platform",
       "a zoneRoute gateway that does not exist",
       {{"q.xml",
         two_hosts(
             kLink +
             "<zoneRoute src=\"a\" dst=\"b\" gw_src=\"a\" gw_dst=\"r9\"><link_ctn id=\"l\"/></zoneRoute>\n")},
        {"s.xml", two}},
       Q,
       "vitsim: error: q.xml:8: <zoneRoute> gw_dst='r9' names no host, router, zone or cluster of this "
       "platform"},
      {"platform",
       "a link direction that is not UP, DOWN or NONE",
       {{"q.xml",
         two_hosts(kLink +
                   "<route src=\"a\" dst=\"b\"><link_ctn id=\"l\" direction=\"SIDEWAYS\"/></route>\n")},
        {"s.xml", two}},
       Q,
       "vitsim: error: q.xml:8: <link_ctn> direction 'SIDEWAYS'; valid: UP, DOWN, NONE"},
      {"platform",
       "an unknown routing",
       {{"q.xml", two_hosts(kLink + kRoute, "routing=\"Fastest\"")}, {"s.xml", two}},
       Q,
       "vitsim: error: q.xml:4: zone 'z': unknown routing 'Fastest'; valid: Cluster, ClusterDragonfly, "
       "ClusterFatTree, ClusterTorus, Dijkstra, DijkstraCache, Floyd, Full, None, Star, Vivaldi, Wifi"},
      {"platform",
       "a cluster radical of 20 million hosts",
       {{"q.xml", kHead +
                      "<zone id=\"z\" routing=\"Full\">\n<cluster id=\"c\" prefix=\"c-\" suffix=\"\" "
                      "radical=\"0-19999999\" speed=\"1Gf\" bw=\"1GBps\" lat=\"1us\">" +
                      gpu() + "</cluster>\n</zone></platform>\n"},
        {"s.xml", one}},
       Q,
       "vitsim: error: q.xml:5: bad cluster radical '0-19999999'; expected e.g. 0-7 or 0-3,8 (at most "
       "10,000,000 hosts)"},
      {"platform",
       "a cluster radical with trailing text (std::stol read it as 0-1)",
       {{"q.xml", kHead +
                      "<zone id=\"z\" routing=\"Full\">\n<cluster id=\"c\" prefix=\"c-\" suffix=\"\" "
                      "radical=\"0-1x\" speed=\"1Gf\" bw=\"1GBps\" lat=\"1us\">" +
                      gpu() + "</cluster>\n</zone></platform>\n"},
        {"s.xml", one}},
       Q,
       "vitsim: error: q.xml:5: bad cluster radical '0-1x'; expected e.g. 0-7 or 0-3,8 (at most 10,000,000 "
       "hosts)"},
      {"platform",
       "a GEMM tile of seven digits (std::stoi read the digits)",
       {{"q.xml", one_gpu("<prop id=\"gpu_gemm_tile\" value=\"1234567x8\"/>\n")}, {"s.xml", one}},
       Q,
       "vitsim: error: q.xml:7: property gpu_gemm_tile: '1234567x8' is not MxN with two positive integers, "
       "e.g. 128x128"},
      {"sizes",
       "a traced rank of 20 digits (std::stol read it)",
       {{"s.xml", one}},
       "predict s.xml --trace t.json --trace-ranks 0,99999999999999999999",
       "vitsim: error: --trace-ranks '0,99999999999999999999': rank 99999999999999999999 is above 16777215 "
       "(expected ranks and ranges such as 0,3,8-15)",
       2},
      // What passes the checks and still aborts SimGrid is contained: one line from its last words.
      {"platform",
       "SimGrid aborts (a pstate beyond the host's speeds): contained",
       {{"q.xml", one_gpu("", "speed=\"1Gf\" pstate=\"5\"")}, {"s.xml", one}},
       Q,
       "vitsim: error: q.xml: SimGrid cannot load the platform: it crashed (Aborted): Invalid parameters for "
       "CPU h (pstate 5 >= length of pstates 1). Please fix your platform file, or your call to change the "
       "pstate."},
      {"platform",
       "SimGrid's parser rejects (a fat tree without parameters): contained",
       {{"q.xml", kHead +
                      "<zone id=\"z\" routing=\"Full\">\n<cluster id=\"c\" prefix=\"c-\" suffix=\"\" "
                      "radical=\"0-1\" speed=\"1Gf\" bw=\"1GBps\" lat=\"1us\" topology=\"FAT_TREE\">" +
                      gpu() + "</cluster>\n</zone></platform>\n"},
        {"s.xml", one}},
       Q,
       "vitsim: error: q.xml: SimGrid cannot load the platform: Parse error at q.xml:5: Fat trees are "
       "defined by the levels number and 3 vectors, see the documentation for more information."},
      // --- 2. figures, range-checked where they are read ---
      {"figures",
       "a link of zero bandwidth (SimGrid: unlimited)",
       {{"q.xml", two_hosts("<link id=\"l\" bandwidth=\"0GBps\" latency=\"1us\"/>\n" + kRoute)},
        {"s.xml", two}},
       Q,
       "vitsim: error: q.xml:7: <link> bandwidth: bad bandwidth '0GBps': out of range (expected > 0)"},
      {"figures",
       "a link of negative bandwidth",
       {{"q.xml", two_hosts("<link id=\"l\" bandwidth=\"-1GBps\" latency=\"1us\"/>\n" + kRoute)},
        {"s.xml", two}},
       Q,
       "vitsim: error: q.xml:7: <link> bandwidth: bad bandwidth '-1GBps': out of range (expected > 0)"},
      {"figures",
       "a link of negative latency",
       {{"q.xml", two_hosts("<link id=\"l\" bandwidth=\"1GBps\" latency=\"-5us\"/>\n" + kRoute)},
        {"s.xml", two}},
       Q,
       "vitsim: error: q.xml:7: <link> latency: bad time '-5us': out of range (expected >= 0)"},
      {"figures",
       "a link bandwidth of NaN",
       {{"q.xml", two_hosts("<link id=\"l\" bandwidth=\"nanGBps\" latency=\"1us\"/>\n" + kRoute)},
        {"s.xml", two}},
       Q,
       "vitsim: error: q.xml:7: <link> bandwidth: bad bandwidth 'nanGBps': not a finite number; valid units: "
       "Bps, kBps, KBps, MBps, GBps, TBps, KiBps, MiBps, GiBps, TiBps, bps, kbps, Kbps, Mbps, Gbps, Tbps, "
       "Kibps, Mibps, Gibps"},
      {"figures",
       "a cluster backbone of zero bandwidth",
       {{"q.xml", kHead +
                      "<zone id=\"z\" routing=\"Full\">\n<cluster id=\"c\" prefix=\"c-\" suffix=\"\" "
                      "radical=\"0-1\" speed=\"1Gf\" bw=\"1GBps\" lat=\"1us\" bb_bw=\"0Bps\">" +
                      gpu() + "</cluster>\n</zone></platform>\n"},
        {"s.xml", one}},
       Q,
       "vitsim: error: q.xml:5: <cluster> bb_bw: bad bandwidth '0Bps': out of range (expected > 0)"},
      {"figures",
       "a host speed of zero",
       {{"q.xml", one_gpu("", "speed=\"0f\"")}, {"s.xml", one}},
       Q,
       "vitsim: error: q.xml:5: <host> speed: bad speed '0f': out of range (expected > 0)"},
      {"figures",
       "gpu_efficiency=\"nan\"",
       {{"q.xml", one_gpu("<prop id=\"gpu_gemm_efficiency\" value=\"nan\"/>")}, {"s.xml", one}},
       Q,
       "vitsim: error: q.xml:7: property gpu_gemm_efficiency: 'nan' is not a number > 0 and <= 1"},
      {"figures",
       "gpu_efficiency=\"inf\"",
       {{"q.xml", kHead + "<zone id=\"z\" routing=\"Full\">\n<host id=\"h\" speed=\"1Gf\">\n<prop "
                          "id=\"gpu_model\" value=\"G\"/><prop id=\"gpu_flops_fp32\" value=\"8Tf\"/><prop "
                          "id=\"gpu_mem_bw\" value=\"1TBps\"/><prop id=\"gpu_mem\" value=\"8GiB\"/>\n<prop "
                          "id=\"gpu_efficiency\" value=\"inf\"/></host>\n</zone></platform>\n"},
        {"s.xml", one}},
       Q,
       "vitsim: error: q.xml:7: property gpu_efficiency: 'inf' is not a number > 0 and <= 1"},
      {"figures",
       "cpu_cores=\"nan\"",
       {{"q.xml", one_gpu("<prop id=\"cpu_cores\" value=\"nan\"/>")}, {"s.xml", one}},
       Q,
       "vitsim: error: q.xml:7: property cpu_cores: 'nan' is not an integer in 1 .. 1048576"},
      {"figures",
       "cpu_cores=\"2.5\"",
       {{"q.xml", one_gpu("<prop id=\"cpu_cores\" value=\"2.5\"/>")}, {"s.xml", one}},
       Q,
       "vitsim: error: q.xml:7: property cpu_cores: '2.5' is not an integer in 1 .. 1048576"},
      {"figures",
       "a loader bandwidth of zero",
       {{"q.xml", one_gpu("<prop id=\"loader_bw\" value=\"0MBps\"/>")}, {"s.xml", one}},
       Q,
       "vitsim: error: q.xml:7: property loader_bw: bad bandwidth '0MBps': out of range (expected > 0)"},
      {"figures",
       "a pageable copy bandwidth of zero",
       {{"q.xml", one_gpu("<prop id=\"h2d_pageable_bw\" value=\"0GBps\"/>")}, {"s.xml", one}},
       Q,
       "vitsim: error: q.xml:7: property h2d_pageable_bw: bad bandwidth '0GBps': out of range (expected > "
       "0)"},
      {"figures",
       "a zero fp16 peak",
       {{"q.xml", one_gpu("<prop id=\"gpu_flops_fp16\" value=\"0Tf\"/>")}, {"s.xml", one}},
       Q,
       "vitsim: error: q.xml:7: property gpu_flops_fp16: bad speed '0Tf': out of range (expected > 0)"},
      {"figures",
       "a peak of 1e400 FLOP/s",
       {{"q.xml", one_gpu("<prop id=\"gpu_flops_fp16\" value=\"1e400Tf\"/>")}, {"s.xml", one}},
       Q,
       "vitsim: error: q.xml:7: property gpu_flops_fp16: bad speed '1e400Tf': not a finite number; valid "
       "units: f, kf, Kf, Mf, Gf, Tf, Pf, Ef"},
      {"figures",
       "a negative kernel overhead",
       {{"q.xml", one_gpu("<prop id=\"gpu_kernel_overhead\" value=\"-3us\"/>")}, {"s.xml", one}},
       Q,
       "vitsim: error: q.xml:7: property gpu_kernel_overhead: bad time '-3us': out of range (expected >= 0)"},
      {"figures",
       "a scenario number that is NaN",
       {{"s.xml", scenario()}},
       S + " --set model.dropout=nan",
       "vitsim: error: --set model.dropout: model.dropout: 'nan' is not a number (expected 0 .. 0.999)"},
      {"figures",
       "a scenario number that is inf",
       {{"s.xml", scenario()}},
       S + " --set training.lr=inf",
       "vitsim: error: --set training.lr: training.lr: 'inf' is not a number (expected 0 .. 1000)"},
      {"figures",
       "a scenario integer in hexadecimal",
       {{"s.xml", scenario()}},
       S + " --set training.micro_batch=0x10",
       "vitsim: error: --set training.micro_batch: training.micro_batch: '0x10' is not an integer"},
      {"what-if",
       "a link bandwidth of zero",
       {{"s.xml", scenario("  <whatif edits=\"link:n0-nic:bandwidth=0GBps\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: what-if 'link:n0-nic:bandwidth=0GBps': bad bandwidth '0GBps': out of range "
       "(expected > 0)"},
      {"what-if",
       "a negative latency",
       {{"s.xml", scenario("  <whatif edits=\"link:n*.pcie:latency=-1us\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: what-if 'link:n*.pcie:latency=-1us': bad time '-1us': out of range (expected "
       ">= 0)"},
      {"what-if",
       "a loader bandwidth of zero",
       {{"s.xml", scenario("  <whatif edits=\"prop:n0:loader_bw=0MBps\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: what-if 'prop:n0:loader_bw=0MBps': bad bandwidth '0MBps': out of range "
       "(expected > 0)"},
      {"what-if",
       "gpu_efficiency=nan",
       {{"s.xml", scenario("  <whatif edits=\"prop:n*:gpu_efficiency=nan\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: what-if 'prop:n*:gpu_efficiency=nan': gpu_efficiency: 'nan' is not a number "
       "(expected > 0 and <= 1)"},
      {"what-if",
       "cpu_cores=nan",
       {{"s.xml", scenario("  <whatif edits=\"prop:n*:cpu_cores=nan\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: what-if 'prop:n*:cpu_cores=nan': cpu_cores: 'nan' is not an integer in 1 .. "
       "1048576"},
      // --- 7. a bad what-if names the user's file and line, never the temporary copy ---
      {"what-if",
       "an edit that breaks a property it does not check itself",
       {{"s.xml", scenario("\n\n  <whatif edits=\"prop:n1:gpu_gemm_tile=7\"/>\n")}},
       S,
       "vitsim: error: s.xml:8: p.xml (as edited by the what-ifs): property gpu_gemm_tile: '7' is not MxN "
       "with two positive integers, e.g. 128x128"},
      // --- 3. sizes, estimated before the work ---
      {"sizes",
       "a sweep of 10^9 points",
       {{"s.xml", scenario("  <sweep param=\"training.micro_batch\" values=\"" + values(1000) +
                           "\"/>\n  <sweep param=\"training.lr\" values=\"" + values(1000) +
                           "\"/>\n  <sweep param=\"training.seed\" values=\"" + values(1000) + "\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: the sweeps make 1000000000 points (1000 x 1000 x 1000 values of "
       "training.micro_batch, training.lr, training.seed), above the limit of 100000 points (each point is "
       "one simulation); sweep fewer values or raise the limit with --set simulation.max_points=N"},
      {"sizes",
       "two --set sweeps of 10^6 points",
       {{"s.xml", scenario()}},
       S + " --set training.seed=" + values(1000) + " --set training.lr=" + values(1000),
       "vitsim: error: --set training.seed: the sweeps make 1000000 points (1000 x 1000 values of "
       "training.seed, training.lr), above the limit of 100000 points (each point is one simulation); sweep "
       "fewer values or raise the limit with --set simulation.max_points=N"},
      {"sizes",
       "a plan of 10^6 points",
       {{"s.xml", scenario("  <sweep param=\"training.micro_batch\" values=\"" + values(1000) +
                           "\"/>\n  <sweep param=\"training.seed\" values=\"" + values(1000) + "\"/>\n")}},
       "plan s.xml",
       "vitsim: error: s.xml:6: the sweeps make 1000000 points (1000 x 1000 values of training.micro_batch, "
       "training.seed), above the limit of 100000 points (each point is one simulation); sweep fewer values "
       "or raise the limit with --set simulation.max_points=N"},
      {"sizes",
       "a what-if adding 100,000 nodes",
       {{"s.xml", scenario("  <whatif edits=\"nodes:add=100000\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: what-if 'nodes:add=100000': 100002 nodes in a Full zone need 5e+09 routes "
       "(one per pair, about 2.73 TiB to build and simulate); the limit is 1000000 routes: raise it with "
       "--set simulation.max_routes=N"},
      {"sizes",
       "a what-if growing to 2,000 nodes",
       {{"s.xml", scenario("  <whatif edits=\"nodes:count=2000\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: what-if 'nodes:count=2000': 2000 nodes in a Full zone need 2e+06 routes (one "
       "per pair, about 1.12 GiB to build and simulate); the limit is 1000000 routes: raise it with --set "
       "simulation.max_routes=N"},
      {"sizes",
       "a 100,352-GPU point (98 nodes x 1,024) beyond a 2 GiB limit",
       {{"q.xml", vt::platform_xml(98, 1024, "12GBps", "1us", std::vector<std::string>(98, "1GBps"),
                                   std::vector<std::string>(98, "8Tf"))},
        {"s.xml",
         "<scenario>\n  <cluster platform=\"q.xml\" nodes=\"98\" gpus_per_node=\"1024\"/>\n  <model "
         "preset=\"vit_cifar_tiny\"/>\n  <dataset name=\"synthetic\" train_samples=\"100000000\" "
         "image_size=\"32\"/>\n  <training micro_batch=\"16\"/>\n</scenario>\n"}},
       S + " --set simulation.max_memory=2GiB",
       "vitsim: error: s.xml:2: simulating 100352 GPUs for 20 steps needs about 5.54 GiB of memory (~48 KiB "
       "per rank, 6 KiB per platform host, 200 B per rank and micro-batch step), above the limit of 2.00 "
       "GiB; raise it with --set simulation.max_memory=SIZE"},
      {"sizes",
       "a point beyond simulation.max_memory",
       {{"s.xml", scenario()}},
       S + " --set simulation.max_memory=64KiB",
       "vitsim: error: s.xml:2: simulating 2 GPUs for 20 steps needs about 151.81 KiB of memory (~48 KiB per "
       "rank, 6 KiB per platform host, 200 B per rank and micro-batch step), above the limit of 64.00 KiB; "
       "raise it with --set simulation.max_memory=SIZE"},
      {"sizes",
       "a limit that is not a number",
       {{"s.xml", scenario()}},
       S + " --set simulation.max_points=lots",
       "vitsim: error: --set simulation.max_points: simulation.max_points: 'lots' is not an integer in 1 .. "
       "9223372036854775807"},
      // --- 5. calibration files, checked semantically ---
      {"calibration",
       "two points at one micro-batch",
       {{"c.json", calib(calib_device("G8Tf", pt("16", 0.1, 0.2) + "," + pt("16", 0.11, 0.21)))},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[0] ('G8Tf'): two points at micro_batch 16; measure each micro-batch "
       "once"},
      {"calibration",
       "a fractional micro-batch",
       {{"c.json", calib(calib_device("G8Tf", pt("16.5", 0.1, 0.2)))}, {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[0] ('G8Tf').points[0]: micro_batch must be a whole number of samples "
       ">= 1, got 16.5"},
      {"calibration",
       "times that fall as the batch grows",
       {{"c.json", calib(calib_device("G8Tf", pt("16", 0.1, 0.2) + "," + pt("64", 0.05, 0.1)))},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[0] ('G8Tf'): fwd_s + bwd_s falls from 0.3 s at micro_batch 16 to 0.15 "
       "s at 64 (a larger batch cannot take less time; more than the 5% of measurement noise)"},
      {"calibration",
       "a layer the model does not have",
       {{"c.json",
         calib(calib_device("G8Tf",
                            pt("16", 0.1, 0.2, R"({"name": "block9.attn", "fwd_s": 0.01, "bwd_s": 0.02})")))},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[0] ('G8Tf').points[0].layers[0]: 'block9.attn' is not a layer of this "
       "model (patch_embed, block0.attn .. block5.mlp, head)"},
      {"calibration",
       "a negative layer time",
       {{"c.json",
         calib(calib_device(
             "G8Tf", pt("16", 0.1, 0.2, R"({"name": "block0.attn", "fwd_s": -0.01, "bwd_s": 0.02})")))},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[0] ('G8Tf').points[0].layers[0]: fwd_s and bwd_s must be >= 0"},
      {"calibration",
       "a layer listed twice",
       {{"c.json",
         calib(calib_device(
             "G8Tf",
             pt("16", 0.1, 0.2,
                R"({"name": "head", "fwd_s": 0.01, "bwd_s": 0.02}, {"name": "head", "fwd_s": 0.01, "bwd_s": 0.02})")))},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[0] ('G8Tf').points[0].layers[1]: layer 'head' is listed twice"},
      {"calibration",
       "the same device twice",
       {{"c.json",
         calib(calib_device("G8Tf", pt("16", 0.1, 0.2)) + "," + calib_device("G8Tf", pt("32", 0.2, 0.4)))},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[1] ('G8Tf'): the same device, precision and model as devices[0]; give "
       "each once"},
      {"calibration",
       "a model of negative depth",
       {{"c.json",
         R"({"schema": "vitsim.calibration/2", "devices": [{"device_type": "G8Tf", "precision": "fp32", "model": {"image_size": 32, "patch": 4, "channels": 3, "width": 192, "depth": -6, "heads": 3, "mlp_ratio": 4, "classes": 10}, "points": []}]})"},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[0] ('G8Tf').model: sizes must be positive (depth <= 4096, width <= "
       "1048576)"},
      {"calibration",
       "a loader given twice",
       {{"c.json",
         R"({"schema": "vitsim.calibration/2", "loaders": [{"dataset": "cifar10", "resize": 32, "images_per_s_per_worker": 900}, {"dataset": "cifar10", "resize": 32, "images_per_s_per_worker": 800}]})"},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: loaders[1]: a second loader for dataset 'cifar10' at resize 32"},
      // --- 5b. one plausibility bound per figure kind (issue 39 items 1, 7, 13, 17, 18, 23, 24, 25) ---
      {"plausible",
       "a calibration of another GPU with peak_flops 1e-300 (SIGABRT in the fluid model)",
       {{"c.json", calib_with("X", R"("peak_flops": 1e-300, "mem_bw": 1e-300, )", pt("16", 0.001, 0.002))},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[0] ('X'): peak_flops: 1e-300 FLOP/s is not a plausible speed "
       "(expected "
       "1Gf .. 1Ef)"},
      {"plausible",
       "a calibration of another GPU at 1 GFLOP/s (compute 0 ns for an 8 TFLOP/s GPU)",
       {{"c.json", calib_with("X", R"("peak_flops": 1e9, "mem_bw": 1e12, )", pt("16", 0.001, 0.002))},
        {"s.xml", scenario("", "nodes=\"1\" gpus_per_node=\"1\"")}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[0] ('X').peak_flops: forward + backward at micro-batch 16 come to 375 "
       "ns "
       "(scaled to G8Tf by its peak_flops 1e+09 and mem_bw 1e+12) for 1.201e+10 FLOP: 4e+03 x faster than "
       "the "
       "GPU's peak, the least the peak of G8Tf (8 TFLOP/s) allows is 1.50 ms; correct the calibration"},
      {"plausible",
       "an occupancy alone_factor of 0.1 (inside the range documented before; an internal MFU message)",
       {{"c.json", calib_with("G8Tf", "", pt("16", 0.001, 0.002),
                              R"(, "occupancy": {"busy_ranks": 2, "alone_factor": 0.1})")},
        {"s.xml", scenario("", "nodes=\"1\" gpus_per_node=\"1\"")}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[0] ('G8Tf').occupancy.alone_factor: forward + backward at micro-batch "
       "16 "
       "come to 300.00 us (x0.1 with fewer busy ranks) for 1.201e+10 FLOP: 5.01 x faster than the GPU's "
       "peak, "
       "the least the peak of G8Tf (8 TFLOP/s) allows is 1.50 ms; correct the calibration"},
      {"plausible",
       "a compute span's low of 0.1 (inside its documented range; an internal MFU message)",
       {{"c.json", calib_with("G8Tf", "", pt("16", 0.001, 0.002),
                              R"(, "spans": {"compute": {"low": 0.1, "high": 1.2, "why": "t"}})")},
        {"s.xml", scenario("", "nodes=\"1\" gpus_per_node=\"1\"")}},
       S + " --calibration c.json --interval --samples 8 -j 1",
       "vitsim: error: c.json: devices[0] ('G8Tf').spans.compute: forward + backward at micro-batch 16 come "
       "to "
       "300.00 us (x0.1 as sampled from its spans.compute (low 0.1, high 1.2)) for 1.201e+10 FLOP: 5.01 x "
       "faster than the GPU's peak, the least the peak of G8Tf (8 TFLOP/s) allows is 1.50 ms; correct the "
       "calibration"},
      {"plausible",
       "a compute span's low of 1e-9",
       {{"c.json", calib_with("G8Tf", "", pt("16", 0.001, 0.002),
                              R"(, "spans": {"compute": {"low": 1e-9, "high": 1.2, "why": "t"}})")},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[0] ('G8Tf').spans.compute: low must be a factor in [0.001, 1] on the "
       "figure kept, got 1e-09"},
      {"plausible",
       "a measured forward of 1e300 s",
       {{"c.json", calib(calib_device("G8Tf", pt("16", 1e300, 0.002)))}, {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[0] ('G8Tf').points[0]: fwd_s: 1e+300 s is not a plausible time "
       "(expected "
       "1ps .. 1d)"},
      {"plausible",
       "the same device twice, the second's points falling (blamed on monotonicity)",
       {{"c.json", calib(calib_device("G8Tf", pt("16", 0.1, 0.2)) + "," +
                         calib_device("G8Tf", pt("16", 0.2, 0.4) + "," + pt("32", 0.1, 0.1)))},
        {"s.xml", scenario()}},
       S + " --calibration c.json",
       "vitsim: error: c.json: devices[1] ('G8Tf'): the same device, precision and model as devices[0]; give "
       "each once"},
      {"plausible",
       "a NIC of 1e-300 GBps (300-digit step times)",
       {{"q.xml", two_hosts("<link id=\"l\" bandwidth=\"1e-300GBps\" latency=\"1us\"/>\n" + kRoute)},
        {"s.xml", two}},
       Q,
       "vitsim: error: q.xml:7: <link> bandwidth: 1e-291 B/s is not a plausible bandwidth (expected 1kBps .. "
       "1PBps)"},
      {"plausible",
       "a link latency of 1e300 s",
       {{"q.xml", two_hosts("<link id=\"l\" bandwidth=\"1GBps\" latency=\"1e300s\"/>\n" + kRoute)},
        {"s.xml", two}},
       Q,
       "vitsim: error: q.xml:7: <link> latency: 1e+300 s is not a plausible time (expected 1ps .. 1d)"},
      {"plausible",
       "a GPU efficiency of 1e-300",
       {{"q.xml", one_gpu("<prop id=\"gpu_gemm_efficiency\" value=\"1e-300\"/>")}, {"s.xml", one}},
       Q,
       "vitsim: error: q.xml:7: property gpu_gemm_efficiency: 1e-300 is not a plausible factor (expected "
       "x0.001 "
       ".. x1000)"},
      {"plausible",
       "a reserved memory of 1e30 B",
       {{"q.xml", one_gpu("<prop id=\"gpu_reserved\" value=\"1e30B\"/>")}, {"s.xml", one}},
       Q,
       "vitsim: error: q.xml:7: property gpu_reserved: 1e+30 B is not a plausible size (expected 1B .. "
       "16TiB)"},
      {"plausible",
       "a range end of 1e300 s (a 300-digit p10)",
       {{"q.xml", one_gpu("<prop id=\"gpu_kernel_overhead\" value=\"5us\"/><prop "
                          "id=\"gpu_kernel_overhead.range\" value=\"4us..1e300s; a guess\"/>")},
        {"s.xml", one}},
       Q,
       "vitsim: error: q.xml:7: property gpu_kernel_overhead.range: '4us..1e300s': 1e+300 s is not a "
       "plausible "
       "time (expected 1ps .. 1d)"},
      {"plausible",
       "a range written with three dots",
       {{"q.xml", one_gpu("<prop id=\"gpu_kernel_overhead\" value=\"5us\"/><prop "
                          "id=\"gpu_kernel_overhead.range\" value=\"4us...10us; a guess\"/>")},
        {"s.xml", one}},
       Q,
       "vitsim: error: q.xml:7: property gpu_kernel_overhead.range: '4us...10us' has more than one '..' (or "
       "'...'): write LOW..HIGH with two dots, e.g. 4us..10us"},
      {"plausible",
       "a what-if on a property vitsim does not read (accepted silently)",
       {{"s.xml", scenario("  <whatif edits=\"prop:n*:bogus_key=1\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: what-if 'prop:n*:bogus_key=1': 'bogus_key' is not a property vitsim reads on "
       "a "
       "node; valid: gpu_model, gpu_flops_fp32, gpu_flops_fp16, gpu_flops_bf16, gpu_mem_bw, gpu_mem, "
       "gpu_sm_count, gpu_arch, gpu_link, gpu_link_bw, gpu_host_link, gpu_gemm_tile, gpu_gemm_efficiency, "
       "gpu_efficiency, gpu_attn_efficiency, gpu_mem_efficiency, gpu_gemm_k_half, gpu_kernel_overhead, "
       "gpu_sync_overhead, host_op_overhead, gpu_reserved, gpu_step_cv, gpu_power_busy, gpu_power_idle, "
       "device_kind, "
       "cpu_cores, loader_bw, loader_image_overhead, h2d_pageable_bw, intranode_transport, transport, "
       "nic_count, tcp_mtu, nccl_socket_nthreads, nccl_nsocks_perthread, socket_bw, tcp_stack_latency, "
       "ib_mtu, "
       "ib_stack_latency, staging_bw, efa_mtu, efa_net_latency, tcpx_mtu, tcpx_stack_latency (and a figure's "
       "KEY.range for its range; a zone's properties go by zone:KEY=VALUE)"},
      {"plausible",
       "a what-if NIC of 1e-300 GBps",
       {{"s.xml", scenario("  <whatif edits=\"link:n0-nic:bandwidth=1e-300GBps\"/>\n")}},
       S,
       "vitsim: error: s.xml:6: what-if 'link:n0-nic:bandwidth=1e-300GBps': 1e-291 B/s is not a plausible "
       "bandwidth (expected 1kBps .. 1PBps)"},
      // --- 6. DeepSpeed sections, checked for typos and ranges ---
      {"deepspeed",
       "a typo inside fp16",
       {{"ds.json", R"({"fp16": {"enabled": true, "loss_scal": 0}})"}, {"s.xml", scenario(kDs)}},
       S,
       "vitsim: error: s.xml:6: ds.json: unknown DeepSpeed key 'fp16.loss_scal' (did you mean "
       "'fp16.loss_scale'?); known: auto_cast, consecutive_hysteresis, enabled, "
       "fp16_master_weights_and_grads, hysteresis, initial_scale_power, loss_scale, loss_scale_window, "
       "min_loss_scale"},
      {"deepspeed",
       "a typo inside bf16",
       {{"ds.json", R"({"bf16": {"enable": true}})"}, {"s.xml", scenario(kDs)}},
       S,
       "vitsim: error: s.xml:6: ds.json: unknown DeepSpeed key 'bf16.enable' (did you mean 'bf16.enabled'?); "
       "known: enabled, immediate_grad_update"},
      {"deepspeed",
       "a typo inside optimizer",
       {{"ds.json", R"({"optimizer": {"type": "AdamW", "param": {"lr": 0.001}}})"}, {"s.xml", scenario(kDs)}},
       S,
       "vitsim: error: s.xml:6: ds.json: unknown DeepSpeed key 'optimizer.param' (did you mean "
       "'optimizer.params'?); known: legacy_fusion, params, type"},
      {"deepspeed",
       "a typo inside optimizer.params",
       {{"ds.json", R"({"optimizer": {"type": "AdamW", "params": {"lr": 0.001, "weight_decey": 0.01}}})"},
        {"s.xml", scenario(kDs)}},
       S,
       "vitsim: error: s.xml:6: ds.json: unknown DeepSpeed key 'optimizer.params.weight_decey' (did you mean "
       "'optimizer.params.weight_decay'?); known: adam_w_mode, amsgrad, betas, bias_correction, coeff_beta, "
       "comm_backend_name, cuda_aware, dampening, eps, factor_max, factor_min, factor_threshold, "
       "freeze_step, fused, local_step_clipper, local_step_scaler, lr, max_coeff, max_grad_norm, min_coeff, "
       "momentum, nesterov, torch_adam, var_freeze_step, var_update_scaler, weight_decay"},
      {"deepspeed",
       "a typo inside zero_optimization",
       {{"ds.json", R"({"zero_optimization": {"stage": 2, "overlap_com": true}})"}, {"s.xml", scenario(kDs)}},
       S,
       "vitsim: error: s.xml:6: ds.json: unknown DeepSpeed key 'zero_optimization.overlap_com' (did you mean "
       "'zero_optimization.overlap_comm'?); known: "
       "allgather_bucket_size, allgather_partitions, contiguous_gradients, cpu_offload, "
       "cpu_offload_param, cpu_offload_use_pin_memory, elastic_checkpoint, "
       "gather_16bit_weights_on_model_save, ignore_unused_parameters, legacy_stage1, "
       "load_from_fp32_weights, log_trace_cache_warnings, max_live_parameters, max_reuse_distance, "
       "memory_efficient_linear, mics_hierarchical_params_gather, mics_shard_size, "
       "model_persistence_threshold, module_granularity_threshold, offload_optimizer, offload_param, "
       "overlap_comm, override_module_apply, param_persistence_threshold, pipeline_loading_checkpoint, "
       "prefetch_bucket_size, reduce_bucket_size, reduce_scatter, round_robin_gradients, stage, "
       "stage3_gather_16bit_weights_on_model_save, stage3_gather_fp16_weights_on_model_save, "
       "stage3_max_live_parameters, stage3_max_reuse_distance, stage3_model_persistence_threshold, "
       "stage3_module_granularity_threshold, stage3_param_persistence_threshold, "
       "stage3_prefetch_bucket_size, stage3_use_all_reduce_for_fetch_params, sub_group_size, "
       "use_all_reduce_for_fetch_params, use_multi_rank_bucket_allreduce, zero_hpz_partition_size, "
       "zero_quantized_gradients, zero_quantized_nontrainable_weights, zero_quantized_weights, "
       "zeropp_loco_param"},
      {"deepspeed",
       "a typo inside scheduler.params",
       {{"ds.json", R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_step": 100}}})"},
        {"s.xml", scenario(kDs)}},
       S,
       "vitsim: error: s.xml:6: ds.json: unknown DeepSpeed key 'scheduler.params.warmup_num_step' (did you "
       "mean 'scheduler.params.warmup_num_steps'?); known: cycle_first_stair_count, cycle_first_step_size, "
       "cycle_max_lr, cycle_max_mom, cycle_min_lr, cycle_min_mom, cycle_momentum, cycle_second_stair_count, "
       "cycle_second_step_size, decay_lr_rate, decay_mom_rate, decay_step_size, last_batch_iteration, "
       "lr_range_test_min_lr, lr_range_test_staircase, lr_range_test_step_rate, lr_range_test_step_size, "
       "total_num_steps, warmup_max_lr, warmup_min_lr, warmup_num_steps, warmup_type"},
      {"deepspeed",
       "an unknown key far from any known one",
       {{"ds.json", R"({"zero_optimization": {"turbo": true}})"}, {"s.xml", scenario(kDs)}},
       S,
       "vitsim: error: s.xml:6: ds.json: unknown DeepSpeed key 'zero_optimization.turbo'; known: "
       "allgather_bucket_size, allgather_partitions, contiguous_gradients, cpu_offload, "
       "cpu_offload_param, cpu_offload_use_pin_memory, elastic_checkpoint, "
       "gather_16bit_weights_on_model_save, ignore_unused_parameters, legacy_stage1, "
       "load_from_fp32_weights, log_trace_cache_warnings, max_live_parameters, max_reuse_distance, "
       "memory_efficient_linear, mics_hierarchical_params_gather, mics_shard_size, "
       "model_persistence_threshold, module_granularity_threshold, offload_optimizer, offload_param, "
       "overlap_comm, override_module_apply, param_persistence_threshold, pipeline_loading_checkpoint, "
       "prefetch_bucket_size, reduce_bucket_size, reduce_scatter, round_robin_gradients, stage, "
       "stage3_gather_16bit_weights_on_model_save, stage3_gather_fp16_weights_on_model_save, "
       "stage3_max_live_parameters, stage3_max_reuse_distance, stage3_model_persistence_threshold, "
       "stage3_module_granularity_threshold, stage3_param_persistence_threshold, "
       "stage3_prefetch_bucket_size, stage3_use_all_reduce_for_fetch_params, sub_group_size, "
       "use_all_reduce_for_fetch_params, use_multi_rank_bucket_allreduce, zero_hpz_partition_size, "
       "zero_quantized_gradients, zero_quantized_nontrainable_weights, zero_quantized_weights, "
       "zeropp_loco_param"},
      {"deepspeed",
       "reduce_bucket_size 0.5",
       {{"ds.json", R"({"zero_optimization": {"reduce_bucket_size": 0.5}})"}, {"s.xml", scenario(kDs)}},
       S,
       "vitsim: error: s.xml:6: ds.json: DeepSpeed key 'zero_optimization.reduce_bucket_size' must be a "
       "positive integer number of elements in 1 .. 9007199254740992, got 0.5"},
      {"deepspeed",
       "allgather_bucket_size -1",
       {{"ds.json", R"({"zero_optimization": {"allgather_bucket_size": -1}})"}, {"s.xml", scenario(kDs)}},
       S,
       "vitsim: error: s.xml:6: ds.json: DeepSpeed key 'zero_optimization.allgather_bucket_size' must be a "
       "positive integer number of elements in 1 .. 9007199254740992, got -1"},
      {"deepspeed",
       "a learning rate of -1",
       {{"ds.json", R"({"optimizer": {"type": "AdamW", "params": {"lr": -1}}})"}, {"s.xml", scenario(kDs)}},
       S,
       "vitsim: error: s.xml:6: ds.json: DeepSpeed key 'optimizer.params.lr' must be a number in 0 .. 1000, "
       "got -1"},
      {"deepspeed",
       "betas out of range",
       {{"ds.json", R"({"optimizer": {"type": "AdamW", "params": {"betas": [0.9, 1.5]}}})"},
        {"s.xml", scenario(kDs)}},
       S,
       "vitsim: error: s.xml:6: ds.json: DeepSpeed key 'optimizer.params.betas' must be two numbers >= 0 and "
       "< 1, got [0.9,1.5]"},
      {"deepspeed",
       "a loss scale window of 0",
       {{"ds.json", R"({"fp16": {"enabled": true, "loss_scale_window": 0}})"}, {"s.xml", scenario(kDs)}},
       S,
       "vitsim: error: s.xml:6: ds.json: DeepSpeed key 'fp16.loss_scale_window' must be an integer in 1 .. "
       "9007199254740992, got 0"},
      {"deepspeed",
       "train_batch_size 0",
       {{"ds.json", R"({"train_batch_size": 0})"}, {"s.xml", scenario(kDs)}},
       S,
       "vitsim: error: s.xml:6: ds.json: DeepSpeed key 'train_batch_size' must be a positive integer in 1 .. "
       "9007199254740992, got 0"},
      // --- 7. long values are not echoed in full ---
      {"messages",
       "a 5,000-digit micro-batch",
       {{"s.xml", scenario()}},
       S + " --set training.micro_batch=" + big,
       "vitsim: error: --set training.micro_batch: training.micro_batch: "
       "'9999999999999999999999999999999999999999... (5000 characters)' is not an integer"},
      {"messages",
       "a 5,000-character unit",
       // gpu_reserved, a size gpu() does not give (a <prop> given twice is refused: issue 27).
       {{"q.xml", one_gpu("<prop id=\"gpu_reserved\" value=\"16" + std::string(5000, 'G') + "\"/>")},
        {"s.xml", one}},
       Q,
       "vitsim: error: q.xml:7: property gpu_reserved: bad size '16GGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGG... "
       "(5002 characters)': unknown unit 'GGGGGGGGGGGGGGGG... (5000 characters)'; valid units: B, kB, KB, "
       "MB, GB, TB, KiB, MiB, GiB, TiB, b, kb, Kb, Mb, Gb"},
      {"messages",
       "a 5,000-character routing",
       {{"q.xml", two_hosts(kLink + kRoute, "routing=\"" + std::string(5000, 'F') + "\"")}, {"s.xml", two}},
       Q,
       "vitsim: error: q.xml:4: zone 'z': unknown routing 'FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF... (5000 "
       "characters)'; valid: Cluster, ClusterDragonfly, ClusterFatTree, ClusterTorus, Dijkstra, "
       "DijkstraCache, Floyd, Full, None, Star, Vivaldi, Wifi"},
      {"messages",
       "a 5,000-character DeepSpeed key",
       // In optimizer, whose keys DeepSpeed passes to the optimizer's constructor (an unknown one raises);
       // fp16, read key by key, ignores unknown keys as DeepSpeed v0.14.4 does.
       {{"ds.json", "{\"optimizer\": {\"" + std::string(5000, 'k') + "\": 1}}"}, {"s.xml", scenario(kDs)}},
       S,
       "vitsim: error: s.xml:6: ds.json: unknown DeepSpeed key "
       "'optimizer.kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk... (5000 characters)'; known: legacy_fusion, "
       "params, type"},
      // --- issue 38: DeepSpeed v0.14.4's own refusals ---
      {"deepspeed",
       "communication_data_type bfp16 (DeepSpeed's spelling before v0.14.1)",
       {{"ds.json", R"({"communication_data_type": "bfp16"})"}, {"s.xml", scenario(kDs)}},
       S,
       "vitsim: error: s.xml:6: ds.json: communication_data_type \"bfp16\" is not one of fp32, fp16, bf16, "
       "as "
       "DeepSpeed v0.14.4 reads it (did you mean bf16? DeepSpeed took bfp16 before v0.14.1 only)"},
      {"deepspeed",
       "partial offload (offload_optimizer.ratio below 1)",
       {{"ds.json",
         R"({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 0.5}}})"},
        {"s.xml", scenario(kDs)}},
       S,
       "vitsim: error: s.xml:6: ds.json: DeepSpeed key 'zero_optimization.offload_optimizer.ratio' is not "
       "modelled by vitsim (a ratio below 1 is ZeRO-Offload++'s partial offload (Twin-Flow): part of the "
       "step "
       "on the GPU); remove it or turn it off to predict without it"},
  };
}
}  // namespace

// --- 4. the steady-state rule ---

TEST_CASE("steady state: the rule against its closed forms", "[sim][steady]") {
  using vitsim::sim::steady_state;
  // Constant steps are steady; the window is the whole even run.
  auto v = steady_state(std::vector<double>(18, 0.1), 1, 0);
  CHECK(v.steady);
  CHECK(v.window == 18);
  // A trend of 10% between halves is not (tolerance 2%).
  std::vector<double> trend;
  for (int i = 0; i < 18; ++i) trend.push_back(i < 9 ? 0.1 : 0.11);
  CHECK_FALSE(steady_state(trend, 1, 0).steady);
  CHECK(steady_state(trend, 1, 0).why.find("trends") != std::string::npos);
  // A loader of W = 4 workers delivering in bursts: one long wait, then 3 short steps, repeated. Over whole
  // periods the halves agree; the mean (0.1 + 3 x 0.01) / 4 = 0.0325 s equals the loader's sustained
  // 0.13 s per 4 batches, so it is steady.
  std::vector<double> burst;
  for (int i = 0; i < 16; ++i) burst.push_back(i % 4 == 0 ? 0.1 : 0.01);
  CHECK(steady_state(burst, 4, 0.0325).steady);
  // The same steps with 18 values (not whole periods) are judged on the last 16.
  burst.insert(burst.begin(), {0.01, 0.01});
  CHECK(steady_state(burst, 4, 0.0325).window == 16);
  // Steps of 10 ms when the loader sustains one per 100 ms: the prefetched queue is draining.
  auto drain = steady_state(std::vector<double>(18, 0.01), 1, 0.1);
  CHECK_FALSE(drain.steady);
  CHECK(drain.why.find("draining") != std::string::npos);
  // Fewer than two periods of a loader that binds (it sustains one step per 10 ms, the steps' pace): not
  // steady. The same loader at a tenth of the steps' pace keeps its queue full: steady over 18 steps.
  CHECK_FALSE(steady_state(std::vector<double>(18, 0.01), 32, 0.01).steady);
  CHECK(steady_state(std::vector<double>(18, 0.1), 32, 0.01).steady);
}

namespace {
nlohmann::json predict_json(const vt::TempDir& d, const std::string& scenario_file,
                            const std::string& extra) {
  auto r = vt::run("cd " + d.path.string() + " && " + VITSIM_BINARY + " predict " + scenario_file + " " +
                   extra + " --format json -q");
  INFO(r.out);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out)["points"][0];
}
}  // namespace

TEST_CASE("steady state: a slow loader's extrapolated epoch is samples / loader rate", "[sim][steady]") {
  // One GPU fed by 32 loader workers at 10 kB/s each (loader_bw), 32 px CIFAR-10 images as fp32 tensors
  // (4 x 32 x 32 x 3 = 12,288 B): each worker makes an image in 1.2288 s; 32 workers deliver
  // 32 / 1.2288 = 26.04 images/s; the 50,000 images of an epoch need 50,000 x 1.2288 / 32 = 1,920 s.
  // The compute (vit_cifar_tiny on 8 TFLOP/s) is milliseconds: the run is loader-bound. The default window
  // (20 steps, 2 warm-up) sits inside the first burst of 32 prefetched batches and saw only compute.
  vt::TempDir d;
  d.file("p.xml", vt::platform_xml(1, 1, "12GBps", "1us", {"1GBps"}, {"8Tf"}));
  std::string plat = vt::platform_xml(1, 1, "12GBps", "1us", {"1GBps"}, {"8Tf"});
  plat.replace(plat.find("</cluster>"), 0,
               "<prop id=\"cpu_cores\" value=\"64\"/><prop id=\"loader_bw\" value=\"10kBps\"/>");
  d.file("p.xml", plat);
  d.file("s.xml", scenario("  <loader workers=\"32\" prefetch=\"2\"/>\n", "nodes=\"1\" gpus_per_node=\"1\""));
  const double closed_form = 50000 * 12288.0 / (32 * 10e3);
  const auto p = predict_json(d, "s.xml", "");
  CHECK(p["extrapolated"].get<bool>());
  CHECK(p["simulated_steps"].get<int>() > 20);
  CHECK(p["epoch_time_s"].get<double>() == Approx(closed_form).epsilon(0.01));
  // The whole epoch, step by step, agrees within the start-up transient (the first burst: 1.2288 s x 16).
  const auto full = predict_json(d, "s.xml", "--set simulation.full_epoch=true");
  CHECK(p["epoch_time_s"].get<double>() == Approx(full["epoch_time_s"].get<double>()).epsilon(0.01));
  // A bound below what the search needs leaves the extrapolation, and says it is unsafe.
  const auto bounded = predict_json(d, "s.xml", "--set simulation.max_steps=20");
  bool unsafe = false;
  for (const auto& n : bounded["notes"])
    unsafe = unsafe || n.get<std::string>().rfind("extrapolation unsafe", 0) == 0;
  CHECK(unsafe);
}

TEST_CASE("steady state: Vector with one CPU core and 32 workers per GPU matches its full epoch",
          "[sim][steady]") {
  // The shipped Vector platform (T4 nodes, loader_bw 600 MB/s + 100 us per image per core) with one CPU core
  // per node: 8 GPUs x 32 workers share one core. The default window extrapolated 2.9 s against 7.95 s
  // simulated step by step (2.7x); the search now runs on and agrees with the full epoch. (With no core
  // beyond the ranks' the workers now load as num_workers=0 would, the test above: the agreement stands.)
  vt::TempDir d;
  const std::string args =
      "--set cluster.gpus_per_node=8 --set loader.workers=32 --set whatif.edits=prop:*:cpu_cores=1 "
      "--set model.preset=vit_cifar_tiny --set dataset.resize=32";
  const std::string s = vt::source("scenarios/study/vector-strong-b64.xml");
  const auto p = predict_json(d, s, args);
  const auto full = predict_json(d, s, args + " --set simulation.full_epoch=true");
  CHECK(p["epoch_time_s"].get<double>() == Approx(full["epoch_time_s"].get<double>()).epsilon(0.02));
}

TEST_CASE("loader: 0 workers is never faster than 1 on the same cores", "[sim][loader]") {
  // One node of G GPUs (8 TFLOP/s) and C CPU cores, loader_bw 10 MB/s: a 32 px CIFAR-10 image as an fp32
  // tensor (4 x 32 x 32 x 3 = 12,288 B) takes a core 1.2288 ms, a micro-batch of 16 b = 19.66 ms.
  // num_workers=0 loads in the training process before each micro-batch: step = compute + b x max(1, G / C)
  // (G ranks on C cores). 1 worker on a node with no core beyond its ranks' (C <= G) competes with its rank
  // for the rank's core and cannot hide the loading either: the same step. With a free core per worker
  // (C >= 2G) it loads during the compute: step = max(compute, b) < compute + b.
  const double b = 16 * 12288.0 / 10e6;
  auto step = [](int gpus, int cores, int workers) {
    vt::TempDir d;
    std::string plat = vt::platform_xml(1, gpus, "12GBps", "1us", {"1GBps"}, {"8Tf"});
    plat.replace(plat.find("</cluster>"), 0,
                 "<prop id=\"cpu_cores\" value=\"" + std::to_string(cores) +
                     "\"/><prop id=\"loader_bw\" value=\"10MBps\"/>");
    d.file("p.xml", plat);
    d.file("s.xml", scenario("  <loader workers=\"" + std::to_string(workers) + "\" prefetch=\"2\"/>\n",
                             "nodes=\"1\" gpus_per_node=\"" + std::to_string(gpus) + "\""));
    return predict_json(d, "s.xml", "");
  };
  for (int gpus : {1, 2}) {
    for (int cores : {1, gpus}) {
      INFO(gpus << " GPUs, " << cores << " cores");
      const auto w0 = step(gpus, cores, 0), w1 = step(gpus, cores, 1);
      const double load = b * std::max(1.0, static_cast<double>(gpus) / cores);
      const auto& bd = w0["breakdown_s"];
      const double compute = w0["step_time_s"]["mean"].get<double>() - bd["data"].get<double>();
      CHECK(bd["data"].get<double>() == Approx(load).epsilon(1e-9));
      CHECK(w1["breakdown_s"]["data"].get<double>() == Approx(load).epsilon(1e-9));
      CHECK(w1["step_time_s"]["mean"].get<double>() == Approx(compute + load).epsilon(1e-9));
      CHECK(w0["epoch_time_s"].get<double>() <= w1["epoch_time_s"].get<double>() * (1 + 1e-12));
    }
  }
  // Free cores for the workers (1 GPU, 2 cores): the loading hides behind the compute (milliseconds here
  // against b = 19.66 ms, so the loader binds: step = b), and 0 workers is slower by the compute.
  const auto w0 = step(1, 2, 0), w1 = step(1, 2, 1);
  CHECK(w1["step_time_s"]["mean"].get<double>() == Approx(b).epsilon(1e-6));
  CHECK(w0["step_time_s"]["mean"].get<double>() > w1["step_time_s"]["mean"].get<double>());
}

TEST_CASE("numbers: the strict number reader", "[core][units]") {
  using namespace vitsim::units;
  CHECK(parse_number("0.5", fraction()) == 0.5);
  CHECK(parse_number(" 1 ", fraction()) == 1);
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "1e999", "0x10", "1.5x", "", " ", "--1"})
    CHECK_THROWS_AS(parse_number(bad, Range{}), vitsim::Error);
  CHECK_THROWS_WITH(parse_number("0", fraction()), "0 is out of range (expected > 0 and <= 1)");
  CHECK_THROWS_WITH(parse_number("nan", fraction()), "'nan' is not a number (expected > 0 and <= 1)");
  CHECK(parse_integer("16", 1, 64) == 16);
  for (const char* bad : {"16.0", "1e3", "nan", "99999999999999999999", "0", "65"})
    CHECK_THROWS_AS(parse_integer(bad, 1, 64), vitsim::Error);
  CHECK(parse("1GBps", Kind::Bandwidth, positive()) == 1e9);
  for (const char* bad : {"0GBps", "-1GBps", "nanGBps", "infGBps", "1e400Tbps"})
    CHECK_THROWS_AS(parse(bad, Kind::Bandwidth, positive()), vitsim::Error);
  CHECK(parse("0us", Kind::Time, non_negative()) == 0);
  CHECK_THROWS_AS(parse("-1us", Kind::Time, non_negative()), vitsim::Error);
  // Echoed values are capped.
  CHECK(vitsim::echo("short") == "short");
  CHECK(vitsim::echo(std::string(100, 'x')) == std::string(40, 'x') + "... (100 characters)");
}
