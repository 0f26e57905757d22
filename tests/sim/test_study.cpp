// The study's seven findings (docs/sources.md "The study", issue 3), each reproduced by the simulator
// from the shipped platform and scenario files alone, as golden-shape tests.
//
// Each test asserts the shape the finding describes, never a number copied from a run. Where a tolerance
// is needed it is derived in a comment from the model's arithmetic (the closed-form terms the simulator
// is built from) or from the words of the finding. The reference figures below are read from the
// platform files at run time, so that a what-if edit of a platform file moves the bound with it.
#include <catch2/catch.hpp>
#include <pugixml.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/report.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/model/memory.hpp"
#include "vitsim/core/model/vit.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/sim/predict.hpp"

namespace {

std::string src(const std::string& rel) {
  return std::string(VITSIM_SOURCE_DIR) + "/" + rel;
}

vitsim::Report predict(const std::string& scenario, const std::vector<std::string>& sets = {}) {
  vitsim::ScenarioFile f = vitsim::read_scenario_file(src("scenarios/study/" + scenario));
  for (const auto& s : sets) vitsim::apply_override(f, s);
  vitsim::sim::PredictOptions opt;
  opt.progress = false;
  return vitsim::sim::predict(f, opt);
}

// The point of a report with the given GPU count (and micro-batch, when several are swept).
const vitsim::ReportPoint& at(const vitsim::Report& r, int gpus, int micro_batch = 0) {
  for (const auto& p : r.points)
    if (p.gpus == gpus && (micro_batch == 0 || p.micro_batch == micro_batch)) return p;
  FAIL("report " << r.scenario << " has no point with " << gpus << " GPUs, micro-batch " << micro_batch);
  throw std::logic_error("unreachable");
}

double epoch(const vitsim::Report& r, int gpus) {
  return at(r, gpus).epoch_time_s;
}
double compute(const vitsim::Breakdown& b) {
  return b.compute_fwd + b.compute_bwd;
}

// Gradient bytes all-reduced per step: every vit_b_16 parameter (1000-class head kept) in `elem` bytes.
double gradient_bytes(int elem) {
  return static_cast<double>(vitsim::build_workload(vitsim::vit_preset("vit_b_16")).total_params()) * elem;
}

// A bandwidth attribute of a platform element, by id (a NIC <link> or a node's <cluster>).
double platform_bw(const std::string& platform, const std::string& id, const char* attr) {
  pugi::xml_document doc;
  REQUIRE(doc.load_file(src(platform).c_str()));
  pugi::xpath_node n = doc.select_node(("//*[@id='" + id + "']").c_str());
  REQUIRE(n);
  return vitsim::units::parse(n.node().attribute(attr).value(), vitsim::units::Kind::Bandwidth);
}

}  // namespace

// Finding 1: heterogeneous GPUs and links drag every rank down at the all-reduce barrier.
TEST_CASE("finding 1: on Tesla the slow card and the 1 GbE node make strong scaling worse",
          "[study][tesla]") {
  const vitsim::Report r = predict("tesla-strong-b16.xml");
  REQUIRE(r.points.size() == 5);
  // The node order the scenario documents: three RTX 3070s, then the P4, then the GTX 1070 on 1 GbE.
  const auto& p5 = at(r, 5);
  REQUIRE(p5.per_rank.size() == 5);
  CHECK(p5.per_rank[0].device == "RTX3070");
  CHECK(p5.per_rank[2].device == "RTX3070");
  CHECK(p5.per_rank[3].device == "P4");
  CHECK(p5.per_rank[4].device == "GTX1070");

  // Adding the P4 (4th GPU) and then tesla3 (5th) lengthens the epoch: strict inequalities, which is
  // what "worse, not better" says. The arithmetic leaves a margin: the P4 computes 20.3/5.5 = 3.7x
  // slower than a 3070, so with 4 GPUs every step lasts at least the P4's compute, and with N
  // micro-batches per epoch t3 = N/3 (c_3070 + ring_3), t4 >= N/4 c_P4, so
  // t4/t3 >= (3/4) * 3.7 c_3070 / (c_3070 + ring_3) > 1 as long as ring_3 < 1.77 c_3070 (the 10 GbE ring
  // of 3 moves 4/3 S / 1.25 GB/s = 370 ms against c_3070 = 257 ms of compute: 1.44).
  CHECK(epoch(r, 4) > epoch(r, 3));
  // The 5th GPU would save at most a fifth of the 4-GPU epoch (its compute share: ideally t5 = 4/5 t4);
  // it costs more than that saving exactly when t5 - 4/5 t4 > t4/5, i.e. when the epoch grows.
  CHECK(epoch(r, 5) > epoch(r, 4));

  // Why, 1: the barrier. At 4 GPUs the 3070 ranks wait at the all-reduce for the P4, so their exposed
  // communication is at least the difference in compute (same micro-batch, synchronous step).
  const auto& p4 = at(r, 4);
  const double c_p4 = compute(p4.per_rank[3].breakdown_s);
  for (int k = 0; k < 3; ++k) {
    const auto& fast = p4.per_rank[k].breakdown_s;
    CHECK(fast.comm_exposed >= c_p4 - compute(fast));
  }
  CHECK(p4.step_time_s.mean >= c_p4);

  // Why, 2: the ring runs at its slowest edge. With tesla3 in the ring, every one of the 2(n-1) ring
  // steps moves S/n bytes through tesla3's NIC, so the all-reduce takes at least 2(n-1)/n * S / B_1GbE
  // (docs/sources.md "Collectives", ring all-reduce). The bandwidth is read from the platform file.
  const double s = gradient_bytes(4);
  const double b_slow = platform_bw("platforms/tesla.xml", "tesla3-nic", "bandwidth");
  const double ring_bound = 2.0 * 4 / 5 * s / b_slow;
  for (const auto& rank : p5.per_rank) CHECK(rank.breakdown_s.comm_total >= ring_bound * (1 - 1e-6));
  CHECK(p5.bound == "exposed_comm");
}

// Finding 2: small batches pay a disproportionate synchronisation cost.
TEST_CASE("finding 2: micro-batch 16 scales worse than 64 on Vector", "[study][vector]") {
  const vitsim::Report b16 = predict("vector-strong-b16.xml");
  const vitsim::Report b64 = predict("vector-strong-b64.xml");
  const double e16 = at(b16, 8).scaling_efficiency, e64 = at(b64, 8).scaling_efficiency;
  REQUIRE(e16 > 0);
  REQUIRE(e64 > 0);
  // The all-reduce moves the same S bytes per step whatever the micro-batch, while compute scales with
  // it: with c = comm/compute at b64, the efficiency loss is about c/(1+c) at b64 and 4c/(1+4c) at b16,
  // a ratio 4(1+c)/(1+4c) that exceeds 2 while c < 1/2 (the all-reduce under half the b64 compute).
  // "Clearly lower" is read as: at least twice the loss, and at least 5 points of efficiency apart.
  CHECK(1 - e16 >= 2 * (1 - e64));
  CHECK(e64 - e16 >= 0.05);
  // The cause is the fixed-size all-reduce: same bytes, same time, at both micro-batches.
  CHECK(at(b16, 8).breakdown_s.comm_total == Approx(at(b64, 8).breakdown_s.comm_total).epsilon(1e-6));
}

// Finding 3: per-sample time improves up to 128 and flattens from 128 to 256.
TEST_CASE(
    "finding 3: on Nebula per-sample time improves to 128 then flattens, and compute saturation flattens it",
    "[study][nebula]") {
  const vitsim::Report r = predict("nebula-batch.xml");
  REQUIRE(r.points.size() == 10);
  for (int gpus : {1, 2}) {
    INFO(gpus << " GPU(s)");
    auto per_sample = [&](int b) {
      const auto& p = at(r, gpus, b);
      return p.step_time_s.mean / p.global_batch;
    };
    // Improves from 16 to 128, at every doubling.
    CHECK(per_sample(32) < per_sample(16));
    CHECK(per_sample(64) < per_sample(32));
    CHECK(per_sample(128) < per_sample(64));
    // Flattens. In the model a step costs b*c (per-sample compute, h2d, loading) plus F fixed per step
    // (kernel launches, the optimizer, the all-reduce), so per-sample time is c + F/(n b) and the gain of
    // a doubling from b is F/(2 n b): the 128->256 gain is 1/8 of the 16->32 gain. A factor 2 of margin
    // for terms that do not follow 1/b (a loader wait that grows with b would break it): below 1/4.
    const double gain_small = per_sample(16) - per_sample(32);
    const double gain_large = per_sample(128) - per_sample(256);
    CHECK(gain_large >= 0);
    CHECK(gain_large < gain_small / 4);

    // Which term flattens it: compute saturation. At 128 and 256 the step is compute-bound, the loader
    // never makes the GPU wait, and the host->device copy is a constant, negligible cost per sample
    // (602 KB per 224 px fp32 image over 25 GB/s PCIe Gen4 = 24 us against more than 1.2 ms of compute
    // per image on the A4500 in fp16, at most 2% of the step). So
    // per-sample time tends to per-sample compute, and what remains to amortise (optimizer, launches,
    // all-reduce) is a small and shrinking share.
    for (int b : {128, 256}) {
      const auto& p = at(r, gpus, b);
      const auto& bd = p.breakdown_s;
      INFO("micro-batch " << b);
      CHECK(p.bound == "compute");
      CHECK(bd.data == 0);
      CHECK(bd.h2d < 0.02 * p.step_time_s.mean);
      CHECK(compute(bd) > 0.9 * p.step_time_s.mean);
    }
    const auto& p128 = at(r, gpus, 128);
    const auto& p256 = at(r, gpus, 256);
    const double fixed128 = p128.breakdown_s.optimizer + p128.breakdown_s.comm_exposed;
    const double fixed256 = p256.breakdown_s.optimizer + p256.breakdown_s.comm_exposed;
    CHECK(fixed256 / p256.step_time_s.mean < fixed128 / p128.step_time_s.mean);
    // The h2d copy per sample does not change with the batch (it is linear in the batch).
    CHECK(p256.breakdown_s.h2d / 256 == Approx(p128.breakdown_s.h2d / 128).epsilon(0.01));
  }
}

TEST_CASE("nebula: the single partition's node predicts what one GPU of the dualcard node does",
          "[study][nebula]") {
  const vitsim::Report dual =
      predict("nebula-batch.xml", {"cluster.gpus_per_node=1", "training.micro_batch=64"});
  const vitsim::Report single = predict(
      "nebula-batch.xml", {"cluster.hosts=single", "cluster.gpus_per_node=1", "training.micro_batch=64"});
  REQUIRE(dual.points.size() == 1);
  REQUIRE(single.points.size() == 1);
  CHECK(single.points[0].per_rank[0].host == "single-gpu0");
  CHECK(single.points[0].epoch_time_s == Approx(dual.points[0].epoch_time_s).epsilon(1e-9));
}

// Finding 4: Vector strong scaling.
TEST_CASE("finding 4: Vector 1 -> 2 GPUs roughly halves the epoch, and it keeps decreasing to 8",
          "[study][vector]") {
  const vitsim::Report r = predict("vector-strong-b64.xml");
  REQUIRE(r.points.size() == 8);
  // Two GPUs run half the steps each (782 -> 391 micro-batches of 64), each step longer by the exposed
  // all-reduce, S/B for n = 2: the ratio is 0.5 * (1 + comm/compute) >= 0.5. "Roughly halves" is read as
  // at most 10% of a step lost to communication: ratio <= 0.55.
  const double ratio = epoch(r, 2) / epoch(r, 1);
  CHECK(ratio >= 0.5 * (1 - 1e-9));
  CHECK(ratio <= 0.55);
  for (int g = 2; g <= 8; ++g) {
    INFO(g << " GPUs");
    CHECK(epoch(r, g) < epoch(r, g - 1));
  }
}

// Finding 5: weak scaling.
TEST_CASE("finding 5: Vector weak scaling keeps the epoch time in a narrow band from 1 to 8 GPUs",
          "[study][vector]") {
  const vitsim::Report r = predict("vector-weak-b64.xml");
  REQUIRE(r.points.size() == 8);
  // Each GPU gets 10% of CIFAR-10 whatever the GPU count, so the steps per epoch are fixed; only the
  // all-reduce grows, and a ring costs at most 2 S / B per step (2(n-1)/n < 2) with B the slowest edge,
  // here the node's host-staged GPU<->GPU path (the backbone, read from the platform). So the band is at
  // most 1 + 2 S / (B * step_1). With the platform's figures that bound is about 7%; "narrow" is read as
  // at most 10%, which the bound must respect as well.
  const double s = gradient_bytes(4);
  const double b_node = platform_bw("platforms/vector.xml", "vec00", "bb_bw");
  const double bound = 1 + 2 * s / b_node / at(r, 1).step_time_s.mean;
  CHECK(bound <= 1.10);
  double lo = 1e300, hi = 0;
  for (const auto& p : r.points) {
    lo = std::min(lo, p.epoch_time_s);
    hi = std::max(hi, p.epoch_time_s);
    CHECK(p.steps_per_epoch == at(r, 1).steps_per_epoch);
  }
  CHECK(hi / lo <= bound);
}

// Finding 6: intra-node vs inter-node.
TEST_CASE("finding 6: 8 GPUs in one node and 1 GPU on each of 8 nodes give close epoch times",
          "[study][vector]") {
  const vitsim::Report intra = predict("vector-intranode-cifar100-b64.xml");
  const vitsim::Report inter = predict("vector-internode-b64.xml");
  const auto& a = at(intra, 8);
  const auto& b = at(inter, 8);
  CHECK(a.nodes == 1);
  CHECK(b.nodes == 8);
  // The two runs differ only in the links of the ring (host-staged PCIe path vs NICs); compute, data
  // and steps are identical, so the difference is the all-reduce's: at most the whole all-reduce,
  // 2(n-1)/n S / B_slowest. "No significant difference" is read as within 5% of the epoch, which needs an
  // inter-node path about as fast as the host-staged one inside a node (4 GB/s). Vector's network is not
  // reported: the shipped assumption (25 GbE, NCCL sockets at their 1 thread x 1 socket default, socket-
  // limited to 2 GB/s; platforms/vector.xml) predicts a gap of about 7%, so the finding is checked with
  // the NIC what-if the platform names (4 socket threads: the framing limit, 2.94 GB/s), and the shipped
  // assumption is checked to stay within the bound of the whole all-reduce.
  CHECK(compute(a.breakdown_s) == Approx(compute(b.breakdown_s)).epsilon(1e-9));
  CHECK(a.steps_per_epoch == b.steps_per_epoch);
  const double allreduce_share =
      std::max(a.breakdown_s.comm_total, b.breakdown_s.comm_total) / b.step_time_s.mean;
  CHECK(std::abs(b.epoch_time_s - a.epoch_time_s) / a.epoch_time_s < allreduce_share);
  const vitsim::Report faster =
      predict("vector-internode-b64.xml", {"whatif.edits=zone:nccl_socket_nthreads=4"});
  CHECK(std::abs(at(faster, 8).epoch_time_s - a.epoch_time_s) / a.epoch_time_s < 0.05);
  // And the inter-node curve keeps scaling out to 32 nodes.
  CHECK(epoch(inter, 32) < epoch(inter, 16));
  CHECK(epoch(inter, 16) < epoch(inter, 8));
}

// Finding 7 (memory, as issue 3 states it).
TEST_CASE(
    "finding 7: micro-batch 64 fits a 16 GB T4 in fp32 and 128 does not, and Nebula's fp16 batches fit 20 GB",
    "[study][memory]") {
  // One GPU is enough: data parallelism without ZeRO keeps everything on every GPU.
  const vitsim::Report t4 =
      predict("vector-strong-b64.xml", {"cluster.gpus_per_node=1", "training.micro_batch=64,128"});
  REQUIRE(t4.points.size() == 2);
  const vitsim::PlatformFacts vector = vitsim::read_platform_facts(src("platforms/vector.xml"));
  const double t4_mem = vector.gpu.at("vec00-gpu0").mem_bytes;
  const auto& m64 = at(t4, 1, 64);
  const auto& m128 = at(t4, 1, 128);
  CHECK(m64.fits_in_memory);
  CHECK(m64.memory_per_gpu_bytes < t4_mem);
  CHECK_FALSE(m128.fits_in_memory);
  CHECK(m128.memory_per_gpu_bytes > t4_mem);
  // Activations are what grows: they are linear in the batch, the rest does not move.
  CHECK(m128.memory.activations == Approx(2 * m64.memory.activations).epsilon(1e-9));
  CHECK(m128.memory_per_gpu_bytes - m128.memory.activations ==
        Approx(m64.memory_per_gpu_bytes - m64.memory.activations).epsilon(1e-9));

  const vitsim::Report nebula = predict("nebula-batch.xml");
  const vitsim::PlatformFacts neb = vitsim::read_platform_facts(src("platforms/nebula.xml"));
  const double a4500_mem = neb.gpu.at("dualcard-gpu0").mem_bytes;
  for (const auto& p : nebula.points) {
    INFO(p.gpus << " GPU(s), micro-batch " << p.micro_batch);
    CHECK(p.fits_in_memory);
    CHECK(p.memory_per_gpu_bytes < a4500_mem);
  }
}

TEST_CASE("study scenarios: every shipped one predicts in a few seconds", "[study]") {
  for (const char* name : {"vector-strong-b64.xml", "vector-strong-b16.xml", "vector-weak-b64.xml",
                           "vector-internode-b64.xml", "vector-intranode-cifar100-b64.xml",
                           "nebula-batch.xml", "tesla-strong-b16.xml", "tesla-weak-b16.xml"}) {
    INFO(name);
    const auto t0 = std::chrono::steady_clock::now();
    const vitsim::Report r = predict(name);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(!r.points.empty());
    // Each point simulates 20 steps of at most 32 ranks; a few seconds is the requirement.
    CHECK(wall < 5.0);
  }
}

TEST_CASE("study platforms: each XML is what its spec generates, with the study's GPUs and links",
          "[study][platform]") {
  // The XML and its spec must not drift apart: a what-if edited in one is lost when the other regenerates.
  for (const char* name : {"vector", "nebula", "tesla"}) {
    INFO(name);
    const std::string cmd = std::string("cd '") + VITSIM_SOURCE_DIR + "' && '" + VITSIM_BINARY +
                            "' platform platforms/specs/" + name + ".json";
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p);
    std::string generated;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) generated.append(buf, n);
    REQUIRE(pclose(p) == 0);
    std::ifstream in(src(std::string("platforms/") + name + ".xml"));
    const std::string shipped((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(generated == shipped);
  }
  const vitsim::PlatformFacts tesla = vitsim::read_platform_facts(src("platforms/tesla.xml"));
  const std::map<std::string, std::string> model{{"tesla0", "P4"},
                                                 {"tesla1", "RTX3070"},
                                                 {"tesla2", "RTX3070"},
                                                 {"tesla3", "GTX1070"},
                                                 {"tesla4", "RTX3070"}};
  REQUIRE(tesla.nodes.size() == 5);
  for (const auto& node : tesla.nodes) {
    INFO(node.name);
    REQUIRE(node.gpus.size() == 1);
    CHECK(tesla.gpu.at(node.gpus[0]).model == model.at(node.name));
    // NICs as NCCL detected them: 10 GbE, except tesla3 on 1 GbE.
    CHECK(platform_bw("platforms/tesla.xml", node.name + "-nic", "bandwidth") ==
          (node.name == "tesla3" ? 0.125e9 : 1.25e9));
  }
  // GPUs without fast fp16 compute fp16 at their fp32 rate.
  CHECK(tesla.gpu.at("tesla0-gpu0").flops_fp16 == tesla.gpu.at("tesla0-gpu0").flops_fp32);
  CHECK(tesla.gpu.at("tesla3-gpu0").flops_fp16 == tesla.gpu.at("tesla3-gpu0").flops_fp32);
  const vitsim::PlatformFacts nebula = vitsim::read_platform_facts(src("platforms/nebula.xml"));
  REQUIRE(nebula.nodes.size() == 2);
  CHECK(nebula.node("single").gpus.size() == 1);
  CHECK(nebula.node("dualcard").gpus.size() == 2);
}
