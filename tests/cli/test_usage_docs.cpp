// Issue 35 item 4: one source per command's usage. The flags of every command are CLI11's (app/cmd_*.cpp);
// each command's page of the manual holds its flags table generated from them (`vitsim --usage-json`,
// app/common.cpp), between "<!-- begin flags-COMMAND -->" and "<!-- end flags-COMMAND -->"
// (VITSIM_UPDATE_DOCS=1 rewrites them); a flag missing from its page, or a page listing one its command
// lacks, fails here. And every section of README.md or docs/ that the code names (a message, a help text, a
// comment, a generated platform file's comment: all come from the sources) is a heading that exists.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "markdown.hpp"
#include "test_util.hpp"
#include "vitsim/core/base/io.hpp"

namespace {
namespace fs = std::filesystem;

// The page of the manual that documents each command's flags. A new command needs its row (the test
// below fails on a command that has none).
const std::map<std::string, std::string> kCommandPages{{"predict", "docs/predict.md"},
                                                       {"plan", "docs/plan.md"},
                                                       {"platform", "docs/platforms.md"},
                                                       {"collective", "docs/collective.md"},
                                                       {"fit", "docs/fit.md"},
                                                       {"validate", "docs/calibrate-validate.md"},
                                                       {"plot", "docs/study.md"},
                                                       {"train", "docs/trainer.md"},
                                                       {"calibrate", "docs/calibrate-validate.md"}};

// The commands that only a build with LibTorch defines (elsewhere a stand-in that says how to rebuild).
const std::set<std::string> kTorchCommands{"train", "calibrate"};

std::string doc(const std::string& rel) {
  return vitsim::read_file(vt::source(rel));
}

// The executables that define commands: vitsim, and beside it vitsim-torch where the build has one (the
// commands that need LibTorch, which vitsim parses and then execs it for). Each answers --usage-json with its
// own commands.
std::vector<std::string> executables() {
  std::vector<std::string> out{VITSIM_BINARY};
  const fs::path torch = fs::path(VITSIM_BINARY).parent_path() / "vitsim-torch";
  if (fs::exists(torch)) out.push_back(torch.string());
  return out;
}

struct Commands {
  std::map<std::string, nlohmann::json> defined;  // name -> its options, from the executable that has them
  std::set<std::string> listed;                   // every command `vitsim` lists, defined there or not
};

const Commands& commands() {
  static const Commands all = [] {
    Commands c;
    for (const auto& exe : executables()) {
      const auto r = vt::run(exe + " --usage-json");
      INFO(exe << " --usage-json: " << r.out);
      REQUIRE(r.status == 0);
      const nlohmann::json j = nlohmann::json::parse(r.out);
      for (const auto& cmd : j.at("commands")) {
        const std::string name = cmd.at("name");
        if (exe == VITSIM_BINARY) c.listed.insert(name);
        if (!cmd.at("flags_here").get<bool>()) continue;
        INFO(name << " in " << exe);
        // vitsim parses train's and calibrate's flags and execs vitsim-torch, which parses them again from
        // the same CLI11 definitions (app/cmd_train.cpp, cmd_calibrate.cpp): both must list the same options.
        if (c.defined.count(name)) CHECK(c.defined[name] == cmd.at("options"));
        c.defined[name] = cmd.at("options");
      }
    }
    return c;
  }();
  return all;
}

// A markdown table cell: a '|' in the text would end it.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

// The value a flag takes, from CLI11's type name: "TYPE:CHECK" is written as the check's name where a check
// names one ("INT:INT" -> INT, "TEXT:SIZE" -> SIZE, "TEXT:{table,json}" -> {table,json}), then CLI11's
// "=DEFAULT" where CLI11 holds the default (elsewhere the description says it), then " ..." when the flag
// may be repeated, as `--help` writes them.
std::string value_of(const nlohmann::json& o) {
  std::string value = o.at("value");
  const auto colon = value.rfind(':');
  if (colon != std::string::npos && colon + 1 < value.size()) value = value.substr(colon + 1);
  const std::string def = o.at("default");
  if (!value.empty() && !def.empty()) value += "=" + def;
  if (o.at("repeatable").get<bool>()) value += value.empty() ? "(repeatable)" : " ...";
  return value;
}

// The flags table of a command, from CLI11's options in the order the command adds them.
std::string flags_table(const nlohmann::json& options) {
  std::string md = "| flag | value | meaning |\n| --- | --- | --- |\n";
  for (const auto& o : options) {
    std::string names;
    for (const auto& n : o.at("names")) names += (names.empty() ? "`" : ", `") + n.get<std::string>() + "`";
    if (o.at("positional").get<bool>()) names += " (positional)";
    const std::string value = value_of(o);
    md += "| " + cell(names) + " | " + (value.empty() ? "" : "`" + cell(value) + "`") + " | " +
          cell(o.at("description")) + " |\n";
  }
  return md;
}

// Every name of a command's options ("--jobs", "-j"), positionals left out.
std::set<std::string> flag_names(const nlohmann::json& options) {
  std::set<std::string> out;
  for (const auto& o : options)
    if (!o.at("positional").get<bool>())
      for (const auto& n : o.at("names")) out.insert(n.get<std::string>());
  return out;
}

// The pages whose command lines are checked: the front door, CONTRIBUTING.md and the manual.
std::vector<std::string> pages() {
  std::vector<std::string> out{"README.md", "CONTRIBUTING.md"};
  for (const auto& e : fs::directory_iterator(vt::source("docs")))
    if (e.path().extension() == ".md") out.push_back("docs/" + e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("usage: every command's page holds its flags table generated from CLI11", "[descriptors][usage]") {
  const Commands& c = commands();
  // Every command has a page, and every command of the table exists (train and calibrate where the build
  // has LibTorch; elsewhere vitsim lists them as stand-ins).
  for (const auto& name : c.listed) {
    INFO(name);
    CHECK(kCommandPages.count(name) == 1);
  }
  for (const auto& [name, page] : kCommandPages) {
    INFO(name);
    CHECK(c.listed.count(name) == 1);
    if (!kTorchCommands.count(name) || VITSIM_TEST_HAVE_REAL) CHECK(c.defined.count(name) == 1);
  }
  for (const auto& [name, options] : c.defined) {
    INFO(name << ": " << kCommandPages.at(name) << ", between the flags-" << name
              << " markers (VITSIM_UPDATE_DOCS=1 build/tests/test_descriptors \"[usage]\" rewrites it)");
    // A flag without a description would be an empty row of the manual.
    for (const auto& o : options) {
      INFO(o.at("names").dump());
      CHECK_FALSE(o.at("description").get<std::string>().empty());
    }
    const std::string md = flags_table(options);
    CHECK(vt::doc_section(vt::source(kCommandPages.at(name)), "flags-" + name, md) == md);
  }
}

TEST_CASE("usage: the manual's command lines use only flags their command has", "[descriptors][usage]") {
  // In code blocks and inline code of README.md, CONTRIBUTING.md and docs/: "vitsim COMMAND ..." (also
  // build/app/vitsim, after mpirun) and the lines that continue it (a trailing '\', or an indented line
  // inside a code block). A flag is "-x" (a value may follow at once: "-j4") or "--name" after a space, '['
  // '(' or '|'; "--a=--b" names --a. Not docs/robustness.md, whose tables are bad command lines on purpose.
  const Commands& c = commands();
  const std::regex command(R"((?:^|[\s/`])vitsim ([a-z]+)\b(.*))");
  const std::regex flag(R"((?:^|[\s\[(|])(--[A-Za-z][A-Za-z0-9-]*|-[A-Za-z]))");
  size_t checked = 0;
  auto check_line = [&](const std::string& page, const std::string& name, const std::string& rest) {
    if (!c.defined.count(name)) return;  // a command this build does not define (train without LibTorch)
    const std::set<std::string> names = flag_names(c.defined.at(name));
    // The command ends at a shell comment, a closing backtick or a gap of two spaces (a diagram's next
    // column: "vitsim validate --run    predicts as above, then runs `mpirun -np ...`").
    const size_t from = rest.find_first_not_of(" \t");
    std::string text = from == std::string::npos ? "" : rest.substr(from);
    text = text.substr(0, std::min({text.find(" #"), text.find('`'), text.find("  ")}));
    for (std::sregex_iterator m(text.begin(), text.end(), flag), end; m != end; ++m) {
      const std::string f = (*m)[1];
      if (f == "--help" || f == "-h") continue;
      INFO(page << ": " << f << " in: vitsim " << name << rest);
      CHECK(names.count(f) == 1);
      ++checked;
    }
  };
  for (const auto& page : pages()) {
    if (page == "docs/robustness.md") continue;  // its tables are bad command lines on purpose
    const std::string text = doc(page);
    // Fenced code blocks: a command and its continuation lines.
    std::string current;  // the command being continued ("" when none)
    for (const auto& line : vt::md::lines(text, true)) {
      std::smatch m;
      if (std::regex_search(line, m, command) && c.listed.count(m[1])) {
        current = m[1];
        check_line(page, current, m[2]);
      } else if (!current.empty() && !line.empty() && (line[0] == ' ' || line[0] == '\t')) {
        check_line(page, current, line);
      } else {
        current.clear();
      }
    }
    // Inline code spans of the prose: `vitsim COMMAND ...`.
    const std::regex span("`([^`]+)`");
    for (const auto& line : vt::md::prose_lines(text))
      for (std::sregex_iterator s(line.begin(), line.end(), span), end; s != end; ++s) {
        const std::string code = (*s)[1];
        std::smatch m;
        if (std::regex_search(code, m, command) && c.listed.count(m[1])) check_line(page, m[1], m[2]);
      }
  }
  CHECK(checked > 50);  // the synopses of predict, plan and platform alone hold more
}

namespace {

// A source file's text as the reader sees it: string literals joined across lines ("...README "
// "\"Energy...), escapes and XML entities undone, comment markers and line breaks as single spaces.
std::string normalised(std::string text) {
  text = std::regex_replace(text, std::regex(R"("\s*\n\s*")"), "");
  text = std::regex_replace(text, std::regex(R"(\\n)"), " ");
  text = std::regex_replace(text, std::regex(R"(\\")"), "\"");
  text = std::regex_replace(text, std::regex("&quot;"), "\"");
  text = std::regex_replace(text, std::regex("&apos;"), "'");
  text = std::regex_replace(text, std::regex(R"(\s*\n\s*(//+|\*|#)?\s*)"), " ");
  return std::regex_replace(text, std::regex(R"([ \t]+)"), " ");
}

// The files whose text names sections of the manual: every source of the libraries and the app (messages,
// help texts, the comments the platform writer puts into every file it writes), the catalogue compiled
// into them, and the shipped platforms and scenarios.
std::vector<std::string> named_from() {
  std::vector<std::string> out;
  for (const std::string dir : {"core", "sim", "real", "calibrate", "validate", "plot", "app"})
    for (const auto& e : fs::recursive_directory_iterator(vt::source(dir))) {
      const auto ext = e.path().extension();
      if (e.is_regular_file() && (ext == ".cpp" || ext == ".hpp" || ext == ".h" || ext == ".in"))
        out.push_back(e.path().string());
    }
  for (const std::string dir : {"data", "platforms", "scenarios"})
    for (const auto& e : fs::recursive_directory_iterator(vt::source(dir))) {
      const auto ext = e.path().extension();
      if (e.is_regular_file() && (ext == ".xml" || ext == ".json")) out.push_back(e.path().string());
    }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("usage: every section of the manual named in code or a shipped file exists",
          "[descriptors][usage]") {
  // README.md#anchor, docs/X.md#anchor, and a page followed by a quoted heading: docs/X.md "Heading" (or
  // 'Heading', or after a comma). The anchor (GitHub's, as the link check) must be one of the page's
  // headings' (vt::md::sections: also a heading without its closing parenthesis, or the bold lead of a
  // paragraph or list item, the manual's named paragraphs); a mention of the README that names no section
  // this way fails too: the README is a front door, what a message points to lives in docs/.
  const std::regex page_ref(
      R"re((README(?:\.md)?|docs/[A-Za-z0-9_-]+\.md)(?:#([A-Za-z0-9_-]+)|,? "([^"]{1,80})"|,? '([^']{1,80})')?)re");
  std::map<std::string, std::set<std::string>> sections;  // page -> what may be named on it
  size_t checked = 0;
  for (const auto& file : named_from()) {
    const std::string text = normalised(vitsim::read_file(file));
    for (std::sregex_iterator m(text.begin(), text.end(), page_ref), end; m != end; ++m) {
      std::string page = (*m)[1];
      // Another repository's file ("owner/name/README.md", "compute/accelerator/README.md": a source's path
      // in data/catalogue.json) is no page of this manual.
      if (page.rfind("README", 0) == 0 && m->position() > 0 &&
          text[static_cast<size_t>(m->position()) - 1] == '/')
        continue;
      if (page.rfind("README", 0) == 0) page = "README.md";
      const std::string at = text.substr(static_cast<size_t>(m->position()), 160);
      INFO(fs::relative(file, vt::source("")).string() << ": " << at);
      if (!fs::is_regular_file(vt::source(page))) {
        FAIL_CHECK("no such page: " << page);
        continue;
      }
      const bool named = (*m)[2].matched || (*m)[3].matched || (*m)[4].matched;
      if (!named) {
        // A page named as a whole ("docs/sources.md gives each setting's source") is fine, but not the
        // README: it holds no section a message may send a user to.
        CHECK(page != "README.md");
        continue;
      }
      if (!sections.count(page)) sections[page] = vt::md::sections(doc(page));
      if ((*m)[2].matched) {  // a link's anchor: a heading's, exactly
        CHECK(vt::md::anchors(doc(page)).count((*m)[2]) == 1);
      } else {
        CHECK(sections[page].count(vt::md::anchor_of((*m)[3].matched ? (*m)[3] : (*m)[4])) == 1);
      }
      ++checked;
    }
  }
  CHECK(checked > 30);  // the sources name docs/sources.md's and docs/model.md's sections by the dozen
}
