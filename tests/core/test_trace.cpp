// Issue 15 item 3: one trace format for predicted and measured runs (core/formats/trace.hpp), written by
// `vitsim predict --trace` here; tests/real/test_real_trace.cpp compares it with `vitsim train --trace`.
#include <catch2/catch.hpp>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "test_util.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/trace.hpp"
#include "vitsim/core/model/vit.hpp"

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
  REQUIRE(t.events.size() == 2);
  CHECK(t.events[0]["pid"] == 0);
  CHECK(t.events[1]["pid"] == 1);
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
    // dur is written to the nanosecond (0.0005 us of rounding); the bandwidths from the unrounded time.
    const double dur_us = e["dur"];
    CHECK(algbw == Approx(bytes / (dur_us * 1e-6) / 1e9).epsilon(0.0005 / dur_us + 1e-9));
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
