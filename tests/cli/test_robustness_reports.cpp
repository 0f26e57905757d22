// Reports fed back in (validate --measured, plan --merge, plot): real reports written by the vitsim binary
// (predict, plan --shard), corrupted one field at a time, each refused with one line naming the file and
// the JSON pointer. The same table renders docs/robustness.md (VITSIM_UPDATE_DOCS=1 rewrites it).
#include <catch2/catch.hpp>

#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_util.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/formats/identity.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/results/report.hpp"

using json = nlohmann::json;

namespace {

// The base files every case starts from, written once by the vitsim binary into one folder:
//   pred.json   vitsim predict s.xml --set cluster.gpus_per_node=1,2 --format json
//   meas.json   pred.json relabelled as a measurement (kind/source "measured", simulated_steps 0): what
//               `vitsim train` writes, made without LibTorch so that this test runs in every build
//   other.json  a "measured" report of s2.xml (vit_small_patch16_224 instead of vit_b_16, the same GPUs and
//   batch) s0.json, s1.json   vitsim plan s.xml --set cluster.gpus_per_node=1,2,4 --shard I/2 --format json
//   x1.json     shard 1/2 of another plan (--epochs 7)
//   plan.json   the same plan in one piece, ranked
const std::string kSets = "--set cluster.gpus_per_node=1,2";
const std::string kValidate = "validate s.xml " + kSets + " --measured bad.json";

std::string scenario(const std::string& preset) {
  return "<scenario>\n  <cluster platform=\"p.xml\" nodes=\"1\" gpus_per_node=\"2\"/>\n  <model preset=\"" +
         preset +
         "\"/>\n  <dataset name=\"cifar10\"/>\n  <training micro_batch=\"16\" epochs=\"2\"/>\n</scenario>\n";
}

json as_measured(json j) {
  j["kind"] = "measured";
  j["source"] = "measured";
  j["provenance"] = vt::train_provenance();
  for (auto& p : j["points"]) p["simulated_steps"] = 0;
  return j;
}

struct Base {
  vt::TempDir dir;
  std::map<std::string, json> files;
  Base() {
    dir.file("p.xml", vt::platform_xml(1, 4, "12GBps", "1us", {"1GBps"}, {"8Tf"}));
    dir.file("s.xml", scenario("vit_b_16"));
    dir.file("s2.xml", scenario("vit_small_patch16_224"));
    const std::string cd = "cd " + dir.path.string() + " && " + VITSIM_BINARY + " ";
    auto must = [&](const std::string& args) {
      auto r = vt::run(cd + args + " -q");
      if (r.status != 0) throw std::runtime_error("vitsim " + args + ": " + r.out);
    };
    must("predict s.xml " + kSets + " --format json --out pred.json");
    must("predict s2.xml " + kSets + " --format json --out pred2.json");
    for (int i = 0; i < 2; ++i)
      must(fmt::format(
          "plan s.xml --set cluster.gpus_per_node=1,2,4 --shard {}/2 --format json --out s{}.json", i, i));
    must("plan s.xml --set cluster.gpus_per_node=1,2,4 --shard 1/2 --epochs 7 --format json --out x1.json");
    must("plan s.xml --set cluster.gpus_per_node=1,2,4 --format json --out plan.json");
    for (const char* name : {"pred", "s0", "s1", "x1", "plan"})
      files[name] = json::parse(vt::run("cat " + dir / (std::string(name) + ".json")).out);
    files["meas"] = as_measured(files["pred"]);
    files["other"] = as_measured(json::parse(vt::run("cat " + dir / "pred2.json").out));
    for (const char* name : {"meas", "other"}) dir.file(std::string(name) + ".json", files[name].dump(2));
  }
};

const Base& base() {
  static Base b;
  return b;
}

// The report's own identity covers its points' identities: an edit of a point's must redo it, as a
// forger would.
void rehash(json& j) {
  vitsim::Report r;
  for (const auto& p : j["points"]) {
    r.points.emplace_back();
    r.points.back().scenario_id = p["scenario_id"].get<std::string>();
  }
  j["scenario_id"] = vitsim::report_scenario_id(r);
}

struct BadReport {
  const char* check;  // the class of check
  const char* what;
  std::string from;  // the base file corrupted into bad.json ("" = none)
  std::function<void(json&)> corrupt;
  std::string args;     // run in the base folder
  std::string message;  // the whole output (or its start, with prefix), one line
  bool prefix = false;  // messages that quote simulated figures: only the part before them is checked
};

std::vector<BadReport> cases();

std::string render(const std::vector<BadReport>& all) {
  std::ostringstream o;
  o << "Every row is a case of `tests/cli/test_robustness_reports.cpp`: a report written by the vitsim "
       "binary\n"
       "(`predict` of a 1- and a 2-GPU point of ViT-B/16 on CIFAR-10, `plan --shard I/2` of 1, 2 and 4 "
       "GPUs),\n"
       "corrupted as the row says into `bad.json`; the test checks the exit status (1) and the exact line "
       "(a\n"
       "trailing `...` marks messages checked up to the simulated figures they quote). `meas.json` is\n"
       "`pred.json` relabelled as measured (what `vitsim train` writes), `other.json` a measured report of\n"
       "another scenario with the same GPUs and batch. Regenerate with\n"
       "`VITSIM_UPDATE_DOCS=1 build/tests/test_robustness_reports`.\n\n"
       "| # | check | bad input | command | message |\n| --- | --- | --- | --- | --- |\n";
  int i = 0;
  for (const auto& c : all) {
    std::string msg = c.message;
    for (size_t p = 0; (p = msg.find('|', p)) != std::string::npos; p += 2) msg.replace(p, 1, "\\|");
    o << "| " << ++i << " | " << c.check << " | " << c.what << " | `vitsim " << c.args << "` | `" << msg
      << (c.prefix ? " ...` |\n" : "` |\n");
  }
  return o.str();
}

}  // namespace

TEST_CASE("reports fed back in: the untouched reports pass", "[robustness][reports]") {
  const Base& b = base();
  const std::string cd = "cd " + b.dir.path.string() + " && " + VITSIM_BINARY + " ";
  auto same = vt::run(cd + "validate s.xml " + kSets + " --measured meas.json -q");
  CHECK(same.status == 0);  // the "measurement" is the prediction: every error is 0
  CHECK(same.out.find("PASS") != std::string::npos);
  auto merged = vt::run(cd + "plan --merge s0.json s1.json --format json -q");
  CHECK(merged.status == 0);
  // Merged shards rank exactly like the plan in one piece (same identity, same points).
  auto whole = b.files.at("plan");
  auto m = json::parse(merged.out);
  CHECK(m["plan_id"] == whole["plan_id"]);
  CHECK(m["points"] == whole["points"]);
  // Provenance: kind, version, identities.
  const json& pred = b.files.at("pred");
  CHECK(pred["schema"] == "vitsim.report/2");
  CHECK(pred["kind"] == "predicted");
  CHECK(pred["vitsim_version"] == vitsim::vitsim_version());
  CHECK(pred["points"][0]["scenario_id"].get<std::string>().rfind("sha256:", 0) == 0);
  CHECK(pred["points"][0]["scenario_id"] != pred["points"][1]["scenario_id"]);  // 1 and 2 GPUs
  CHECK(pred["provenance"]["platform_sha256"].get<std::string>().size() == 64);
  CHECK(whole["kind"] == "plan");
  // A point's identity is its resolved scenario's, whoever resolves it: predict's children (after the
  // platform is copied for what-ifs) and `vitsim train` (which reports scenario_id() of expand()'s points).
  vitsim::ScenarioFile f = vitsim::read_scenario_file(b.dir / "s.xml");
  vitsim::apply_override(f, "cluster.gpus_per_node=1,2");
  const auto points = vitsim::expand(f);
  REQUIRE(points.size() == 2);
  for (size_t i = 0; i < 2; ++i) CHECK(pred["points"][i]["scenario_id"] == vitsim::scenario_id(points[i]));
  // Settings that change neither a step's time nor its memory leave it alone; those that do change it.
  vitsim::Scenario other = points[0];
  other.training.epochs = 90;
  other.training.lr = 1;
  other.run.max_steps = 5;
  other.cluster.platform = "elsewhere.xml";
  CHECK(vitsim::scenario_id(other) == vitsim::scenario_id(points[0]));
  other.parallel.overlap = !other.parallel.overlap;
  CHECK(vitsim::scenario_id(other) != vitsim::scenario_id(points[0]));
  CHECK(b.files.at("s0")["plan_id"] == b.files.at("s1")["plan_id"]);
  CHECK(b.files.at("x1")["plan_id"] != b.files.at("s1")["plan_id"]);  // other epochs: another plan
}

TEST_CASE("sha256 of the FIPS 180-4 examples", "[reports]") {
  // FIPS 180-4 / NIST CSRC example values: "abc", the empty string, and the 448-bit two-block message.
  CHECK(vitsim::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(vitsim::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(vitsim::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(vitsim::sha256_hex(std::string(1000000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("reports fed back in: corrupted, foreign or mislabelled reports get one line",
          "[robustness][reports][negative]") {
  const Base& b = base();
  const auto all = cases();
  CHECK(all.size() >= 30);
  for (const auto& c : all) {
    INFO(c.check << ": " << c.what);
    if (!c.from.empty()) {
      json j = b.files.at(c.from);
      c.corrupt(j);
      std::string text = j.dump(2);
      // "@RAW:x@" strings stand for JSON text nlohmann would not write (numbers beyond a double).
      for (size_t p; (p = text.find("\"@RAW:")) != std::string::npos;) {
        const size_t e = text.find("@\"", p + 6);
        text.replace(p, e + 2 - p, text.substr(p + 6, e - p - 6));
      }
      b.dir.file("bad.json", text);
    }
    const bool quiet = c.args.rfind("plot", 0) != 0;  // plot has no progress line and no -q
    auto r =
        vt::run("cd " + b.dir.path.string() + " && " + VITSIM_BINARY + " " + c.args + (quiet ? " -q" : ""));
    if (std::getenv("VITSIM_SHOW_OUTPUT"))
      fmt::print("{}: {}: {}", c.check, c.what, r.out);  // to review the lines
    CHECK(r.status == 1);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    if (c.prefix)
      CHECK(r.out.rfind(c.message, 0) == 0);
    else
      CHECK(r.out == c.message + "\n");
  }
  const std::string doc = render(all);
  CHECK(vt::doc_section(vt::source("docs/robustness.md"), "test_robustness_reports", doc) == doc);
}

namespace {
std::vector<BadReport> cases() {
  const std::string E = "vitsim: error: bad.json: ";
  const std::string merge = "plan --merge bad.json s1.json";
  const std::string merge0 = "plan --merge s0.json bad.json";
  const std::string plot = "plot bad.json --out x.svg";
  auto set = [](const std::string& ptr, json v) {
    return [ptr, v](json& j) { j[json::json_pointer(ptr)] = v; };
  };
  auto scale = [](const std::string& ptr, double k) {
    return [ptr, k](json& j) { j[json::json_pointer(ptr)] = j[json::json_pointer(ptr)].get<double>() * k; };
  };
  auto erase = [](const std::string& parent, const std::string& key) {
    return [parent, key](json& j) { j[json::json_pointer(parent)].erase(key); };
  };
  // The simulated result of shard 0's first simulated point.
  const std::string R = "/points/0/result";
  return {
      // --- times: finite and not negative ---
      {"times", "negative epoch time", "meas", set("/points/0/epoch_time_s", -5), kValidate,
       E + "/points/0/epoch_time_s: the epoch time is negative (-5)"},
      {"times", "step time NaN (written as null)", "pred", set("/points/1/step_time_s/mean", nullptr), plot,
       E + "/points/1/step_time_s/mean: expected a number, found null"},
      {"times", "negative compute time in a shard", "s0", set(R + "/breakdown_s/compute_bwd", -1.5), merge,
       E + "/points/0/result/breakdown_s/compute_bwd: a time is negative (-1.5)"},
      {"times", "zero step time", "meas", set("/points/0/step_time_s/mean", 0), kValidate,
       E + "/points/0/step_time_s/mean: a step takes time: the mean step time is 0"},
      {"times", "median above the 95th percentile", "pred", scale("/points/0/step_time_s/p50", 2), plot,
       E + "/points/0/step_time_s/p50: the median step (", true},
      {"times", "negative time to train in a ranked plan", "plan", set("/points/0/time_to_train_s", -1), plot,
       E + "/points/0/time_to_train_s: the time to train is negative (-1)"},
      {"times", "epoch time 1e999 (beyond a double)", "pred", set("/points/0/epoch_time_s", "@RAW:1e999@"),
       plot, E + "malformed JSON: [json.exception.out_of_range.406] number overflow parsing '1e999'"},
      // --- epoch time against step time x steps ---
      {"epoch", "epoch 1000x the steps' time", "meas", scale("/points/0/epoch_time_s", 1000), kValidate,
       E + "/points/0/epoch_time_s: ", true},
      {"epoch", "epoch a tenth of the steps' time", "pred", scale("/points/1/epoch_time_s", 0.1), plot,
       E + "/points/1/epoch_time_s: ", true},
      {"epoch", "a shard's result 3x too long", "s0", scale(R + "/epoch_time_s", 3), merge,
       E + "/points/0/result/epoch_time_s: ", true},
      {"epoch", "no steps per epoch", "meas", set("/points/0/steps_per_epoch", 0), kValidate,
       E + "/points/0/steps_per_epoch: 0 is out of range [1, 9223372036854775807]"},
      // --- memory ---
      {"memory", "1 EB per GPU, said to fit", "meas", set("/points/0/memory_per_gpu_bytes", 1e18), kValidate,
       E + "/points/0/memory_per_gpu_bytes: 1e+18 bytes (909494.7 TiB) per GPU is beyond any device (limit "
           "16 TiB)"},
      {"memory", "negative memory", "pred", set("/points/0/memory_per_gpu_bytes", -1), plot,
       E + "/points/0/memory_per_gpu_bytes: the memory per GPU is negative (-1)"},
      {"memory", "memory disagrees with its breakdown", "pred", scale("/points/0/memory_per_gpu_bytes", 0.5),
       plot, E + "/points/0/memory_per_gpu_bytes: ", true},
      {"memory", "a GPU of 1e20 bytes in a shard", "s0", set("/points/0/gpu_memory_bytes", 1e20), merge,
       E + "/points/0/gpu_memory_bytes: 1e+20 bytes is beyond any device (limit 16 TiB)"},
      {"memory", "negative activations", "meas", set("/points/0/memory_breakdown_bytes/activations", -8),
       kValidate, E + "/points/0/memory_breakdown_bytes/activations: a memory figure is negative (-8)"},
      // --- throughput and the other derived figures ---
      {"throughput", "throughput 10x batch / step", "meas", scale("/points/1/throughput_img_s", 10),
       kValidate, E + "/points/1/throughput_img_s: ", true},
      {"throughput", "throughput 0", "pred", set("/points/0/throughput_img_s", 0), plot,
       E + "/points/0/throughput_img_s: 0 images/s disagrees with global_batch / mean step = ", true},
      {"throughput", "global batch beyond micro x accum x GPUs", "s0", set(R + "/global_batch", 1000), merge,
       E + "/points/0/result/global_batch: 1000 is more than micro_batch x grad_accum x gpus = 16"},
      {"throughput", "ranked plan: forged time to train", "plan", scale("/points/0/time_to_train_s", 0.5),
       plot, E + "/points/0/time_to_train_s: ", true},
      {"throughput", "forged scaling efficiency", "pred", set("/points/1/scaling_efficiency", 1.5), plot,
       E + "/points/1/scaling_efficiency: 1.5 disagrees with throughput / (gpus x the 1-GPU throughput) = ",
       true},
      {"throughput", "bound not the largest term", "meas", set("/points/0/bound", "data"), kValidate,
       E + "/points/0/bound: \"data\", but the breakdown's largest term is compute"},
      {"throughput", "params disagree with the point", "pred", set("/points/1/params/gpus", "8"), plot,
       E + "/points/1/params/gpus: \"8\" disagrees with the point's gpus (2)"},
      // --- physics (issue 27: merged plans ranked a 100 GiB point on an 80 GiB GPU as fitting, an MFU of
      // 15,373,802,284 %, 1 step per epoch where the dataset gives 938, a result of another setting) ---
      {"physics", "a shard's point needs more than its GPU, its result says it fits", "s0",
       set("/points/0/gpu_memory_bytes", 1e9), merge,
       E + "/points/0/result/fits_in_memory: true, but the point needs ", true},
      {"physics", "a shard's result says it does not fit, though it does", "s0",
       set(R + "/fits_in_memory", false), merge,
       E + "/points/0/result/fits_in_memory: false, but the point needs ", true},
      // The model's FLOPs a million times over: MFU far above 100%, which no GPU reaches.
      {"physics", "a shard's MFU above 100%", "s0", scale(R + "/flops_per_gpu_step/model", 1e6), merge,
       E + "/points/0/result/peak_flops_per_gpu: ", true},
      {"physics", "a report's MFU above 100%", "pred", scale("/points/1/flops_per_gpu_step/model", 1e6), plot,
       E + "/points/1/peak_flops_per_gpu: ", true},
      // CIFAR-10's 50,000 samples on 1 GPU at micro-batch 16: ceil(50000 / 16) = 3125 steps (epoch.hpp).
      {"physics", "1 step per epoch where the dataset gives 3125", "pred",
       set("/points/0/steps_per_epoch", 1), plot,
       E + "/points/0/steps_per_epoch: 1 disagrees with the epoch's 50000 samples over 1 replicas at "
           "micro-batch 16 x accumulation 1: 3125 steps"},
      {"physics", "a shard's result of another GPU count than its point", "s0",
       set(R + "/params/cluster.gpus_per_node", "4"), merge,
       E + "/points/0/result/params/cluster.gpus_per_node: \"4\" disagrees with the point's \"1\""},
      {"physics", "a shard's point of another ZeRO stage than its params", "s0",
       [](json& j) {
         j["points"][0]["params"]["parallelism.zero"] = "0";
         j["points"][0]["zero"] = 3;
       },
       merge, E + "/points/0/params/parallelism.zero: \"0\" disagrees with the point's parallelism.zero (3)"},
      // Issue 39 item 22: a shard whose ZeRO stage contradicts its own memory, and one ranked by a
      // steps_per_epoch the report reader could not check (no epoch samples stated).
      {"physics",
       "a shard's ZeRO stage whose largest micro-batch says the point does not fit, its memory that it does",
       "s0", set("/points/0/largest_micro_batch/zero0", 1), merge,
       E + "/points/0/zero: ZeRO-0 contradicts the point's memory: at this stage micro-batch 16 does not fit",
       true},
      // One step an epoch, the samples and the epoch edited with it (each agrees with the others): CIFAR-10's
      // 50,000 samples on the other points.
      {"physics", "a shard's point edited to one step an epoch of 16 samples (ranked first)", "s0",
       [R](json& j) {
         json& r = j[json::json_pointer(R)];
         r["epoch_samples"] = 16;
         r["steps_per_epoch"] = 1;
         r["epoch_time_s"] = r["step_time_s"]["mean"];
       },
       merge,
       E + "point 0: result/epoch_samples: 16 samples an epoch on 1 replica(s), where the plan's other "
           "points say 50000: the points of one plan train on one dataset"},
      // Issue 39 item 28: plotting a shard said "no feasible point".
      {"kind", "a plan shard given to plot", "s0", [](json&) {}, plot,
       E + "the plan is shard 0/2's unranked points: merge the shards first (vitsim plan --merge)"},
      // --- missing or mistyped fields ---
      {"fields", "epoch time missing", "meas", erase("/points/0", "epoch_time_s"), kValidate,
       E + "/points/0/epoch_time_s: missing"},
      {"fields", "kind missing", "pred", erase("", "kind"), plot, E + "/kind: missing"},
      {"fields", "plan identity missing", "s0", erase("", "plan_id"), merge, E + "/plan_id: missing"},
      {"fields", "GPU count as a string", "pred", set("/points/0/gpus", "2"), plot,
       E + "/points/0/gpus: expected an integer, found a string (\"2\")"},
      {"fields", "scenario identity not a digest", "meas", set("/points/0/scenario_id", "vit_b_16"),
       kValidate,
       E + "/points/0/scenario_id: expected \"sha256:\" and 64 hex digits (the identity of the scenario "
           "point)"},
      {"fields", "points not a list", "pred", set("/points", json::object()), plot,
       E + "/points: expected an array, found an object"},
      // --- kind ---
      {"kind", "a prediction given as measured", "pred", [](json&) {}, kValidate,
       E + "/kind: this report is predicted (simulated by vitsim predict), not measured: validate --measured "
           "needs a "
           "report written by `vitsim train`"},
      {"kind", "a prediction given as a plan shard", "pred", [](json&) {}, merge,
       E + "this is a predicted report (vitsim predict), not a plan: give the JSON of `vitsim plan [--shard "
           "I/K] --format json`"},
      {"kind", "a plan given as measured", "plan", [](json&) {}, kValidate,
       E + "this is a capacity plan (vitsim plan), not a report (vitsim predict or vitsim train)"},
      {"kind", "kind contradicts source", "meas", set("/source", "simulated"), kValidate,
       E + "/kind: \"measured\" contradicts \"source\": \"simulated\""},
      {"kind", "a measured report with simulated steps", "meas", set("/points/0/simulated_steps", 20),
       kValidate, E + "/points/0/simulated_steps: 20 simulated steps in a measured report"},
      {"kind", "an old vitsim.report/1 file", "meas",
       [](json& j) {
         j["schema"] = "vitsim.report/1";
         j.erase("kind");
         j.erase("vitsim_version");
       },
       kValidate,
       E +
           "a vitsim.report/1 file (written before reports carried their kind and scenario identity): "
           "validate "
           "--measured needs a report from this vitsim (" +
           std::string(vitsim::vitsim_version()) + "); run it again"},
      {"kind", "an old vitsim.plan/1 shard", "s0", set("/schema", "vitsim.plan/1"), merge,
       E +
           "a vitsim.plan/1 file (written before plans carried their identity): run `vitsim plan` again with "
           "this "
           "vitsim (" +
           std::string(vitsim::vitsim_version()) + ")"},
      // --- another scenario ---
      {"scenario", "measured with another model, same GPUs and batch", "other", [](json&) {}, kValidate,
       E + "/points/0/scenario_id: the run measured another scenario than 's' at point "
           "cluster.gpus_per_node=1 gpus=1 "
           "grad_accum=1 micro_batch=16 nodes=1 (",
       true},
      {"scenario", "measured without the overlap validate asks for", "meas", [](json&) {},
       kValidate + " --set parallelism.overlap=true",
       E + "/points/0/scenario_id: the run measured another scenario than 's' at point ", true},
      {"scenario", "a point's identity edited (report's left)", "meas",
       set("/points/0/scenario_id", "sha256:" + std::string(64, '0')), kValidate,
       E + "/scenario_id: does not match the points' scenario_id values (the report was edited)"},
      {"scenario", "a point's identity forged, report's redone", "meas",
       [](json& j) {
         j["points"][0]["scenario_id"] = j["points"][1]["scenario_id"];
         rehash(j);
       },
       kValidate, E + "/points/0/scenario_id: the run measured another scenario than 's' at point ", true},
      {"scenario", "a shard of another plan (other epochs)", "x1", [](json&) {}, merge0,
       E + "/plan_id: this shard is of another plan than s0.json (", true},
      {"scenario", "a shard's plan identity forged", "s1", set("/plan_id", "sha256:" + std::string(64, 'a')),
       merge0, E + "/plan_id: this shard is of another plan than s0.json (sha256:aaaaaaaaaaaa vs ", true},
      // --- duplicates ---
      {"duplicates", "the same shard twice", "s1", [](json&) {}, "plan --merge s0.json s1.json bad.json",
       E + "/shard/index: shard 1/2 given twice (also s1.json)"},
      {"duplicates", "a point twice in one shard", "s0",
       [](json& j) { j["points"].push_back(j["points"][0]); }, merge,
       E + "/points/2/index: point 0 appears twice"},
      {"duplicates", "a point moved into the other shard", "s1", [](json& j) { j["points"][0]["index"] = 2; },
       merge0, E + "/points/0/index: point 2 does not belong to shard 1/2 (index % 2 = 0)"},
      {"duplicates", "a point measured twice", "meas",
       [](json& j) {
         j["points"].push_back(j["points"][0]);
         rehash(j);
       },
       kValidate,
       E + "/points/2: a second measurement of point cluster.gpus_per_node=1 gpus=1 grad_accum=1 "
           "micro_batch=16 nodes=1 "
           "(also /points/0): which one to compare is ambiguous; keep one"},
      {"duplicates", "a rank listed twice", "pred",
       [](json& j) { j["points"][1]["per_rank"][1]["rank"] = 0; }, plot,
       E + "/points/1/per_rank/1/rank: rank 0 appears twice"},
  };
}
}  // namespace
