// The plan's advice from the numbers (issue 25 item 6; core/model/comm_regime.hpp, core/src/formats/
// plan_advice.cpp) and its intervals (issue 26 item 3's plan half; sim/predict/plan.hpp --interval): the
// recommended bucket against the ring's closed form on a homogeneous platform, the regime's figures against
// the simulated communication, no collective advice where exposed communication is small, the latency-bound
// regime named with the point's figures, and plan --interval's intervals and its overlap sentence.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/model/comm_regime.hpp"
#include "vitsim/core/model/nccl_tuning.hpp"
#include "vitsim/core/results/plan.hpp"
#include "vitsim/sim/predict/plan.hpp"

using namespace vitsim;

namespace {

// 4 nodes of one GPU (tests/test_util.hpp), GPU links of 100GBps, NICs of `nic` (10GBps); every link at
// `lat`: a ring neighbour's route crosses 4 of them (its GPU's link, its NIC out, the next NIC in, the next
// GPU's link), so a = 4 x lat, and the slowest edge is a NIC, crossed by one edge per direction: B = 10 GB/s.
constexpr double kNic = 10e9;
std::string ring_platform(const std::string& lat, const std::string& flops, const std::string& nic) {
  return vt::platform_xml(4, 1, "100GBps", lat, {nic, nic, nic, nic}, {flops, flops, flops, flops});
}

// vit_cifar_tiny at micro-batch 32 with overlap (as tests/sim/test_interval.cpp), the collective and bucket
// cap given.
std::string scenario(const std::string& platform, const std::string& collective, const std::string& bucket,
                     int nodes = 4) {
  return fmt::format(R"(<scenario name="advice">
  <cluster platform="{}" nodes="{}" gpus_per_node="1"/>
  <model preset="vit_cifar_tiny"/>
  <dataset name="synthetic" train_samples="6400" image_size="32" channels="3"/>
  <training micro_batch="32" precision="fp32"/>
  <parallelism collective="{}" overlap="true" bucket_size="{}"/>
  <loader workers="2"/>
  <simulation steps="6" warmup="1"/>
</scenario>
)",
                     platform, nodes, collective, bucket);
}

struct Planned {
  PlanResult plan;
  Scenario scenario;  // the top pick's, resolved
  const PlanPoint& top() const {
    for (const auto& p : plan.points)
      if (p.rank == 1) return p;
    throw std::runtime_error("no top pick");
  }
  bool says(const std::string& needle) const {
    for (const auto& line : plan.explanation)
      if (line.find(needle) != std::string::npos) return true;
    return false;
  }
  std::string text() const { return vt::join(plan.explanation, "\n"); }
};

Planned plan_of(const vt::TempDir& d, const std::string& lat, const std::string& flops,
                const std::string& collective, const std::string& bucket, const std::string& nic = "10GBps") {
  d.file("p.xml", ring_platform(lat, flops, nic));
  const ScenarioFile f = read_scenario_file(d.file("s.xml", scenario("p.xml", collective, bucket)));
  sim::PlanOptions o;
  o.progress = false;
  o.jobs = 2;
  return {sim::plan(f, o), expand(f).at(0)};
}

}  // namespace

TEST_CASE("the recommended bucket is the ring's closed form n a B / share on a homogeneous platform",
          "[plan][advice]") {
  // A call over n ranks: latency 2(n-1) a, transfer 2(n-1) (S/n) / B; latency <= share x transfer from
  // S = n a B / share.
  CHECK(ring_bucket_for_share(4, 200e-6, 10e9, 0.1) == Approx(8e7));
  CHECK(ring_steps(4, true) == 6);
  CHECK(ring_steps(4, false) == 3);
  CHECK(ring_transfer_s(4, 4e6, 1e9, true) == Approx(6 * 1e6 / 1e9));
  CHECK(bucket_setting(2.37e8) == "240MB");
  CHECK(bucket_setting_bytes(2.37e8) == Approx(2.4e8));
  CHECK(bucket_setting(1.6e6) == "1.6MB");

  vt::TempDir d;
  for (const char* lat : {"50us", "1us"}) {
    DYNAMIC_SECTION("links at " << lat) {
      const double a = 4 * units::parse(lat, units::Kind::Time);
      const Planned r = plan_of(d, lat, "1000Tf", "ring", "64KB");
      const CommRegime& c = r.top().comm;
      REQUIRE(c.model == "ring");
      CHECK(c.ranks == 4);
      CHECK(c.ring_steps == 6);
      CHECK(c.step_latency_s == Approx(a));
      CHECK(c.bottleneck_bw == Approx(kNic));
      CHECK_THAT(c.bottleneck, Catch::Contains("-nic"));
      CHECK(c.recommended_bytes == Approx(4 * a * kNic / kLatencyShareTarget));
      // The buckets are the scenario's layout (core's gradient_buckets), reduced once per step.
      const std::vector<GradBucket> layout = gradient_buckets(r.scenario);
      CHECK(c.calls == static_cast<int>(layout.size()));
      double transfer = 0;
      for (const auto& b : layout) transfer += 6 * (b.bytes / 4) / kNic;
      CHECK(c.transfer_s == Approx(transfer));
      CHECK(c.latency_s == Approx(c.calls * 6 * a));
      // The regime's figures are the simulation's: its collectives run one after another on the
      // communication stream, each latency + transfer.
      CHECK(c.latency_s + c.transfer_s == Approx(r.top().result.breakdown_s.comm_total).epsilon(1e-3));
    }
  }
  SECTION("under the gradients' size, the cap is recommended with the calls it leaves") {
    // a = 4 us: S = 4 x 4 us x 10 GB/s / 0.1 = 1.6 MB, under vit_cifar_tiny's 7.2 MB of gradients.
    const Planned r = plan_of(d, "1us", "1000Tf", "ring", "64KB");
    Scenario at = r.scenario;
    at.parallel.bucket_bytes = 1.6e6;
    const std::string expected = fmt::format(
        "Buckets: parallelism.bucket_size=1.6MB (now 64KB) keeps a call's latency under 10% of its "
        "transfer (n x a x B / 0.1 = 4 x {} x 10 GB/s / 0.1 = {}): {} -> {} calls per step.",
        units::format_time(4e-6), units::format_bytes(1.6e6), r.top().comm.calls,
        gradient_buckets(at).size());
    CHECK_THAT(r.text(), Catch::Contains(expected));
  }
}

TEST_CASE("a compute-bound pick gets no collective or bucket advice", "[plan][advice]") {
  vt::TempDir d;
  for (const char* collective : {"ring", "auto", "tree"}) {
    DYNAMIC_SECTION(collective) {
      // 1 TFLOP/s GPUs: compute is 99% of the step, exposed communication under 1%.
      const Planned r = plan_of(d, "50us", "1Tf", collective, "64KB");
      REQUIRE(r.top().result.bound == "compute");
      CHECK(r.says("Collective and buckets: exposed communication is"));
      CHECK(r.says("none is suggested"));
      CHECK_FALSE(r.says("parallelism.bucket_size="));
      CHECK_FALSE(r.says("parallelism.collective="));
      CHECK_FALSE(r.says("Gradient reduction"));
    }
  }
}

TEST_CASE("a latency-bound pick names its regime with its own figures", "[plan][advice]") {
  vt::TempDir d;
  SECTION("ring: buckets x ring steps x per-step latency") {
    const Planned r = plan_of(d, "50us", "1000Tf", "ring", "64KB");
    const CommRegime& c = r.top().comm;
    REQUIRE(c.latency_bound());
    const double a = 200e-6;
    CHECK(r.says(fmt::format("latency-bound: {} buckets x 6 ring steps x {} = {} of latency per step",
                             c.calls, units::format_time(a), units::format_time(c.calls * 6 * a))));
    // NCCL picks the ring here too: no collective to suggest, and it says so.
    CHECK(c.nccl_same);
    CHECK(r.says("'ring' is NCCL's own pick here, no collective setting to suggest"));
    CHECK_FALSE(r.says("parallelism.collective="));
    // All the gradients are under the model's bucket: one bucket is what buckets can do.
    CHECK(r.says(fmt::format("parallelism.bucket_size={} cuts the calls from {} to 1 per step",
                             bucket_setting(c.gradient_bytes), c.calls)));
  }
  SECTION("auto: NCCL's algorithm, protocol and latency per call") {
    // 100GBps NICs: NCCL's latency per call (tens of us) outweighs vit_cifar_tiny's bucket transfers.
    const Planned r = plan_of(d, "50us", "1000Tf", "auto", "8KB", "100GBps");
    const CommRegime& c = r.top().comm;
    REQUIRE(c.model == "nccl");
    REQUIRE(c.latency_bound());
    CHECK_THAT(c.nccl_choice, Catch::StartsWith(nccl_newest_version().name + " "));
    CHECK(r.says(fmt::format("latency-bound: {} buckets", c.calls)));
    CHECK(r.says("(NCCL " + c.nccl_choice));
    CHECK(r.says("Collective: auto runs what NCCL picks"));
    CHECK_FALSE(r.says("parallelism.collective="));
    CHECK(c.latency_s + c.transfer_s == Approx(r.top().result.breakdown_s.comm_total).epsilon(1e-3));
  }
  SECTION("a named tree NCCL would not run: auto is suggested with NCCL's estimates") {
    const Planned r = plan_of(d, "50us", "1000Tf", "tree", "64KB");
    const CommRegime& c = r.top().comm;
    REQUIRE_FALSE(c.nccl_same);
    CHECK(r.says("per-call latency figures are derived for ring and auto"));
    CHECK(r.says(fmt::format("against {} for 'tree'): parallelism.collective=auto runs NCCL's choice",
                             units::format_time(c.named_estimate_s))));
  }
}

namespace {

// One node of two 1 TFLOP/s GPUs whose peak is ranged 0.9Tf..1.1Tf: a compute-bound point's epoch scales as
// 1 / peak, so its p10-p90 holds the value at 1Tf.
std::string interval_platform() {
  std::string x = vt::platform_xml(1, 2, "100GBps", "0us", {"10GBps"}, {"1Tf"});
  return x.insert(x.find("</cluster>"), R"(<prop id="gpu_flops_fp32.range" value="0.9Tf..1.1Tf; test"/>)");
}

vt::CmdResult plan_cli(const vt::TempDir& d, const std::string& args) {
  return vt::vitsim(fmt::format("plan '{}' -q -j 2 {}", d / "s.xml", args));
}

}  // namespace

TEST_CASE("plan --interval gives the top candidates their interval and says whether the pick overlaps",
          "[plan][interval]") {
  vt::TempDir d;
  d.file("p.xml", interval_platform());
  d.file("s.xml", scenario("p.xml", "ring", "25MB", 1));
  SECTION("micro-batch 32 against 16 on one GPU: within 3% of each other, the intervals overlap") {
    const vt::CmdResult r =
        plan_cli(d, "--set training.micro_batch=32,16,8 --interval --format json --out " + d / "plan.json");
    REQUIRE(r.status == 0);
    const PlanResult plan = plan_from_json(read_file(d / "plan.json"), "plan.json");
    int with = 0;
    for (const auto& p : plan.points) {
      if (p.result.interval.samples == 0) continue;
      ++with;
      CHECK(p.rank <= 3);
      CHECK(p.result.interval.epoch_low_s <= p.result.epoch_time_s);
      CHECK(p.result.epoch_time_s <= p.result.interval.epoch_high_s);
      CHECK(p.result.interval.epoch_low_s < p.result.interval.epoch_high_s);
      CHECK(p.result.sensitivity.at(0).figure == "gpu_flops_fp32");
    }
    CHECK(with == 3);
    const std::string text = vt::join(plan.explanation, "\n");
    CHECK_THAT(text, Catch::Contains("on the top 3 by central value"));
    CHECK_THAT(text, Catch::Contains("The pick and the runner-up overlap within their intervals"));
    CHECK_THAT(text, Catch::Contains("measure gpu_flops_fp32 first (cluster n0, 0.9Tf..1.1Tf"));
    // The table's and the CSV's interval columns.
    const vt::CmdResult table = plan_cli(d, "--set training.micro_batch=32,16,8 --interval");
    CHECK_THAT(table.out, Catch::Contains("epoch p10-p90"));
    const vt::CmdResult csv = plan_cli(d, "--set training.micro_batch=32,16,8 --interval --format csv");
    CHECK_THAT(csv.out, Catch::Contains("epoch_time_low_s,epoch_time_high_s"));
  }
  SECTION("one GPU against two: twice as fast, the intervals (+-10% of the peak) stay apart") {
    const vt::CmdResult r = plan_cli(d, "--set cluster.gpus_per_node=1,2 --interval");
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("The pick stays ahead of the runner-up across their intervals"));
    CHECK_THAT(r.out, !Catch::Contains("overlap within their intervals"));
  }
  SECTION("--interval-top 1: only the pick has one, and no verdict against the runner-up") {
    const vt::CmdResult r = plan_cli(d, "--set training.micro_batch=32,16 --interval-top 1 --format csv");
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains(",gpu_flops_fp32\n"));
    CHECK_THAT(r.out, Catch::Contains(",,,,,,,\n"));  // the runner-up's interval cells, empty
    const vt::CmdResult table = plan_cli(d, "--set training.micro_batch=32,16 --interval-top 1");
    CHECK_THAT(table.out, Catch::Contains("on the top 1 by central value"));
    CHECK_THAT(table.out, !Catch::Contains("runner-up"));
  }
  SECTION("without --interval nothing changes; with shards or --merge it is refused") {
    const vt::CmdResult plain = plan_cli(d, "--set training.micro_batch=32,16 --format csv");
    REQUIRE(plain.status == 0);
    CHECK_THAT(plain.out, !Catch::Contains("interval"));
    const vt::CmdResult shard = plan_cli(d, "--set training.micro_batch=32,16 --interval --shard 0/2");
    CHECK(shard.status == 2);
    CHECK_THAT(shard.out, Catch::Contains("not with --shard"));
    const vt::CmdResult merge = vt::vitsim(fmt::format("plan --merge '{}' --interval", d / "x.json"));
    CHECK(merge.status == 2);
    CHECK_THAT(merge.out, Catch::Contains("--interval: an interval is simulated"));
  }
}
