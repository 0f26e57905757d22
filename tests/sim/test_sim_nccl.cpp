// The "auto" collective (the default) (sim/src/collectives/collective_nccl.cpp): NCCL's choice per call
// (core's nccl_choose), run as the closest simulated algorithm with the protocol's wire bytes; each
// simulation in its own process.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>

#include <simgrid/s4u.hpp>

#include "test_util.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/model/nccl_tuning.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/platform/platform_writer.hpp"
#include "vitsim/core/results/report.hpp"
#include "vitsim/sim/collectives/collective.hpp"
#include "vitsim/sim/point/simulate.hpp"
#include "vitsim/sim/predict/predict.hpp"

namespace sg4 = simgrid::s4u;
using namespace vitsim;
using namespace vitsim::sim;

namespace {

// One node of `gpus` H100-SXM GPUs (the catalogue's: Hopper, NVLink 4 at 450 GB/s, so NCCL sees an NVSwitch
// node with 18 NVLinks per GPU and NVLS) on the test platform's links: a private link of B = 10 GB/s and 1 us
// per GPU, a backbone that never limits; a route between two GPUs is a = 2 us.
// With several nodes, each node's NIC link is 50 GB/s (NCCL: one 400 Gb/s NIC per node).
std::string h100_node(int gpus, int nodes = 1, const std::string& link = "10GBps") {
  std::string x = vt::platform_xml(nodes, gpus, link, "1us", std::vector<std::string>(nodes, "50GBps"),
                                   std::vector<std::string>(nodes, "1Tf"));
  const std::string from = "value=\"G1Tf\"";
  for (size_t at = x.find(from); at != std::string::npos; at = x.find(from))
    x.replace(at, from.size(), "value=\"H100-SXM\"");
  // NCCL's view from the catalogue's entry, not the test GPU's stated one.
  const std::string stated = vt::kTestGpuNcclProps;
  for (size_t at = x.find(stated); at != std::string::npos; at = x.find(stated)) x.erase(at, stated.size());
  return x;
}

// What NCCL sees on that node (collective_nccl.cpp group_platform): no NIC stated, one at 25 GB/s.
NcclPlatform h100_nccl_platform(int gpus, int nodes = 1) {
  NcclPlatform p;
  p.nodes = nodes;
  p.gpus_per_node = gpus;
  p.sm = 90;
  p.intra = NcclIntra::NvSwitch;
  p.nvlinks_per_gpu = 18;
  p.pcie_bw = 48;  // PCIe Gen5 x16 as NCCL rates it
  p.nics_per_node = 1;
  p.nic_bw = nodes > 1 ? 50 : 25;
  p.nvls = true;
  return p;
}

// Runs the "auto" collective once over every GPU of `platform` (one node), configured with `ctx`'s nccl.*
// settings (ranks node-major); returns {time, 1 when the point's note names `expect` (else 0)}.
std::vector<double> run_nccl(const std::string& platform, CollectiveContext ctx, double bytes, CollOp op,
                             const std::string& expect, const std::string& algo = "auto") {
  return vt::in_child_vector([&] {
    const PlatformFacts facts = read_platform_facts(platform);
    ctx.facts = &facts;
    int argc = 2;
    char a0[] = "t", a1[] = "--log=root.thres:critical";
    char* argv[] = {a0, a1, nullptr};
    sg4::Engine e(&argc, argv);
    configure_engine(e);
    e.load_platform(platform);
    auto hosts = e.get_all_hosts();
    auto node = [](sg4::Host* h) { return std::stoi(h->get_name().substr(1, h->get_name().find('-') - 1)); };
    auto gpu = [](sg4::Host* h) { return std::stoi(h->get_name().substr(h->get_name().rfind('u') + 1)); };
    std::sort(hosts.begin(), hosts.end(),
              [&](auto* x, auto* y) { return std::pair(node(x), gpu(x)) < std::pair(node(y), gpu(y)); });
    std::vector<int> nodes;
    for (auto* h : hosts) nodes.push_back(node(h));
    LatencyModel lat(e);
    Group g("g", hosts, nodes, lat);
    auto coll = make_collective(algo);
    coll->configure(ctx);
    double end = 0;
    for (int i = 0; i < g.size(); ++i)
      sg4::Actor::create("r" + std::to_string(i), hosts[i], [&, i] {
        coll->run(g, i, bytes, op);
        end = std::max(end, sg4::Engine::get_clock());
      });
    e.run();
    std::vector<std::string> notes;  // the calls' notes, without the line on the NICs NCCL's model saw
    for (const auto& n : coll->run_notes())
      if (n.rfind("NCCL's model sees", 0) != 0) notes.push_back(n);
    const bool named = notes.size() == 1 && notes[0].find(expect) != std::string::npos;
    if (!named)
      for (const auto& n : notes) UNSCOPED_INFO("note: " << n);
    return std::vector<double>{end, named ? 1.0 : 0.0};
  });
}

// The closed form of the simulated algorithm that stands for NCCL's choice, on one node of n GPUs with
// private links B: NCCL's latency term L (c.latency_us: the routes' own latencies are not counted), then the
// transfers of the protocol's wire bytes W = S / payload fraction:
//   ring (Ring, PAT), all-reduce: L + 2(n-1)/n W/B; reduce-scatter, all-gather: L + (n-1)/n W/B;
//   NVLS all-reduce (the switch reduces: each GPU moves W each way): L + W/B; its gathers as the ring's;
//   tree (one node: a chain per tree, two trees each with half of W): L + 2 W/B (n >= 3);
// and under LL, LL128 or NVLS no less than NCCL's own estimate c.time_us (NCCL's rating bounds them,
// collective_nccl.cpp's head comment).
double closed_form(const NcclChoice& c, int n, double S, CollOp op, double B) {
  const double W = S / nccl_payload_fraction(c.proto), L = c.latency_us * 1e-6;
  double t = 0;
  if (c.algo == NcclAlgo::Tree)
    t = L + 2 * W / B;
  else if (c.algo == NcclAlgo::Nvls && op == CollOp::AllReduce)
    t = L + W / B;
  else
    t = L + (op == CollOp::AllReduce ? 1.0 : 0.5) * 2.0 * (n - 1) / n * W / B;
  const bool rated = c.proto != NcclProto::Simple || c.algo == NcclAlgo::Nvls;
  return rated ? std::max(t, c.time_us * 1e-6) : t;
}

std::string choice_text(const NcclChoice& c) {
  return std::string(nccl_algo_name(c.algo)) + "/" + nccl_proto_name(c.proto) + ", " +
         std::to_string(c.n_channels) + (c.n_channels == 1 ? " channel" : " channels");
}

}  // namespace

TEST_CASE(
    "auto runs NCCL's choice as its closest algorithm with the protocol's wire bytes and NCCL's latency",
    "[collective][nccl]") {
  const int n = 8;
  vt::TempDir d;
  // 10 GB/s links: the transfers decide; 500 GB/s (the backbone, 1000 GB/s, still never limits): NCCL's
  // rating decides where it bounds (LL, LL128, NVLS) and is slower than the links.
  for (double B : {10e9, 500e9}) {
    const std::string p = d.file("h100.xml", h100_node(n, 1, B > 1e11 ? "500GBps" : "10GBps"));
    for (const char* version : {"2.18", "2.27"})
      for (CollOp op : {CollOp::AllReduce, CollOp::ReduceScatter, CollOp::AllGather})
        for (double S : {4096.0, 256.0 * 1024, 64.0 * 1024 * 1024}) {
          const NcclVersion& v = nccl_version(version);
          const NcclFunc f = op == CollOp::AllReduce       ? NcclFunc::AllReduce
                             : op == CollOp::ReduceScatter ? NcclFunc::ReduceScatter
                                                           : NcclFunc::AllGather;
          const NcclChoice c =
              nccl_choose(f, static_cast<std::uint64_t>(S), nccl_topo(h100_nccl_platform(n), v), v);
          const double t = closed_form(c, n, S, op, B);
          INFO("B " << B << ", NCCL " << version << " " << coll_op_name(op) << " " << S << " B: " << c.why());
          const std::vector<double> r = run_nccl(p, {nullptr, version, "", ""}, S, op, choice_text(c));
          REQUIRE(r.size() == 2);
          CHECK(r[0] == Approx(t).epsilon(1e-6));
          CHECK(r[1] == 1.0);
          if (B > 1e11 && (c.proto != NcclProto::Simple || c.algo == NcclAlgo::Nvls) &&
              c.time_us * 1e-6 > t * (1 - 1e-9)) {
            // NCCL's rating, not the links, decided, and the note says so.
            CHECK(r[0] == Approx(c.time_us * 1e-6).epsilon(1e-6));
            const std::vector<double> named =
                run_nccl(p, {nullptr, version, "", ""}, S, op, "bound by NCCL's rated");
            CHECK(named[1] == 1.0);
          }
        }
  }
}

TEST_CASE("auto with nccl.algo=ring and nccl.proto=simple is the ring's transfers after NCCL's latency",
          "[collective][nccl]") {
  vt::TempDir d;
  const std::string p = d.file("h100.xml", h100_node(8));
  const double a = 2e-6;  // the test platform's route latency between two GPUs (h100_node)
  for (double S : {4096.0, 64.0 * 1024 * 1024}) {
    const NcclVersion& v = nccl_newest_version();
    // `ring`: 2(n-1) a + its transfers; auto's forced Ring/Simple: NCCL's latency + the same transfers.
    const double transfers = run_nccl(p, {}, S, CollOp::AllReduce, "", "ring").at(0) - 2 * 7 * a;
    const NcclChoice simple = nccl_choose(NcclFunc::AllReduce, static_cast<std::uint64_t>(S),
                                          nccl_topo(h100_nccl_platform(8), v), v, {"ring", "simple"});
    const std::vector<double> r =
        run_nccl(p, {nullptr, "", "ring", "simple"}, S, CollOp::AllReduce, "Ring/Simple");
    CHECK(r.at(0) == Approx(simple.latency_us * 1e-6 + transfers).epsilon(1e-9));
    CHECK(r.at(1) == 1.0);
    // Forced tree on one node: a chain per tree, L + 2 W/B.
    const NcclChoice tree = nccl_choose(NcclFunc::AllReduce, static_cast<std::uint64_t>(S),
                                        nccl_topo(h100_nccl_platform(8), v), v, {"tree", ""});
    REQUIRE(tree.algo == NcclAlgo::Tree);
    const std::vector<double> t =
        run_nccl(p, {nullptr, "", "tree", ""}, S, CollOp::AllReduce, choice_text(tree));
    CHECK(t.at(0) == Approx(closed_form(tree, 8, S, CollOp::AllReduce, 10e9)).epsilon(1e-6));
    CHECK(t.at(1) == 1.0);
    // LL moves twice the bytes: the ring's transfers take twice as long, after LL's latency.
    const NcclChoice ll_choice = nccl_choose(NcclFunc::AllReduce, static_cast<std::uint64_t>(S),
                                             nccl_topo(h100_nccl_platform(8), v), v, {"ring", "LL"});
    const std::vector<double> ll = run_nccl(p, {nullptr, "", "ring", "LL"}, S, CollOp::AllReduce, "Ring/LL");
    CHECK(ll.at(0) == Approx(ll_choice.latency_us * 1e-6 + 2 * transfers).epsilon(1e-6));
  }
}

TEST_CASE("nccl picks what NCCL's tuner picks: LL for a small message, Simple for a large one",
          "[collective][nccl]") {
  const NcclVersion& v = nccl_newest_version();
  const NcclTopo t = nccl_topo(h100_nccl_platform(8), v);
  const NcclChoice small = nccl_choose(NcclFunc::AllReduce, 4096, t, v);
  const NcclChoice large = nccl_choose(NcclFunc::AllReduce, 256u << 20, t, v);
  CHECK(small.proto == NcclProto::LL);
  CHECK(large.proto == NcclProto::Simple);
  vt::TempDir d;
  const std::string p = d.file("h100.xml", h100_node(8));
  CHECK(run_nccl(p, {}, 4096, CollOp::AllReduce, choice_text(small)).at(1) == 1.0);
  // Across two nodes a small all-reduce is NCCL's tree with LL; the note names it.
  const NcclTopo t2 = nccl_topo(h100_nccl_platform(4, 2), v);
  const NcclChoice tiny = nccl_choose(NcclFunc::AllReduce, 64, t2, v);
  CHECK(tiny.algo == NcclAlgo::Tree);
  CHECK(tiny.proto == NcclProto::LL);
  const std::string p2 = d.file("h100x2.xml", h100_node(4, 2));
  CHECK(run_nccl(p2, {}, 64, CollOp::AllReduce,
                 "Tree/LL, 1 channel, simulated as the node-aware double binary tree")
            .at(1) == 1.0);
  // A name NCCL would refuse is an Error when the collective is configured.
  auto coll = make_collective("auto");
  CHECK_THROWS_AS(coll->configure({nullptr, "2.27", "bogus", ""}), Error);
  CHECK_THROWS_AS(coll->configure({nullptr, "1.0", "", ""}), Error);
}

TEST_CASE(
    "a point with the default collective auto: forced ring is the ring plus NCCL's latency per call, and "
    "the notes say what ran",
    "[collective][nccl][model]") {
  // Two nodes of one GPU joined by 10 GB/s NICs (test_sim_model.cpp's small scenario), each point in its own
  // process (predict): the choice's note comes back with the point's report.
  vt::TempDir d;
  d.file("p.xml", vt::platform_xml(2, 1, "100GBps", "0us", {"10GBps", "10GBps"}, {"1Tf", "1Tf"}));
  const std::string scenario = R"(<scenario name="m">
  <cluster platform="p.xml" nodes="2" gpus_per_node="1"/>
  <model preset="vit_cifar_tiny"/>
  <dataset name="synthetic" train_samples="6400" image_size="32" channels="3"/>
  <training micro_batch="32" precision="fp32"/>
  <loader workers="2"/>
  <simulation steps="6" warmup="1"/>
</scenario>
)";
  auto predict = [&](const std::vector<std::string>& sets) {
    auto f = read_scenario_file(d.file("s.xml", scenario));
    for (const auto& s : sets) apply_override(f, s);
    sim::PredictOptions o;
    o.progress = false;
    return sim::predict(f, o);
  };
  const Report ring = predict({"parallelism.collective=ring"});
  const Report nccl = predict({"nccl.algo=ring", "nccl.proto=simple"});  // the default collective: auto
  REQUIRE(ring.points.size() == 1);
  REQUIRE(nccl.points.size() == 1);
  // The platform's routes have no latency, so `ring` is its transfers alone and auto's forced Ring/Simple
  // adds NCCL's latency L per all-reduce (2 nodes of 1 GPU, 10 GB/s NICs: net latency 0): the difference
  // in collective time per step is a whole number of calls times L.
  NcclPlatform np;
  np.nodes = 2;
  np.gpus_per_node = 1;
  np.intra =
      NcclIntra::Pcie;  // the test GPUs as they state it: Ampere (SM 80) on PCIe (vt::kTestGpuNcclProps)
  np.nics_per_node = 1;
  np.nic_bw = 10;
  const NcclVersion& v = nccl_newest_version();
  const double L =
      nccl_choose(NcclFunc::AllReduce, 1 << 20, nccl_topo(np, v), v, {"ring", "simple"}).latency_us * 1e-6;
  const double calls = (nccl.points[0].breakdown_s.comm_total - ring.points[0].breakdown_s.comm_total) / L;
  CHECK(calls >= 0.999);
  CHECK(calls == Approx(std::round(calls)).margin(1e-6));
  int named = 0;
  for (const auto& n : nccl.points[0].notes)
    named += n.find("all-reduce on 2 ranks: NCCL 2.27 Ring/Simple") != std::string::npos;
  CHECK(named == 1);
  // A named collective: per distinct call, what NCCL would run there, the same choice the default makes.
  const Report chosen = predict({});
  REQUIRE(chosen.points.size() == 1);
  int distinct = 0;
  for (const auto& n : chosen.points[0].notes) {
    const auto at = n.find(" on 2 ranks: NCCL 2.27 ");
    if (at == std::string::npos) continue;
    ++distinct;
    const std::string call = n.substr(0, at),
                      what = n.substr(at + 23, n.find(',', at) - at - 23);  // "Ring/Simple"
    int said = 0;
    for (const auto& r : ring.points[0].notes)
      said +=
          r.rfind(call + " on 2 ranks: the collective 'ring' is named; NCCL 2.27 would run " + what, 0) == 0;
    INFO(n);
    CHECK(said == 1);
  }
  CHECK(distinct >= 1);
  // nccl.* beside a named collective is said to be unread, not silently dropped.
  const Report unread = predict({"parallelism.collective=ring", "nccl.algo=tree"});
  int told = 0;
  for (const auto& n : unread.points[0].notes)
    told += n.find("read by parallelism.collective=auto only") != std::string::npos;
  CHECK(told == 1);
}

namespace {
// h100_node's platform with every gpu_model renamed and `props` (NCCL's view, as the file states it) added.
std::string renamed_node(int gpus, const std::string& model, const std::string& props) {
  std::string x = h100_node(gpus);
  const std::string from = "value=\"H100-SXM\"/>";
  for (size_t at = x.find(from); at != std::string::npos; at = x.find(from, at + 1))
    x.replace(at, from.size(), "value=\"" + model + "\"/>" + props);
  return x;
}

// The architectures the tuner knows, as its messages list them: the catalogue's with an SM version.
std::string tuner_archs() {
  std::vector<std::string> out;
  for (const auto& [name, a] : builtin_catalogue().archs)
    if (a.nccl_sm > 0) out.push_back(name);
  return vt::join(out);
}

// make_collective("auto")->configure over every GPU of `platform`: the Error's message, "" when none.
std::string configure_auto(const std::string& platform) {
  const PlatformFacts facts = read_platform_facts(platform);
  std::vector<std::string> hosts;
  for (const auto& [host, g] : facts.gpu) hosts.push_back(host);
  auto coll = make_collective("auto");
  return vt::error_of([&] { coll->configure({&facts, "", "", "", hosts}); });
}
}  // namespace

TEST_CASE("auto reads NCCL's view of a GPU from the platform file and refuses a GPU it cannot rate",
          "[collective][nccl]") {
  vt::TempDir d;
  // Stated in the file, the catalogue's H100-SXM figures (data/catalogue.json: hopper, nvlink4 450 GB/s
  // behind NVSwitch, pcie5_x16) give the catalogue GPU's time to the bit, under another model name.
  const std::string stated =
      R"(<prop id="gpu_arch" value="hopper"/><prop id="gpu_link" value="nvswitch"/>)"
      R"(<prop id="gpu_link_bw" value="450GBps"/><prop id="gpu_host_link" value="pcie5_x16"/>)";
  const std::string h100 = d.file("h100.xml", h100_node(8)),
                    x100 = d.file("x100.xml", renamed_node(8, "X100", stated));
  for (double S : {4096.0, 64.0 * 1024 * 1024}) {
    const std::vector<double> a = run_nccl(h100, {nullptr, "2.27", "", ""}, S, CollOp::AllReduce, "");
    const std::vector<double> b = run_nccl(x100, {nullptr, "2.27", "", ""}, S, CollOp::AllReduce, "");
    REQUIRE(a.size() == 2);
    REQUIRE(b.size() == 2);
    CHECK(a[0] == b[0]);
  }
  // The same GPU stating an older architecture (ampere_dc: SM 80, no NVLS) is tuned as that, not as Hopper.
  std::string ampere = stated;
  ampere.replace(ampere.find("hopper"), 6, "ampere_dc");
  const std::string a100 = d.file("a100.xml", renamed_node(8, "X100", ampere));
  const std::vector<double> hopper_time =
      run_nccl(x100, {nullptr, "2.27", "", ""}, 64 << 20, CollOp::AllReduce, "");
  const std::vector<double> ampere_time =
      run_nccl(a100, {nullptr, "2.27", "", ""}, 64 << 20, CollOp::AllReduce, "");
  REQUIRE(hopper_time.size() == 2);
  REQUIRE(ampere_time.size() == 2);
  CHECK(hopper_time[0] != ampere_time[0]);

  // A GPU outside the catalogue stating nothing: refused with what to state, never rated as another GPU.
  const std::string unknown = d.file("unknown.xml", renamed_node(2, "X100", ""));
  CHECK(
      configure_auto(unknown) ==
      "GPU host 'n0-gpu0' (gpu_model 'X100'): NCCL's tuner needs its architecture: state gpu_arch (known: " +
          tuner_archs() +
          "), gpu_link and gpu_host_link, or name a catalogue GPU as gpu_model (vitsim "
          "platform --list-gpus)");
  // An architecture the catalogue gives no SM version (AMD's: RCCL is not modelled), by name or by model.
  const std::string cdna =
      d.file("cdna.xml", renamed_node(2, "X100", R"(<prop id="gpu_arch" value="cdna3"/>)"));
  CHECK(configure_auto(cdna) ==
        "GPU host 'n0-gpu0' (gpu_model 'X100'): architecture 'cdna3' has no NCCL SM "
        "version in the catalogue (RCCL is not modelled); known: " +
            tuner_archs());
  const std::string mi300 = d.file("mi300.xml", renamed_node(2, "MI300X", ""));
  CHECK_THAT(configure_auto(mi300), Catch::Contains("architecture 'cdna3' has no NCCL SM version"));
  // Half a view: the fabric and the host link are needed too.
  const std::string half =
      d.file("half.xml", renamed_node(2, "X100", R"(<prop id="gpu_arch" value="hopper"/>)"));
  CHECK(configure_auto(half) ==
        "GPU host 'n0-gpu0' (gpu_model 'X100'): NCCL's tuner needs its GPU-to-GPU "
        "fabric: state gpu_link (none, nvlink, nvswitch)");
  // An architecture the catalogue does not have is the reader's error, with the catalogue's list.
  const std::string bad =
      d.file("bad.xml", renamed_node(2, "X100", R"(<prop id="gpu_arch" value="ampere"/>)"));
  std::vector<std::string> all;
  for (const auto& [name, a] : builtin_catalogue().archs) all.push_back(name);
  CHECK_THAT(vt::error_of([&] { read_platform_facts(bad); }),
             Catch::Contains("property gpu_arch: unknown architecture 'ampere'; known: " + vt::join(all)));
  // NCCL is not used by one rank, nor by CPU devices (MPI): nothing to refuse there.
  const PlatformFacts facts = read_platform_facts(unknown);
  auto coll = make_collective("auto");
  CHECK_NOTHROW(coll->configure({&facts, "", "", "", {"n0-gpu0"}}));
  // A whole prediction: refused before any simulation, exit 1, naming the scenario's collective.
  const std::string s = d.file("s.xml", R"(<scenario>
  <cluster platform="unknown.xml" nodes="1" gpus_per_node="2"/>
  <model preset="vit_cifar_tiny"/>
  <dataset name="synthetic" train_samples="64"/>
</scenario>
)");
  const auto r = vt::vitsim("predict '" + s + "' -q");
  CHECK(r.status == 1);
  CHECK_THAT(r.out, Catch::Contains("parallelism.collective: GPU host 'n0-gpu0' (gpu_model 'X100'): NCCL's "
                                    "tuner needs its architecture"));
}

// Issue 36: the NICs NCCL's model sees are those the platform states (nic_count), each at the node's NIC
// rate / count; a file without nic_count keeps the old inference (the rate over 400 Gb/s ports, at most one
// per GPU). AWS p4de: 4 EFA of 100 Gb/s a node (aws-ofi-nccl presents each as a net device: docs/platforms.md
// "NICs as NCCL sees them"), 8 A100-SXM-80GB (the catalogue: SM 80, NVLink 3 at 300 GB/s = 12 links behind
// NVSwitch, PCIe Gen4 x16 rated 24 GB/s by NCCL), aws-ofi-nccl's 75 us latency property.
TEST_CASE("auto: NCCL's model sees the NICs the platform states, and infers them where it states none",
          "[collective][nccl]") {
  vt::TempDir d;
  const std::string p = d / "p4de.xml";
  REQUIRE(vt::vitsim("platform --nodes 2 --gpus-per-node 8 --gpu a100-sxm-80gb --nics 4 --nic-speed 100Gbps "
                     "--nic-transport efa --out " +
                     p)
              .status == 0);
  std::ifstream in(p);
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const std::string prop = "<prop id=\"nic_count\" value=\"4\"/>";
  REQUIRE(text.find(prop) != std::string::npos);
  const std::string old = d.file("old.xml", text.erase(text.find(prop), prop.size()));
  NcclPlatform np;
  np.nodes = 2;
  np.gpus_per_node = 8;
  np.sm = 80;
  np.intra = NcclIntra::NvSwitch;
  np.nvlinks_per_gpu = 12;
  np.pcie_bw = 24;
  np.net_latency_us = 75;
  const NcclVersion& v = nccl_version("2.27");
  auto choice = [&](int nics, double nic_bw) {
    NcclPlatform q = np;
    q.nics_per_node = nics;
    q.nic_bw = nic_bw;
    return choice_text(nccl_choose(NcclFunc::AllReduce, 64u << 20, nccl_topo(q, v), v));
  };
  // Stated: 4 NICs of 50 / 4 = 12.5 GB/s. Inferred: 50 GB/s is one 400 Gb/s port.
  const std::string stated = choice(4, 12.5), inferred = choice(1, 50);
  CHECK(stated != inferred);  // the count decides NCCL's channels here
  const vt::CmdResult a = vt::vitsim("collective " + p + " -b 64M -e 64M --nccl-version 2.27");
  REQUIRE(a.status == 0);
  CHECK_THAT(a.out, Catch::Contains("NCCL's model sees 4 NICs a node at 12.5 GB/s each (nic_count as the "
                                    "platform states it)"));
  CHECK_THAT(a.out, Catch::Contains("64 MiB all-reduce on 16 ranks: NCCL 2.27 " + stated));
  const vt::CmdResult b = vt::vitsim("collective " + old + " -b 64M -e 64M --nccl-version 2.27");
  REQUIRE(b.status == 0);
  CHECK_THAT(b.out,
             Catch::Contains("NCCL's model sees 1 NIC a node at 50 GB/s each (inferred from the node's 50 "
                             "GB/s of NICs as 400 Gb/s ports: the platform states no nic_count"));
  CHECK_THAT(b.out, Catch::Contains("64 MiB all-reduce on 16 ranks: NCCL 2.27 " + inferred));
}
