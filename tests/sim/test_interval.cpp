// Intervals and sensitivity of a prediction (issue 26 item 3; sim/predict/interval.hpp): a point whose every
// range is zero has the point as its interval; a figure built to dominate tops the sensitivity list by its
// closed form; the Latin hypercube puts one sample in each stratum; --interval adds to the outputs and
// nothing changes without it.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>

#include "test_util.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/platform/platform_props.hpp"
#include "vitsim/core/results/corpus_error.hpp"
#include "vitsim/sim/predict/interval.hpp"
#include "vitsim/sim/predict/predict.hpp"

using namespace vitsim;

namespace {

// One node of one compute-bound GPU (tests/test_util.hpp: 1000TBps memory, efficiency 1, no launch cost),
// peak 1Tf, with `extra` props on its cluster; no loader figure (not modelled), a 1000GBps copy path.
std::string platform(const std::string& extra) {
  std::string x = vt::platform_xml(1, 1, "100GBps", "0us", {"10GBps"}, {"1Tf"});
  return x.insert(x.find("</cluster>"), extra);
}

std::string range(const std::string& key, const std::string& value) {
  return fmt::format("<prop id=\"{}.range\" value=\"{}\"/>", key, value);
}

// vit_cifar_tiny at micro-batch 32 on the one GPU, 6 steps (as tests/sim/test_sim_model.cpp); the ring named
// (no collective runs on one rank, but the choice does not depend on the default).
std::string scenario(const std::string& platform_file) {
  return fmt::format(R"(<scenario name="interval">
  <cluster platform="{}" nodes="1" gpus_per_node="1"/>
  <model preset="vit_cifar_tiny"/>
  <dataset name="synthetic" train_samples="6400" image_size="32" channels="3"/>
  <training micro_batch="32" precision="fp32"/>
  <parallelism collective="ring"/>
  <loader workers="2"/>
  <simulation steps="6" warmup="1"/>
</scenario>
)",
                     platform_file);
}

Report predict_with(const vt::TempDir& d, const std::string& extra, int samples) {
  d.file("p.xml", platform(extra));
  const ScenarioFile f = read_scenario_file(d.file("s.xml", scenario("p.xml")));
  sim::PredictOptions o;
  o.progress = false;
  o.jobs = 2;
  o.interval.samples = samples;
  // Every sample simulated: the closed forms below are the samples' own (the surrogate's:
  // tests/sim/test_interval_surrogate.cpp).
  o.interval.mode = sim::IntervalMode::Sampled;
  return sim::predict(f, o);
}

}  // namespace

TEST_CASE("a Latin hypercube puts one sample in each stratum of each figure, the same for a seed",
          "[interval]") {
  const auto a = sim::latin_hypercube(16, 3, 26), b = sim::latin_hypercube(16, 3, 26);
  CHECK(a == b);
  CHECK(a != sim::latin_hypercube(16, 3, 27));
  for (int j = 0; j < 3; ++j) {
    std::set<int> strata;
    for (const auto& row : a) {
      REQUIRE(row[j] >= 0);
      REQUIRE(row[j] < 1);
      strata.insert(static_cast<int>(row[j] * 16));
    }
    CHECK(strata.size() == 16);
  }
  // Type-7 quantiles: p10 of 0..10 is 1, p90 is 9; of 0, 1: 0.1 and 0.9.
  CHECK(sim::quantile({10, 0, 5, 1, 2, 3, 4, 6, 7, 8, 9}, 0.1) == Approx(1));
  CHECK(sim::quantile({10, 0, 5, 1, 2, 3, 4, 6, 7, 8, 9}, 0.9) == Approx(9));
  CHECK(sim::quantile({1, 0}, 0.1) == Approx(0.1));
}

TEST_CASE("the figures' interval of a point whose every range is zero is the point", "[interval]") {
  vt::TempDir d;
  // Every range LOW = HIGH = the value: each sample writes the value back (exactly, 17 digits), so every
  // simulation is the point's own.
  const Report r = predict_with(d,
                                range("gpu_flops_fp32", "1Tf..1Tf; zero") +
                                    range("gpu_mem_bw", "1000TBps..1000TBps; zero") +
                                    range("gpu_efficiency", "1..1; zero"),
                                8);
  REQUIRE(r.points.size() == 1);
  const ReportPoint& p = r.points[0];
  CHECK(p.interval.samples == 8);
  CHECK(p.interval.figures == 3);
  const CorpusSpread& c = p.interval.corpus;
  CHECK(c.figures_epoch_low_s == p.epoch_time_s);
  CHECK(c.figures_epoch_high_s == p.epoch_time_s);
  CHECK(c.figures_step_low_s == p.step_time_s.mean);
  CHECK(c.figures_step_high_s == p.step_time_s.mean);
  // Uncalibrated (no calibration at all): the interval is the point times the shipped corpus' p10-p90 band
  // (core/results/corpus_error.hpp), which holds the figures' zero-width interval.
  const CorpusBand band = corpus_band(shipped_corpus_error(), 0.1, 0.9);
  REQUIRE(c.rows == band.rows);
  CHECK(c.origins == band.origins);
  CHECK(c.held_out == Approx(corpus_holdout(shipped_corpus_error(), 0.1, 0.9).level()));
  CHECK(p.interval.epoch_low_s == Approx(p.epoch_time_s * std::min(1.0, band.ratio_low)));
  CHECK(p.interval.epoch_high_s == Approx(p.epoch_time_s * std::max(1.0, band.ratio_high)));
  CHECK(p.interval.step_low_s == Approx(p.step_time_s.mean * std::min(1.0, band.ratio_low)));
  CHECK(p.interval.step_high_s == Approx(p.step_time_s.mean * std::max(1.0, band.ratio_high)));
  REQUIRE(p.sensitivity.size() == 3);  // the figures only: the corpus is no figure to measure
  for (const auto& s : p.sensitivity) {
    CHECK(s.epoch_at_low_s == p.epoch_time_s);
    CHECK(s.epoch_at_high_s == p.epoch_time_s);
  }
}

TEST_CASE("a figure with a wide range tops the sensitivity list by its closed form", "[interval]") {
  vt::TempDir d;
  // The device is compute-bound (memory 1000TBps, no launch costs, one rank: no collective), so an epoch is
  // its ops' FLOPs over the peak: T(P) = T(1Tf) x 1Tf / P, up to the copy of a 32-image batch (393 kB at
  // 1000GBps, 0.4 us a step) and memory-bound terms at 1000TBps (under 1% of T together: the margin below).
  // gpu_flops_fp32 over 0.5Tf..1Tf: T(0.5Tf) = 2 T, a swing of T. gpu_mem_bw over 999TBps..1000TBps moves
  // only the memory terms, by 0.1% of themselves.
  const Report r = predict_with(
      d, range("gpu_mem_bw", "999TBps..1000TBps; narrow") + range("gpu_flops_fp32", "0.5Tf..1Tf; wide"), 16);
  const ReportPoint& p = r.points[0];
  const double t = p.epoch_time_s;
  REQUIRE(p.sensitivity.size() == 2);
  const FigureSensitivity& top = p.sensitivity[0];
  CHECK(top.figure == "gpu_flops_fp32");
  CHECK(top.measure == platform_prop("gpu_flops_fp32").measure);
  CHECK(top.epoch_at_high_s == t);  // the high end is the value: the same platform figures
  CHECK(top.epoch_at_low_s == Approx(2 * t).epsilon(0.01));
  CHECK(top.swing_s() == Approx(t).epsilon(0.01));
  CHECK(p.sensitivity[1].figure == "gpu_mem_bw");
  CHECK(p.sensitivity[1].swing_s() < 0.01 * t);
  // The interval: T(P) with P = 0.5Tf + u x 0.5Tf, u one sample per stratum [s/16, (s+1)/16). Sorted by
  // time, p90 (h = 15 x 0.9 = 13.5) lies between the samples of strata 2 and 1, so within
  // [T/(0.5 + 0.5 x 3/16), T/(0.5 + 0.5 x 1/16)]; p10 (h = 1.5) between strata 14 and 13:
  // [T/(0.5 + 0.5 x 15/16), T/(0.5 + 0.5 x 13/16)]; each widened by the 1% margin. The figures' part:
  // uncalibrated, the whole interval is its union with the corpus' band (the test above).
  const CorpusSpread& c = p.interval.corpus;
  CHECK(c.figures_epoch_high_s >= 0.99 * t / (0.5 + 0.5 * 3 / 16.0));
  CHECK(c.figures_epoch_high_s <= 1.01 * t / (0.5 + 0.5 * 1 / 16.0));
  CHECK(c.figures_epoch_low_s >= 0.99 * t / (0.5 + 0.5 * 15 / 16.0));
  CHECK(c.figures_epoch_low_s <= 1.01 * t / (0.5 + 0.5 * 13 / 16.0));
  const CorpusBand band = corpus_band(shipped_corpus_error(), 0.1, 0.9);
  CHECK(p.interval.epoch_high_s == Approx(std::max(c.figures_epoch_high_s, t * band.ratio_high)));
  CHECK(p.interval.epoch_low_s == Approx(std::min(c.figures_epoch_low_s, t * band.ratio_low)));
}

TEST_CASE(
    "predict --interval adds the interval and sensitivity to the table, JSON and CSV, and nothing without it",
    "[interval]") {
  vt::TempDir d;
  d.file("p.xml", platform(range("gpu_flops_fp32", "0.5Tf..1Tf; wide")));
  const std::string s = d.file("s.xml", scenario("p.xml"));
  const vt::CmdResult plain = vt::vitsim(fmt::format("predict '{}' -q --format csv", s));
  REQUIRE(plain.status == 0);
  CHECK(plain.out.find("interval") == std::string::npos);
  const vt::CmdResult csv = vt::vitsim(fmt::format("predict '{}' -q --format csv --samples 4", s));
  REQUIRE(csv.status == 0);
  CHECK_THAT(csv.out, Catch::Contains("epoch_time_low_s,epoch_time_high_s"));
  CHECK_THAT(csv.out, Catch::Contains(",gpu_flops_fp32\n"));
  const vt::CmdResult table = vt::vitsim(fmt::format("predict '{}' -q --interval", s));
  REQUIRE(table.status == 0);
  CHECK_THAT(table.out, Catch::Contains("epoch p10-p90"));
  CHECK_THAT(table.out, Catch::Contains("what to measure first"));
  CHECK_THAT(table.out, Catch::Contains("1. gpu_flops_fp32 (cluster n0) 0.5Tf..1Tf"));
  // The JSON reads back through the one report reader (plan, validate and plot read it).
  const vt::CmdResult json =
      vt::vitsim(fmt::format("predict '{}' -q --interval --format json --out '{}'", s, d / "r.json"));
  REQUIRE(json.status == 0);
  const Report back = report_from_json(read_file(d / "r.json"), "r.json");
  CHECK(back.points.at(0).interval.samples == 16);
  CHECK(back.points.at(0).sensitivity.at(0).figure == "gpu_flops_fp32");
}

namespace {
// Two nodes of one GPU each (tests/test_util.hpp), both stating the same range of gpu_flops_fp32 word for
// word, as `vitsim platform` writes one GPU type's clusters.
std::string two_nodes_one_range() {
  std::string x = vt::platform_xml(2, 1, "100GBps", "0us", {"10GBps", "10GBps"}, {"1Tf", "1Tf"});
  const std::string same = range("gpu_flops_fp32", "0.5Tf..1Tf; wide");
  for (size_t at = x.find("</cluster>"); at != std::string::npos;
       at = x.find("</cluster>", at + same.size() + 10))
    x.insert(at, same);
  return x;
}
}  // namespace

TEST_CASE("a figure stated alike on several nodes is one figure, and every rank that has it gets its sample",
          "[interval]") {
  vt::TempDir d;
  // Two nodes of one GPU each (tests/test_util.hpp), both stating the same range word for word, as
  // `vitsim platform` writes one GPU type's clusters: one figure; a third range on one node only: another.
  std::string x = two_nodes_one_range();
  x.insert(x.find("</cluster>"), range("gpu_efficiency", "0.5..1; one node"));
  const std::string path = d.file("two.xml", x);
  const auto figures = sim::ranged_figures(read_platform_facts(path));
  REQUIRE(figures.size() == 2);
  CHECK(figures[0].key == "gpu_efficiency");
  CHECK(figures[0].elements == std::vector<std::string>{"cluster n0"});
  CHECK(figures[1].key == "gpu_flops_fp32");
  CHECK(figures[1].elements == std::vector<std::string>{"cluster n0", "cluster n1"});
  CHECK(figures[1].where() == "cluster n0 and 1 more");
  // A sample of 0.7Tf reaches both GPUs; NaN leaves gpu_efficiency as written (1).
  const double sample = 0.7e12;
  const PlatformFacts f = read_platform_text(
      "sampled",
      sim::platform_with_values(x, path, figures, {std::numeric_limits<double>::quiet_NaN(), sample}));
  for (const auto& [host, g] : f.gpu) {
    CHECK(g.flops_fp32 == sample);
    CHECK(g.efficiency == 1);
  }
}

TEST_CASE("predict's interval flags refuse what they cannot use", "[interval]") {
  vt::TempDir d;
  d.file("p.xml", platform(""));
  const std::string s = d.file("s.xml", scenario("p.xml"));
  // Two samples at least: a p10-p90 of one sample is no interval.
  CHECK(vt::vitsim(fmt::format("predict '{}' -q --samples 1", s)).status == 2);
  CHECK(vt::vitsim(fmt::format("predict '{}' -q --interval-seed x", s)).status == 2);
  CHECK(vt::vitsim(fmt::format("predict '{}' -q --interval --p-low 0", s)).status == 2);
  CHECK(vt::vitsim(fmt::format("predict '{}' -q --interval --p-high 1", s)).status == 2);
  const vt::CmdResult crossed =
      vt::vitsim(fmt::format("predict '{}' -q --interval --p-low 0.9 --p-high 0.1", s));
  CHECK(crossed.status == 2);
  CHECK_THAT(crossed.out, Catch::Contains("--p-low 0.9 is not below --p-high 0.1"));
  // No ranges, no calibration: the interval is the corpus' band alone, and the table says so.
  const vt::CmdResult r = vt::vitsim(fmt::format("predict '{}' -q --interval", s));
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains(
                        "no figure of the platform states a range: the interval is the corpus' band alone"));
  CHECK_THAT(r.out, Catch::Contains("the model's own error on the public corpus"));
  // Other quantiles name their column.
  const vt::CmdResult q = vt::vitsim(fmt::format("predict '{}' -q --interval --p-low 0.05 --p-high 0.95", s));
  REQUIRE(q.status == 0);
  CHECK_THAT(q.out, Catch::Contains("epoch p5-p95"));
}

namespace {

// Every figure the simulator reads from a platform's facts, GPU by GPU and node by node, and the ranges.
void check_same_facts(const PlatformFacts& a, const PlatformFacts& b) {
  REQUIRE(a.gpu.size() == b.gpu.size());
  for (const auto& [host, g] : a.gpu) {
    INFO(host);
    const GpuFacts& h = b.gpu.at(host);
    CHECK(g.model == h.model);
    for (auto [x, y] : {std::pair{g.flops_fp32, h.flops_fp32},
                        {g.flops_fp16, h.flops_fp16},
                        {g.flops_bf16, h.flops_bf16},
                        {g.mem_bw, h.mem_bw},
                        {g.mem_bytes, h.mem_bytes},
                        {g.efficiency, h.efficiency},
                        {g.kernel_overhead, h.kernel_overhead},
                        {g.reserved_bytes, h.reserved_bytes},
                        {g.gemm_efficiency, h.gemm_efficiency},
                        {g.attn_efficiency, h.attn_efficiency},
                        {g.mem_efficiency, h.mem_efficiency},
                        {g.gemm_k_half, h.gemm_k_half},
                        {g.sync_overhead, h.sync_overhead},
                        {g.host_op_overhead, h.host_op_overhead},
                        {g.power_busy_w, h.power_busy_w},
                        {g.power_idle_w, h.power_idle_w},
                        {g.step_cv, h.step_cv},
                        {g.link_bw, h.link_bw}})
      CHECK(x == y);
    CHECK(std::tie(g.sm_count, g.tile_m, g.tile_n, g.async, g.arch, g.link, g.pcie_gen, g.pcie_lanes) ==
          std::tie(h.sm_count, h.tile_m, h.tile_n, h.async, h.arch, h.link, h.pcie_gen, h.pcie_lanes));
  }
  REQUIRE(a.nodes.size() == b.nodes.size());
  for (size_t n = 0; n < a.nodes.size(); ++n)
    CHECK(std::tie(a.nodes[n].name, a.nodes[n].gpus, a.nodes[n].cpu_cores, a.nodes[n].loader_bw,
                   a.nodes[n].loader_image_overhead, a.nodes[n].h2d_pageable_bw) ==
          std::tie(b.nodes[n].name, b.nodes[n].gpus, b.nodes[n].cpu_cores, b.nodes[n].loader_bw,
                   b.nodes[n].loader_image_overhead, b.nodes[n].h2d_pageable_bw));
  REQUIRE(a.ranges.size() == b.ranges.size());
  for (size_t r = 0; r < a.ranges.size(); ++r)
    CHECK(std::tie(a.ranges[r].key, a.ranges[r].value, a.ranges[r].low, a.ranges[r].high,
                   a.ranges[r].element) == std::tie(b.ranges[r].key, b.ranges[r].value, b.ranges[r].low,
                                                    b.ranges[r].high, b.ranges[r].element));
  CHECK(a.props == b.props);
  CHECK(a.links.size() == b.links.size());
}

}  // namespace

TEST_CASE("a copy's figures read in memory read as the copy the interval would write", "[interval]") {
  // The interval's children read a copy of GPU and node figures with PlatformDocument::with instead of
  // parsing the copy platform_with_values writes (docs/benchmarks.md "Prediction intervals (issue 26)"); both
  // must read alike. Two nodes of one GPU each (tests/test_util.hpp): a range stated alike on both clusters
  // (one figure), one on one cluster only, one on the zone for a figure no element states (its default in
  // effect: the copy adds the prop, which every GPU inherits), and one on a node figure.
  vt::TempDir d;
  std::string x = two_nodes_one_range();
  x.insert(x.find("</cluster>"), range("gpu_efficiency", "0.5..1; one node") +
                                     "<prop id=\"cpu_cores\" value=\"8\"/>" +
                                     range("cpu_cores", "4..8; cores"));
  const std::string zone = "routing=\"Full\">\n";
  x.insert(x.find(zone) + zone.size(), range("gpu_step_cv", "0..0.1; assumed") + "\n");
  const std::string path = d.file("p.xml", x);
  const auto figures = sim::ranged_figures(read_platform_facts(path));
  REQUIRE(figures.size() == 4);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::vector<double>> copies;
  for (size_t j = 0; j < figures.size(); ++j)
    for (double end : {figures[j].low, figures[j].high}) {
      std::vector<double> v(figures.size(), nan);
      v[j] = end;
      copies.push_back(v);
    }
  std::vector<double> all;  // every figure at the middle of its range at once (a design's sample)
  for (const auto& f : figures) all.push_back(f.key == "cpu_cores" ? 6 : (f.low + f.high) / 2);
  copies.push_back(all);
  PlatformDocument doc(path, x);  // parsed once, read again per copy (as the interval's children do)
  for (const auto& v : copies) {
    std::vector<FigureValue> values;
    for (size_t j = 0; j < figures.size(); ++j)
      if (!std::isnan(v[j]))
        values.push_back({figures[j].key, figures[j].raw, exact_prop_value(*figures[j].prop, v[j])});
    const PlatformFacts copy = read_platform_text("copy", sim::platform_with_values(x, path, figures, v));
    check_same_facts(copy, PlatformDocument(path, x).with(values));  // a document read once
    check_same_facts(copy, doc.with(values));                        // one document read again and again
  }
  // Not vacuous: the copies differ from the file as written where their figure moved (one of them: every
  // figure at its middle; the step cv's default, which the file does not state, now 0.05 on both GPUs).
  const PlatformFacts written = read_platform_facts(path);
  const double cv_default = platform_prop("gpu_step_cv").default_value;
  std::vector<FigureValue> middle;
  for (size_t j = 0; j < figures.size(); ++j)
    middle.push_back({figures[j].key, figures[j].raw, exact_prop_value(*figures[j].prop, all[j])});
  const PlatformFacts moved = doc.with(middle);
  check_same_facts(written, doc.with({}));  // no value left over from the copies before
  for (const auto& [host, g] : moved.gpu) {
    CHECK(g.step_cv == 0.05);
    CHECK(written.gpu.at(host).step_cv == cv_default);
    CHECK(cv_default != 0.05);
    CHECK(g.flops_fp32 == 0.75e12);
  }
  CHECK(moved.nodes[0].cpu_cores == 6);
  CHECK(written.nodes[0].cpu_cores == 8);
}

TEST_CASE("predict's interval, its ends simulated beside its points, is add_intervals' after them",
          "[interval]") {
  // predict runs the interval's first simulations (the figures' ends, and in sampled mode the samples) in its
  // points' batch, before the points' times are known (sim::IntervalPlan); plan runs add_intervals after its
  // points. Both must give the same report, member for member, whatever the order the results come back in:
  // two points (a sweep of micro-batches, each with its own ends), a GPU figure, a node figure (both read in
  // the children's memory) and a link figure (a copy written, on an engine of its own).
  vt::TempDir d;
  std::string x = two_nodes_one_range();
  x.insert(x.find("</cluster>"), "<prop id=\"cpu_cores\" value=\"8\"/>" + range("cpu_cores", "2..8; cores"));
  const std::string link =
      "<link id=\"n0-nic\" bandwidth=\"10GBps\" latency=\"0us\" sharing_policy=\"SPLITDUPLEX\"";
  REQUIRE(x.find(link + "/>") != std::string::npos);
  x.replace(x.find(link + "/>"), link.size() + 2,
            link + "><prop id=\"transport\" value=\"tcp\"/><prop id=\"socket_bw\" value=\"2GBps\"/>" +
                range("socket_bw", "1GBps..3GBps; sockets") + "</link>");
  d.file("p.xml", x);
  std::string s = scenario("p.xml");
  s.replace(s.find("nodes=\"1\""), 9, "nodes=\"2\"");
  s.insert(s.find("</scenario>"), "  <sweep param=\"training.micro_batch\" values=\"16,32\"/>\n");
  const ScenarioFile f = read_scenario_file(d.file("s.xml", s));
  for (const auto mode : {sim::IntervalMode::Surrogate, sim::IntervalMode::Sampled}) {
    sim::PredictOptions o;
    o.progress = false;
    o.jobs = 2;
    o.interval.samples = 6;
    o.interval.mode = mode;
    const Report together = sim::predict(f, o);
    REQUIRE(together.points.size() == 2);
    REQUIRE(together.points[0].sensitivity.size() == 3);
    sim::PredictOptions plain = o;
    plain.interval.samples = 0;
    Report after = sim::predict(f, plain);
    sim::add_intervals(after, expand(f), nullptr, o);
    CHECK(report_to_json(together) == report_to_json(after));
    // Not vacuous: the two points' intervals differ, and the GPU and link figures move each point's epoch
    // (cpu_cores does not here: no loader figure, nothing reads the cores).
    CHECK(together.points[0].interval.epoch_high_s != together.points[1].interval.epoch_high_s);
    for (const auto& p : together.points)
      for (const auto& e : p.sensitivity)
        CHECK((e.epoch_at_low_s != e.epoch_at_high_s) == (e.figure != "cpu_cores"));
  }
}
