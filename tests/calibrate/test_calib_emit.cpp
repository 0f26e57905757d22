// `vitsim calibrate --emit-platform` writes through core's one platform writer (issue 14 item 1,
// calibrate/src/emit/emit_platform.cpp): the machines a calibration measured, as calibrate describes them,
// become a PlatformSpec; the file loads, carries the measured figures, and predicts. No Torch, no MPI.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "test_util.hpp"
#include "vitsim/calibrate/calibrate.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/platform/platform_writer.hpp"

using namespace vitsim;
using namespace vitsim::calibrate;

namespace {

// What calibrate measured, as it describes it (calibrate.cpp, --emit-platform): figures of a CPU run.
PlatformDevice device(const std::string& model, double flops) {
  PlatformDevice d;
  d.gpu_model = model;
  d.flops = flops;
  d.mem_bw = 5.2e9;                // a measured memcpy
  d.mem_bytes = 15.5 * (1 << 30);  // MemTotal over the ranks
  return d;
}

PlatformNode node(const std::string& id, std::vector<PlatformDevice> devices) {
  PlatformNode n;
  n.id = id;
  n.cpu_cores = 16;
  n.devices = std::move(devices);
  n.link_bw = 1.9e9;  // the fitted ring edge
  n.link_lat = 23e-6;
  n.h2d_bw = 5.2e9;
  n.loader_image_overhead = 1.0 / 850;  // one worker's measured images/s
  return n;
}

double step_of(const std::string& platform, int nodes, int gpus_per_node) {
  vt::TempDir d;
  const std::string s = d.file("s.xml", fmt::format(R"(<scenario name="emitted">
  <cluster platform="{}" nodes="{}" gpus_per_node="{}"/>
  <model preset="vit_cifar_tiny"/>
  <dataset name="synthetic" train_samples="2048" image_size="32" channels="3"/>
  <training micro_batch="16" precision="fp32"/>
  <parallelism collective="ring"/>
  <simulation steps="6" warmup="2"/>
</scenario>)",
                                                    platform, nodes, gpus_per_node));
  const vt::CmdResult r = vt::vitsim("predict '" + s + "' --format json -q -j1");
  INFO(r.out);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out)["points"][0]["step_time_s"]["mean"].get<double>();
}

}  // namespace

TEST_CASE(
    "calibrate --emit-platform: the emitted platform loads and carries the measured figures and predicts",
    "[calib][platform]") {
  vt::TempDir d;
  struct Case {
    const char* what;
    PlatformText text;
    int nodes, gpus_per_node;
  };
  PlatformText one;  // one host, one kind of device: one cluster of 4
  one.name = "calibrated";
  one.nodes.push_back(node("host0", std::vector<PlatformDevice>(4, device("cpu", 41e9))));
  one.provenance = "  Measured by: vitsim calibrate s.xml --emit-platform p.xml\n";
  PlatformText three;  // three hosts, one rank each, two kinds of device: three clusters joined by NICs
  three.name = "calibrated";
  three.nodes = {node("a-r0", {device("cpu", 41e9)}), node("b-r1", {device("cpu", 39e9)}),
                 node("c-r2", {device("cpu-slow", 12e9)})};
  for (auto& n : three.nodes) n.link_lat = 0;
  three.nic_bw = 0.11e9;
  three.nic_lat = 61e-6;
  const std::vector<Case> cases{{"one host", one, 1, 4}, {"three hosts", three, 3, 1}};
  for (const auto& c : cases) {
    INFO(c.what);
    const std::string emitted = d.file(std::string(c.what) + ".xml", calibrated_platform_xml(c.text));
    const PlatformFacts f = read_platform_facts(emitted);
    // One cluster per node of the text (each here of one kind of device), named as the node.
    REQUIRE(f.nodes.size() == c.text.nodes.size());
    for (size_t i = 0; i < f.nodes.size(); ++i) {
      const NodeFacts& a = f.nodes[i];
      const PlatformNode& n = c.text.nodes[i];
      CHECK(a.name == n.id);
      REQUIRE(a.gpus.size() == n.devices.size());
      CHECK(a.cpu_cores == n.cpu_cores);
      CHECK(a.h2d_pageable_bw == Approx(n.h2d_bw));
      CHECK(a.loader_image_overhead == Approx(n.loader_image_overhead));
      const GpuFacts& x = f.gpu.at(a.gpus.front());
      const PlatformDevice& dev = n.devices.front();
      CHECK(x.model == dev.gpu_model);
      CHECK(x.flops_fp32 == Approx(dev.flops));
      CHECK(x.mem_bw == Approx(dev.mem_bw));
      CHECK(x.mem_bytes == Approx(dev.mem_bytes));
      CHECK(x.efficiency == 1);
    }
    // The header names the writer and keeps calibrate's provenance.
    const std::string text = calibrated_platform_xml(c.text);
    CHECK_THAT(text, Catch::Contains("Written by `vitsim calibrate --emit-platform`"));
    if (!c.text.provenance.empty()) CHECK_THAT(text, Catch::Contains(c.text.provenance));
    // It predicts.
    CHECK(step_of(emitted, c.nodes, c.gpus_per_node) > 0);
  }
  // A CPU device is written as one (device_kind cpu): its ops run on the issuing thread and it copies no
  // batch.
  PlatformText cpu = one;
  for (auto& dev : cpu.nodes[0].devices) dev.cpu = true;
  CHECK_THAT(calibrated_platform_xml(cpu), Catch::Contains("<prop id=\"device_kind\" value=\"cpu\"/>"));
  CHECK_FALSE(read_platform_facts(d.file("cpu.xml", calibrated_platform_xml(cpu))).gpu.begin()->second.async);
  CHECK(read_platform_facts(d.file("gpu.xml", calibrated_platform_xml(one))).gpu.begin()->second.async);
  // What it refuses, as before: no node, no NIC for several clusters, no link bandwidth.
  CHECK_THROWS_WITH(calibrated_platform_xml(PlatformText{}), "platform: no node to write");
  PlatformText no_nic = three;
  no_nic.nic_bw = 0;
  CHECK_THROWS_WITH(calibrated_platform_xml(no_nic),
                    "platform: several clusters need a positive NIC bandwidth");
  PlatformText no_link = one;
  no_link.nodes[0].link_bw = 0;
  CHECK_THROWS_WITH(calibrated_platform_xml(no_link),
                    Catch::Contains("needs a positive link and host-to-device bandwidth"));
}

TEST_CASE("calibrate --emit-platform writes a measured figure's spread as its range, read back as written",
          "[calib][platform][figure_range]") {
  // Issue 26 item 2: the one range schema (core/platform/figure_range.hpp). The spread here is an example
  // (39..43 GFLOP/s around a 41 GFLOP/s median, +-10% around the 5.2 GB/s copy); what is tested is that
  // the writer's figures come back through the one reader.
  vt::TempDir d;
  PlatformText one;
  one.name = "calibrated";
  PlatformDevice dev = device("cpu", 41e9);
  dev.flops_low = 39e9;
  dev.flops_high = 43e9;
  dev.flops_why = "measured here: 10 repeats at micro-batch 32, min..max";
  one.nodes.push_back(node("host0", std::vector<PlatformDevice>(2, dev)));
  one.nodes[0].h2d_bw_low = 0.9 * one.nodes[0].h2d_bw;
  one.nodes[0].h2d_bw_high = 1.1 * one.nodes[0].h2d_bw;
  one.nodes[0].h2d_why = "measured here: 10 repeats, min..max";
  const PlatformFacts f = read_platform_facts(d.file("r.xml", calibrated_platform_xml(one)));
  REQUIRE(f.ranges.size() == 2);
  CHECK(f.ranges[0].key == "gpu_flops_fp32");
  CHECK(f.ranges[0].low == Approx(39e9));
  CHECK(f.ranges[0].high == Approx(43e9));
  CHECK(f.ranges[0].why == dev.flops_why);
  CHECK(f.ranges[1].key == "h2d_pageable_bw");
  CHECK(f.ranges[1].low == Approx(0.9 * one.nodes[0].h2d_bw).epsilon(1e-4));
  CHECK(f.ranges[1].high == Approx(1.1 * one.nodes[0].h2d_bw).epsilon(1e-4));
  // Without a spread no range is written: the file reads as before.
  one.nodes[0].devices.assign(2, device("cpu", 41e9));
  one.nodes[0].h2d_bw_low = 0;
  CHECK(read_platform_facts(d.file("plain.xml", calibrated_platform_xml(one))).ranges.empty());
}
