// Issue 39, the input/output class on the command line and its files (items 3, 4, 5, 6, 8, 9, 10, 12, 14,
// 19, 20, 26, 29): every output checked against every input of the run, however named (a CSV's
// cluster.platform column, a DeepSpeed config in the --save-scenario folder); CSV as RFC 4180 writes it, in
// every writer and the reader; "did you mean" bounded; JSON read as JSON; fit's rows named; one plausibility
// bound for measured times; the interval's flags; a what-if's spec file by what it is; a prediction
// relabelled as measured. docs/robustness.md's table "test_robustness_io" is generated from these cases.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <random>

#include "test_util.hpp"
#include "tiny_scenario.hpp"
#include "vitsim/core/base/csv.hpp"
#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/results/measured_times.hpp"

using json = nlohmann::json;

namespace {

// A folder of inputs: p.xml (`vitsim platform --gpu t4`: one node of 2 T4s, the catalogue's ranges, so that
// fit has figures to fit) and its copy q.xml, a 2-GPU scenario s.xml of the tiny CIFAR ViT on p.xml, and the
// measured-times files the cases name.
struct Folder {
  vt::TempDir d;
  Folder() {
    const auto r = run("vitsim platform --gpu t4 --nodes 1 --gpus-per-node 2 --out p.xml");
    if (r.status != 0) throw std::runtime_error("vitsim platform: " + r.out);
    vt::run("cp " + d / "p.xml" + " " + d / "q.xml");
    d.file("s.xml", vt::tiny_cifar_scenario("io"));
    d.file("mq.csv", "cluster.platform,training.micro_batch,step_time_s\nq.xml,4,0.01\n");
    d.file("two.csv", "cluster.platform,training.micro_batch,step_time_s\np.xml,4,0.01\nq.xml,4,0.01\n");
    d.file("nodes.csv", "cluster.nodes,step_time_s\n2,0.01\n");
    d.file("missing.csv", "cluster.platform,step_time_s\nnone.xml,0.01\n");
    d.file("huge.csv", "training.micro_batch,step_time_s\n4,1e300\n");
    d.file("tiny.csv", "training.micro_batch,step_time_s\n4,1e-300\n");
    d.file("empty.json", "[]\n");
    d.file("garbage.json", "hello\n");
    d.file("after.csv", "training.micro_batch,step_time_s\n\"4\"x,0.01\n");
    d.file("open.csv", "training.micro_batch,step_time_s\n\"4,0.01\n");
    d.file("f.txt", "a file, not a folder\n");
    d.file("D/scenario.xml", "{\"train_micro_batch_size_per_gpu\": 8}\n");  // a DeepSpeed config so named
    // A validation whose one point is repeated 20 times (issue 39 item 14): as vitsim validate writes one
    // point (core/results/validation_json.cpp), copied.
    json point = {{"params", {{"cluster.gpus_per_node", "2"}}},
                  {"metrics", json::array({{{"metric", "step_time"},
                                            {"predicted", 0.015},
                                            {"measured", 0.016},
                                            {"rel_error", -0.0625}}})}};
    json v = {{"schema", "vitsim.validation/2"}, {"kind", "validation"}, {"vitsim_version", "test"}};
    v["points"] = json::array();
    for (int i = 0; i < 20; ++i) v["points"].push_back(point);
    d.file("repeated.json", v.dump());
    // A `vitsim platform` spec under a name without .json (issue 39 item 26).
    vt::run("cp " + vt::source("platforms/specs/nebula.json") + " " + d / "nebula.spec");
  }
  // `cmd` in the folder, `vitsim` standing for the binary.
  vt::CmdResult run(std::string cmd) const {
    for (size_t at = cmd.find("vitsim "); at != std::string::npos; at = cmd.find("vitsim ", at + 1)) {
      if (at > 0 && cmd[at - 1] != ' ' && cmd[at - 1] != '(' && cmd[at - 1] != ';') continue;
      cmd.replace(at, 6, VITSIM_BINARY);
      at += std::string(VITSIM_BINARY).size();
    }
    return vt::run("cd '" + d.path.string() + "' && " + cmd);
  }
};

struct IoCase {
  const char* item;  // the item
  const char* what;
  std::string command;  // in the Folder
  int status;
  std::string line;  // the start of the error line
};

const char* const kMeasuredJson =
    "where vitsim's JSON is an object: measured times are a report of kind measured (vitsim train; for "
    "--runs also a validation, vitsim validate --format json) or a CSV (docs/fit.md)";

std::vector<IoCase> io_cases() {
  const std::string one_line = "vitsim plan --gpu t4 --model vit_b_16 --dataset cifar10 -q";
  return {
      {"3", "`plan --save-scenario` names a regular file", one_line + " --save-scenario f.txt", 1,
       "vitsim: error: --save-scenario 'f.txt' is a file, not a folder: give the folder (made when missing) "
       "that receives platform.xml and scenario.xml"},
      {"5", "`plan --deepspeed D/scenario.xml --save-scenario D`: the config would be overwritten",
       one_line + " --deepspeed D/scenario.xml --save-scenario D", 1,
       "vitsim: error: --save-scenario's scenario.xml 'D/scenario.xml' is --deepspeed 'D/scenario.xml': an "
       "output must not overwrite an input"},
      {"5", "`--save-scenario D --out D/scenario.xml`: two outputs one file (nothing made)",
       one_line + " --save-scenario new --out new/scenario.xml", 1,
       "vitsim: error: --save-scenario's scenario.xml 'new/scenario.xml' and --out 'new/scenario.xml' are "
       "the same file: one output would overwrite the other"},
      {"6", "`fit --out q.xml`, a row's cluster.platform naming q.xml",
       "vitsim fit s.xml --measured mq.csv --out q.xml -q", 1,
       "vitsim: error: --out 'q.xml' is the platform of mq.csv:2 'q.xml': an output must not overwrite an "
       "input"},
      {"6", "`predict --runs m.csv --out q.xml`, the same",
       "vitsim predict s.xml --runs mq.csv --out q.xml -q", 1,
       "vitsim: error: --out 'q.xml' is the platform of mq.csv:2 'q.xml': an output must not overwrite an "
       "input"},
      {"4", "a CSV column name of 2e7 characters (under a 20 s CPU-time limit; it took 87 s)",
       "(ulimit -t 20; vitsim fit s.xml --measured long.csv -q)", 1,
       "vitsim: error: long.csv:1: column 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... (20000000 "
       "characters)' "
       "is neither a scenario key (as --set takes it) nor a time column (step_time_s, epoch_time_s)"},
      {"10", "a quoted CSV cell with text after its closing quote",
       "vitsim fit s.xml --measured after.csv -q", 1,
       "vitsim: error: after.csv:2: text after the closing quote of \"4\": a quoted field ends at its quote "
       "(a "
       "quote inside is written twice, \"\")"},
      {"10", "a quoted CSV cell never closed", "vitsim fit s.xml --measured open.csv -q", 1,
       "vitsim: error: open.csv:2: a quoted field is not closed: its closing '\"' is missing"},
      {"19", "`--runs` a .json holding `[]`", "vitsim predict s.xml --runs empty.json -q", 1,
       std::string("vitsim: error: empty.json: JSON holding an array, ") + kMeasuredJson},
      {"19", "`fit --measured` the same", "vitsim fit s.xml --measured empty.json -q", 1,
       std::string("vitsim: error: empty.json: JSON holding an array, ") + kMeasuredJson},
      {"19", "`--runs` a .json holding garbage", "vitsim predict s.xml --runs garbage.json -q", 1,
       "vitsim: error: garbage.json: malformed JSON: [json.exception.parse_error.101] parse error at line 1, "
       "column 1: syntax error while parsing value - invalid literal; last read: 'h'"},
      {"19", "`--runs` an XML file (the scenario given in its place)", "vitsim predict s.xml --runs s.xml -q",
       1,
       "vitsim: error: s.xml: an XML file (a scenario or platform?), where measured times are a CSV of "
       "scenario keys and step_time_s or epoch_time_s, or a report of kind measured (vitsim train; for "
       "--runs "
       "also a validation) (docs/fit.md)"},
      {"20", "fit rows on two platform files", "vitsim fit s.xml --measured two.csv -q", 1,
       "vitsim: error: two.csv:3: runs on the platform q.xml, two.csv:2 on p.xml: vitsim fit fits one "
       "platform's figures; fit each platform's measurements on their own"},
      {"20", "a fit row with more nodes than its platform", "vitsim fit s.xml --measured nodes.csv -q", 1,
       "vitsim: error: nodes.csv:2: column 'cluster.nodes': cluster.nodes: 2 nodes requested but p.xml has "
       "1"},
      {"20", "a fit row naming a missing platform", "vitsim fit s.xml --measured missing.csv -q", 1,
       "vitsim: error: missing.csv:2: column 'cluster.platform': cluster.platform: no such file 'none.xml'"},
      {"12", "fit: a step time of 1e300 s", "vitsim fit s.xml --measured huge.csv -q --out f.xml", 1,
       "vitsim: error: huge.csv:2: measured 1e+300 s against "},
      {"12", "fit: a step time of 1e-300 s", "vitsim fit s.xml --measured tiny.csv -q --out f.xml", 1,
       "vitsim: error: tiny.csv:2: measured 1e-300 s against "},
      {"12", "`--runs` the same file (the one bound)", "vitsim predict s.xml --runs huge.csv -q", 1,
       "vitsim: error: huge.csv:2: measured 1e+300 s against "},
      {"14", "`--runs` a validation whose one point is repeated 20 times",
       "vitsim predict s.xml --runs repeated.json -q", 1,
       "vitsim: error: repeated.json: /points/1/params: the same point as /points/0: vitsim validate holds "
       "each point once; a point repeated would count as more runs than were measured"},
      {"8", "`--interval-seed -1`", "vitsim predict s.xml --interval --interval-seed -1 -q", 2,
       "vitsim: error: --interval-seed: -1 is out of range (expected 0 .. 9223372036854775807)"},
      {"8", "`--interval-seed 2^64-1`",
       "vitsim predict s.xml --interval --interval-seed 18446744073709551615 -q", 2,
       "vitsim: error: --interval-seed: 18446744073709551615 is out of range (expected 0 .. "
       "9223372036854775807)"},
      {"21", "the one-line plan: a `--set` value refused against its platform (named its temporary file)",
       "vitsim plan --gpu t4 --model vit_cifar_tiny --dataset cifar10 -q --set cluster.hosts=x", 1,
       "vitsim: error: --set cluster.hosts: cluster.hosts: no node 'x' in the platform of --gpu t4; nodes: "
       "node0"},
      {"21", "the one-line plan: `--gpus-per-node` past the scenario key's 1024 (scenario_limits.hpp)",
       "vitsim plan --gpu t4 --gpus-per-node 1025 --model vit_cifar_tiny --dataset cifar10 -q", 2,
       "vitsim: error: --gpus-per-node: 1025 is out of range (expected 1 .. 1024)"},
      {"26", "`--what-if gpu:*=FILE:TYPE`, FILE neither an existing file nor a node",
       "vitsim predict s.xml -q --what-if 'gpu:*=nope:A4500'", 1,
       "vitsim: error: --what-if: what-if 'gpu:*=nope:A4500': 'nope:A4500' is neither a node (node0) nor "
       "SPEC:TYPE with SPEC an existing spec file ('nope' is no file, as given or beside the scenario)"},
      {"29", "`validate --measured` a predicted report relabelled measured",
       "vitsim predict s.xml -q --format json --out pred.json && python3 -c \"import json; "
       "j=json.load(open('pred.json')); j['kind']=j['source']='measured'; "
       "[p.update(simulated_steps=0) or p.pop('energy',0) for p in j['points']]; "
       "json.dump(j,open('relabelled.json','w'))\" && vitsim validate s.xml --measured relabelled.json",
       1, "vitsim: error: relabelled.json: /provenance/generator: \"vitsim "},
      {"8", "`--interval-mode` an unknown mode", "vitsim predict s.xml --interval-mode sampeld -q", 2,
       "vitsim: error: --interval-mode: sampeld not in {surrogate,sampled}"},
  };
}

std::string render_io(const std::vector<IoCase>& all) {
  std::string o =
      "Every row is a case of `tests/cli/test_robustness_io.cpp` (issue 39), run in a folder holding p.xml\n"
      "(`vitsim platform --gpu t4 --nodes 1 --gpus-per-node 2`), its copy q.xml, a 2-GPU scenario `s.xml` "
      "on\n"
      "p.xml and the files each case names (the test writes them); the test checks the exit status and the\n"
      "start of the error line (`VITSIM_UPDATE_DOCS=1 build/tests/test_robustness_io` rewrites this "
      "table).\n\n"
      "| # | item | case | command | exit | message (its start) |\n| --- | --- | --- | --- | --- | --- |\n";
  int i = 0;
  for (const auto& c : all) {
    std::string cmd = c.command, line = c.line;
    for (std::string* s : {&cmd, &line})
      for (size_t at = s->find('|'); at != std::string::npos; at = s->find('|', at + 2))
        s->replace(at, 1, "\\|");
    o += fmt::format("| {} | {} | {} | `{}` | {} | `{}` |\n", ++i, c.item, c.what, cmd, c.status, line);
  }
  return o;
}

// The line of `out` that starts with `start`.
bool has_line(const std::string& out, const std::string& start) {
  return out.rfind(start, 0) == 0 || out.find("\n" + start) != std::string::npos;
}

}  // namespace

TEST_CASE("issue 39 inputs and outputs: docs/robustness.md's table is these cases, each run",
          "[robustness][io][docs]") {
  const Folder f;
  f.d.file("long.csv", std::string(20000000, 'x') + ",step_time_s\n4,0.01\n");
  const auto all = io_cases();
  for (const auto& c : all) {
    INFO("item " << c.item << ": " << c.what << "\n  " << c.command);
    const auto r = f.run(c.command);
    INFO(r.out.substr(0, 2000));
    CHECK(r.status == c.status);
    CHECK(has_line(r.out, c.line));
  }
  const std::string doc = render_io(all);
  CHECK(vt::doc_section(vt::source("docs/robustness.md"), "test_robustness_io", doc) == doc);
}

TEST_CASE("plan --save-scenario: nothing written when refused, and a saved file edited since is kept",
          "[robustness][io]") {
  const Folder f;
  const std::string one_line = "vitsim plan --gpu t4 --model vit_b_16 --dataset cifar10 -q";
  // The DeepSpeed config named scenario.xml in the folder: refused, and left as it was (item 5).
  CHECK(f.run(one_line + " --deepspeed D/scenario.xml --save-scenario D").status == 1);
  CHECK(vitsim::read_file(f.d / "D/scenario.xml") == "{\"train_micro_batch_size_per_gpu\": 8}\n");
  CHECK(!vt::fs::exists(f.d / "D/platform.xml"));
  // Refused before anything is made: the folder --save-scenario would have made is not there.
  CHECK(f.run(one_line + " --save-scenario new --out new/scenario.xml").status == 1);
  CHECK(!vt::fs::exists(f.d / "new"));
  // Saved, run again unchanged (the same files: allowed), then edited: the edit is kept, the run refused.
  REQUIRE(f.run(one_line + " --save-scenario E > /dev/null").status == 0);
  REQUIRE(f.run(one_line + " --save-scenario E > /dev/null").status == 0);
  std::string edited = vitsim::read_file(f.d / "E/scenario.xml");
  edited.insert(edited.find("</scenario>"), "  <training micro_batch=\"8\"/>\n");
  f.d.file("E/scenario.xml", edited);
  const auto r = f.run(one_line + " --save-scenario E");
  CHECK(r.status == 1);
  CHECK(r.out ==
        "vitsim: error: --save-scenario: E/scenario.xml exists and differs from what this command writes "
        "(edited since it was saved?): plan it with vitsim plan E/scenario.xml, or give another folder\n");
  CHECK(vitsim::read_file(f.d / "E/scenario.xml") == edited);
}

TEST_CASE("CSV per RFC 4180: cells with a comma, a quote or a line end quoted, quotes doubled, read back",
          "[robustness][io][csv]") {
  using vitsim::csv_cell;
  CHECK(csv_cell("p.xml") == "p.xml");
  CHECK(csv_cell("a,b") == "\"a,b\"");
  CHECK(csv_cell("q\"x.xml") == "\"q\"\"x.xml\"");
  CHECK(csv_cell("n\nl") == "\"n\nl\"");
  CHECK(csv_cell("c\rr") == "\"c\rr\"");
  CHECK(vitsim::csv_quoted("memory: 3 > 2") == "\"memory: 3 > 2\"");
  // What the writer writes, the reader reads back: each cell, in one record, the lines counted.
  CHECK(csv_cell(" kept ") == "\" kept \"");
  CHECK(csv_cell("#1") == "\"#1\"");
  const std::vector<std::string> cells{"p.xml", "a,b", "q\"x.xml", "n\nl", "", " kept ", "#1"};
  std::string text;
  for (const auto& c : cells) text += (text.empty() ? "" : ",") + csv_cell(c);
  text += "\nnext\n";
  size_t pos = 0;
  int line = 1;
  const vitsim::CsvRecord r = vitsim::read_csv_record(text, pos, line, "t.csv");
  CHECK(r.line == 1);
  CHECK(line == 3);  // the record held one line end inside a quoted cell
  CHECK(r.fields == cells);
  // A bare cell is trimmed of spaces and tabs (a spreadsheet's "4, 0.01"), a quoted one kept as written.
  size_t at = 0;
  int l = 1;
  CHECK(vitsim::read_csv_record(" a ,\t\" b \" \r\n", at, l, "t.csv").fields ==
        std::vector<std::string>{"a", " b "});
  CHECK(vitsim::read_csv_record(text, pos, line, "t.csv").fields == std::vector<std::string>{"next"});
  CHECK(pos == text.size());
  // predict's and plan's CSV: a platform file whose name holds a quote stays one cell of its row (it was
  // written bare and shifted nothing, but a reader took the quote for the start of a quoted cell).
  const Folder f;
  vt::run("cp " + f.d / "p.xml" + " '" + f.d / "q\"x.xml'");
  for (const char* command : {"predict", "plan"}) {
    const auto out = f.run(fmt::format(
        "vitsim {} s.xml -q --set 'cluster.platform=p.xml,q\"x.xml' --format csv --out out.csv", command));
    REQUIRE(out.status == 0);
    const std::string csv = vitsim::read_file(f.d / "out.csv");
    size_t at = 0;
    int l = 1;
    const auto header = vitsim::read_csv_record(csv, at, l, "out.csv").fields;
    const size_t col = std::find(header.begin(), header.end(), "cluster.platform") - header.begin();
    REQUIRE(col < header.size());
    std::vector<std::string> platforms;
    while (at < csv.size()) {
      const auto row = vitsim::read_csv_record(csv, at, l, "out.csv").fields;
      CHECK(row.size() == header.size());
      platforms.push_back(row[col]);
    }
    CHECK(platforms == std::vector<std::string>{"p.xml", "q\"x.xml"});
  }
  // fit's reader takes quoted names and values (it refused any quote before).
  f.d.file("quoted.csv", "\"training.micro_batch\",\"step_time_s\"\n\"4\", 0.01\n\"8\" ,\"0.02\"\n");
  const auto fit = f.run("vitsim fit s.xml --measured quoted.csv -q --out fitted.xml --format json");
  INFO(fit.out);
  CHECK(fit.status == 0);
}

TEST_CASE("did you mean: a name too long or too short for any edit allowed is not compared",
          "[robustness][io]") {
  const std::vector<std::string> keys = vitsim::scenario_keys();
  CHECK(vitsim::closest_name("training.micro_bach", keys) == "training.micro_batch");
  CHECK(vitsim::closest_name("pred", {"predict"}) == "predict");
  // 2e6 characters against the key table: no guess, and no 2e6 x 30 distance table (the CLI case above runs
  // 2e7 under a CPU-time limit).
  CHECK(vitsim::closest_name(std::string(2000000, 'x'), keys).empty());
  // The bound is exact: the distance is at least the difference of the lengths, so what it skips could not
  // have matched. Within it the guess stands: one character left out.
  CHECK(vitsim::closest_name("traning.micro_batch", keys) == "training.micro_batch");
}

TEST_CASE(
    "interval flags: --p-low, --p-high, --interval-mode and --interval-seed imply --interval, as --samples "
    "and --runs do",
    "[robustness][io]") {
  const Folder f;
  for (const char* flag : {"--p-low 0.2", "--p-high 0.8", "--interval-seed 5", "--interval-mode sampled"}) {
    INFO(flag);
    const auto r = f.run(fmt::format("vitsim predict s.xml -q --format json {}", flag));
    REQUIRE(r.status == 0);
    const json p = json::parse(r.out)["points"][0];
    REQUIRE(p.contains("interval"));
    const std::string given = flag;
    if (given.rfind("--p-low", 0) == 0) CHECK(p["interval"]["p_low"] == 0.2);
    if (given.rfind("--p-high", 0) == 0) CHECK(p["interval"]["p_high"] == 0.8);
    if (given.rfind("--interval-seed", 0) == 0) CHECK(p["interval"]["seed"] == 5);
    // Sampled: every sample simulated, the JSON as before the surrogate (no "surrogate" key).
    if (given.rfind("--interval-mode", 0) == 0) CHECK_FALSE(p["interval"].contains("surrogate"));
  }
  // The largest seed is written as it was given and read back (plot refused the negative seed it became;
  // a batch plot needs two micro-batches).
  const auto r = f.run(
      "vitsim predict s.xml -q --format json --interval-seed 9223372036854775807 --set "
      "training.micro_batch=16,32 --out r.json");
  REQUIRE(r.status == 0);
  CHECK(json::parse(vitsim::read_file(f.d / "r.json"))["points"][0]["interval"]["seed"] ==
        9223372036854775807LL);
  CHECK(f.run("vitsim plot r.json --out r.svg").status == 0);
}

TEST_CASE("a what-if's GPU spec is read by what it is, a file, whatever its extension", "[robustness][io]") {
  const Folder f;
  // nebula.spec is platforms/specs/nebula.json renamed: its A4500 replaces the T4s, as the .json does.
  const auto as_spec = f.run("vitsim predict s.xml -q --format json --what-if 'gpu:*=nebula.spec:A4500'");
  const auto as_json = f.run(fmt::format("vitsim predict s.xml -q --format json --what-if 'gpu:*={}:A4500'",
                                         vt::source("platforms/specs/nebula.json")));
  INFO(as_spec.out);
  REQUIRE(as_spec.status == 0);
  REQUIRE(as_json.status == 0);
  const auto step = [](const std::string& out) {
    return json::parse(out)["points"][0]["step_time_s"]["mean"];
  };
  CHECK(step(as_spec.out) == step(as_json.out));
  const auto plain = f.run("vitsim predict s.xml -q --format json");
  REQUIRE(plain.status == 0);
  CHECK(step(as_spec.out) != step(plain.out));
  // The spec is an input: --out onto it is refused.
  const auto over = f.run("vitsim predict s.xml -q --what-if 'gpu:*=nebula.spec:A4500' --out nebula.spec");
  CHECK(over.status == 1);
  CHECK(over.out.find("an output must not overwrite an input") != std::string::npos);
}

TEST_CASE("seeded mutations of measured times (CSV and JSON): refused cleanly or read, and read back",
          "[robustness][io][fuzz]") {
  // What fuzz/fuzz_inputs.cpp's `measured` harness checks, on a fixed seed and a fixed number of mutations so
  // that it runs in every suite: bytes flipped, inserted (',', '"', '\n', '#', ' ', '[', '{') and cut out of
  // seeds like docs/fit.md's; anything but vitsim::Error escaping fails, and a CSV read is written back
  // cell by cell with csv_cell and must read back to the same rows.
  const Folder f;
  const vitsim::ScenarioFile scenario = vitsim::read_scenario_file(f.d / "s.xml");
  const std::vector<std::string> seeds{
      "# runs\ncluster.nodes,training.micro_batch,step_time_s\n1,32,0.1412\n2,32,0.1438\n",
      "\"training.micro_batch\",\"step_time_s\"\n\"4\", 0.01\n\"8\" ,\"0.02\"\n",
      "cluster.platform,training.micro_batch,step_time_s\nq.xml,4,0.01\n\"p.xml\",8,0.02\n", "[]\n",
      "{\"schema\": \"vitsim.report/2\", \"kind\": \"measured\"}\n"};
  const std::string inserts = ",\"\n# [{\r";
  std::mt19937 gen(39);  // the number: any fixed seed, the sequence is fixed by the C++ standard
  int accepted = 0, refused = 0;
  for (int i = 0; i < 600; ++i) {
    std::string text = seeds[gen() % seeds.size()];
    for (int k = 1 + gen() % 4; k > 0 && !text.empty(); --k) {
      const size_t at = gen() % text.size();
      switch (gen() % 3) {
        case 0:
          text[at] = static_cast<char>(gen() % 256);
          break;
        case 1:
          text.insert(at, 1, inserts[gen() % inserts.size()]);
          break;
        default:
          text.erase(at, 1 + gen() % 3);
      }
    }
    const std::string path = gen() % 2 ? "m.json" : "m.csv";
    INFO("mutation " << i << " as " << path << ": "
                     << json(text).dump(-1, ' ', false, json::error_handler_t::replace));
    try {
      const vitsim::MeasuredTimes m = vitsim::read_measured_times(path, text);
      ++accepted;
      if (m.report) continue;
      std::string again;
      for (const auto& [key, value] : m.rows.front().keys) again += vitsim::csv_cell(key) + ",";
      again += std::string(vitsim::measured_metric_column(m.metric)) + "\n";
      for (const auto& row : m.rows) {
        for (const auto& [key, value] : row.keys) again += vitsim::csv_cell(value) + ",";
        again += fmt::format("{:.17g}\n", row.seconds);
      }
      const vitsim::MeasuredTimes back = vitsim::read_measured_times("again.csv", again);
      REQUIRE(back.rows.size() == m.rows.size());
      for (size_t r = 0; r < m.rows.size(); ++r) {
        CHECK(back.rows[r].keys == m.rows[r].keys);
        CHECK(back.rows[r].seconds == m.rows[r].seconds);
      }
      vitsim::measured_inputs(scenario, m);
    } catch (const vitsim::Error&) {
      ++refused;
    }
  }
  // Both sides reached: the mutations are neither all refused nor all harmless.
  CHECK(accepted > 0);
  CHECK(refused > 0);
}
