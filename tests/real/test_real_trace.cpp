// Issue 15 item 3: `vitsim train --trace` writes the format of `vitsim predict --trace`
// (core/results/trace.hpp): the same processes, tracks and event names for the same scenario, so the two load
// side by side in Perfetto and a program can diff them. Runs the trainer on 2 CPU ranks under mpirun, a few
// steps.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
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

// The "memory" counter tracks ("C" events): process name ("rank 1") -> (ts in ns, bytes) in file order;
// every one named "memory" with the one arg "bytes".
std::map<std::string, std::vector<std::pair<long long, double>>> memory_of(const std::string& path) {
  const json j = json::parse(vitsim::read_file(path));
  std::map<int, std::string> process;
  for (const auto& e : j.at("traceEvents"))
    if (e["ph"] == "M" && e["name"] == "process_name") {
      const std::string p = e["args"]["name"];
      process[e["pid"]] = p.substr(0, p.find(" ("));
    }
  std::map<std::string, std::vector<std::pair<long long, double>>> out;
  for (const auto& e : j.at("traceEvents"))
    if (e["ph"] == "C") {
      CHECK(e["name"] == "memory");
      CHECK(e["args"].size() == 1);
      out[process.at(e["pid"])].push_back(
          {std::llround(e["ts"].get<double>() * 1000), e["args"]["bytes"].get<double>()});
    }
  return out;
}

// The "X" events of a process ("rank 0") named `prefix`...: (ts, ts + dur) in ns.
std::vector<std::pair<long long, long long>> slices_of(const std::string& path, const std::string& process,
                                                       const std::string& prefix) {
  const json j = json::parse(vitsim::read_file(path));
  int pid = -1;
  for (const auto& e : j.at("traceEvents"))
    if (e["ph"] == "M" && e["name"] == "process_name" &&
        e["args"]["name"].get<std::string>().rfind(process + " (", 0) == 0)
      pid = e["pid"];
  std::vector<std::pair<long long, long long>> out;
  for (const auto& e : j.at("traceEvents"))
    if (e["ph"] == "X" && e["pid"] == pid && e["name"].get<std::string>().rfind(prefix, 0) == 0) {
      const long long ts = std::llround(e["ts"].get<double>() * 1000);
      out.push_back({ts, ts + std::llround(e["dur"].get<double>() * 1000)});
    }
  return out;
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
  // The same events: on these CPU devices neither copies a batch (no h2d), as on a GPU both would. But the
  // prediction's `straggler wait` (the wait for the slowest of N ranks' jitter, docs/model.md "Stragglers"),
  // which a measured run cannot tell from its all-reduce: the trainer's is inside its comm wait.
  std::set<std::string> predicted = p.events;
  CHECK(predicted.erase("straggler wait") == 1);
  CHECK(m.events.count("straggler wait") == 0);
  CHECK(m.events == predicted);
  CHECK(p.events.count("h2d") == 0);
  CHECK(m.events.count("fwd patch_embed"));
  CHECK(m.events.count("bwd head"));
  CHECK(m.events.count("allreduce bucket 0"));
  CHECK(m.events.count("data wait"));
  CHECK(m.events.count("optimizer"));
  CHECK(m.events.count("ProfilerStep#N"));  // issue 28 item 8: derived by the one writer for both
  for (const auto& [name, tid] : m.tracks) CHECK(p.tracks.at(name) == tid);

  // Issue 28 item 8: a measured "memory" counter per rank, as predict's (same name, same arg).
  const auto mm = memory_of(d / "measured.json"), pm = memory_of(d / "predicted.json");
  CHECK(pm.size() == 2);
  REQUIRE(mm.size() == 2);
  for (const auto& [process, samples] : mm) {
    INFO(process);
    CHECK(pm.count(process));
    // A sample at least at each forward slice's end (and backward's, and each step's ends).
    const auto fwd = slices_of(d / "measured.json", process, "fwd ");
    const auto steps = slices_of(d / "measured.json", process, "ProfilerStep#");
    REQUIRE(steps.size() == 3);  // run.max_steps
    CHECK(samples.size() >= fwd.size() + 2 * steps.size());
    double lo = samples.front().second, hi = lo;
    for (size_t i = 0; i < samples.size(); ++i) {
      CHECK(samples[i].second > 0);  // a resident set size (these CPU ranks) is never 0
      if (i > 0) CHECK(samples[i].first >= samples[i - 1].first);
      lo = std::min(lo, samples[i].second);
      hi = std::max(hi, samples[i].second);
    }
    // Every forward slice's end is a sample's time (the writer keeps the trainer's times to the ns).
    std::set<long long> at;
    for (const auto& s : samples) at.insert(s.first);
    size_t fwd_ends = 0;
    for (const auto& [a, b] : fwd) fwd_ends += at.count(b);
    CHECK(fwd_ends == fwd.size());
    // The first step's forward allocates its activations, fresh pages for the resident set: some sample
    // at the end of one of that step's forward slices lies above the first sample, the step's start
    // (before its first event). Later steps may reuse the pages malloc kept, so only the first is asserted.
    CHECK(samples.front().first <= steps[0].first);
    const double start = samples.front().second;
    double fwd_peak = 0;
    for (const auto& [a, b] : fwd)
      if (b <= steps[0].second)
        for (const auto& [t, bytes] : samples)
          if (t == b) fwd_peak = std::max(fwd_peak, bytes);
    CHECK(fwd_peak > start);
    CHECK(hi > lo);
  }
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
