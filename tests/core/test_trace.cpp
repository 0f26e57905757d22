// Issue 15 item 3: one trace format for predicted and measured runs (core/results/trace.hpp), written by
// `vitsim predict --trace` here; tests/real/test_real_trace.cpp compares it with `vitsim train --trace`.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "test_util.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/model/vit.hpp"
#include "vitsim/core/results/trace.hpp"

using namespace vitsim;
using json = nlohmann::json;

namespace {

using vt::error_of;

// What a trace file holds, read as a program diffing two of them would.
struct ReadTrace {
  std::map<int, std::string> process;                 // pid -> process_name
  std::map<int, std::string> labels;                  // pid -> process_labels
  std::map<std::pair<int, int>, std::string> thread;  // (pid, tid) -> thread_name
  std::vector<json> events;                           // "X" events
  json other;
  std::set<std::string> names() const {
    std::set<std::string> out;
    for (const auto& e : events) out.insert(e["name"].get<std::string>());
    return out;
  }
};

ReadTrace read_trace(const std::string& text) {
  ReadTrace t;
  const json j = json::parse(text);  // throws on invalid JSON: the test fails
  for (const auto& e : j.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "M" && e["name"] == "process_name") t.process[e["pid"]] = e["args"]["name"];
    if (ph == "M" && e["name"] == "process_labels") t.labels[e["pid"]] = e["args"]["labels"];
    if (ph == "M" && e["name"] == "thread_name")
      t.thread[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
    if (ph == "X") t.events.push_back(e);
  }
  t.other = j.at("otherData");
  return t;
}

}  // namespace

TEST_CASE("trace writer: processes per rank, three tracks, events in microseconds with args", "[trace]") {
  TracePoint p;
  p.ranks = {0, 2};
  p.hosts = {"node0", "node0", "node1"};
  p.events = {{0, TraceTrack::Data, kTraceDataWait, 0, 0.001, {}},
              {0, TraceTrack::Compute, trace_fwd("patch_embed"), 0.001, 0.0025, {}},
              {2, TraceTrack::Compute, trace_bwd("block0.mlp"), 0.01, 0.002, {}},
              {2, TraceTrack::Comm, trace_allreduce(3), 0.0125, 0.004, allreduce_args(8e6, 0.004, 4)},
              {1, TraceTrack::Compute, kTraceOptimizer, 0.02, 0.001, {}}};  // rank 1 is not traced
  const ReadTrace t = read_trace(write_trace({p}, "predicted", {"a note"}));
  CHECK(t.process == std::map<int, std::string>{{0, "rank 0 (node0)"}, {1, "rank 2 (node1)"}});
  CHECK(t.labels.empty());  // one point: no label
  for (int pid : {0, 1}) {
    CHECK(t.thread.at({pid, 0}) == "compute");
    CHECK(t.thread.at({pid, 1}) == "comm");
    CHECK(t.thread.at({pid, 2}) == "data");
  }
  REQUIRE(t.events.size() == 4);
  CHECK(t.events[0]["name"] == "data wait");
  CHECK(t.events[0]["tid"] == 2);
  CHECK(t.events[0]["dur"].get<double>() == 1000.0);  // 1 ms in microseconds
  CHECK(t.events[1]["name"] == "fwd patch_embed");
  CHECK(t.events[1]["ts"].get<double>() == 1000.0);
  CHECK(t.events[1]["dur"].get<double>() == 2500.0);
  CHECK(t.events[2]["name"] == "bwd block0.mlp");
  CHECK(t.events[2]["pid"] == 1);
  const json& ar = t.events[3];
  CHECK(ar["name"] == "allreduce bucket 3");
  CHECK(ar["cat"] == "comm");
  CHECK(ar["tid"] == 1);
  CHECK(ar["args"]["bytes"].get<double>() == 8e6);
  CHECK(ar["args"]["algbw_GBps"].get<double>() == Approx(2.0));              // 8 MB / 4 ms
  CHECK(ar["args"]["busbw_GBps"].get<double>() == Approx(2.0 * 2 * 3 / 4));  // x 2(n-1)/n, n = 4
  CHECK(t.other["source"] == "predicted");
  CHECK(t.other["notes"] == json::array({"a note"}));
}

TEST_CASE("trace writer: several points get a process per point and rank, labelled", "[trace]") {
  TracePoint a, b;
  a.label = "point 1 {\"micro_batch\":\"8\"}";
  b.label = "point 2 {\"micro_batch\":\"16\"}";
  a.ranks = b.ranks = {0};
  a.hosts = b.hosts = {"h\"ost"};  // a name the JSON must escape
  a.events = {{0, TraceTrack::Compute, kTraceOptimizer, 0, 1e-3, {}}};
  b.events = a.events;
  const ReadTrace t = read_trace(write_trace({a, b}, "measured"));
  CHECK(t.process == std::map<int, std::string>{{0, "rank 0 (h\"ost)"}, {1, "rank 0 (h\"ost)"}});
  CHECK(t.labels.at(0) == a.label);
  CHECK(t.labels.at(1) == b.label);
  // Per point: its step's slice (ProfilerStep#0, the optimizer ends the step), then the optimizer.
  REQUIRE(t.events.size() == 4);
  CHECK(t.events[0]["name"] == "ProfilerStep#0");
  CHECK(t.events[1]["name"] == "optimizer");
  CHECK(t.events[0]["pid"] == 0);
  CHECK(t.events[1]["pid"] == 0);
  CHECK(t.events[2]["pid"] == 1);
  CHECK(t.events[3]["pid"] == 1);
  CHECK(t.other["source"] == "measured");
}

TEST_CASE("trace rank lists (--trace-ranks): ranks and ranges, parsed strictly", "[trace]") {
  const RankList l = parse_rank_list("0,3,8-15");
  CHECK(l.ranges == std::vector<std::pair<int, int>>{{0, 0}, {3, 3}, {8, 15}});
  CHECK(l.max() == 15);
  CHECK(traced_ranks(&l, 10) == std::vector<int>{0, 3, 8, 9});
  CHECK(traced_ranks(&l, 100) == std::vector<int>{0, 3, 8, 9, 10, 11, 12, 13, 14, 15});
  CHECK(parse_rank_list("7").ranges == std::vector<std::pair<int, int>>{{7, 7}});
  CHECK(parse_rank_list("5-5,2").ranges == std::vector<std::pair<int, int>>{{5, 5}, {2, 2}});
  const std::string hint = " (expected ranks and ranges such as 0,3,8-15)";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "--trace-ranks '': empty list"},
      {"1,,2", "--trace-ranks '1,,2': item 2 is empty"},
      {"1,", "--trace-ranks '1,': item 2 is empty"},
      {",1", "--trace-ranks ',1': item 1 is empty"},
      {"a", "--trace-ranks 'a': 'a' is not a rank (a whole number >= 0)"},
      {"1, 2", "--trace-ranks '1, 2': ' 2' is not a rank (a whole number >= 0)"},
      {"-3", "--trace-ranks '-3': '-3' is not a rank (ranks are whole numbers >= 0)"},
      {"+3", "--trace-ranks '+3': '+3' is not a rank (a whole number >= 0)"},
      {"1.5", "--trace-ranks '1.5': '1.5' is not a rank (a whole number >= 0)"},
      {"9-2", "--trace-ranks '9-2': range 9-2 runs backwards"},
      {"1-2-3", "--trace-ranks '1-2-3': '2-3' is not a rank (a whole number >= 0)"},
      {"3-", "--trace-ranks '3-': '' is not a rank (a whole number >= 0)"},
      {"16777216", "--trace-ranks '16777216': rank 16777216 is above 16777215"},
      {"99999999999", "--trace-ranks '99999999999': rank 99999999999 is above 16777215"},
  };
  for (const auto& [text, message] : bad) CHECK(error_of([&] { parse_rank_list(text); }) == message + hint);
}

TEST_CASE("default trace ranks: the first 64, with a note when more exist", "[trace]") {
  CHECK(traced_ranks(nullptr, 3) == std::vector<int>{0, 1, 2});
  CHECK(traced_ranks(nullptr, 200).size() == kDefaultTraceRanks);
  CHECK(traced_ranks(nullptr, 200).back() == 63);
  CHECK(trace_ranks_note(nullptr, 64).empty());
  CHECK(trace_ranks_note(nullptr, 65) ==
        "trace: ranks 0-63 of 65 kept; --trace-ranks LIST chooses others (e.g. --trace-ranks 0-64 for all)");
  const RankList l = parse_rank_list("0-99");
  CHECK(trace_ranks_note(&l, 200).empty());  // the user chose
}

namespace {

// A data-parallel scenario of `nodes` x 8 H100s (platforms/h100-16x8-ndr.xml), tiny ViT, few steps.
std::string scenario(const vt::TempDir& d, int nodes) {
  return d.file("s.xml", fmt::format(R"(<scenario name="trace">
  <cluster platform="{}" nodes="{}" gpus_per_node="8"/>
  <model preset="vit_fmnist_tiny"/>
  <dataset name="synthetic" train_samples="100000" image_size="28" channels="1"/>
  <training micro_batch="32" precision="fp32"/>
  <parallelism overlap="true" bucket_size="64KiB"/>
  <simulation steps="3" warmup="1"/>
</scenario>)",
                                     vt::source("platforms/h100-16x8-ndr.xml"), nodes));
}

}  // namespace

TEST_CASE("predict --trace: the documented names, per layer and per bucket", "[trace][cli]") {
  vt::TempDir d;
  const std::string s = scenario(d, 1);
  auto r = vt::vitsim("predict " + s + " --quiet --trace " + d / "t.json" + " --out " + d / "r.txt");
  REQUIRE(r.status == 0);
  const ReadTrace t = read_trace(vitsim::read_file(d / "t.json"));
  REQUIRE(t.process.size() == 8);
  CHECK(t.process.at(0).rfind("rank 0 (", 0) == 0);
  CHECK(t.process.at(7).rfind("rank 7 (", 0) == 0);
  const std::set<std::string> names = t.names();
  CHECK(names.count("data wait"));
  CHECK(names.count("optimizer"));
  CHECK(names.count("comm wait"));
  for (const auto& l : build_workload(vit_preset("vit_fmnist_tiny")).layers) {
    CHECK(names.count("fwd " + l.name));
    CHECK(names.count("bwd " + l.name));
  }
  // Every all-reduce is a bucket's, with its bandwidths; busbw = algbw x 2(n-1)/n for n = 8.
  int allreduces = 0;
  for (const auto& e : t.events) {
    const std::string n = e["name"];
    if (n.rfind("allreduce", 0) != 0) continue;
    ++allreduces;
    CHECK(n.rfind("allreduce bucket ", 0) == 0);
    CHECK(e["tid"] == 1);
    const double bytes = e["args"]["bytes"], algbw = e["args"]["algbw_GBps"], busbw = e["args"]["busbw_GBps"];
    // ts and the end are written to the nanosecond, dur as their difference (at most 0.001 us from the
    // time); the bandwidths from the unrounded time.
    const double dur_us = e["dur"];
    CHECK(algbw == Approx(bytes / (dur_us * 1e-6) / 1e9).epsilon(0.001 / dur_us + 1e-9));
    CHECK(busbw == Approx(algbw * 2 * 7 / 8));
  }
  CHECK(allreduces > 0);
}

TEST_CASE("predict --trace-ranks keeps the listed ranks, the default keeps 64 with a note", "[trace][cli]") {
  vt::TempDir d;
  const std::string s = scenario(d, 9);  // 72 ranks
  auto listed = vt::vitsim("predict " + s + " --quiet --trace " + d / "t.json" +
                           " --trace-ranks 0,3,8-10,71 --out " + d / "r.txt");
  REQUIRE(listed.status == 0);
  ReadTrace t = read_trace(vitsim::read_file(d / "t.json"));
  std::set<std::string> kept;
  for (const auto& [pid, name] : t.process) kept.insert(name.substr(0, name.find(' ', 5)));
  CHECK(kept == std::set<std::string>{"rank 0", "rank 3", "rank 8", "rank 9", "rank 10", "rank 71"});
  std::set<int> pids;
  for (const auto& e : t.events) pids.insert(e["pid"].get<int>());
  CHECK(pids.size() == 6);
  CHECK(t.other["notes"].empty());

  auto all = vt::vitsim("predict " + s + " --trace " + d / "u.json" + " --out " + d / "r.txt");
  REQUIRE(all.status == 0);
  const std::string note =
      "trace: ranks 0-63 of 72 kept; --trace-ranks LIST chooses others (e.g. --trace-ranks 0-71 for all)";
  CHECK(all.out.find("vitsim: note: " + note + "\n") != std::string::npos);
  t = read_trace(vitsim::read_file(d / "u.json"));
  CHECK(t.process.size() == 64);
  CHECK(t.other["notes"] == json::array({note}));
}

TEST_CASE("predict --trace-ranks: a bad list is a bad command line (exit 2) in one line", "[trace][cli]") {
  vt::TempDir d;
  const std::string s = scenario(d, 1);
  const std::string hint = " (expected ranks and ranges such as 0,3,8-15)\n";
  struct Case {
    std::string list, message;
  };
  for (const Case& c : {Case{"0,,3", "--trace-ranks '0,,3': item 2 is empty"},
                        Case{"x", "--trace-ranks 'x': 'x' is not a rank (a whole number >= 0)"},
                        Case{"4-1", "--trace-ranks '4-1': range 4-1 runs backwards"}}) {
    auto r = vt::vitsim("predict " + s + " --trace " + d / "t.json" + " --trace-ranks '" + c.list + "'");
    CHECK(r.status == 2);
    CHECK(r.out == "vitsim: error: " + c.message + hint);
    CHECK_FALSE(vt::fs::exists(d / "t.json"));
  }
  auto alone = vt::vitsim("predict " + s + " --trace-ranks 0");
  CHECK(alone.status == 2);
  CHECK(alone.out ==
        "vitsim: error: --trace-ranks needs --trace FILE: it chooses the ranks the trace keeps\n");
  // A rank the scenario does not have: the list is fine, the scenario is smaller (exit 1).
  auto beyond = vt::vitsim("predict " + s + " --quiet --trace " + d / "t.json" + " --trace-ranks 0,8");
  CHECK(beyond.status == 1);
  CHECK(beyond.out == "vitsim: error: --trace-ranks '0,8': rank 8 is beyond the scenario's 8 ranks (0-7)\n");
}

// Issue 28 item 8: slices that touch in time touch in the file, PyTorch's step slices, for both writers.
namespace {

long long ns_of(const json& v) {  // a written microsecond figure in whole nanoseconds
  return std::llround(v.get<double>() * 1000);
}

}  // namespace

TEST_CASE("trace writer: dur is the rounded end less the rounded start, no 1 ns overlaps", "[trace]") {
  TracePoint p;
  p.ranks = {0};
  p.hosts = {"h"};
  // A from 0.6 ns for 1.6 ns (ends at 2.2 ns), B from 2.2 ns: rounding ts and dur apart wrote A as
  // ts 1 ns, dur 2 ns (ending at 3 ns), over B's start at 2 ns.
  p.events = {{0, TraceTrack::Compute, trace_fwd("a"), 0.6e-9, 1.6e-9, {}},
              {0, TraceTrack::Compute, trace_fwd("b"), 2.2e-9, 1e-9, {}}};
  const ReadTrace t = read_trace(write_trace({p}, "predicted"));
  REQUIRE(t.events.size() == 2);
  CHECK(ns_of(t.events[0]["ts"]) == 1);
  CHECK(ns_of(t.events[0]["dur"]) == 1);  // round(2.2) - round(0.6) = 2 - 1
  CHECK(ns_of(t.events[0]["ts"]) + ns_of(t.events[0]["dur"]) == ns_of(t.events[1]["ts"]));
}

TEST_CASE("trace writer: a ProfilerStep#N slice per step, the parent of the step's work", "[trace]") {
  TracePoint p;
  p.ranks = {0};
  p.hosts = {"h"};
  // Two steps of 5 ms: loader wait, forward, backward, optimizer.
  for (int s = 0; s < 2; ++s) {
    const double t0 = 5e-3 * s;
    for (TraceEvent e : {TraceEvent{0, TraceTrack::Data, kTraceDataWait, t0, 1e-3, {}},
                         TraceEvent{0, TraceTrack::Compute, trace_fwd("head"), t0 + 1e-3, 1e-3, {}},
                         TraceEvent{0, TraceTrack::Compute, trace_bwd("head"), t0 + 2e-3, 2e-3, {}},
                         TraceEvent{0, TraceTrack::Compute, kTraceOptimizer, t0 + 4e-3, 1e-3, {}}})
      p.events.push_back(e);
  }
  const ReadTrace t = read_trace(write_trace({p}, "measured"));
  REQUIRE(t.events.size() == 10);
  // The steps come first (a parent before its children), on the compute track, 0-5 ms and 5-10 ms.
  for (int s = 0; s < 2; ++s) {
    const json& e = t.events[s];
    CHECK(e["name"] == fmt::format("ProfilerStep#{}", s));
    CHECK(e["cat"] == "user_annotation");
    CHECK(e["tid"] == 0);
    CHECK(ns_of(e["ts"]) == 5000000LL * s);
    CHECK(ns_of(e["dur"]) == 5000000LL);
  }
}

TEST_CASE("predict --trace: slices on one track nest or follow, one step slice per optimizer step",
          "[trace][cli]") {
  vt::TempDir d;
  auto r =
      vt::vitsim("predict " + scenario(d, 2) + " --quiet --trace " + d / "t.json" + " --out " + d / "r.txt");
  REQUIRE(r.status == 0);
  const ReadTrace t = read_trace(vitsim::read_file(d / "t.json"));
  std::map<std::pair<int, int>, std::vector<std::pair<long long, long long>>>
      spans;  // (pid, tid) -> [start, end)
  std::map<int, int> steps, optimizers;
  for (const auto& e : t.events) {
    const long long start = ns_of(e["ts"]);
    spans[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back({start, start + ns_of(e["dur"])});
    if (e["name"].get<std::string>().rfind("ProfilerStep#", 0) == 0) ++steps[e["pid"]];
    if (e["name"] == "optimizer") ++optimizers[e["pid"]];
  }
  REQUIRE(optimizers.size() == 16);  // 2 nodes x 8 GPUs, every rank traced
  CHECK(steps == optimizers);
  // On one track, two slices either nest or one ends before (or where) the other starts.
  int overlaps = 0;
  for (auto& [track, v] : spans) {
    std::sort(v.begin(), v.end(),
              [](auto& a, auto& b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
    std::vector<long long> open;  // ends of the enclosing slices
    for (const auto& [start, end] : v) {
      while (!open.empty() && open.back() <= start) open.pop_back();
      if (!open.empty() && end > open.back()) ++overlaps;
      open.push_back(end);
    }
  }
  CHECK(overlaps == 0);
}

TEST_CASE("trace writer: the memory counter rises at each forward's end and falls at each backward's",
          "[trace]") {
  TracePoint p;
  p.ranks = {0};
  p.hosts = {"h"};
  p.memory.resident_bytes = 100;
  p.memory.saved_bytes = {{"a", 10}, {"b", 20}};
  p.events = {{0, TraceTrack::Compute, trace_fwd("a"), 0, 1e-3, {}},
              {0, TraceTrack::Compute, trace_fwd("b"), 1e-3, 1e-3, {}},
              {0, TraceTrack::Compute, trace_bwd("b"), 2e-3, 1e-3, {}},
              {0, TraceTrack::Compute, trace_bwd("a"), 3e-3, 1e-3, {}},
              {0, TraceTrack::Compute, kTraceOptimizer, 4e-3, 1e-3, {}}};
  const json j = json::parse(write_trace({p}, "predicted"));
  std::vector<std::pair<long long, double>> counter;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "C") {
      CHECK(e["name"] == "memory");
      counter.push_back({ns_of(e["ts"]), e["args"]["bytes"].get<double>()});
    }
  // Resident at the first event; + a at 1 ms, + b at 2 ms (the peak: resident + every layer's), - b, - a.
  CHECK(counter == std::vector<std::pair<long long, double>>{
                       {0, 100}, {1000000, 110}, {2000000, 130}, {3000000, 110}, {4000000, 100}});
  p.memory = {};  // no memory model: no counter
  CHECK(write_trace({p}, "measured").find("\"ph\": \"C\"") == std::string::npos);
}

TEST_CASE("trace writer: a measured run's memory samples, in time order, in place of the model's",
          "[trace]") {
  TracePoint p;
  p.ranks = {0, 1};
  p.hosts = {"h", "h"};
  p.memory.resident_bytes = 100;  // a model figure the measured rank's samples replace
  p.memory.saved_bytes = {{"a", 10}};
  p.events = {{0, TraceTrack::Compute, trace_fwd("a"), 0, 1e-3, {}},
              {0, TraceTrack::Compute, trace_bwd("a"), 1e-3, 1e-3, {}},
              {1, TraceTrack::Compute, trace_fwd("a"), 0, 1e-3, {}},
              {1, TraceTrack::Compute, trace_bwd("a"), 1e-3, 1e-3, {}}};
  // Rank 0's samples out of order (a backward hook's thread may record late), two in the same nanosecond
  // (the later one is kept); rank 1 has none, so it keeps the model's counter.
  p.measured_memory[0] = {{2e-3, 500}, {0, 300}, {1e-3, 350}, {1e-3 + 1e-10, 400}};
  const json j = json::parse(write_trace({p}, "measured"));
  std::map<int, std::vector<std::pair<long long, double>>> counter;  // pid -> samples
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "C") {
      CHECK(e["name"] == "memory");
      counter[e["pid"]].push_back({ns_of(e["ts"]), e["args"]["bytes"].get<double>()});
    }
  CHECK(counter[0] == std::vector<std::pair<long long, double>>{{0, 300}, {1000000, 400}, {2000000, 500}});
  CHECK(counter[1] == std::vector<std::pair<long long, double>>{{0, 100}, {1000000, 110}, {2000000, 100}});
  // No samples for a rank, or an empty list: the model's counter, byte for byte as without the field.
  p.measured_memory.clear();
  const std::string model_only = write_trace({p}, "predicted");
  p.measured_memory[1] = {};
  CHECK(write_trace({p}, "predicted") == model_only);
}

TEST_CASE("trace writer: a ring's all-reduces get a flow arrow from each rank to the next", "[trace]") {
  TracePoint p;
  p.ranks = {0, 1, 2};
  p.hosts = {"h0", "h1", "h2"};
  p.ring_size = 3;
  for (int r = 0; r < 3; ++r)
    for (int step = 0; step < 2; ++step)
      p.events.push_back({r, TraceTrack::Comm, trace_allreduce(0), 0.01 * step + 1e-4 * r, 1e-3, {}});
  const json j = json::parse(write_trace({p}, "predicted"));
  std::map<std::string, std::pair<json, json>> flows;  // id -> (start, finish)
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "s") flows[e["id"]].first = e;
    if (e["ph"] == "f") flows[e["id"]].second = e;
  }
  REQUIRE(flows.size() == 6);  // 3 ranks x 2 all-reduces, each to its ring successor
  std::set<std::pair<int, int>> edges;
  for (const auto& [id, f] : flows) {
    REQUIRE(f.first.is_object());
    REQUIRE(f.second.is_object());
    CHECK(f.first["tid"] == 1);  // on comm
    CHECK(f.second["bp"] == "e");
    CHECK(f.first["name"] == "ring");
    // The n-th all-reduce of a rank to the n-th of the next: the same step (10 ms apart).
    CHECK(std::abs(ns_of(f.first["ts"]) - ns_of(f.second["ts"])) < 1000000);
    edges.insert({f.first["pid"].get<int>(), f.second["pid"].get<int>()});
  }
  CHECK(edges == std::set<std::pair<int, int>>{{0, 1}, {1, 2}, {2, 0}});
  p.ring_size = 0;  // another collective: no arrows
  CHECK(write_trace({p}, "predicted").find("\"ph\": \"s\"") == std::string::npos);
}

TEST_CASE("predict --trace: the memory counter peaks at the reported memory, ring arrows per all-reduce",
          "[trace][cli]") {
  vt::TempDir d;
  auto r = vt::vitsim("predict " + scenario(d, 1) +
                      " --quiet --set parallelism.collective=ring --format json --trace " + d / "t.json" +
                      " --out " + d / "r.json");
  REQUIRE(r.status == 0);
  const double reported = json::parse(vitsim::read_file(d / "r.json"))["points"][0]["memory_per_gpu_bytes"];
  const json j = json::parse(vitsim::read_file(d / "t.json"));
  std::map<int, double> peak;
  std::map<int, int> allreduces;
  int flows = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "C") peak[e["pid"]] = std::max(peak[e["pid"]], e["args"]["bytes"].get<double>());
    if (e["ph"] == "X" && e["name"].get<std::string>().rfind("allreduce bucket ", 0) == 0)
      ++allreduces[e["pid"]];
    if (e["ph"] == "s") ++flows;
  }
  REQUIRE(peak.size() == 8);
  // Every GPU is alike: the peak is resident + every layer's saved activations = the memory per GPU.
  for (const auto& [pid, bytes] : peak) CHECK(bytes == Approx(reported).margin(1));
  // Every rank's every all-reduce sends to the next rank's (8 ranks, all traced).
  int total = 0;
  for (const auto& [pid, n] : allreduces) total += n;
  CHECK(total > 0);
  CHECK(flows == total);
}
