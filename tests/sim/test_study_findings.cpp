// The study's findings (the seed, "4. Risultati Principali"; REFERENCE.md section 1), one test each, on the
// shipped study platforms and scenarios through the simulator. Each test quotes the finding (the seed's
// Italian, then English) and reads it as the seed states it: where a shipped assumption contradicted a
// finding, the assumption was replaced (docs/sources.md "Inferred from the findings"), never the reading.
//
// Tolerances come from the finding's words, read once for the whole file:
// - "roughly halves", "roughly flat", "no significant difference", "plateau": within 10% (a change a
//   reader of an epoch time would not call significant; 5% where the study compares two layouts of the
//   same GPUs, finding 6);
// - "poor scaling": at least twice the loss that "roughly halves" allows, i.e. at least 20% of the
//   ideal speed-up lost.
// The study's measured times are never used: they are the blind test (docs/study.md).
//
// Finding 7 (accuracy: "L'accuratezza tende a migliorare con l'aumento del batch size fino a un certo
// punto, per poi declinare", accuracy improves with the batch size up to a point, then declines) is not
// a performance quantity: the simulator has nothing to say about it; the real trainer measures accuracy.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include "study_util.hpp"
#include "vitsim/core/platform/platform_props.hpp"
#include "vitsim/core/results/report.hpp"
#include "vitsim/sim/compute/compute_model.hpp"

using study::at;
using study::compute;
using study::epoch;
using study::gradient_bytes;
using study::platform_bw;
using study::predict;

namespace {

// Per-sample step time of a point: the step over the global batch it trains.
double per_sample(const vitsim::Report& r, int gpus, int micro_batch) {
  const auto& p = at(r, gpus, micro_batch);
  return p.step_time_s.mean / p.global_batch;
}

// The share of a point's step the ranks spend in communication nobody overlaps: the synchronisation cost.
double sync_share(const vitsim::ReportPoint& p) {
  return p.breakdown_s.comm_exposed / p.step_time_s.mean;
}

}  // namespace

// Finding 1. "L'addestramento inter-nodo su cluster con GPU eterogenee (Tesla) ha mostrato risultati non
// ottimali. La presenza di GPU più lente ha creato colli di bottiglia durante la fase di sincronizzazione
// (AllReduce), aumentando i tempi di addestramento e riducendo l'efficienza di scalabilità."
// Inter-node training on the heterogeneous Tesla cluster gave sub-optimal results: the slower GPUs created
// bottlenecks in the synchronisation phase (AllReduce), increasing training time and reducing scaling
// efficiency.
TEST_CASE("finding 1: on Tesla the slower GPUs lengthen the epoch and cut efficiency at the AllReduce",
          "[study][finding][tesla]") {
  const vitsim::Report r = predict("tesla-strong-b16.xml");
  REQUIRE(r.points.size() == 5);
  // The node order the scenario documents: three RTX 3070s, then the P4, then the GTX 1070 on 1 GbE.
  const auto& p5 = at(r, 5);
  REQUIRE(p5.per_rank.size() == 5);
  CHECK(p5.per_rank[0].device == "RTX3070");
  CHECK(p5.per_rank[2].device == "RTX3070");
  CHECK(p5.per_rank[3].device == "P4");
  CHECK(p5.per_rank[4].device == "GTX1070");

  // "aumentando i tempi di addestramento": each slower node added lengthens the epoch (the P4 computes
  // 20.3/5.5 = 3.7x slower than a 3070, so every 4-GPU step lasts at least its compute).
  CHECK(epoch(r, 4) > epoch(r, 3));
  CHECK(epoch(r, 5) > epoch(r, 4));
  // "riducendo l'efficienza di scalabilità": and the scaling efficiency falls with each.
  CHECK(at(r, 4).scaling_efficiency < at(r, 3).scaling_efficiency);
  CHECK(at(r, 5).scaling_efficiency < at(r, 4).scaling_efficiency);

  // "durante la fase di sincronizzazione (AllReduce)": the cost shows at the all-reduce. At 4 GPUs the
  // 3070 ranks wait there for the P4, so their exposed communication is at least the compute difference.
  const auto& p4 = at(r, 4);
  const double c_p4 = compute(p4.per_rank[3].breakdown_s);
  for (int k = 0; k < 3; ++k) {
    const auto& fast = p4.per_rank[k].breakdown_s;
    CHECK(fast.comm_exposed >= c_p4 - compute(fast));
  }
  CHECK(p4.step_time_s.mean >= c_p4);
  // With tesla3 the ring runs at its slowest edge: each of the 2(n-1) ring steps moves S/n through its
  // 1 GbE NIC, so the all-reduce takes at least 2(n-1)/n S / B (B read from the platform file).
  const double ring_bound =
      2.0 * 4 / 5 * gradient_bytes(4) / platform_bw("platforms/tesla.xml", "tesla3-nic", "bandwidth");
  for (const auto& rank : p5.per_rank) CHECK(rank.breakdown_s.comm_total >= ring_bound * (1 - 1e-6));
  CHECK(p5.bound == "exposed_comm");
}

// Finding 2, on the experiment the seed states it for. "Batch size piccoli (es. 16) hanno generato costi
// di sincronizzazione sproporzionatamente alti, portando a una scarsa scalabilità. L'aumento del batch
// size ha ridotto significativamente l'overhead di comunicazione." (Cluster Nebula.)
// Small batches (e.g. 16) brought disproportionately high synchronisation costs, leading to poor scaling.
// Increasing the batch size significantly reduced the communication overhead.
TEST_CASE(
    "finding 2: on Nebula micro-batch 16 pays a disproportionate synchronisation cost and scales poorly",
    "[study][finding][nebula]") {
  const vitsim::Report r = predict("nebula-batch.xml");
  REQUIRE(r.points.size() == 10);
  const auto& p16 = at(r, 2, 16);
  INFO("efficiency at 16 on 2 GPUs " << p16.scaling_efficiency << ", sync share " << sync_share(p16));
  // "scarsa scalabilità": at least 20% of the second GPU's ideal speed-up lost (file header).
  CHECK(p16.scaling_efficiency <= 0.80);
  // "costi di sincronizzazione sproporzionatamente alti": the synchronisation is what loses it. The
  // 2-GPU step is the 1-GPU step plus the exposed all-reduce and the DeepSpeed step's bucket work
  // (flatten, average, copy-back: a few ms, docs/study.md), so the exposed all-reduce is at least 90% of
  // the step's growth; with the 20% loss above, that is at least 18% of the step.
  const double growth = p16.step_time_s.mean - at(r, 1, 16).step_time_s.mean;
  CHECK(p16.breakdown_s.comm_exposed >= 0.9 * growth);
  CHECK(sync_share(p16) >= 0.18);
  // "L'aumento del batch size ha ridotto significativamente l'overhead": the share at least halves by
  // 128, and the efficiency rises at every doubling.
  CHECK(sync_share(at(r, 2, 128)) <= sync_share(p16) / 2);
  for (int b : {32, 64, 128, 256}) {
    INFO("micro-batch " << b);
    CHECK(at(r, 2, b).scaling_efficiency > at(r, 2, b / 2).scaling_efficiency);
  }
  // The mechanism: the all-reduce moves the same fp16 gradients whatever the micro-batch.
  CHECK(at(r, 2, 256).breakdown_s.comm_total == Approx(p16.breakdown_s.comm_total).epsilon(1e-6));
}

// Finding 2 decides Nebula's GPU-to-GPU path: the public-evidence alternative (peer-to-peer over PCIe
// Gen4, the shipped what-if scenarios/whatif/nebula-p2p.xml) contradicts it, which is why it is a what-if.
TEST_CASE("finding 2: Nebula's peer-to-peer what-if contradicts it, host-memory staging reproduces it",
          "[study][finding][nebula][whatif]") {
  const vitsim::Report p2p =
      study::predict_file("whatif/nebula-p2p.xml", {"cluster.gpus_per_node=1,2", "training.micro_batch=16"});
  REQUIRE(p2p.points.size() == 2);
  CHECK(at(p2p, 2, 16).scaling_efficiency > 0.80);
  // The shipped staging figure is inside the public range of host-staged NCCL, 3-9 GB/s; the finding
  // holds at the range's upper end too (a backbone what-if on the shipped platform).
  const vitsim::Report fast_staging =
      predict("nebula-batch.xml", {"cluster.gpus_per_node=1,2", "training.micro_batch=16",
                                   "whatif.edits=prop:dualcard:staging_bw=9GBps"});
  CHECK(at(fast_staging, 2, 16).scaling_efficiency <= 0.80);
}

// Finding 2 on Vector's micro-batch 16 experiment (the same finding; the study ran Vector at 16 and 64).
TEST_CASE("finding 2: on Vector micro-batch 16 scales worse than 64", "[study][finding][vector]") {
  const vitsim::Report b16 = predict("vector-strong-b16.xml");
  const vitsim::Report b64 = predict("vector-strong-b64.xml");
  const double e16 = at(b16, 8).scaling_efficiency, e64 = at(b64, 8).scaling_efficiency;
  // The all-reduce moves the same S bytes per step whatever the micro-batch while compute scales with it:
  // with c = comm/compute at 64 the loss is about c/(1+c) at 64 and 4c/(1+4c) at 16, a ratio over 2 while
  // c < 1/2. "Scarsa scalabilità": at 8 GPUs at least 20% lost, twice the loss at 64 at least.
  CHECK(e16 <= 0.80);
  CHECK(1 - e16 >= 2 * (1 - e64));
  CHECK(at(b16, 8).breakdown_s.comm_total == Approx(at(b64, 8).breakdown_s.comm_total).epsilon(1e-6));
}

// Finding 3. "È stato identificato un punto di equilibrio ottimale tra batch size 64 e 128, che massimizza
// l'efficienza senza saturare la memoria o introdurre nuovi colli di bottiglia nel caricamento dei dati.
// Batch size eccessivamente grandi (es. 256) hanno mostrato un plateau nelle prestazioni, probabilmente a
// causa dell'overhead nel trasferimento dati CPU-GPU." (Cluster Nebula.)
// An optimal balance point was found between batch size 64 and 128, maximising efficiency without
// saturating memory or introducing new data-loading bottlenecks. Excessively large batches (e.g. 256)
// showed a performance plateau, probably due to the CPU-GPU data transfer overhead.
TEST_CASE("finding 3: on Nebula 64-128 is the sweet spot and 256 plateaus", "[study][finding][nebula]") {
  const vitsim::Report r = predict("nebula-batch.xml");
  REQUIRE(r.points.size() == 10);
  for (int gpus : {1, 2}) {
    INFO(gpus << " GPU(s)");
    // Up to the sweet spot, each doubling gains, and 16 -> 64 gains more than 10%.
    CHECK(per_sample(r, gpus, 32) < per_sample(r, gpus, 16));
    CHECK(per_sample(r, gpus, 64) < per_sample(r, gpus, 32));
    CHECK(per_sample(r, gpus, 128) < per_sample(r, gpus, 64));
    CHECK(per_sample(r, gpus, 64) < 0.9 * per_sample(r, gpus, 16));
    // "un plateau": 128 -> 256 gains under 10%, and under a quarter of what 16 -> 32 gains (a step costs
    // b c per sample plus F fixed, so a doubling from b gains F / 2b: 1/8 as much at 128 as at 16).
    const double gain_small = per_sample(r, gpus, 16) - per_sample(r, gpus, 32);
    const double gain_large = per_sample(r, gpus, 128) - per_sample(r, gpus, 256);
    CHECK(gain_large >= 0);
    CHECK(gain_large < 0.10 * per_sample(r, gpus, 128));
    CHECK(gain_large < gain_small / 4);
    // "senza saturare la memoria o introdurre nuovi colli di bottiglia nel caricamento": at 64 and 128
    // the batch fits and the loader never makes the GPU wait.
    for (int b : {64, 128}) {
      INFO("micro-batch " << b);
      CHECK(at(r, gpus, b).fits_in_memory);
      CHECK(at(r, gpus, b).breakdown_s.data == 0);
    }
    // What flattens it in the model: fixed per-step costs (the DeepSpeed fp16 step, the all-reduce)
    // amortised over the batch, a shrinking share of the step; the host->device copy is linear in the
    // batch (602 KB per image over 25 GB/s, 24 us) and under 2% of the step. The study's "probabilmente"
    // (CPU-GPU transfers) is not what the model finds (docs/study.md).
    const auto& p128 = at(r, gpus, 128);
    const auto& p256 = at(r, gpus, 256);
    const double fixed128 = p128.breakdown_s.optimizer + p128.breakdown_s.comm_exposed;
    const double fixed256 = p256.breakdown_s.optimizer + p256.breakdown_s.comm_exposed;
    CHECK(fixed256 / p256.step_time_s.mean < fixed128 / p128.step_time_s.mean);
    CHECK(p256.breakdown_s.h2d < 0.02 * p256.step_time_s.mean);
    CHECK(p256.breakdown_s.h2d / 256 == Approx(p128.breakdown_s.h2d / 128).epsilon(0.01));
  }
}

// Finding 4. "Strong Scaling: Su CIFAR-10, l'aggiunta di risorse ha ridotto il tempo di addestramento
// quasi della metà passando da 1 a 2 GPU, con una tendenza decrescente costante." (Cluster Vector.)
// On CIFAR-10, adding resources nearly halved the training time from 1 to 2 GPUs, with a steady
// decreasing trend.
TEST_CASE("finding 4: Vector 1 -> 2 GPUs nearly halves the epoch, and it keeps decreasing to 8",
          "[study][finding][vector]") {
  const vitsim::Report r = predict("vector-strong-b64.xml");
  REQUIRE(r.points.size() == 8);
  // Two GPUs run half the steps each, each longer by the exposed all-reduce: the ratio is
  // 0.5 (1 + comm/step) >= 0.5; "quasi della metà": within 10% of half, ratio <= 0.55.
  const double ratio = epoch(r, 2) / epoch(r, 1);
  CHECK(ratio >= 0.5 * (1 - 1e-9));
  CHECK(ratio <= 0.55);
  for (int g = 2; g <= 8; ++g) {
    INFO(g << " GPUs");
    CHECK(epoch(r, g) < epoch(r, g - 1));
  }
}

// Finding 5. "Weak Scaling: I tempi di addestramento sono rimasti costanti all'aumentare delle GPU,
// confermando la corretta distribuzione del carico." (Cluster Vector.)
// Training times stayed constant as GPUs were added, confirming the load was distributed correctly.
TEST_CASE("finding 5: Vector weak scaling keeps the epoch time constant from 1 to 8 GPUs",
          "[study][finding][vector]") {
  const vitsim::Report r = predict("vector-weak-b64.xml");
  REQUIRE(r.points.size() == 8);
  double lo = 1e300, hi = 0;
  for (const auto& p : r.points) {
    lo = std::min(lo, p.epoch_time_s);
    hi = std::max(hi, p.epoch_time_s);
    CHECK(p.steps_per_epoch == at(r, 1).steps_per_epoch);
  }
  // "rimasti costanti": within 10%.
  CHECK(hi / lo <= 1.10);
  // Why: only the all-reduce and the wait for the slowest rank grow. A ring costs at most 2 S / B per step
  // (B the node's host-staged GPU path, read from the platform); the straggler wait on 8 ranks is
  // gpu_step_cv (vector.xml states none: the property's default) x forward + backward x E[max of 8 normals]
  // (docs/model.md "Stragglers"). The ring's bound alone is under 10% (9.1%); with the straggler wait the
  // bound is 10.5%, so the finding rests on the simulated times (hi / lo above), not on the bound.
  const vitsim::Breakdown& one = at(r, 1).breakdown_s;
  const double straggler = vitsim::sim::straggler_wait_s(vitsim::platform_prop("gpu_step_cv").default_value,
                                                         one.compute_fwd + one.compute_bwd, 8);
  const double bound =
      1 + (2 * gradient_bytes(4) / platform_bw("platforms/vector.xml", "vec00", "bb_bw") + straggler) /
              at(r, 1).step_time_s.mean;
  CHECK(1 + 2 * gradient_bytes(4) / platform_bw("platforms/vector.xml", "vec00", "bb_bw") /
                at(r, 1).step_time_s.mean <=
        1.10);
  CHECK(hi / lo <= bound);
}

// Finding 6. "Confronto Intra vs Inter-nodo: Non sono state rilevate differenze significative nelle
// prestazioni di strong scaling tra l'uso di più GPU su un singolo nodo e l'uso di una GPU per nodo su più
// nodi (fino a 32 nodi), suggerendo che l'overhead di rete non è stato un fattore limitante in questa
// configurazione specifica." (Cluster Vector.)
// No significant difference in strong-scaling performance between several GPUs in one node and one GPU
// per node on several nodes (up to 32 nodes), suggesting that network overhead was not a limiting factor.
TEST_CASE("finding 6: on Vector several GPUs of one node and one GPU per node scale alike up to 32 nodes",
          "[study][finding][vector]") {
  const vitsim::Report intra = predict("vector-intranode-cifar100-b64.xml");
  const vitsim::Report inter = predict("vector-internode-b64.xml");
  // "nessuna differenza significativa": within 5% at every GPU count both layouts run (2 to 8).
  for (int n = 2; n <= 8; ++n) {
    INFO(n << " GPUs");
    const auto& a = at(intra, n);
    const auto& b = at(inter, n);
    CHECK(a.nodes == 1);
    CHECK(b.nodes == n);
    CHECK(compute(a.breakdown_s) == Approx(compute(b.breakdown_s)).epsilon(1e-9));
    CHECK(a.steps_per_epoch == b.steps_per_epoch);
    CHECK(std::abs(b.epoch_time_s - a.epoch_time_s) / a.epoch_time_s < 0.05);
  }
  // "fino a 32 nodi": out to 32 nodes the inter-node curve keeps falling and scales within 5 points of
  // the intra-node curve's efficiency at its largest point (8 GPUs).
  CHECK(epoch(inter, 32) < epoch(inter, 16));
  CHECK(epoch(inter, 16) < epoch(inter, 8));
  CHECK(at(inter, 32).scaling_efficiency >= at(intra, 8).scaling_efficiency - 0.05);
  // "l'overhead di rete non è stato un fattore limitante": the all-reduce over 8 nodes costs what it
  // costs inside one node, within 5%.
  CHECK(at(inter, 8).breakdown_s.comm_total <= 1.05 * at(intra, 8).breakdown_s.comm_total);
}

// Finding 6 and Vector's socket what-ifs (scenarios/whatif/vector-25gbe.xml). Issue 36: NCCL opens its
// sockets per channel and runs 2 channels over a 25 GbE NIC (nccl_net_connections), 2 x 2 GB/s > 2.94 GB/s
// after framing: the 25 GbE path is framing-bound and agrees with the finding (within 5%); at 10 GbE
// (1.18 GB/s, below the node's staged 4 GB/s) the NIC is the slowest edge and contradicts it.
TEST_CASE("finding 6: Vector's 25 GbE socket what-if agrees with it, 10 GbE contradicts it",
          "[study][finding][vector][whatif]") {
  const vitsim::Report intra = predict("vector-intranode-cifar100-b64.xml", {"cluster.gpus_per_node=8"});
  const vitsim::Report tcp = study::predict_file("whatif/vector-25gbe.xml", {"cluster.nodes=8"});
  CHECK(std::abs(at(tcp, 8).epoch_time_s - at(intra, 8).epoch_time_s) / at(intra, 8).epoch_time_s < 0.05);
  const vitsim::Report ten = study::predict_file(
      "whatif/vector-25gbe.xml",
      {"cluster.nodes=8", "whatif.edits=zone:transport=tcp;link:vec*-nic:bandwidth=10Gbps"});
  CHECK(std::abs(at(ten, 8).epoch_time_s - at(intra, 8).epoch_time_s) / at(intra, 8).epoch_time_s > 0.05);
}
