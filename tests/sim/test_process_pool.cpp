// Zygotes (issue 14, "a 1,000-point plan of Vector"): predict's and plan's points of one platform file fork
// from one process that loaded the platform once (sim/engine/process_pool.hpp run_forked_groups,
// gather_forked with ForkedPoints::group_of; sim/point/simulate.hpp prepare_engine + simulate_prepared). The
// pool with made-up tasks (groups, failures per task, the job limit, a zygote that dies), then real points of
// several platforms (one flat-star) against simulate_point, a platform that fails to load, and the CLI with
// two platform files and with a what-if swept over two edits (two edited copies).
#include <sys/mman.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <csignal>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "test_util.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/platform/platform_flat.hpp"
#include "vitsim/sim/engine/process_pool.hpp"
#include "vitsim/sim/point/simulate.hpp"

using namespace vitsim;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Counters shared by the test process, its zygotes and their children (an anonymous shared mapping is
// inherited through every fork).
struct Shared {
  std::atomic<int> prepares[8];
  std::atomic<int> running, peak;
};
Shared* shared_counters() {
  void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  return new (p) Shared{};
}

// What a zygote's prepare() left for its children (each zygote has its own copy).
std::string g_prepared;
pid_t g_zygote = 0;

// The message of the Error that fn throws, in a child process (SimGrid has one engine per process).
std::string error_in_child(const std::function<void()>& fn) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string msg = "(no error)";
    try {
      fn();
    } catch (const std::exception& e) {
      msg = e.what();
    }
    if (write(fds[1], msg.data(), msg.size()) < 0) _exit(3);
    _exit(0);
  }
  close(fds[1]);
  const std::string out = vt::read_to_end(fds[0]);
  waitpid(pid, nullptr, 0);
  return out;
}

// The zygote tests' scenario in d/NAME: ViT-B/16 at micro-batch 16 on 1 node x 2 GPUs of a.xml, 4 steps,
// with the given <sweep> lines.
std::string sweep_scenario(const vt::TempDir& d, const std::string& name, const std::string& sweeps) {
  return d.file(name, fmt::format(R"(<scenario name="t">
  <cluster platform="a.xml" nodes="1" gpus_per_node="2"/>
  <model preset="vit_b_16"/>
  <dataset name="cifar10" resize="224"/>
  <training micro_batch="16" precision="fp32"/>
  <simulation steps="4" warmup="1"/>
{}</scenario>)",
                                  sweeps));
}

// Runs `vitsim COMMAND` (a predict with --format json), which must succeed, and files each of its points in
// `into` under its params with `key` set to `value` (what this run varied).
void add_points(std::map<std::string, json>& into, const std::string& command, const std::string& key,
                const std::string& value) {
  const auto r = vt::vitsim(command);
  INFO(r.out);
  REQUIRE(r.status == 0);
  const json report = json::parse(r.out);
  for (const auto& pt : report["points"]) {
    json params = pt["params"];
    params[key] = value;
    into[params.dump()] = pt;
  }
}

// Runs `vitsim COMMAND` with -j 1 and with -j 2 (COMMAND holds one {} for the job count); both must succeed
// with the same output, which is returned.
std::string same_with_1_and_2_jobs(const std::string& command) {
  std::vector<std::string> outs;
  for (int jobs : {1, 2}) {
    auto r = vt::vitsim(fmt::format(fmt::runtime(command), jobs));
    INFO(r.out);
    REQUIRE(r.status == 0);
    outs.push_back(r.out);
  }
  CHECK(outs[0] == outs[1]);
  return outs[0];
}

}  // namespace

TEST_CASE("zygotes: a group's tasks fork from one zygote that prepared once, whatever the job count",
          "[process_pool][zygote]") {
  Shared* sh = shared_counters();
  const size_t count = 9;  // groups g0 g1 g2 g0 g1 ... interleaved
  auto group_of = [](size_t i) { return fmt::format("g{}", i % 3); };
  for (int jobs : {1, 2, 3, 8}) {
    INFO("jobs " << jobs);
    vt::TempDir d;
    for (auto& c : sh->prepares) c = 0;
    std::vector<size_t> ends;
    const auto failures = sim::run_forked_groups(
        count, jobs, group_of,
        [&](size_t i) {
          ++sh->prepares[i % 3];
          g_prepared = group_of(i);
          g_zygote = getpid();
        },
        [&](size_t i) {
          sim::finish_child(d / std::to_string(i), fmt::format("{} {} {}", g_prepared, g_zygote, getppid()));
        },
        [&](size_t done) { ends.push_back(done); });
    REQUIRE(failures == std::vector<std::string>(count));
    std::map<std::string, std::string> zygote_of_group;
    for (size_t i = 0; i < count; ++i) {
      std::istringstream in(read_file(d / std::to_string(i)));
      std::string prepared, zygote, ppid;
      in >> prepared >> zygote >> ppid;
      CHECK(prepared == group_of(i));  // the child inherited its own group's preparation
      CHECK(ppid == zygote);           // forked from the zygote that prepared it
      auto [it, first] = zygote_of_group.emplace(group_of(i), zygote);
      CHECK(it->second == zygote);  // one zygote per group
    }
    std::set<std::string> zygotes;
    for (const auto& [g, z] : zygote_of_group) zygotes.insert(z);
    CHECK(zygotes.size() == 3u);
    for (int g = 0; g < 3; ++g) CHECK(sh->prepares[g] == 1);
    CHECK(ends == std::vector<size_t>{1, 2, 3, 4, 5, 6, 7, 8, 9});  // the progress line's counts
  }
  munmap(sh, sizeof(Shared));
}

TEST_CASE(
    "zygotes: a group of one task runs it in its zygote after preparing, and its exit is the task's end",
    "[process_pool][zygote]") {
  // Three groups of one task each (their zygotes fork no child: zygote.cpp's `solo`), among a group of two
  // (forked children as before): the solo task's process is the one that prepared; a solo task killed or
  // exiting with a status fails alone, with the message a forked child's end gives (failure_of).
  for (int jobs : {1, 3}) {
    INFO("jobs " << jobs);
    vt::TempDir d;
    const std::vector<std::string> group{"ok", "killed", "status3", "pair", "pair"};
    const auto failures = sim::run_forked_groups(
        group.size(), jobs, [&](size_t i) { return group[i]; },
        [&](size_t i) {
          g_prepared = group[i];
          g_zygote = getpid();
        },
        [&](size_t i) {
          if (group[i] == "killed") kill(getpid(), SIGKILL);
          if (group[i] == "status3") std::_Exit(3);
          sim::finish_child(d / std::to_string(i), fmt::format("{} {} {}", g_prepared, g_zygote, getpid()));
        },
        nullptr);
    CHECK(failures[0].empty());
    CHECK(failures[1] ==
          "the simulation process died of signal 9 (killed: out of memory, or by another process)");
    CHECK(failures[2] == "the simulation process exited with status 3");
    for (size_t i : {size_t{0}, size_t{3}, size_t{4}}) {
      INFO("task " << i);
      CHECK(failures[i].empty());
      std::istringstream in(read_file(d / std::to_string(i)));
      std::string prepared, zygote, self;
      in >> prepared >> zygote >> self;
      CHECK(prepared == group[i]);
      CHECK((self == zygote) == (group[i] == "ok"));  // solo: the zygote itself; a pair's: a forked child
    }
  }
}

TEST_CASE("zygotes: at most `jobs` tasks run at once over all groups", "[process_pool][zygote]") {
  Shared* sh = shared_counters();
  for (int jobs : {1, 2, 3}) {
    INFO("jobs " << jobs);
    sh->running = 0;
    sh->peak = 0;
    const auto failures = sim::run_forked_groups(
        12, jobs, [](size_t i) { return std::to_string(i % 4); }, [](size_t) {},
        [&](size_t) {
          const int now = ++sh->running;
          int peak = sh->peak.load();
          while (now > peak && !sh->peak.compare_exchange_weak(peak, now)) {
          }
          std::this_thread::sleep_for(
              std::chrono::milliseconds(20));  // overlap with the next task, if it starts
          --sh->running;
          std::_Exit(0);
        },
        nullptr);
    CHECK(failures == std::vector<std::string>(12));
    CHECK(sh->peak <= jobs);
    CHECK(sh->peak >= 1);
  }
  munmap(sh, sizeof(Shared));
}

TEST_CASE("zygotes: a task that fails is reported alone and the others succeed", "[process_pool][zygote]") {
  vt::TempDir d;
  // The ways a point's process ends badly, each the message run_forked_groups gives it.
  const std::map<size_t, std::string> bad{
      {1, "the simulation process exited with status 5"},  // child() threw
      {2, "the simulation process died of signal 9 (killed: out of memory, or by another process)"},
      {5, "the simulation process exited with status 3"},
      {6, ""}};  // exited 0 without a result: gather_forked's "no result"
  for (int jobs : {1, 2}) {
    const auto failures = sim::run_forked_groups(
        8, jobs, [](size_t i) { return i % 2 ? "odd" : "even"; }, [](size_t) {},
        [&](size_t i) {
          if (i == 1) throw std::runtime_error("the point threw");
          if (i == 2) kill(getpid(), SIGKILL);
          if (i == 5) std::_Exit(3);
          if (i == 6) std::_Exit(0);
          sim::finish_child(d / fmt::format("{}-{}", jobs, i), "ok");
        },
        nullptr);
    REQUIRE(failures.size() == 8u);
    for (size_t i = 0; i < 8; ++i) {
      INFO("task " << i << " jobs " << jobs);
      CHECK(failures[i] == (bad.count(i) ? bad.at(i) : ""));
      CHECK(fs::exists(d / fmt::format("{}-{}", jobs, i)) == !bad.count(i));
    }
  }
  // Through gather_forked: the error of the first failing point, by name; a point that throws an Error
  // hands back its message.
  sim::ForkedPoints how;
  how.progress = false;
  how.jobs = 2;
  how.group_of = [](size_t i) { return i < 3 ? "a" : "b"; };
  how.prepare = [](size_t) {};
  auto name = [](size_t i) { return fmt::format("point {}", i + 1); };
  auto gather = [&](size_t bad_point, int how_bad) {
    return vt::error_of([&] {
      sim::gather_forked(
          6, how,
          [&](size_t i) -> json {
            if (i == bad_point && how_bad == 0) throw Error(fmt::format("s.xml:3: point {} is wrong", i + 1));
            if (i == bad_point && how_bad == 1) kill(getpid(), SIGKILL);
            if (i == bad_point && how_bad == 2) std::_Exit(0);
            return json{{"i", i}};
          },
          name);
    });
  };
  CHECK(gather(4, 0) == "s.xml:3: point 5 is wrong");
  CHECK(gather(1, 1) ==
        "point 2: the simulation process died of signal 9 (killed: out of memory, or by another process)");
  CHECK(gather(3, 2) == "point 4: no result");
  // gather_forked_each keeps every other point's result when one is killed and one throws (issue 27: one
  // killed child lost the whole sweep's output).
  const auto each = sim::gather_forked_each(6, how, [&](size_t i) -> json {
    if (i == 1) kill(getpid(), SIGKILL);
    if (i == 4) throw Error("s.xml:3: point 5 is wrong");
    return json{{"i", i}};
  });
  REQUIRE(each.size() == 6u);
  for (size_t i = 0; i < 6; ++i) {
    INFO("point " << i + 1);
    CHECK(each[i].ok() == (i != 1 && i != 4));
    if (each[i].ok()) CHECK(each[i].result["i"] == i);
  }
  CHECK(each[1].process_failed);
  CHECK(sim::forked_error(each[1], "point 2") ==
        "point 2: the simulation process died of signal 9 (killed: out of memory, or by another process)");
  CHECK(!each[4].process_failed);
  CHECK(sim::forked_error(each[4], "point 5") == "s.xml:3: point 5 is wrong");
  const auto all = sim::gather_forked(
      6, how,
      [](size_t i) {
        return json{{"i", i}};
      },
      name);
  for (size_t i = 0; i < 6; ++i) CHECK(all[i]["i"] == i);
}

TEST_CASE("zygotes: a zygote that dies or throws while preparing fails its own group's tasks only",
          "[process_pool][zygote]") {
  vt::TempDir d;
  for (const auto& [how_bad, expected] : std::vector<std::pair<int, std::string>>{
           {0, "the simulation process died of signal 9 (killed: out of memory, or by another process)"},
           {1, "the simulation process exited with status 5"}}) {
    const auto failures = sim::run_forked_groups(
        6, 2, [](size_t i) { return i % 3 == 1 ? "bad" : "good"; },
        [&](size_t i) {
          if (i % 3 != 1) return;
          if (how_bad == 0) kill(getpid(), SIGKILL);
          throw std::runtime_error("prepare threw");
        },
        [&](size_t i) { sim::finish_child(d / fmt::format("{}-{}", how_bad, i), "ok"); }, nullptr);
    for (size_t i = 0; i < 6; ++i) {
      INFO("task " << i << " how_bad " << how_bad);
      CHECK(failures[i] == (i % 3 == 1 ? expected : ""));
      CHECK(fs::exists(d / fmt::format("{}-{}", how_bad, i)) == (i % 3 != 1));
    }
  }
}

TEST_CASE(
    "zygotes: points of two platforms (one flat-star) equal simulate_point's, and a platform that fails to "
    "load is the point's one-line error",
    "[process_pool][zygote][sim]") {
  vt::TempDir d;
  // Two platforms that give different step times (H100 and A100), so that a point run on the other
  // zygote's platform would show; b in the flat-star layout built in code.
  REQUIRE(
      vt::vitsim("platform --gpu h100-sxm --nic-speed ndr --nodes 2 --gpus-per-node 2 --out " + d / "a.xml")
          .status == 0);
  REQUIRE(vt::vitsim("platform --gpu a100-sxm-80gb --nic-speed hdr --nodes 2 --gpus-per-node 2 --layout "
                     "flat-star --out " +
                     d / "b.xml")
              .status == 0);
  REQUIRE(is_flat_layout_file(d / "b.xml"));
  // SimGrid's parser rejects a fat tree without parameters (tests/cli/test_robustness_numbers.cpp): it passes
  // core's checks and fails in SimGrid, in the zygote here.
  d.file("q.xml",
         "<?xml version=\"1.0\"?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n<platform "
         "version=\"4.1\">\n"
         "<zone id=\"z\" routing=\"Full\">\n<cluster id=\"c\" prefix=\"c-\" suffix=\"\" radical=\"0-1\" "
         "speed=\"1Gf\" "
         "bw=\"1GBps\" lat=\"1us\" topology=\"FAT_TREE\">" +
             vt::gpu_props("G", "8Tf") + "</cluster>\n</zone></platform>\n");
  auto points_of = [&](const std::string& platforms, const std::string& nodes) {
    return expand(
        read_scenario_file(sweep_scenario(d, "s.xml",
                                          fmt::format("  <sweep param=\"cluster.nodes\" values=\"{}\"/>\n"
                                                      "  <sweep param=\"cluster.platform\" values=\"{}\"/>\n",
                                                      nodes, platforms))));
  };
  std::map<std::string, PlatformFacts> facts;
  auto facts_of = [&](const Scenario& s) -> const PlatformFacts& {
    auto it = facts.find(s.cluster.platform);
    if (it == facts.end())
      it = facts.emplace(s.cluster.platform, read_platform_facts(s.cluster.platform)).first;
    return it->second;
  };
  std::unique_ptr<sim::PreparedEngine> engine;
  auto gather = [&](const std::vector<Scenario>& points, int jobs) {
    sim::ForkedPoints how;
    how.progress = false;
    how.jobs = jobs;
    how.group_of = [&](size_t i) { return points[i].cluster.platform; };
    how.prepare = [&](size_t i) { engine = sim::prepare_engine(points[i], facts_of(points[i])); };
    return sim::gather_forked(
        points.size(), how,
        [&](size_t i) {
          const sim::SimResult r =
              sim::simulate_prepared(*engine, points[i], facts_of(points[i]), nullptr, false);
          return json{{"step", r.point.step_time_s.mean}, {"notes", r.point.notes}};
        },
        [&](size_t i) { return fmt::format("point {}", i + 1); });
  };

  const std::vector<Scenario> points = points_of("a.xml,b.xml", "1,2");  // a b a b: the groups interleave
  REQUIRE(points.size() == 4u);
  for (const auto& s : points) facts_of(s);  // read before the forks, as PlatformCache does
  const auto one = gather(points, 1), two = gather(points, 2);
  for (size_t i = 0; i < points.size(); ++i) {
    INFO("point " << i + 1 << " on " << points[i].cluster.platform);
    const double alone = vt::in_child([&] {
      return sim::simulate_point(points[i], facts_of(points[i]), nullptr, false).point.step_time_s.mean;
    });
    CHECK(one[i]["step"].get<double>() == alone);
    CHECK(two[i] == one[i]);
  }
  CHECK(one[0]["step"] != one[1]["step"]);  // the two platforms differ: a mix-up would show
  CHECK(one[2]["step"] != one[3]["step"]);

  // A platform that SimGrid fails to load: the zygote keeps the error and each of its points throws it,
  // after its own checks, as simulate_point throws it; the other platform's points are unaffected.
  const std::vector<Scenario> mixed = points_of("a.xml,q.xml", "1");
  REQUIRE(mixed.size() == 2u);
  for (const auto& s : mixed) facts_of(s);
  const std::string expected =
      error_in_child([&] { sim::simulate_point(mixed[1], facts_of(mixed[1]), nullptr, false); });
  CHECK(expected.find("q.xml: SimGrid cannot load the platform: ") != std::string::npos);
  CHECK(expected.find('\n') == std::string::npos);
  for (int jobs : {1, 2}) CHECK(vt::error_of([&] { gather(mixed, jobs); }) == expected);
  const std::vector<Scenario> good_only{mixed[0]};
  CHECK(gather(good_only, 1)[0]["step"] == one[0]["step"]);
}

TEST_CASE("zygotes: predict and plan over two platform files, -j 1 and -j 2, equal each platform run alone",
          "[process_pool][zygote][cli]") {
  vt::TempDir d;
  REQUIRE(
      vt::vitsim("platform --gpu h100-sxm --nic-speed ndr --nodes 2 --gpus-per-node 2 --out " + d / "a.xml")
          .status == 0);
  REQUIRE(vt::vitsim("platform --gpu a100-sxm-80gb --nic-speed hdr --nodes 2 --gpus-per-node 2 --layout "
                     "flat-star --out " +
                     d / "b.xml")
              .status == 0);
  const std::string sweeps =
      "  <sweep param=\"cluster.nodes\" values=\"1,2\"/>\n  <sweep param=\"training.micro_batch\" "
      "values=\"16,32\"/>\n";
  const std::string both = sweep_scenario(
      d, "both.xml", sweeps + "  <sweep param=\"cluster.platform\" values=\"a.xml,b.xml\"/>\n");
  const std::string alone = sweep_scenario(d, "alone.xml", sweeps);
  // predict: every point of the two-platform run equals that point predicted with its platform alone.
  std::map<std::string, json> by_params;
  for (const char* p : {"a.xml", "b.xml"}) {
    add_points(by_params,
               fmt::format("predict {} -q -j 2 --format json --set cluster.platform={}", alone, d / p),
               "cluster.platform", p);
  }
  const std::string out1 = same_with_1_and_2_jobs(fmt::format("predict {} -q -j {{}} --format json", both));
  const json points = json::parse(out1)["points"];
  REQUIRE(points.size() == 8u);
  for (const auto& pt : points) {
    json key = pt["params"];
    const std::string platform = key["cluster.platform"];
    key["cluster.platform"] = fs::path(platform).filename().string();
    REQUIRE(by_params.count(key.dump()));
    const json& ref = by_params.at(key.dump());
    INFO(key.dump());
    CHECK(pt["step_time_s"] == ref["step_time_s"]);
    CHECK(pt["epoch_time_s"] == ref["epoch_time_s"]);
    CHECK(pt["notes"] == ref["notes"]);
  }
  // plan: the same two platforms, byte-identical with -j 1 and -j 2.
  const std::string out2 = same_with_1_and_2_jobs(fmt::format("plan {} -q -j {{}} --format json", both));
  int simulated = 0;
  const json plan = json::parse(out2);
  for (const auto& p : plan["points"]) simulated += p.value("simulated", false);
  CHECK(simulated == 8);
}

TEST_CASE(
    "zygotes: a what-if swept over two edits (two edited copies of the platform) equals each edit alone",
    "[process_pool][zygote][cli][whatif]") {
  vt::TempDir d;
  REQUIRE(
      vt::vitsim("platform --gpu h100-sxm --nic-speed ndr --nodes 2 --gpus-per-node 2 --out " + d / "a.xml")
          .status == 0);
  const std::string scen = sweep_scenario(d, "s.xml",
                                          "  <sweep param=\"cluster.nodes\" values=\"1,2\"/>\n"
                                          "  <sweep param=\"training.micro_batch\" values=\"16,32\"/>\n");
  // 1 GB/s against 100 GB/s NICs: the 2-node points differ by several times (a point simulated on the
  // other copy would show).
  const std::vector<std::string> edits{"link:node*-nic:bandwidth=1GBps", "link:node*-nic:bandwidth=100GBps"};
  std::map<std::string, json> alone;  // params -> point
  for (const auto& e : edits) {
    add_points(alone, fmt::format("predict {} -q -j 2 --format json --set 'whatif.edits={}'", scen, e),
               "whatif.edits", e);
  }
  const std::string out3 = same_with_1_and_2_jobs(fmt::format(
      "predict {} -q -j {{}} --format json --set 'whatif.edits={},{}'", scen, edits[0], edits[1]));
  const json both = json::parse(out3);
  REQUIRE(both["points"].size() == 8u);
  std::map<std::string, double> two_nodes;  // edit -> a 2-node point's step time
  for (const auto& pt : both["points"]) {
    const std::string key = pt["params"].dump();
    INFO(key);
    REQUIRE(alone.count(key));
    CHECK(pt["step_time_s"] == alone.at(key)["step_time_s"]);
    CHECK(pt["notes"] == alone.at(key)["notes"]);
    if (pt["params"]["cluster.nodes"] == "2" && pt["params"]["training.micro_batch"] == "16")
      two_nodes[pt["params"]["whatif.edits"]] = pt["step_time_s"]["mean"];
  }
  REQUIRE(two_nodes.size() == 2u);
  CHECK(two_nodes.at(edits[0]) > 2 * two_nodes.at(edits[1]));
  // plan over the two copies: byte-identical with -j 1 and -j 2.
  same_with_1_and_2_jobs(
      fmt::format("plan {} -q -j {{}} --format json --set 'whatif.edits={},{}'", scen, edits[0], edits[1]));
}
