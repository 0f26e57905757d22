// Energy and cost per epoch (issue 14 item 4, core/model/energy.hpp): the power model's closed forms, the
// report's energy fields read back and checked, simulated points whose energy is busy power x time (no idle
// time) and busy x t_busy + idle x t_idle (a loader-bound point), `vitsim platform` writing the catalogue's
// power, and `vitsim plan --objective energy` ranking by kWh.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>

#include "test_util.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/model/energy.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/platform/platform_writer.hpp"
#include "vitsim/core/results/plan.hpp"
#include "vitsim/core/results/report.hpp"

using namespace vitsim;
using json = nlohmann::json;

namespace {

// One node of `gpus` GPUs (1 TFLOP/s each, compute-bound) with the given power props; the host link is
// fast enough (1e15 B/s, the plausible bandwidth's top: core/base/units.hpp) that host-to-device copies take
// no time worth counting (4.8 MB in 4.8 ns).
std::string power_platform(int gpus, const std::string& power_props,
                           const std::string& extra_node_props = "") {
  return fmt::format(
      "<?xml version=\"1.0\"?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
      "<platform version=\"4.1\"><zone id=\"p\" routing=\"Full\">\n"
      "<cluster id=\"n0\" prefix=\"n0-gpu\" suffix=\"\" radical=\"0-{}\" speed=\"1Tf\" bw=\"100GBps\" "
      "lat=\"1us\" "
      "sharing_policy=\"SPLITDUPLEX\" bb_bw=\"100GBps\" bb_lat=\"1us\" bb_sharing_policy=\"FATPIPE\" "
      "loopback_bw=\"1000000GBps\" loopback_lat=\"0us\" router_id=\"n0-router\">{}{}{}</cluster>\n"
      "</zone></platform>\n",
      gpus - 1, vt::gpu_props("G", "1Tf"), power_props, extra_node_props);
}

std::string scenario(const std::string& platform, int gpus, const std::string& extra = "") {
  return fmt::format(R"(<scenario name="energy">
  <cluster platform="{}" nodes="1" gpus_per_node="{}"/>
  <model preset="vit_cifar_tiny"/>
  <dataset name="synthetic" train_samples="4096" image_size="32" channels="3"/>
  <training micro_batch="16" precision="fp32"/>
  <loader workers="2"/>
  <simulation steps="8" warmup="2"/>
  {}
</scenario>)",
                     platform, gpus, extra);
}

json predict_json(const std::string& scenario_path, const std::string& extra = "") {
  const vt::CmdResult r = vt::vitsim("predict '" + scenario_path + "' --format json -q -j1 " + extra);
  INFO(r.out);
  REQUIRE(r.status == 0);
  return json::parse(r.out);
}

// The rule of core/model/energy.hpp, written out from a report's breakdown: busy = forward + backward +
// optimizer + exposed communication.
double busy_of(const json& b) {
  return b["compute_fwd"].get<double>() + b["compute_bwd"].get<double>() + b["optimizer"].get<double>() +
         b["comm_exposed"].get<double>();
}

}  // namespace

TEST_CASE("energy: power figures parse with their unit", "[energy]") {
  CHECK(parse_power("700W") == 700);
  CHECK(parse_power("1.2kW") == Approx(1200));
  CHECK(parse_power("0.5W") == 0.5);
  for (const char* bad : {"700", "W", "-5W", "0W", "nanW", "700w", "7e2Wx", "0x10W", ""}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_power(bad), Error);
  }
  CHECK_THROWS_WITH(parse_power("700"),
                    Catch::Contains("'700' is not a power") && Catch::Contains("\"700W\""));
}

TEST_CASE("energy: closed forms of one GPU and of a point", "[energy]") {
  const GpuPower h100{700, 105};  // the catalogue's H100-SXM: TDP 700 W, idle 15% of it
  // Busy the whole time: busy power x time.
  CHECK(gpu_energy_j(h100, 10, 10) == Approx(7000));
  // Busy 4 s of 10: 700 x 4 + 105 x 6.
  CHECK(gpu_energy_j(h100, 4, 10) == Approx(700 * 4 + 105 * 6));
  // Busy time beyond the wall time is clamped to it, negative to 0.
  CHECK(gpu_energy_j(h100, 12, 10) == Approx(7000));
  CHECK(gpu_energy_j(h100, -1, 10) == Approx(1050));

  // A point of 4 alike GPUs busy 30 ms of a 40 ms step, epoch 100 s: each busy 75 s, idle 25 s.
  const PointEnergy e =
      point_energy(std::vector<GpuPower>(4, h100), {0.03, 0.03, 0.03, 0.03}, 0.04, 100, 0.2);
  REQUIRE(e.known());
  CHECK(e.busy_w == Approx(2800));
  CHECK(e.idle_w == Approx(420));
  CHECK(e.busy_fraction == Approx(0.75));
  CHECK(e.epoch_kwh == Approx(4 * (700 * 75 + 105 * 25) / 3.6e6));
  CHECK(e.epoch_cost() == Approx(0.2 * e.epoch_kwh));
  CHECK(energy_kwh(e, 100) == Approx(e.epoch_kwh));

  // Mixed GPUs: the weighted busy fraction gives the summed energy back in one line.
  const std::vector<GpuPower> mixed{{700, 105}, {70, 10.5}, {300, 45}};
  const std::vector<double> busy{0.04, 0.01, 0.025};
  const PointEnergy m = point_energy(mixed, busy, 0.04, 50, 0);
  const double joules =
      gpu_energy_j(mixed[0], 50, 50) + gpu_energy_j(mixed[1], 12.5, 50) + gpu_energy_j(mixed[2], 31.25, 50);
  CHECK(m.epoch_kwh == Approx(joules / 3.6e6));
  CHECK(energy_kwh(m, 50) == Approx(m.epoch_kwh));
  CHECK(m.price_per_kwh == 0);
  CHECK(m.epoch_cost() == 0);

  // Any GPU without power figures: no energy for the point.
  CHECK_FALSE(point_energy({h100, GpuPower{}}, {0.01, 0.01}, 0.04, 100, 0).known());
  CHECK_FALSE(point_energy({}, {}, 0.04, 100, 0).known());
}

TEST_CASE("energy: a report's energy is read back and checked against its epoch time and is optional",
          "[energy][report]") {
  ReportPoint p;
  p.params = {{"nodes", "1"}};
  p.scenario_id = "sha256:" + std::string(64, 'a');
  p.nodes = 1, p.gpus = 2, p.micro_batch = 8, p.grad_accum = 1, p.global_batch = 16, p.steps_per_epoch = 100;
  p.step_time_s = {0.1, 0.1, 0.1};
  p.breakdown_s.compute_fwd = 0.03, p.breakdown_s.compute_bwd = 0.06;
  p.epoch_time_s = 10;
  p.throughput_img_s = 160;
  p.bound = "compute";
  p.energy = point_energy({{400, 60}, {400, 60}}, {0.09, 0.09}, 0.1, 10, 0.15);
  Report r;
  r.scenario = "e";
  r.points.push_back(p);
  const std::string text = report_to_json(r);
  const Report back = report_from_json(text, "r.json");
  CHECK(back.points[0].energy.epoch_kwh == Approx(p.energy.epoch_kwh));
  CHECK(back.points[0].energy.price_per_kwh == Approx(0.15));
  CHECK_THAT(report_to_csv(back), Catch::Contains("energy_kwh_per_epoch,energy_cost_per_epoch"));
  CHECK_THAT(report_to_table(back), Catch::Contains("kWh/epoch") && Catch::Contains("energy cost"));

  // Edited figures: each is one line naming the field.
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    const char* message;
  };
  const std::vector<Case> cases{
      {"kWh off",
       [](json& j) {
         json& e = j["points"][0]["energy"];
         e["epoch_kwh"] = 1.0;
         e.erase("price_per_kwh");
         e.erase("epoch_cost");
       },
       "/points/0/energy/epoch_kwh: 1 kWh disagrees"},
      {"idle above busy", [](json& j) { j["points"][0]["energy"]["gpus_idle_w"] = 900.0; },
       "/points/0/energy/gpus_idle_w: 900 W is above"},
      {"fraction above 1", [](json& j) { j["points"][0]["energy"]["busy_fraction"] = 1.5; },
       "/points/0/energy/busy_fraction"},
      {"cost off", [](json& j) { j["points"][0]["energy"]["epoch_cost"] = 7.0; },
       "/points/0/energy/epoch_cost: 7 disagrees"},
      {"no busy power", [](json& j) { j["points"][0]["energy"]["gpus_busy_w"] = 0.0; },
       "/points/0/energy/gpus_busy_w"},
      {"price without cost", [](json& j) { j["points"][0]["energy"].erase("epoch_cost"); },
       "/points/0/energy/epoch_cost"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    json j = json::parse(text);
    c.edit(j);
    CHECK_THROWS_WITH(report_from_json(j.dump(), "r.json"),
                      Catch::StartsWith("r.json") && Catch::Contains(c.message));
  }
  // A report without energy (an older one, or a platform without power) reads, and shows no energy column.
  json j = json::parse(text);
  j["points"][0].erase("energy");
  const Report old = report_from_json(j.dump(), "old.json");
  CHECK_FALSE(old.points[0].energy.known());
  CHECK_THAT(report_to_table(old), !Catch::Contains("kWh"));
}

TEST_CASE("energy: a point without idle time uses busy power x time", "[energy][sim]") {
  vt::TempDir d;
  // No loader figures (no data wait), copies in picoseconds, one GPU (no collective): busy the whole step.
  d.file("p.xml",
         power_platform(
             1, R"(<prop id="gpu_power_busy" value="300W"/><prop id="gpu_power_idle" value="50W"/>)"));
  const json rep = predict_json(d.file("s.xml", scenario("p.xml", 1)));
  const json& p = rep["points"][0];
  REQUIRE(p.contains("energy"));
  const double epoch = p["epoch_time_s"].get<double>();
  CHECK(p["energy"]["busy_fraction"].get<double>() == Approx(1).epsilon(1e-6));
  // 300 W for the whole epoch.
  CHECK(p["energy"]["epoch_kwh"].get<double>() == Approx(300 * epoch / 3.6e6).epsilon(1e-6));
  CHECK(p["energy"]["gpus_busy_w"] == 300.0);
  CHECK(p["energy"]["gpus_idle_w"] == 50.0);
  CHECK_FALSE(p["energy"].contains("epoch_cost"));  // no price given
}

TEST_CASE("energy: a loader-bound point uses busy x t_busy + idle x t_idle per GPU", "[energy][sim]") {
  vt::TempDir d;
  // Two GPUs whose one loader worker each turns out 2 MB/s of input tensors: the steps wait for data.
  d.file("p.xml", power_platform(
                      2, R"(<prop id="gpu_power_busy" value="300W"/><prop id="gpu_power_idle" value="50W"/>)",
                      R"(<prop id="cpu_cores" value="8"/><prop id="loader_bw" value="2MBps"/>)"));
  const std::string s = d.file("s.xml", scenario("p.xml", 2, R"(<parallelism collective="ring"/>)"));
  const json rep = predict_json(s, "--price-per-kwh 0.25");
  const json& p = rep["points"][0];
  REQUIRE(p.contains("energy"));
  const double step = p["step_time_s"]["mean"].get<double>(), epoch = p["epoch_time_s"].get<double>();
  REQUIRE(p["breakdown_s"]["data"].get<double>() > 0.2 * step);  // idle time worth measuring
  double joules = 0, busy_sum = 0;
  REQUIRE(p["per_rank"].size() == 2);
  for (const auto& rr : p["per_rank"]) {
    const double t_busy = busy_of(rr["breakdown_s"]) / step * epoch;  // seconds of the epoch this GPU is busy
    joules += 300 * t_busy + 50 * (epoch - t_busy);
    busy_sum += t_busy;
  }
  CHECK(p["energy"]["epoch_kwh"].get<double>() == Approx(joules / 3.6e6).epsilon(1e-9));
  CHECK(p["energy"]["busy_fraction"].get<double>() == Approx(busy_sum / (2 * epoch)).epsilon(1e-9));
  CHECK(p["energy"]["busy_fraction"].get<double>() < 0.8);
  CHECK(p["energy"]["price_per_kwh"] == 0.25);
  CHECK(p["energy"]["epoch_cost"].get<double>() == Approx(0.25 * joules / 3.6e6).epsilon(1e-9));
  // The table and the CSV carry it.
  const vt::CmdResult table = vt::vitsim("predict '" + s + "' -q -j1 --price-per-kwh 0.25");
  CHECK_THAT(table.out, Catch::Contains("kWh/epoch") && Catch::Contains("energy cost") &&
                            Catch::Contains("energy: GPUs busy"));
  const vt::CmdResult csv = vt::vitsim("predict '" + s + "' -q -j1 --format csv");
  // energy_kwh_per_epoch, then energy_cost_per_epoch empty (no price), then the whole run's columns.
  CHECK_THAT(csv.out, Catch::Contains(fmt::format(",{:.9g},,", p["energy"]["epoch_kwh"].get<double>())));
}

TEST_CASE("energy: a platform without GPU power reports none and bad power props get one line with file:line",
          "[energy]") {
  vt::TempDir d;
  d.file("none.xml", power_platform(1, ""));
  const json rep = predict_json(d.file("s.xml", scenario("none.xml", 1)));
  CHECK_FALSE(rep["points"][0].contains("energy"));
  const vt::CmdResult table = vt::vitsim("predict '" + d / "s.xml" + "' -q -j1");
  CHECK_THAT(table.out, !Catch::Contains("kWh"));
  // plan --objective energy needs energy figures.
  const vt::CmdResult plan = vt::vitsim("plan '" + d / "s.xml" + "' -q -j1 --objective energy");
  CHECK(plan.status == 1);
  CHECK_THAT(plan.out, Catch::StartsWith("vitsim: error: plan --objective energy: point 0") &&
                           Catch::Contains("gpu_power_busy"));

  const std::vector<std::pair<std::string, std::string>> bad{
      {R"(<prop id="gpu_power_busy" value="300"/><prop id="gpu_power_idle" value="50W"/>)",
       "property gpu_power_busy: '300' is not a power"},
      {R"(<prop id="gpu_power_busy" value="300W"/>)", "gpu_power_busy without gpu_power_idle"},
      {R"(<prop id="gpu_power_idle" value="30W"/>)", "gpu_power_idle without gpu_power_busy"},
      {R"(<prop id="gpu_power_busy" value="300W"/><prop id="gpu_power_idle" value="400W"/>)",
       "gpu_power_idle: 400W is above gpu_power_busy 300W"},
      {R"(<prop id="gpu_power_busy" value="-3W"/><prop id="gpu_power_idle" value="1W"/>)",
       "property gpu_power_busy: '-3W' is not a power"},
  };
  for (const auto& [props, message] : bad) {
    INFO(props);
    const std::string path = d.file("bad.xml", power_platform(1, props));
    CHECK_THROWS_WITH(read_platform_facts(path),
                      Catch::StartsWith(path + ":4: ") && Catch::Contains(message));
  }
}

TEST_CASE("energy: vitsim platform writes the catalogue's TDP and idle fraction and a price per kWh",
          "[energy][platform]") {
  vt::TempDir d;
  const vt::CmdResult r = vt::vitsim(
      fmt::format("platform --gpu h100-sxm --gpus-per-node 8 --price-per-kwh 0.12 --out '{}'", d / "h.xml"));
  INFO(r.out);
  REQUIRE(r.status == 0);
  const PlatformFacts f = read_platform_facts(d / "h.xml");
  const GpuFacts& g = f.gpu.at("node0-gpu0");
  // data/catalogue.json: H100-SXM TDP 700 W; gpu_busy_power_fraction 1.0, gpu_idle_power_fraction 0.15.
  CHECK(g.power_busy_w == 700);
  CHECK(g.power_idle_w == Approx(105));
  CHECK(f.props.at("price_per_kwh") == "0.12");
  const Catalogue& cat = builtin_catalogue();
  for (const auto& gpu : cat.gpus) {
    INFO(gpu.name);
    const auto props = catalogue_gpu_props(cat, gpu, "bf16");
    auto find = [&](const char* k) {
      for (const auto& [key, v] : props)
        if (key == k) return parse_power(v);
      return 0.0;
    };
    CHECK(find("gpu_power_busy") == Approx(parse_power(gpu.tdp)));
    CHECK(find("gpu_power_idle") == Approx(0.15 * parse_power(gpu.tdp)));
  }
  const vt::CmdResult bad = vt::vitsim("platform --gpu h100-sxm --price-per-kwh cheap");
  CHECK(bad.status != 0);
  CHECK_THAT(bad.out, Catch::StartsWith("vitsim: error: ") && Catch::Contains("--price-per-kwh cheap"));
}

TEST_CASE("energy: plan --objective energy ranks by the kWh of the epochs", "[energy][plan]") {
  vt::TempDir d;
  // 1, 2 and 4 GPUs on one node of loader-bound GPUs: more GPUs finish sooner, but the ring's exposed
  // communication and the idle draw of waiting GPUs change the energy in another order than the time.
  d.file("p.xml", power_platform(
                      4, R"(<prop id="gpu_power_busy" value="300W"/><prop id="gpu_power_idle" value="50W"/>)",
                      R"(<prop id="cpu_cores" value="16"/><prop id="loader_bw" value="4MBps"/>)"));
  const std::string s =
      d.file("s.xml", scenario("p.xml", 1, R"(<sweep param="cluster.gpus_per_node" values="1,2,4"/>
  <sweep param="training.micro_batch" values="8,32"/>)"));
  const vt::CmdResult r =
      vt::vitsim("plan '" + s + "' -q -j1 --objective energy --price-per-kwh 0.3 --format json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  const PlanResult plan = plan_from_json(r.out, "plan.json");
  CHECK(plan.objective == "energy");
  CHECK(plan.price_per_kwh == 0.3);
  std::vector<const PlanPoint*> ranked;
  for (const auto& p : plan.points)
    if (p.rank > 0) ranked.push_back(&p);
  REQUIRE(ranked.size() == 6);
  std::sort(ranked.begin(), ranked.end(),
            [](const PlanPoint* a, const PlanPoint* b) { return a->rank < b->rank; });
  for (size_t i = 0; i < ranked.size(); ++i) {
    INFO(i);
    CHECK(ranked[i]->energy_kwh == Approx(ranked[i]->result.energy.epoch_kwh * plan.epochs));
    CHECK(ranked[i]->energy_cost == Approx(0.3 * ranked[i]->energy_kwh));
    if (i > 0) CHECK(ranked[i]->energy_kwh >= ranked[i - 1]->energy_kwh);
  }
  CHECK_THAT(plan.explanation.front() + plan.explanation[1],
             Catch::Contains("by energy") && Catch::Contains("kWh"));
  // The same plan by time ranks in another order here (what the objective is for).
  const vt::CmdResult t = vt::vitsim("plan '" + s + "' -q -j1 --format json");
  REQUIRE(t.status == 0);
  const PlanResult by_time = plan_from_json(t.out, "time.json");
  int energy_top = -1, time_top = -1;
  for (const auto& p : plan.points)
    if (p.rank == 1) energy_top = p.index;
  for (const auto& p : by_time.points)
    if (p.rank == 1) time_top = p.index;
  CHECK(energy_top != time_top);
  // Table and CSV carry the energy.
  const vt::CmdResult table = vt::vitsim("plan '" + s + "' -q -j1 --objective energy --price-per-kwh 0.3");
  CHECK_THAT(table.out,
             Catch::Contains("kWh") && Catch::Contains("energy cost") && Catch::Contains("ranked by energy"));
  const vt::CmdResult csv = vt::vitsim("plan '" + s + "' -q -j1 --format csv");
  CHECK_THAT(csv.out, Catch::Contains("energy_kwh,energy_cost\n"));
}
