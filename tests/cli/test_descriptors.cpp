// Issue 13 item 2: one table per concept. Each registry (collectives, datasets, what-if kinds, plot kinds)
// is what the messages list, and the manual (docs/) lists what the registry holds: a name added to or
// dropped from a table without its documentation fails here. Issue 24: README.md is a front door of at most
// 200 lines, and every relative link of README.md, CONTRIBUTING.md and docs/*.md leads to a file (and a
// heading) that exists.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "markdown.hpp"
#include "test_util.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/formats/whatif.hpp"
#include "vitsim/core/model/dataset.hpp"
#include "vitsim/core/model/framework.hpp"
#include "vitsim/plot/plan_plot.hpp"
#include "vitsim/plot/plot.hpp"
#include "vitsim/sim/collectives/collective.hpp"
#include "vitsim/sim/compute/compute_model.hpp"
#include "vitsim/sim/compute/registries.hpp"

namespace {

// A page of the manual, by its path from the repository root ("docs/model.md").
std::string doc(const std::string& rel) {
  return vitsim::read_file(vt::source(rel));
}
const std::string kScenarioDoc = "docs/scenarios.md";  // the scenario-key table (generated)
const std::string kModelDoc =
    "docs/model.md";  // the collectives, compute models, frameworks lists (generated)
const std::string kCollectiveDoc = "docs/collective.md";  // the collectives' table (generated)
const std::string kPlanDoc = "docs/plan.md";              // "What-ifs", `vitsim plot PLAN.json`
const std::string kStudyDoc = "docs/study.md";            // `vitsim plot REPORT.json`

std::vector<std::string> split(const std::string& s, const std::string& sep) {
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t next; (next = s.find(sep, at)) != std::string::npos; at = next + sep.size())
    out.push_back(s.substr(at, next - at));
  out.push_back(s.substr(at));
  return out;
}

// The "valid" cell of docs/scenarios.md's key row "| KEY | type | default | v1, v2, ...[; remark] | meaning
// |".
std::vector<std::string> doc_key_values(const std::string& key) {
  std::istringstream in(doc(kScenarioDoc));
  const std::string head = "| " + key + " |";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(head, 0) != 0) continue;
    const auto cells = split(line, " | ");
    REQUIRE(cells.size() >= 4);
    std::string values = cells[3];
    if (values.size() >= 2 && values.substr(values.size() - 2) == " |") values.resize(values.size() - 2);
    return split(values.substr(0, values.find(';')), ", ");
  }
  FAIL(kScenarioDoc << " has no row for " << key);
  return {};
}

std::set<std::string> as_set(const std::vector<std::string>& v) {
  return {v.begin(), v.end()};
}

// A markdown table cell: a '|' in the text would end it.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

// docs/scenarios.md's key table, generated from core's key table; names checked outside core come from
// their registries.
std::string key_table_markdown() {
  const std::map<std::string, std::vector<std::string>> registries{
      {"collective", vitsim::sim::collective_names()}, {"compute model", vitsim::sim::compute_model_names()}};
  std::string md = "| key | type | default | valid | meaning |\n| --- | --- | --- | --- | --- |\n";
  for (const auto& k : vitsim::scenario_key_table()) {
    const std::string valid = k.registry.empty() ? k.valid : vt::join(registries.at(k.registry));
    md += "| " + k.key + " | " + k.type + " | " + cell(k.default_value) + " | " + cell(valid) + " | " +
          cell(k.doc) + " |\n";
  }
  return md;
}

// The default of a scenario key, as its row of the key table gives it.
std::string key_default(const std::string& key) {
  for (const auto& k : vitsim::scenario_key_table())
    if (k.key == key) return k.default_value;
  FAIL("no scenario key " << key);
  return "";
}

// A registry as docs/model.md lists it (generated; VITSIM_UPDATE_DOCS=1 rewrites it): one item per entry,
// "  - `NAME` (default; STANDS FOR): DESCRIPTION.", the default the scenario key's.
std::string registry_list_markdown(const std::string& registry, const std::string& key) {
  const std::string def = key_default(key);
  for (const auto& r : vitsim::sim::registries()) {
    if (r.name != registry) continue;
    std::string md;
    for (const auto& e : r.entries)
      md += "  - `" + e.name + "` (" + (e.name == def ? "default; " : "") + e.stands_for +
            "): " + e.description + ".\n";
    return md;
  }
  FAIL("no registry " << registry);
  return "";
}

}  // namespace

TEST_CASE("collectives: the manual, the messages and the tests list the registry",
          "[descriptors][collective]") {
  const std::vector<std::string> names = vitsim::sim::collective_names();
  REQUIRE(names.size() >= 2);  // at least ring and auto: a registry filled by the collective_*.cpp files
  CHECK(as_set(doc_key_values("parallelism.collective")) == as_set(names));
  // Every entry describes itself: what it stands for in NCCL's terms and how it runs.
  for (const auto& c : vitsim::sim::collectives()) {
    INFO(c.name);
    CHECK(!c.stands_for.empty());
    CHECK(!c.description.empty());
  }
  // docs/model.md's list and docs/collective.md's table are generated from the registry.
  const std::string md = registry_list_markdown("collectives", "parallelism.collective");
  CHECK(vt::doc_section(vt::source(kModelDoc), "collectives", md) == md);
  const std::string def = key_default("parallelism.collective");
  std::string table = "| collective | NCCL's algorithm and protocol | how it runs |\n| --- | --- | --- |\n";
  for (const auto& c : vitsim::sim::collectives())
    table += "| `" + c.name + "`" + (c.name == def ? " (default)" : "") + " | " + cell(c.stands_for) + " | " +
             cell(c.description) + " |\n";
  CHECK(vt::doc_section(vt::source(kCollectiveDoc), "collectives", table) == table);
  CHECK_THROWS_WITH(vitsim::sim::make_collective("butterfly"),
                    "unknown collective 'butterfly'; valid: " + vt::join(names));
  CHECK_THROWS_WITH(vitsim::sim::collective_info("butterfly"),
                    "unknown collective 'butterfly'; valid: " + vt::join(names));
  for (const auto& n : names) CHECK(vitsim::sim::make_collective(n) != nullptr);
  // The one mapping to NCCL's algorithms: the ring's forms are Ring, the tree is Tree, auto is none.
  CHECK(vitsim::sim::collective_info("ring").nccl_algo == vitsim::NcclAlgo::Ring);
  CHECK(vitsim::sim::collective_info("ring_msg").nccl_algo == vitsim::NcclAlgo::Ring);
  CHECK(vitsim::sim::collective_info("tree").nccl_algo == vitsim::NcclAlgo::Tree);
  CHECK(!vitsim::sim::collective_info("auto").nccl_algo);
}

TEST_CASE("frameworks: the manual, the key and the messages read the registry", "[descriptors][framework]") {
  std::vector<std::string> names;
  for (const auto& f : vitsim::frameworks()) {
    INFO(f.name);
    names.push_back(f.name);
    CHECK(std::string(f.stands_for).size() > 0);
    CHECK(std::string(f.description).size() > 0);
    CHECK(vitsim::parse_framework(f.name) == f.value);
    CHECK(vitsim::framework_name(f.value) == std::string(f.name));
  }
  CHECK(as_set(doc_key_values("training.framework")) == as_set(names));
  const std::string md = registry_list_markdown("frameworks", "training.framework");
  CHECK(vt::doc_section(vt::source(kModelDoc), "frameworks", md) == md);
  CHECK_THROWS_WITH(vitsim::parse_framework("jax"), "unknown framework 'jax'; valid: " + vt::join(names));
}

TEST_CASE("predict --list prints a registry, without a scenario", "[descriptors][list]") {
  namespace sim = vitsim::sim;
  for (const auto& r : sim::registries()) {
    INFO(r.name);
    std::string lines;
    for (const auto& e : r.entries) lines += e.name + "\t" + e.stands_for + "\t" + e.description + "\n";
    const auto text = vt::vitsim("predict --list " + r.name);
    CHECK(text.status == 0);
    CHECK(text.out == lines);
    const auto json = vt::vitsim("predict --list " + r.name + " --format json");
    CHECK(json.status == 0);
    const auto j = nlohmann::json::parse(json.out);
    REQUIRE(j.size() == r.entries.size());
    for (size_t i = 0; i < r.entries.size(); ++i) {
      CHECK(j[i]["name"] == r.entries[i].name);
      CHECK(j[i]["stands_for"] == r.entries[i].stands_for);
      CHECK(j[i]["description"] == r.entries[i].description);
    }
  }
  // No value: the lists; an unknown one: a bad command line naming them.
  std::string lists;
  for (const auto& r : sim::registries()) lists += r.name + "\t" + r.about + "\n";
  const auto all = vt::vitsim("predict --list");
  CHECK(all.status == 0);
  CHECK(all.out == lists);
  CHECK(vt::join(sim::registry_names()) == "collectives, compute-models, frameworks");
  const auto bad = vt::vitsim("predict --list butterflies");
  CHECK(bad.status == 2);
  CHECK_THAT(bad.out,
             Catch::Contains("--list: unknown list 'butterflies'; valid: collectives, compute-models, "
                             "frameworks"));
}

TEST_CASE("datasets: one table gives the names, the facts and the reader", "[descriptors][dataset]") {
  const std::vector<std::string> names = vitsim::dataset_names();
  CHECK(doc_key_values("dataset.name") == names);  // in the table's order, as the messages list them
  CHECK_THROWS_WITH(vitsim::dataset("mnist"), "unknown dataset 'mnist'; valid: " + vt::join(names));
  for (const auto& d : vitsim::datasets()) {
    INFO(d.name);
    CHECK(&vitsim::dataset(d.name) == &d);
    // A reader with files names them for both splits; the synthetic set has none and no statistics.
    if (d.reader == vitsim::DatasetReader::Synthetic) {
      CHECK(d.train_files.empty());
      CHECK(d.mean.empty());
    } else {
      CHECK_FALSE(d.train_files.empty());
      CHECK_FALSE(d.test_files.empty());
      CHECK((d.default_path.empty() !=
             d.path_help.empty()));  // a default folder, or a message saying what to give
    }
    if (d.reader == vitsim::DatasetReader::Idx || d.reader == vitsim::DatasetReader::CifarBinary)
      CHECK(d.facts.has_value());  // these readers take the class count from the facts
    CHECK(d.mean.size() == d.std.size());
    if (d.facts) CHECK((d.mean.empty() || static_cast<int>(d.mean.size()) == d.facts->channels));
  }
}

TEST_CASE("datasets: a scenario naming a known set takes the table's facts", "[descriptors][dataset]") {
  vt::TempDir dir;  // resolve reads the scenario, not the platform it names
  for (const auto& d : vitsim::datasets()) {
    if (!d.facts) continue;
    INFO(d.name);
    const std::string s = dir.file("s.xml", fmt::format(R"(<scenario>
  <cluster platform="p.xml"/>
  <model width="64" depth="2" heads="2" image_size="{0}" patch="{1}" channels="{2}" classes="{3}"/>
  <dataset name="{4}"/>
</scenario>
)",
                                                        d.facts->image, d.facts->image % 4 == 0 ? 4 : 7,
                                                        d.facts->channels, d.facts->classes, d.name));
    const auto points = vitsim::expand(vitsim::read_scenario_file(s));
    REQUIRE(points.size() == 1);
    CHECK(points[0].dataset.train_samples == d.facts->train);
    CHECK(points[0].dataset.test_samples == d.facts->test);
    CHECK(points[0].dataset.image_size == d.facts->image);
    CHECK(points[0].dataset.channels == d.facts->channels);
  }
}

TEST_CASE("datasets: normalisation by the table's statistics or the fill", "[descriptors][dataset]") {
  // Published statistics (docs/sources.md "Datasets") where the set has them.
  const auto cifar = vitsim::dataset("cifar10").normalization(3);
  CHECK(cifar.first == std::vector<float>{0.4914f, 0.4822f, 0.4465f});
  CHECK(cifar.second == std::vector<float>{0.2470f, 0.2435f, 0.2616f});
  CHECK(vitsim::dataset("fashion_mnist").normalization(1).first == std::vector<float>{0.2860f});
  // An ImageFolder tree: ImageNet's statistics when RGB, 0.5 / 0.5 on each channel otherwise.
  CHECK(vitsim::dataset("imagefolder").normalization(3).second == std::vector<float>{0.229f, 0.224f, 0.225f});
  CHECK(vitsim::dataset("imagefolder").normalization(1).first == std::vector<float>{0.5f});
  CHECK(vitsim::dataset("imagefolder").normalization(4).second == std::vector<float>(4, 0.5f));
  // Synthetic bytes are uniform on [0, 255]: mean 1/2, standard deviation 1/sqrt(12) = 0.2887.
  const auto syn = vitsim::dataset("synthetic").normalization(2);
  CHECK(syn.first == std::vector<float>(2, 0.5f));
  CHECK(syn.second == std::vector<float>(2, 0.2887f));
}

TEST_CASE("what-if kinds: the manual's table and the messages list the kinds", "[descriptors][whatif]") {
  const std::vector<std::string> kinds = vitsim::what_if_kinds();
  const std::string text = doc(kPlanDoc);
  const auto from = text.find("\n## What-ifs\n");
  REQUIRE(from != std::string::npos);
  const std::string section =
      text.substr(from, std::min(text.find("\n### ", from + 1), text.find("\n## ", from + 1)) - from);
  std::set<std::string> documented;
  std::istringstream in(section);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("| `", 0) == 0) documented.insert(line.substr(3, line.find(':') - 3));
  CHECK(documented == as_set(kinds));

  vt::TempDir dir;
  const std::string platform =
      dir.file("p.xml", vt::platform_xml(2, 1, "16GBps", "1us", {"12GBps", "12GBps"}, {"1Tf", "1Tf"}));
  CHECK_THROWS_WITH(vitsim::apply_what_ifs(platform, {"bogus"}),
                    "what-if 'bogus': expected KIND:..., KIND one of " + vt::join(kinds));
  std::vector<std::string> sorted = kinds;
  std::sort(sorted.begin(), sorted.end());
  CHECK_THROWS_WITH(vitsim::apply_what_ifs(platform, {"disk:x=1"}),
                    "what-if 'disk:x=1': unknown kind 'disk'; valid: " + vt::join(sorted));
}

TEST_CASE("plot kinds: the parser, --kind and the manual read the tables", "[descriptors][plot]") {
  namespace plot = vitsim::plot;
  std::vector<std::string> report, plan;
  for (const auto& k : plot::report_kinds()) {
    report.push_back(k.name);
    CHECK(plot::kind_name(plot::parse_kind(k.name)) == std::string(k.name));
  }
  for (const auto& k : plot::plan_kinds()) {
    plan.push_back(k.name);
    CHECK(plot::parse_plan_kind(k.name) == k.kind);
  }
  CHECK_THROWS_WITH(plot::parse_kind("pie"), "unknown plot kind 'pie'; valid: " + vt::join(report));
  CHECK_THROWS_WITH(plot::parse_plan_kind("pie"), "unknown plan plot kind 'pie'; valid: " + vt::join(plan));
  std::set<std::string> all = as_set(report);
  all.insert(plan.begin(), plan.end());
  CHECK(as_set(plot::plot_kind_names()) == all);
  // The manual's usage lines: `[--kind a|b|c]` for reports (docs/study.md) and for plans (docs/plan.md).
  CHECK(doc(kStudyDoc).find("vitsim plot REPORT.json [REPORT.json...] --out FILE.svg|.png|.pdf [--kind " +
                            vt::join(report, "|") + "]") != std::string::npos);
  const std::string text = doc(kPlanDoc);
  std::set<std::string> plan_doc;
  const auto at = text.find("vitsim plot PLAN.json");
  REQUIRE(at != std::string::npos);
  const auto open = text.find("[--kind ", at), close = text.find(']', open);
  for (const auto& n : split(text.substr(open + 8, close - open - 8), "|")) plan_doc.insert(n);
  CHECK(plan_doc == as_set(plan));
  // vitsim plot --kind takes every kind and only those (CLI11 check: exit 2 for another word).
  vt::TempDir dir;
  const std::string r = dir.file("r.json", "{}");
  CHECK(vt::vitsim("plot " + r + " --out " + (dir / "x.svg") + " --kind pie").status == 2);
}

TEST_CASE("scenario keys: the manual's table, the schema and --set read the key table",
          "[descriptors][scenario]") {
  const auto& table = vitsim::scenario_key_table();
  // docs/scenarios.md's table is generated from the rows (VITSIM_UPDATE_DOCS=1 rewrites it).
  const std::string md = key_table_markdown();
  CHECK(vt::doc_section(vt::source(kScenarioDoc), "scenario-keys", md) == md);
  // Each key once; scenario_keys() (--set's known keys, "did you mean") is the table's, sorted.
  std::vector<std::string> keys;
  for (const auto& k : table) keys.push_back(k.key);
  CHECK(as_set(keys).size() == keys.size());
  std::vector<std::string> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  CHECK(vitsim::scenario_keys() == sorted);
  // Every row documents itself; a registry row leaves its names to the registry.
  for (const auto& k : table) {
    INFO(k.key);
    CHECK_FALSE(k.type.empty());
    CHECK_FALSE(k.doc.empty());
    CHECK(k.valid.empty() != k.registry.empty());
  }
  // The schema is the table's: an unknown attribute on each element lists that element's keys in table
  // order, and an unknown element lists the elements.
  vt::TempDir dir;
  std::map<std::string, std::vector<std::string>> by_element;
  for (const auto& k : keys) {
    const auto dot = k.find('.');
    if (k.substr(0, dot) != "scenario") by_element[k.substr(0, dot)].push_back(k.substr(dot + 1));
  }
  std::vector<std::string> elements;
  for (const auto& [el, attrs] : by_element) {
    INFO(el);
    elements.push_back(el);
    const std::string s = dir.file("s.xml", "<scenario>\n  <" + el + " bogus=\"1\"/>\n</scenario>\n");
    CHECK(vt::error_of([&] { vitsim::read_scenario_file(s); }) ==
          s + ":2: unknown attribute 'bogus' on <" + el + ">; valid: " + vt::join(attrs));
  }
  elements.push_back("sweep");
  const std::string s =
      dir.file("s.xml", "<scenario>\n  <cluster platform=\"p.xml\"/>\n  <bogus/>\n</scenario>\n");
  CHECK(vt::error_of([&] { vitsim::read_scenario_file(s); }) ==
        s + ":3: unknown element <bogus>; valid: " + vt::join(elements));
  // --set takes every key of the table and no other.
  auto f = vitsim::read_scenario_file(
      dir.file("t.xml", "<scenario>\n  <cluster platform=\"p.xml\"/>\n</scenario>\n"));
  for (const auto& k : keys) CHECK_NOTHROW(vitsim::apply_override(f, k + "=1"));
  CHECK_THROWS_WITH(vitsim::apply_override(f, "training.bogus=1"),
                    "--set training.bogus: unknown key; valid: " + vt::join(sorted));
}

TEST_CASE("compute models: the manual, the messages and the key read the registry",
          "[descriptors][compute]") {
  namespace sim = vitsim::sim;
  const auto& models = sim::compute_models();
  REQUIRE(models.size() >= 2);
  CHECK(models.front().name == "auto");  // the default: today's choice per device
  CHECK(key_default("compute.model") == "auto");
  const std::string md = registry_list_markdown("compute-models", "compute.model");
  CHECK(vt::doc_section(vt::source(kModelDoc), "compute-models", md) == md);
  CHECK(as_set(doc_key_values("compute.model")) == as_set(sim::compute_model_names()));
  CHECK_THROWS_WITH(sim::check_compute_model("cas01"),
                    "unknown compute model 'cas01'; valid: " + vt::join(sim::compute_model_names()));
  for (const auto& m : models) CHECK_NOTHROW(sim::check_compute_model(m.name));
  // A scenario naming another model: the key's origin and the registry's names, exit 1 before any work.
  vt::TempDir dir;
  dir.file("p.xml", vt::platform_xml(1, 1, "16GBps", "1us", {"12GBps"}, {"1Tf"}));
  const std::string s = dir.file("s.xml", R"(<scenario>
  <cluster platform="p.xml"/>
  <model preset="vit_cifar_tiny"/>
  <compute model="cas01"/>
  <dataset name="synthetic" train_samples="64"/>
</scenario>
)");
  const auto r = vt::vitsim("predict " + s + " -q");
  CHECK(r.status == 1);
  CHECK(r.out == "vitsim: error: " + s + ":4: compute.model: unknown compute model 'cas01'; valid: " +
                     vt::join(sim::compute_model_names()) + "\n");
}

namespace {

// The pages whose links are checked: the front door, CONTRIBUTING.md and the manual.
std::vector<std::string> pages() {
  std::vector<std::string> out{"README.md", "CONTRIBUTING.md"};
  for (const auto& e : std::filesystem::directory_iterator(vt::source("docs")))
    if (e.path().extension() == ".md") out.push_back("docs/" + e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

using vt::md::anchors;
using vt::md::prose_lines;

}  // namespace

TEST_CASE("docs: README is a front door of at most 200 lines", "[descriptors][docs]") {
  const std::string text = doc("README.md");
  CHECK(std::count(text.begin(), text.end(), '\n') <= 200);
  // The two commands of a fresh machine come first, as .ci/run runs the second.
  const auto setup = text.find("VITSIM_WITH_TORCH=0 bash scripts/setup.sh && cmake -S . -B build-sim");
  const auto test = text.find("\n```\nbash scripts/test.sh\n```\n");
  REQUIRE(setup != std::string::npos);
  REQUIRE(test != std::string::npos);
  CHECK(setup < test);
  CHECK(text.find("\n## ") > test);
  CHECK(doc(".ci/run").find("bash scripts/test.sh") != std::string::npos);
  // Its sample output is what the first command prints.
  const std::string command = "$ vitsim predict scenarios/study/vector-strong-b64.xml\n";
  const auto sample = text.find(command);
  REQUIRE(sample != std::string::npos);
  const auto from = sample + command.size();
  const auto r = vt::vitsim("predict " + vt::source("scenarios/study/vector-strong-b64.xml") + " --quiet");
  CHECK(r.status == 0);
  CHECK(text.substr(from, text.find("```", from) - from) == r.out);
}

TEST_CASE("docs: every relative link leads to a file and a heading that exist", "[descriptors][docs]") {
  namespace fs = std::filesystem;
  const std::regex link(R"(\]\(([^()\s]+)(?:\s+"[^"]*")?\))");  // [text](target) and ![alt](target)
  size_t checked = 0;
  for (const auto& page : pages()) {
    const fs::path dir = fs::path(page).parent_path();
    for (const auto& line : prose_lines(doc(page))) {
      for (std::sregex_iterator m(line.begin(), line.end(), link), end; m != end; ++m) {
        const std::string target = (*m)[1];
        if (target.find("://") != std::string::npos || target.rfind("mailto:", 0) == 0) continue;
        INFO(page << ": " << target);
        const auto hash = target.find('#');
        const std::string file = target.substr(0, hash);
        const std::string rel = file.empty() ? page : (dir / file).lexically_normal().string();
        CHECK(fs::exists(vt::source(rel)));
        if (hash != std::string::npos && fs::path(rel).extension() == ".md" &&
            fs::is_regular_file(vt::source(rel)))
          CHECK(anchors(doc(rel)).count(target.substr(hash + 1)) == 1);
        ++checked;
      }
    }
  }
  CHECK(checked > 20);  // the README's map and the manual's table at least
}
