// Issue 27, "whole runs lost for one point": a point of a sweep that fails (its simulation process killed,
// as the out-of-memory killer does; an error of its own) or cannot be run (a global batch beyond the
// dataset) never takes the run with it. predict and plan keep the other points, list the failed one with its
// reason and exit 6 (docs/errors.md); plan excludes a point whose batch exceeds the dataset before
// simulating anything.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "test_util.hpp"
#include "vitsim/core/results/report.hpp"

using json = nlohmann::json;

namespace {

// A 1-node platform of 4 GPUs (tests/test_util.hpp) and a 4-GPU scenario of the synthetic dataset.
struct Folder {
  vt::TempDir d;
  Folder() {
    d.file("p.xml", vt::platform_xml(1, 4, "12GBps", "1us", {"1GBps"}, {"8Tf"}));
    d.file("s.xml",
           "<scenario>\n  <cluster platform=\"p.xml\" nodes=\"1\" gpus_per_node=\"4\"/>\n  <model "
           "preset=\"vit_b_16\"/>\n  <dataset name=\"synthetic\" train_samples=\"1000\"/>\n  <training "
           "micro_batch=\"16\"/>\n</scenario>\n");
  }
  vt::CmdResult run(const std::string& cmd) const { return vt::run("cd " + d.path.string() + " && " + cmd); }
};

// The last line of a command's output (its stderr line comes after the table).
std::string last_line(const std::string& out) {
  std::string s = out;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s.substr(s.rfind('\n') == std::string::npos ? 0 : s.rfind('\n') + 1);
}

// A point killed mid-simulation: the kernel ends a process past its CPU-time limit (`ulimit -t 1`, soft and
// hard) with SIGKILL, as its out-of-memory killer does. The full-epoch point simulates 20,000,000 / (16 x 4)
// = 312,500 steps with flows (tens of seconds of CPU: 15,625 8-rank steps took 0.7 s here), so it dies at 1
// s; the other point simulates simulation.steps (20) and the parent only waits, each well under a second.
std::string killed_run(const std::string& command) {
  return "(ulimit -t 1; " + std::string(VITSIM_BINARY) + " " + command +
         " s.xml -q --set dataset.train_samples=20000000 --set simulation.full_epoch=false,true --set "
         "simulation.flows=always --set simulation.max_steps=1000000 --format json > out.json)";
}

}  // namespace

TEST_CASE("a sweep's point whose process is killed: the others reported, the failure listed, exit 6",
          "[robustness][points]") {
  const Folder f;
  const std::string killed =
      "the simulation process died of signal 9 (killed: out of memory, or by another process)";
  // predict: one point in the report, the other in failed_points with its reason.
  auto r = f.run(killed_run("predict"));
  INFO(r.out);
  CHECK(r.status == 6);
  CHECK(r.out.rfind(
            "vitsim: error: predict: 1 of 2 points failed, the output lists it with its reason (point 2 ",
            0) == 0);
  CHECK(r.out.find(killed) != std::string::npos);
  json j = json::parse(vt::run("cat " + f.d / "out.json").out);
  REQUIRE(j["points"].size() == 1u);
  CHECK(j["points"][0]["params"]["simulation.full_epoch"] == "false");
  REQUIRE(j["failed_points"].size() == 1u);
  CHECK(j["failed_points"][0]["point"] == 2);
  CHECK(j["failed_points"][0]["params"]["simulation.full_epoch"] == "true");
  CHECK(j["failed_points"][0]["reason"] == killed);
  // The report with its failure reads back through the one report reader (plot, validate, plan).
  const vitsim::Report back = vitsim::report_from_json(vt::run("cat " + f.d / "out.json").out, "out.json");
  REQUIRE(back.failed.size() == 1u);
  CHECK(back.failed[0].point == 2);
  CHECK(back.failed[0].reason == killed);
  // plan: the point excluded as failed, the other ranked.
  r = f.run(killed_run("plan"));
  CHECK(r.status == 6);
  CHECK(r.out.find("vitsim: error: plan: 1 of 2 points failed") == 0);
  j = json::parse(vt::run("cat " + f.d / "out.json").out);
  REQUIRE(j["points"].size() == 2u);
  CHECK(j["points"][0]["rank"] == 1);
  CHECK(j["points"][1]["simulated"] == false);
  CHECK(j["points"][1]["excluded"] == "failed: " + killed);
}

TEST_CASE("a sweep's point whose simulation throws: the others reported, exit 6, and all failing exit 1",
          "[robustness][points]") {
  const Folder f;
  // The point's child refuses to simulate: 4 ranks need ~48 KiB each (docs/errors.md), over 1 KiB; the epoch
  // is ceil(1000 / 4 / 16) = 16 steps, under simulation.steps (20), so all of it is simulated.
  const std::string sets = " s.xml -q --set simulation.max_memory=1KiB,1GiB";
  auto r = f.run(std::string(VITSIM_BINARY) + " predict" + sets);
  CHECK(r.status == 6);
  CHECK(
      r.out.find("\nfailed: point 1 {\"simulation.max_memory\":\"1KiB\"}: s.xml:2: simulating 4 GPUs for 16 "
                 "steps needs about ") != std::string::npos);
  CHECK(last_line(r.out).rfind("vitsim: error: predict: 1 of 2 points failed", 0) == 0);
  // A plan's table counts it among the excluded; its shards merge with it and exit 6 too.
  r = f.run(std::string(VITSIM_BINARY) + " plan" + sets);
  CHECK(r.status == 6);
  CHECK(r.out.find("  1 failed, e.g. failed: s.xml:2: simulating 4 GPUs for 16 steps") != std::string::npos);
  for (int i = 0; i < 2; ++i)
    CHECK(f.run(fmt::format("{} plan{} --shard {}/2 --format json --out s{}.json", VITSIM_BINARY, sets, i, i))
              .status == (i == 0 ? 6 : 0));
  r = f.run(std::string(VITSIM_BINARY) + " plan --merge s0.json s1.json --format json --out m.json");
  CHECK(r.status == 6);
  CHECK(json::parse(vt::run("cat " + f.d / "m.json").out)["points"][1]["excluded"].get<std::string>().rfind(
            "failed: ", 0) == 0);
  // Every point failing leaves nothing to report: the first failure is the error, exit 1.
  r = f.run(std::string(VITSIM_BINARY) + " predict s.xml -q --set simulation.max_memory=1KiB,2KiB");
  CHECK(r.status == 1);
  CHECK(r.out.rfind("vitsim: error: s.xml:2: simulating 4 GPUs for 16 steps needs about ", 0) == 0);
}

TEST_CASE(
    "a point whose global batch exceeds the dataset: excluded by plan before simulating, refused by "
    "predict before simulating",
    "[robustness][points]") {
  const Folder f;
  // 1000 samples: micro-batch 16 x 4 GPUs = 64 fills an epoch of ceil(1000 / 4 / 16) = 16 steps; micro-batch
  // 256 x 4 = 1024 exceeds it (core/model/epoch.hpp), and fits an 80 GiB GPU (16 images take 4.2 GiB, 2.1 of
  // them activations: 256 take about 36 GiB), so it is the dataset that excludes it.
  const std::string E =
      "--set training.micro_batch: dataset.train_samples: 1000 training samples are fewer than one global "
      "batch of 1024 (micro_batch 256 x grad_accum 1 x 4 data-parallel ranks)";
  auto r =
      f.run(std::string(VITSIM_BINARY) + " plan s.xml -q --set training.micro_batch=16,256 --format json");
  CHECK(r.status == 0);
  const json j = json::parse(r.out);
  REQUIRE(j["points"].size() == 2u);
  CHECK(j["points"][0]["rank"] == 1);
  CHECK(j["points"][0]["result"]["steps_per_epoch"] == 16);
  CHECK(j["points"][1]["simulated"] == false);
  CHECK(j["points"][1]["excluded"] == "dataset: " + E);
  // predict refuses the sweep with the same line before any point runs (no progress line, no child's).
  r = f.run(std::string(VITSIM_BINARY) + " predict s.xml --set training.micro_batch=16,256");
  CHECK(r.status == 1);
  CHECK(r.out == "vitsim: error: " + E + "\n");
}

namespace {

// The cases above as docs/robustness.md lists them, each run again here: its exit status and the start of
// its last line (the stderr line after the output).
struct PointCase {
  const char* what;
  std::string command;  // in the folder of Folder, `vitsim` for the binary
  int status;
  std::string last_line;  // its start
};

std::vector<PointCase> point_cases() {
  const std::string killed =
      " s.xml -q --set dataset.train_samples=20000000 --set simulation.full_epoch=false,true --set "
      "simulation.flows=always --set simulation.max_steps=1000000 --format json > out.json";
  return {
      {"a point's process killed at its CPU-time limit (SIGKILL, as the out-of-memory killer)",
       "(ulimit -t 1; vitsim predict" + killed + ")", 6,
       "vitsim: error: predict: 1 of 2 points failed, the output lists it with its reason (point 2 "},
      {"the same in a plan", "(ulimit -t 1; vitsim plan" + killed + ")", 6,
       "vitsim: error: plan: 1 of 2 points failed, the output lists it with its reason (point 1 "},
      {"a point's simulation refuses to run (memory over simulation.max_memory)",
       "vitsim predict s.xml -q --set simulation.max_memory=1KiB,1GiB", 6,
       "vitsim: error: predict: 1 of 2 points failed, the output lists it with its reason (point 1 "
       "{\"simulation.max_memory\":\"1KiB\"}: s.xml:2: simulating 4 GPUs for 16 steps needs about "},
      {"every point refuses to run", "vitsim predict s.xml -q --set simulation.max_memory=1KiB,2KiB", 1,
       "vitsim: error: s.xml:2: simulating 4 GPUs for 16 steps needs about "},
      {"a global batch beyond the dataset, in a plan (excluded before simulating)",
       "vitsim plan s.xml -q --set training.micro_batch=16,256", 0,
       "  training.micro_batch=256: excluded (dataset: --set training.micro_batch: dataset.train_samples: "
       "1000 "
       "training samples are fewer than one global batch of 1024"},
      {"a global batch beyond the dataset, in predict (refused before simulating)",
       "vitsim predict s.xml -q --set training.micro_batch=16,256", 1,
       "vitsim: error: --set training.micro_batch: dataset.train_samples: 1000 training samples are fewer "
       "than "
       "one global batch of 1024"},
  };
}

std::string render_points(const std::vector<PointCase>& all) {
  std::string o =
      "Every row is a case of `tests/cli/test_robustness_points.cpp` (issue 27), run in a folder with a "
      "1-node "
      "platform of 4\nGPUs and a 4-GPU scenario `s.xml` of 1,000 synthetic samples; the test checks the exit "
      "status and the start\nof the last line, and the output's points (`VITSIM_UPDATE_DOCS=1 "
      "build/tests/test_robustness_reports`\nrewrites this table).\n\n"
      "| # | case | command | exit | last line |\n| --- | --- | --- | --- | --- |\n";
  int i = 0;
  for (const auto& c : all)
    o += fmt::format("| {} | {} | `{}` | {} | `{} ...` |\n", ++i, c.what, c.command, c.status, c.last_line);
  return o;
}

}  // namespace

TEST_CASE("failed points: docs/robustness.md's table is these cases, each run",
          "[robustness][points][docs]") {
  const Folder f;
  const auto all = point_cases();
  for (const auto& c : all) {
    INFO(c.what << "\n  " << c.command);
    std::string cmd = c.command;
    const size_t at = cmd.find("vitsim ");
    cmd.replace(at, 6, VITSIM_BINARY);
    const auto r = f.run(cmd);
    CHECK(r.status == c.status);
    // The case's line: the last one, or for plan the line of the excluded point (plan's summary ends with
    // the largest micro-batch that fits).
    const bool found =
        last_line(r.out).rfind(c.last_line, 0) == 0 || r.out.find("\n" + c.last_line) != std::string::npos;
    CHECK(found);
  }
  const std::string doc = render_points(all);
  CHECK(vt::doc_section(vt::source("docs/robustness.md"), "test_robustness_points", doc) == doc);
}
