// Issue 15 item 3: `vitsim train --trace` writes the format of `vitsim predict --trace`
// (core/formats/trace.hpp): the same processes, tracks and event names for the same scenario, so the two load
// side by side in Perfetto and a program can diff them. Runs the trainer on 2 CPU ranks under mpirun, a few
// steps.
#include <catch2/catch.hpp>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "test_util.hpp"
#include "vitsim/core/base/io.hpp"

using json = nlohmann::json;

namespace {

std::string mpirun(int ranks) {
  return fmt::format("mpirun --allow-run-as-root --oversubscribe -np {} {} train ", ranks, VITSIM_BINARY);
}

// tests/real/test_real_mpi.cpp's small run of scenarios/local/fmnist-vit.xml (2 CPU ranks), 3 steps.
std::string small_run(const std::string& extra) {
  return vt::source("scenarios/local/fmnist-vit.xml") +
         " --quiet --set dataset.train_samples=384 --set run.eval_samples=64 --set training.epochs=1"
         " --set run.max_steps=3 " +
         extra;
}

struct Names {
  std::set<std::string> processes, threads, events;
  std::map<std::string, int> tracks;  // event name -> tid
};

Names names_of(const std::string& path) {
  Names n;
  const json j = json::parse(vitsim::read_file(path));
  for (const auto& e : j.at("traceEvents")) {
    if (e["ph"] == "M" && e["name"] == "process_name") {
      const std::string p = e["args"]["name"];
      n.processes.insert(p.substr(0, p.find(" (")));  // "rank 1 (host)" -> "rank 1": the hosts differ
    }
    if (e["ph"] == "M" && e["name"] == "thread_name") n.threads.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] == "X") {
      // A step's slice is numbered ("ProfilerStep#2", PyTorch's name): the two runs may take other step
      // counts, so the names compare without the number.
      std::string name = e["name"];
      if (name.rfind("ProfilerStep#", 0) == 0) name = "ProfilerStep#N";
      n.events.insert(name);
      n.tracks[name] = e["tid"];
    }
  }
  return n;
}

}  // namespace

TEST_CASE("train --trace and predict --trace: the same processes, tracks and event names",
          "[real][mpi][trace]") {
  vt::TempDir d;
  auto train = vt::run(mpirun(2) + small_run("--trace " + d / "measured.json"));
  INFO(train.out);
  REQUIRE(train.status == 0);
  auto predict = vt::vitsim("predict " + small_run("--trace " + d / "predicted.json --out " + d / "p.txt"));
  INFO(predict.out);
  REQUIRE(predict.status == 0);
  const Names m = names_of(d / "measured.json"), p = names_of(d / "predicted.json");
  CHECK(m.processes == std::set<std::string>{"rank 0", "rank 1"});
  CHECK(p.processes == m.processes);
  CHECK(m.threads == std::set<std::string>{"compute", "comm", "data"});
  CHECK(p.threads == m.threads);
  // The same events: on these CPU devices neither copies a batch (no h2d), as on a GPU both would.
  CHECK(m.events == p.events);
  CHECK(p.events.count("h2d") == 0);
  CHECK(m.events.count("fwd patch_embed"));
  CHECK(m.events.count("bwd head"));
  CHECK(m.events.count("allreduce bucket 0"));
  CHECK(m.events.count("data wait"));
  CHECK(m.events.count("optimizer"));
  CHECK(m.events.count("ProfilerStep#N"));  // issue 28 item 8: derived by the one writer for both
  for (const auto& [name, tid] : m.tracks) CHECK(p.tracks.at(name) == tid);
}

TEST_CASE("train --trace-ranks keeps the listed ranks, a bad list is a bad command line",
          "[real][mpi][trace]") {
  vt::TempDir d;
  auto one = vt::run(mpirun(2) + small_run("--set run.max_steps=1 --trace " + d / "t.json --trace-ranks 1"));
  INFO(one.out);
  REQUIRE(one.status == 0);
  CHECK(names_of(d / "t.json").processes == std::set<std::string>{"rank 1"});
  // Refused before MPI starts, as predict refuses it.
  auto bad = vt::vitsim("train " + small_run("--trace " + d / "u.json --trace-ranks 1-0"));
  CHECK(bad.status == 2);
  CHECK(bad.out ==
        "vitsim: error: --trace-ranks '1-0': range 1-0 runs backwards (expected ranks and ranges such as "
        "0,3,8-15)\n");
  auto beyond =
      vt::run(mpirun(2) + small_run("--set run.max_steps=1 --trace " + d / "v.json --trace-ranks 2"));
  CHECK(beyond.status != 0);
  // Known only once MPI has started: every rank says it, in the trainer's error format.
  CHECK(beyond.out.find(": --trace-ranks '2': rank 2 is beyond this job's 2 ranks (0-1)\n") !=
        std::string::npos);
  CHECK(beyond.out.find("vitsim: rank 0 on ") != std::string::npos);
}
