// Issue 15 items 5 and 6: the command line (exit codes, "did you mean", train/calibrate without LibTorch,
// short messages for numeric flags, the scenario taken the same way by every subcommand) and the outputs
// (plot formats, plan --top and infeasible plans, rate-limited progress, the straggler column, empty CSV
// cells, plurals and signs). Exact messages are asserted.
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>

#include "test_util.hpp"
#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/results/plan.hpp"
#include "vitsim/core/results/report.hpp"
#include "vitsim/plot/plan_plot.hpp"
#include "vitsim/plot/plot.hpp"
#include "vitsim/sim/engine/process_pool.hpp"

namespace {

// Two nodes of one GPU each; heterogeneous when the two figures differ (device names "G8Tf", "G2Tf").
std::string platform(const std::string& a = "8Tf", const std::string& b = "8Tf") {
  return vt::platform_xml(2, 1, "12GBps", "1us", {"1GBps", "1GBps"}, {a, b});
}

const std::string kScenario =
    "<scenario>\n  <cluster platform=\"p.xml\" nodes=\"1\" gpus_per_node=\"1\"/>\n  <model "
    "preset=\"vit_cifar_tiny\"/>\n"
    "  <dataset name=\"cifar10\"/>\n  <training micro_batch=\"16\"/>\n  <simulation "
    "steps=\"4\"/>\n</scenario>\n";

vt::CmdResult in(const vt::TempDir& d, const std::string& args) {
  return vt::run("cd " + d.path.string() + " && " + VITSIM_BINARY + " " + args);
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("edit distance and did-you-mean", "[cli][habits]") {
  using vitsim::edit_distance;
  CHECK(edit_distance("kitten", "sitting") == 3);  // the textbook example
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("predict", "predict") == 0);
  CHECK(edit_distance("predit", "predict") == 1);
  CHECK(edit_distance("plna", "plan") == 2);  // a transposition is two edits
  const std::vector<std::string> cmds{"predict",  "validate", "plot",     "plan",
                                      "platform", "train",    "calibrate"};
  CHECK(vitsim::did_you_mean("predit", cmds) == " (did you mean 'predict'?)");
  CHECK(vitsim::did_you_mean("plam", cmds) == " (did you mean 'plan'?)");
  CHECK(vitsim::did_you_mean("-x", {"-h", "-q"}).empty());  // two characters: too short to guess
  CHECK(vitsim::did_you_mean("calib", cmds) == " (did you mean 'calibrate'?)");  // a prefix of 3+ characters
  CHECK(vitsim::did_you_mean("platfrom", cmds) == " (did you mean 'platform'?)");
  CHECK(vitsim::did_you_mean("xyzzy", cmds).empty());
  CHECK(vitsim::did_you_mean("", cmds).empty());
  CHECK(vitsim::closest_name("training.batch", {"training.epochs", "training.micro_batch"})
            .empty());  // 4 of 5 differ
  CHECK(vitsim::closest_name("--calibraton", {"--calibration", "--set", "--out"}) == "--calibration");
  CHECK(vitsim::closest_name("training.micro_bach", {"training.micro_batch", "training.grad_accum"}) ==
        "training.micro_batch");
}

TEST_CASE("counts with their noun and signed percentages", "[cli][habits]") {
  CHECK(vitsim::count_noun(1, "epoch") == "1 epoch");
  CHECK(vitsim::count_noun(0, "epoch") == "0 epochs");
  CHECK(vitsim::count_noun(3, "epoch") == "3 epochs");
  CHECK(vitsim::count_noun(-1, "point") == "-1 point");
  CHECK(vitsim::count_noun(2, "child", "children") == "2 children");
  CHECK(vitsim::signed_percent(0.12) == "+12%");
  CHECK(vitsim::signed_percent(-0.034) == "-3%");
  CHECK(vitsim::signed_percent(-0.004) == "0%");  // rounds to zero: no "-0%"
  CHECK(vitsim::signed_percent(0.004) == "0%");
  CHECK(vitsim::signed_percent(-0.0) == "0%");
  CHECK(vitsim::signed_percent(-0.00049, 1) == "0.0%");
  CHECK(vitsim::signed_percent(-0.0005, 1) == "-0.1%");  // 0.05% rounds away from zero
  CHECK(vitsim::signed_percent(1.5, 1) == "+150.0%");
}

namespace {
// The command lines of the exit-2 test and docs/robustness.md's table (run in a folder with p.xml, s.xml
// and r.json).
struct UsageCase {
  std::string args, message;
};
std::vector<UsageCase> usage_cases() {
  return {
      {"predit s.xml",
       "vitsim: error: unknown command 'predit' (did you mean 'predict'?); commands: predict, validate, "
       "plot, plan, "
       "platform, collective, fit, train, calibrate"},
      {"frobnicate",
       "vitsim: error: unknown command 'frobnicate'; commands: predict, validate, plot, plan, platform, "
       "collective, fit, train, calibrate"},
      {"",
       "vitsim: error: a command is required: vitsim COMMAND ...; commands: predict, validate, plot, plan, "
       "platform, collective, "
       "fit, train, calibrate"},
      {"predict s.xml --calibraton c.json",
       "vitsim: error: vitsim predict: unknown option '--calibraton' (did you mean '--calibration'?) (vitsim "
       "predict "
       "--help lists them)"},
      {"predict s.xml --fromat=json",
       "vitsim: error: vitsim predict: unknown option '--fromat' (did you mean '--format'?) (vitsim predict "
       "--help lists "
       "them)"},
      {"validate s.xml --measure r.json",
       "vitsim: error: vitsim validate: unknown option '--measure' (did you mean '--measured'?) (vitsim "
       "validate --help "
       "lists them)"},
      {"plot r.json --out x.svg --knd scaling",
       "vitsim: error: vitsim plot: unknown option '--knd' (did you mean '--kind'?) (vitsim plot --help "
       "lists them)"},
      {"plan s.xml --budjet 3",
       "vitsim: error: vitsim plan: unknown option '--budjet' (did you mean '--budget'?) (vitsim plan --help "
       "lists them)"},
      {"platform --gpu h100-sxm --node 2",
       "vitsim: error: vitsim platform: unknown option '--node' (did you mean '--nodes'?) (vitsim platform "
       "--help lists "
       "them)"},
      {"plan s.xml --zzzzzzzz",
       "vitsim: error: vitsim plan: unknown option '--zzzzzzzz' (vitsim plan --help lists them)"},
      // Numeric flags: core's strict reader's words, not CLI11's conversion dump.
      {"plan s.xml --budget '$100'", "vitsim: error: --budget: '$100' is not a number (expected >= 0)"},
      {"plan s.xml --budget -3", "vitsim: error: --budget: -3 is out of range (expected >= 0)"},
      {"predict s.xml --jobs 0", "vitsim: error: --jobs: 0 is out of range (expected 1 .. 4096)"},
      {"predict s.xml -j0", "vitsim: error: --jobs: 0 is out of range (expected 1 .. 4096)"},
      {"plan s.xml --top 1.5", "vitsim: error: --top: '1.5' is not an integer in 0 .. 1073741824"},
      {"plan s.xml --epochs 1e3", "vitsim: error: --epochs: '1e3' is not an integer in 1 .. 1048576"},
      {"validate s.xml --run --tolerance 5%",
       "vitsim: error: --tolerance: '5%' is not a number (expected >= 0)"},
      {"platform --gpu h100-sxm --nodes two",
       "vitsim: error: --nodes: 'two' is not an integer in 0 .. 1048576"},
      // 0 was taken as "not given" and silently became the default (issue 27); the range is cpu_cores's row.
      {"platform --gpu h100-sxm --cpu-cores 0",
       "vitsim: error: --cpu-cores: 0 is out of range (expected 1 .. 1048576)"},
      // Checked after parsing, still the command line's fault.
      {"predict", "vitsim: error: vitsim predict needs a scenario: vitsim predict SCENARIO.xml"},
      {"validate s.xml", "vitsim: error: validate needs --measured REPORT.json or --run"},
      {"fit s.xml", "vitsim: error: fit needs --measured FILE (a measured report or a CSV)"},
      {"fit s.xml --measured r.json --fre x",
       "vitsim: error: vitsim fit: unknown option '--fre' (did you mean '--free'?) (vitsim fit --help lists "
       "them)"},
      {"plan",
       "vitsim: error: vitsim plan needs a scenario: vitsim plan SCENARIO.xml (or --merge SHARD.json..., or "
       "--gpu "
       "GPU --model M --dataset D)"},
      {"plan s.xml --shard 3/2", "vitsim: error: --shard '3/2': expected I/K with 0 <= I < K, e.g. 0/2"},
      {"plan s.xml --deadline soon",
       "vitsim: error: --deadline: bad time 'soon': no number; valid units: w, d, h, min, m, s, ms, us, ns, "
       "ps"},
      {"plot r.json --out x.jpg",
       "vitsim: error: --out x.jpg: unknown plot format '.jpg'; valid: .svg, .png, .pdf"},
      {"predict s.xml --scenario s.xml",
       "vitsim: error: vitsim predict: the scenario given twice (SCENARIO.xml and --scenario): give it once"},
  };
}
}  // namespace

TEST_CASE("a bad command line exits 2 for every subcommand, with the unknown word named", "[cli][habits]") {
  vt::TempDir d;
  d.file("p.xml", platform());
  d.file("s.xml", kScenario);
  d.file("r.json", "{}");
  for (const auto& c : usage_cases()) {
    INFO(c.args);
    auto r = in(d, c.args);
    CHECK(r.status == 2);
    CHECK(r.out == c.message + "\n");
  }
}

TEST_CASE("test_cli_habits: docs/robustness.md's table is this file's command lines", "[cli][habits][docs]") {
  auto esc = [](std::string t) {
    std::string o;
    for (char ch : t) o += ch == '|' ? std::string("\\|") : std::string(1, ch);
    return o;
  };
  std::string doc =
      "Every row is a case of `tests/cli/test_cli_habits.cpp` (exit status 2, the exact line on stderr), "
      "which\n"
      "regenerates this table (`VITSIM_UPDATE_DOCS=1 build/tests/test_cli_habits`). `s.xml` is a short "
      "scenario\n"
      "on `p.xml`; `r.json` an empty object.\n\n| # | command | output |\n| --- | --- | --- |\n";
  int i = 0;
  for (const auto& c : usage_cases())
    doc += fmt::format("| {} | `vitsim {}` | `{}` |\n", ++i, esc(c.args), esc(c.message));
  CHECK(vt::doc_section(vt::source("docs/robustness.md"), "test_cli_habits", doc) == doc);
}

TEST_CASE("every subcommand takes the scenario positionally or as --scenario", "[cli][habits]") {
  vt::TempDir d;
  d.file("p.xml", platform());
  d.file("s.xml", kScenario);
  auto a = in(d, "predict s.xml --format csv -q");
  auto b = in(d, "predict --scenario s.xml --format csv -q");
  REQUIRE(a.status == 0);
  CHECK(b.status == 0);
  CHECK(a.out == b.out);
  // Both spellings reach the scenario reader: a missing file is the same error either way.
  struct Cmd {
    std::string name, rest;
  };
  std::vector<Cmd> cmds{{"validate", "--measured r.json"}, {"plan", ""}};
#if VITSIM_TEST_HAVE_REAL
  cmds.push_back({"train", ""});
  cmds.push_back({"calibrate", "--out o.json"});
#endif
  for (const auto& c : cmds) {
    INFO(c.name);
    auto p = in(d, c.name + " nope.xml " + c.rest + " -q");
    auto f = in(d, c.name + " --scenario nope.xml " + c.rest + " -q");
    CHECK(p.status == 1);
    CHECK(p.out == "vitsim: error: nope.xml: cannot open scenario file\n");
    CHECK(f.status == 1);
    CHECK(f.out == p.out);
  }
}

#if !VITSIM_TEST_HAVE_REAL
TEST_CASE("train and calibrate in a build without LibTorch say how to rebuild", "[cli][habits]") {
  const std::string rebuild =
      "rebuild with cmake -S . -B build -DVITSIM_WITH_TORCH=ON "
      "-DTorch_DIR=/path/to/libtorch/share/cmake/Torch && "
      "cmake --build build --target vitsim\n";
  for (const char* args : {"train s.xml", "train", "train --help", "train s.xml --out r.json --resume"}) {
    INFO(args);
    auto r = vt::vitsim(args);
    CHECK(r.status == 2);
    CHECK(r.out == "vitsim train: built without LibTorch: " + rebuild);
  }
  for (const char* args :
       {"calibrate s.xml --out c.json", "calibrate --scenario s.xml --out c.json", "calibrate"}) {
    INFO(args);
    auto r = vt::vitsim(args);
    CHECK(r.status == 2);
    CHECK(r.out == "vitsim calibrate: built without LibTorch: " + rebuild);
  }
}
#endif

TEST_CASE("a --set with an unknown key suggests the closest", "[cli][habits]") {
  vt::TempDir d;
  d.file("p.xml", platform());
  d.file("s.xml", kScenario);
  struct Case {
    std::string args, key, near;
  };
  for (const Case& c :
       std::vector<Case>{{"predict s.xml", "training.micro_bach", "training.micro_batch"},
                         {"plan s.xml", "cluster.node", "cluster.nodes"},
                         {"validate s.xml --run", "parallelism.colective", "parallelism.collective"},
                         {"predict s.xml", "zzz.qqq", ""}}) {
    INFO(c.key);
    auto r = in(d, c.args + " --set " + c.key + "=2 -q");
    CHECK(r.status == 1);
    const std::string head = "vitsim: error: --set " + c.key + ": unknown key" +
                             (c.near.empty() ? "" : " (did you mean '" + c.near + "'?)") +
                             "; valid: cluster.gpus_per_node, ";
    CHECK(r.out.rfind(head, 0) == 0);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  }
}

TEST_CASE("plot picks the gnuplot terminal from the extension", "[cli][habits][plot]") {
  using vitsim::plot::output_format;
  CHECK(output_format("a/b.svg") == "svg");
  CHECK(output_format("x.PNG") == "png");
  CHECK(output_format("x.pdf") == "pdf");
  CHECK(output_format("/dev/stdout") == "svg");  // no extension: SVG, as before
  CHECK(output_format(".hidden") == "svg");
  CHECK_THROWS_WITH(output_format("x.jpg"), "x.jpg: unknown plot format '.jpg'; valid: .svg, .png, .pdf");
  CHECK_THROWS_WITH(output_format("dir.d/x.eps"),
                    "dir.d/x.eps: unknown plot format '.eps'; valid: .svg, .png, .pdf");
  CHECK(vitsim::plot::terminal_line("png", 1000, 440).rfind("set terminal pngcairo size 1000,440 ", 0) == 0);
  CHECK(vitsim::plot::terminal_line("pdf", 900, 480).rfind("set terminal pdfcairo size 9.00in,4.80in ", 0) ==
        0);
  CHECK(vitsim::plot::terminal_line("svg", 900, 480).rfind("set terminal svg size 900,480 dynamic ", 0) == 0);

  // End to end: a report drawn into each format has that format's magic bytes.
  vt::TempDir d;
  d.file("p.xml", platform());
  d.file("s.xml", kScenario);
  REQUIRE(in(d, "predict s.xml --set cluster.nodes=1,2 --format json --out r.json -q").status == 0);
  if (vt::run("command -v gnuplot").status != 0) return;  // the plot tests elsewhere report a missing gnuplot
  struct Want {
    const char* name;
    std::string magic;
  };
  for (const Want& w : {Want{"x.png", "\x89PNG"}, Want{"x.pdf", "%PDF"}, Want{"x.svg", "<?xml"}}) {
    INFO(w.name);
    auto r = in(d, std::string("plot r.json --out ") + w.name);
    CHECK(r.status == 0);
    CHECK(r.out.empty());
    std::ifstream f(d / w.name, std::ios::binary);
    std::string head(w.magic.size(), '\0');
    f.read(head.data(), static_cast<std::streamsize>(head.size()));
    CHECK(head == w.magic);
  }
}

TEST_CASE("progress lines off a terminal: at most one per 10 s or per tenth, always the last",
          "[cli][habits]") {
  vitsim::sim::ProgressPace log;      // not a terminal
  CHECK_FALSE(log.due(0.5, 1, 100));  // the first second is quiet
  CHECK(log.due(1.5, 2, 100));        // then the first line
  CHECK_FALSE(log.due(2.0, 3, 100));  // same tenth, 0.5 s later
  CHECK_FALSE(log.due(9.0, 9, 100));
  CHECK(log.due(9.5, 10, 100));  // a tenth (10 of 100) crossed
  CHECK_FALSE(log.due(15.0, 15, 100));
  CHECK(log.due(19.6, 16, 100));  // 10 s since the last line
  CHECK_FALSE(log.due(20.0, 19, 100));
  CHECK(log.due(20.1, 100, 100));  // the last, always
  // Two points: every line is a tenth or more, and the last is shown.
  vitsim::sim::ProgressPace two;
  CHECK(two.due(1.2, 1, 2));
  CHECK(two.due(1.3, 2, 2));
  // A fast run says nothing, not even its last line.
  vitsim::sim::ProgressPace fast;
  CHECK_FALSE(fast.due(0.2, 5, 5));
  // On a terminal one line is redrawn: every update after the first second.
  vitsim::sim::ProgressPace tty;
  tty.tty = true;
  CHECK_FALSE(tty.due(0.5, 1, 100));
  CHECK(tty.due(1.1, 2, 100));
  CHECK(tty.due(1.2, 3, 100));
}

TEST_CASE("the table names the straggler on heterogeneous platforms", "[cli][habits]") {
  vitsim::ReportPoint p;
  auto rank = [](int r, const std::string& host, const std::string& dev, double fwd) {
    vitsim::RankReport rr;
    rr.rank = r;
    rr.host = host;
    rr.device = dev;
    rr.breakdown_s.compute_fwd = fwd;
    rr.breakdown_s.comm_exposed = 1 - fwd;  // the others wait for it: their step is the same
    return rr;
  };
  p.per_rank = {rank(0, "n0-gpu0", "A100", 0.2), rank(1, "n1-gpu0", "T4", 0.7),
                rank(2, "n1-gpu1", "T4", 0.6)};
  CHECK(vitsim::straggler(p) == "rank 1 (T4 on n1-gpu0)");
  p.per_rank = {rank(0, "n0-gpu0", "A100", 0.2), rank(1, "n0-gpu1", "A100", 0.7)};
  CHECK(vitsim::straggler(p).empty());  // one kind of GPU: no column
  p.per_rank.clear();
  CHECK(vitsim::straggler(p).empty());

  // End to end: 8 TFLOP/s and 2 TFLOP/s GPUs; the slow one (rank 1, node n1) bounds the step.
  vt::TempDir d;
  d.file("p.xml", platform("8Tf", "2Tf"));
  d.file("s.xml", kScenario);
  auto het = in(d, "predict s.xml --set cluster.nodes=2 -q");
  REQUIRE(het.status == 0);
  const auto rows = lines(het.out);
  REQUIRE(rows.size() >= 3);
  std::string het_header = rows[1];  // its straggler column, not only the straggler wait column
  for (size_t at; (at = het_header.find("straggler wait")) != std::string::npos;) het_header.erase(at, 14);
  CHECK(het_header.find("straggler") != std::string::npos);
  CHECK(rows[2].size() > 0);
  CHECK(rows[2].find("rank 1 (G2Tf on n1-gpu0)") != std::string::npos);
  d.file("p.xml", platform());
  auto same = in(d, "predict s.xml --set cluster.nodes=2 -q");
  REQUIRE(same.status == 0);
  // No straggler column in the header; the `straggler wait` column (every multi-rank point: the wait for the
  // slowest of N ranks' jitter, docs/model.md "Stragglers", also named in the notes) is another one.
  const auto same_rows = lines(same.out);
  REQUIRE(same_rows.size() >= 2);
  std::string header = same_rows[1];
  for (size_t at; (at = header.find("straggler wait")) != std::string::npos;) header.erase(at, 14);
  CHECK(header.find("straggler") == std::string::npos);
}

TEST_CASE("a plan with no feasible point says which constraint excluded how many, and exits 5",
          "[cli][habits][plan]") {
  vt::TempDir d;
  d.file("p.xml", platform());
  d.file("s.xml", kScenario);
  {
    auto r =
        vt::run("cd " + d.path.string() + " && " + VITSIM_BINARY +
                " plan s.xml --set cluster.nodes=1,2 --budget 0 -q 2>err.txt >out.txt; echo $?; cat err.txt");
    CHECK(
        r.out ==
        "5\nvitsim: error: plan: no point meets the constraints: 2 points, 2 excluded by budget; relax them "
        "or widen the space\n");
    const std::string table = vt::run("cat " + (d / "out.txt")).out;
    CHECK(table.rfind("vitsim plan: s (2 points, 1 epoch, ranked by time)\n", 0) == 0);
    CHECK(table.find("No point meets the constraints: 2 points, 2 excluded by budget; relax them or widen "
                     "the space.") != std::string::npos);
  }
  {
    // Two constraints: the larger count first. micro-batch 2^20 does not fit (excluded before simulating);
    // the other two miss a 1 us deadline.
    auto r = in(d,
                "plan s.xml --set cluster.nodes=1,2 --set training.micro_batch=16,1048576 --deadline 1us "
                "--format csv -q");
    CHECK(r.status == 5);
    const auto rows = lines(r.out);
    REQUIRE(rows.size() == 6);  // header, 4 points, the error
    CHECK(rows[5] ==
          "vitsim: error: plan: no point meets the constraints: 4 points, 2 excluded by deadline, 2 by "
          "memory; relax them or widen the space");
    // Excluded points: no rank; one excluded before simulating has no times, cost or bound either.
    int unsimulated = 0;
    for (size_t i = 1; i <= 4; ++i) {
      INFO(rows[i]);
      CHECK(rows[i].rfind(",", 0) == 0);
      CHECK(rows[i].find(",0,0,") == std::string::npos);
      if (rows[i].find("\"memory:") != std::string::npos) {
        ++unsimulated;
        CHECK(rows[i].find(",,,,,") != std::string::npos);  // step, epoch, time to train, img/s, efficiency
      }
    }
    CHECK(unsimulated == 2);
  }
}

TEST_CASE("plan --top N shows N rows plus the Pareto points, marked", "[cli][habits][plan]") {
  vt::TempDir d;
  d.file("p.xml", platform());
  d.file("s.xml", kScenario);
  auto all = in(d, "plan s.xml --set cluster.nodes=1,2 --set training.micro_batch=8,16,32 --top 0 -q");
  auto one = in(d, "plan s.xml --set cluster.nodes=1,2 --set training.micro_batch=8,16,32 --top 1 -q");
  REQUIRE(all.status == 0);
  REQUIRE(one.status == 0);
  // The rows: the lines after the header ("#  nodes ...") that start with a rank.
  auto table_rows = [](const std::string& out) {
    std::vector<std::string> rows;
    bool in_table = false;
    for (const auto& l : lines(out)) {
      const size_t first = l.find_first_not_of(' ');
      if (first == std::string::npos) break;
      if (!in_table) {
        in_table = l[first] == '#';
        continue;
      }
      if (!std::isdigit(static_cast<unsigned char>(l[first]))) break;
      rows.push_back(l);
    }
    return rows;
  };
  const auto rows_all = table_rows(all.out), rows_one = table_rows(one.out);
  int pareto = 0;
  for (const auto& r : rows_all) pareto += r.back() == '*';
  REQUIRE(rows_all.size() == 6);
  REQUIRE(pareto >= 1);
  // Rank 1 is always on the front (fastest), so --top 1 shows the front and nothing else.
  CHECK(rows_one.size() == static_cast<size_t>(pareto));
  for (size_t i = 1; i < rows_one.size(); ++i) CHECK(rows_one[i].back() == '*');
  const std::string more = vitsim::count_noun(6 - pareto, "more feasible point");
  CHECK(one.out.find("(" + more + " not shown; --top 0 shows all)") != std::string::npos);
}
