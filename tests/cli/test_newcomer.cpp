// Issue 28, a newcomer's traps. Item 1: predict's table tells its rows apart (a column per swept or
// overridden key, the code plan's table uses) and closes with the whole run: time, GPU-hours, cost and kWh of
// the scenario's epochs.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sstream>

#include "test_util.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/results/report.hpp"
#include "vitsim/plot/plot.hpp"

using namespace vitsim;
using json = nlohmann::json;

namespace {

// A tiny data-parallel scenario on 2 nodes of 8 H100s (platforms/h100-16x8-ndr.xml: it states GPU power,
// no price), few steps; the collective is named (ring), so the numbers do not depend on the default's.
std::string scenario(const vt::TempDir& d, const std::string& training = "") {
  return d.file("s.xml", fmt::format(R"(<scenario name="table">
  <cluster platform="{}" nodes="2" gpus_per_node="8"/>
  <model preset="vit_fmnist_tiny"/>
  <dataset name="synthetic" train_samples="100000" image_size="28" channels="1"/>
  <training micro_batch="32" precision="fp32" {}/>
  <parallelism overlap="true" bucket_size="64KiB" collective="ring"/>
  <simulation steps="3" warmup="1"/>
</scenario>)",
                                     vt::source("platforms/h100-16x8-ndr.xml"), training));
}

// The table's lines split into cells (the table has no spaces inside a cell but in times and sizes,
// "1.2 ms": the header and the cells of the first columns are what the tests read).
std::vector<std::string> cells(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string c; in >> c;) out.push_back(c);
  return out;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

ReportPoint point(std::map<std::string, std::string> params) {
  ReportPoint p;
  p.params = std::move(params);
  p.nodes = p.gpus = p.micro_batch = p.grad_accum = 1;
  p.step_time_s.mean = 1;
  p.bound = "compute";
  return p;
}

}  // namespace

TEST_CASE("predict table: a column per swept or overridden key, but those the fixed columns show",
          "[predict_table]") {
  Report r;
  r.points = {point({{"parallelism.collective", "ring"},
                     {"cluster.gpus_per_node", "1"},
                     {"training.micro_batch", "1"},
                     {"cluster.platform", "a.xml"}}),
              point({{"parallelism.collective", "tree"},
                     {"cluster.gpus_per_node", "1"},
                     {"training.micro_batch", "1"},
                     {"cluster.platform", "a.xml"}})};
  const auto l = lines(report_to_table(r));
  REQUIRE(l.size() >= 4);
  // Sorted by key (cluster.platform before parallelism.collective), heads without their element;
  // gpus_per_node and micro_batch have the fixed gpus and micro columns.
  const auto head = cells(l[1]);
  REQUIRE(head.size() >= 3);
  CHECK(head[0] == "platform");  // overridden with one value: a column too (the key was given)
  CHECK(head[1] == "collective");
  CHECK(head[2] == "nodes");
  CHECK(std::count(head.begin(), head.end(), "gpus_per_node") == 0);
  CHECK(std::count(head.begin(), head.end(), "micro_batch") == 0);
  CHECK(cells(l[2])[0] == "a.xml");
  CHECK(cells(l[2])[1] == "ring");
  CHECK(cells(l[3])[1] == "tree");
}

TEST_CASE("predict --set parallelism.collective=ring,tree: the rows name their collective",
          "[predict_table][cli]") {
  vt::TempDir d;
  auto r = vt::vitsim("predict " + scenario(d) + " --quiet --set parallelism.collective=ring,tree");
  REQUIRE(r.status == 0);
  const auto l = lines(r.out);
  REQUIRE(l.size() >= 4);
  CHECK(cells(l[1])[0] == "collective");
  CHECK(cells(l[2])[0] == "ring");
  CHECK(cells(l[3])[0] == "tree");
}

TEST_CASE("predict --set cluster.platform=a.xml,b.xml: the rows name their platform",
          "[predict_table][cli]") {
  vt::TempDir d;
  const std::string text = read_file(vt::source("platforms/h100-16x8-ndr.xml"));
  const std::string a = d.file("a.xml", text), b = d.file("b.xml", text);
  auto r = vt::vitsim("predict " + scenario(d) + " --quiet --set cluster.platform=" + a + "," + b);
  REQUIRE(r.status == 0);
  const auto l = lines(r.out);
  REQUIRE(l.size() >= 4);
  CHECK(cells(l[1])[0] == "platform");
  CHECK(cells(l[2])[0] == a);
  CHECK(cells(l[3])[0] == b);
}

TEST_CASE("predict's whole run: epochs x epoch time, GPU-hours, cost at the platform's price, kWh",
          "[predict_table][cli]") {
  vt::TempDir d;
  const std::string s = scenario(d, "epochs=\"3\"");
  // The platform states no price; the what-if gives its zone one (docs/plan.md, What-ifs).
  const std::string price = " --what-if zone:price_per_gpu_hour=2.5";
  for (const std::string& epochs_flag : {std::string(), std::string(" --epochs 300")}) {
    const long long epochs = epochs_flag.empty() ? 3 : 300;  // the scenario's, or --epochs
    auto r = vt::vitsim("predict " + s + " --quiet --format json" + price + epochs_flag);
    REQUIRE(r.status == 0);
    const json p = json::parse(r.out)["points"][0];
    const json& t = p.at("totals");
    CHECK(t["epochs"] == epochs);
    const double time_s = p["epoch_time_s"].get<double>() * epochs;  // the definition, docs/predict.md
    CHECK(t["time_s"].get<double>() == Approx(time_s));
    CHECK(t["gpu_hours"].get<double>() == Approx(time_s * 16 / 3600));  // 2 nodes x 8 GPUs
    CHECK(t["price_per_gpu_hour"].get<double>() == 2.5);
    CHECK(t["cost"].get<double>() == Approx(time_s * 16 / 3600 * 2.5));
    CHECK(t["energy_kwh"].get<double>() == Approx(p["energy"]["epoch_kwh"].get<double>() * epochs));
  }
  // The table closes with the same figures.
  auto r = vt::vitsim("predict " + s + " --quiet" + price + " --epochs 300");
  REQUIRE(r.status == 0);
  const auto l = lines(r.out);
  auto head =
      std::find_if(l.begin(), l.end(), [](const std::string& x) { return x.rfind("Whole run", 0) == 0; });
  REQUIRE(head != l.end());
  REQUIRE(l.end() - head >= 3);
  CHECK(cells(head[1]) ==
        std::vector<std::string>{"point", "epochs", "time", "GPU-hours", "cost", "$", "kWh"});
  CHECK(cells(head[2])[0] == "1");
  CHECK(cells(head[2])[1] == "300");
  // Without a price, GPU-hours stand for the cost, and the table says so.
  r = vt::vitsim("predict " + s + " --quiet");
  REQUIRE(r.status == 0);
  CHECK(r.out.find("cost: the platform states no price_per_gpu_hour") != std::string::npos);
}

TEST_CASE("a report's totals must agree with its point when read back", "[predict_table]") {
  vt::TempDir d;
  auto r = vt::vitsim("predict " + scenario(d, "epochs=\"3\"") +
                      " --quiet --format json --what-if zone:price_per_gpu_hour=2.5");
  REQUIRE(r.status == 0);
  const json good = json::parse(r.out);
  CHECK(report_from_json(r.out, "r.json").points.at(0).total_epochs == 3);
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"time_s", "disagrees with epoch_time_s x epochs"},
      {"gpu_hours", "disagrees with time_s x gpus / 3600"},
      {"cost", "disagrees with gpu_hours x price_per_gpu_hour"},
      {"energy_kwh", "disagrees with energy.epoch_kwh x epochs"}};
  for (const auto& [key, message] : edits) {
    json bad = good;
    bad["points"][0]["totals"][key] = bad["points"][0]["totals"][key].get<double>() * 2;
    const std::string e = vt::error_of([&] { report_from_json(bad.dump(), "r.json"); });
    CHECK(e.find("r.json: /points/0/totals/" + key + ": ") == 0);
    CHECK(e.find(message) != std::string::npos);
  }
}

// Item 5: `model.attention=fused` against `math` changes the memory per GPU by the scores the math path
// keeps (the report said the same bytes for both). vit_fmnist_tiny: T 17 tokens, a 4 heads, 4 blocks; fp32
// doubles the 2-byte softmax output (2aT^2 -> 4aT^2 bytes per block and sample); fused keeps 4aT bytes of
// fp32 logsumexp instead (core/src/model/vit.cpp, docs/model.md); micro-batch 32.
TEST_CASE("predict: fused attention's memory per GPU is math's without the scores", "[memory][cli]") {
  vt::TempDir d;
  const std::string s = scenario(d);
  auto memory = [&](const std::string& path) {
    auto r = vt::vitsim("predict " + s + " --quiet --format json --set model.attention=" + path);
    REQUIRE(r.status == 0);
    return json::parse(r.out)["points"][0]["memory_per_gpu_bytes"].get<double>();
  };
  const double T = 17, a = 4, blocks = 4, micro = 32;
  CHECK(memory("math") - memory("fused") == Approx(micro * blocks * (4 * a * T * T - 4 * a * T)));
}

// Item 9: vitsim plot given a scenario says what to run first; an ideal-scaling line; a measured overlay.
namespace {

ReportPoint scaling_point(int gpus, double epoch_s, double img_s) {
  ReportPoint p = point({{"cluster.gpus_per_node", std::to_string(gpus)}});
  p.gpus = gpus;
  p.epoch_time_s = epoch_s;
  p.throughput_img_s = img_s;
  return p;
}

}  // namespace

TEST_CASE("plot: a scaling plot draws linear scaling from the fewest GPUs and 100% efficiency", "[plot]") {
  Report r;
  r.scenario = "s";
  // Strong scaling of a 6000-image epoch: 600 s on 1 GPU (10 img/s), 400 s on 2 (15), 200 s on 4 (30).
  r.points = {scaling_point(1, 600, 10), scaling_point(2, 400, 15), scaling_point(4, 200, 30)};
  fill_scaling_efficiency(r);
  const plot::Script sc = plot::make_script(r, plot::Kind::Scaling, "out.svg");
  // Ideal: the 1-GPU epoch (10 min) over the GPU count.
  REQUIRE(sc.data.count("ideal0.dat"));
  CHECK(sc.data.at("ideal0.dat") == "1 10\n2 5\n4 2.5\n");
  CHECK(sc.text.find("title \"ideal (linear) scaling\"") != std::string::npos);
  CHECK(sc.text.find("100 with lines") != std::string::npos);
  // Weak scaling (the epoch's images grow with the GPUs, 6000 per GPU): 600 s everywhere at 10 img/s per
  // GPU is ideal, and the ideal line says so whatever the reference.
  Report weak = r;
  weak.points = {scaling_point(2, 600, 20), scaling_point(4, 600, 40)};
  CHECK(plot::make_script(weak, plot::Kind::Scaling, "out.svg").data.at("ideal0.dat") == "2 10\n4 10\n");
}

TEST_CASE("plot --measured draws a measured run's points over the prediction", "[plot]") {
  Report r;
  r.scenario = "s";
  r.points = {scaling_point(1, 600, 10), scaling_point(2, 400, 15)};
  Report m = r;
  m.source = "measured";
  m.points = {scaling_point(1, 660, 9), scaling_point(2, 420, 14)};
  const plot::Script sc = plot::make_script(r, plot::Kind::Scaling, "out.svg", &m);
  REQUIRE(sc.data.count("measured_time0.dat"));
  CHECK(sc.data.at("measured_time0.dat") == "1 11\n2 7\n");  // 660 s, 420 s in minutes
  CHECK(sc.text.find("with points") != std::string::npos);
  CHECK(sc.text.find("title \"measured: s\"") != std::string::npos);
  CHECK(sc.text.find("title \"predicted: s\"") != std::string::npos);
  CHECK(sc.text.find("predicted and measured scaling") != std::string::npos);
}

TEST_CASE("vitsim plot: a scenario file gets what to run first, --measured must be measured", "[plot][cli]") {
  vt::TempDir d;
  const std::string s = scenario(d);
  auto r = vt::vitsim("plot " + s + " --out " + d / "x.svg");
  CHECK(r.status == 1);
  CHECK(r.out ==
        "vitsim: error: " + s + ": a scenario file, not a report: run `vitsim predict " + s +
            " --format json --out report.json` first, then `vitsim plot report.json --out plot.svg`\n");
  const std::string platform = vt::source("platforms/h100-16x8-ndr.xml");
  r = vt::vitsim("plot " + platform + " --out " + d / "x.svg");
  CHECK(r.status == 1);
  CHECK(r.out.find("an XML file (a platform), not a report") != std::string::npos);
  CHECK(r.out.find("run vitsim predict --format json first") != std::string::npos);

  // A prediction of 1, 2 and 4 GPUs, plotted over itself as --measured: refused (it is predicted); then
  // the same figures marked measured (as vitsim train writes them) are drawn.
  r = vt::vitsim("predict " + s +
                 " --quiet --format json --set cluster.nodes=1 --set cluster.gpus_per_node=1,2,4 --out " +
                 d / "p.json");
  REQUIRE(r.status == 0);
  r = vt::vitsim("plot " + d / "p.json" + " --measured " + d / "p.json" + " --out " + d / "x.svg");
  CHECK(r.status == 1);
  CHECK(r.out.find("this report is predicted (simulated by vitsim predict), not measured: vitsim plot "
                   "--measured needs a report written by `vitsim train`") != std::string::npos);
  json m = json::parse(read_file(d / "p.json"));
  m["kind"] = "measured";
  m["source"] = "measured";
  m["provenance"] = vt::train_provenance();
  for (auto& p : m["points"]) {
    p["simulated_steps"] = 0;
    p.erase("totals");
  }
  const std::string measured = d.file("m.json", m.dump());
  r = vt::vitsim("plot " + d / "p.json" + " --measured " + measured + " --out " + d / "x.svg");
  REQUIRE(r.status == 0);
  const std::string svg = read_file(d / "x.svg");
  CHECK(svg.find("measured: ") != std::string::npos);
  CHECK(svg.find("ideal (linear) scaling") != std::string::npos);
}
