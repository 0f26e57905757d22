// `vitsim plot`: the gnuplot script it writes, and the SVG gnuplot draws from it, read back as curves.
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>
#include <pugixml.hpp>

#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/results/report.hpp"
#include "vitsim/plot/plot.hpp"
#include "vitsim/sim/predict/predict.hpp"

namespace {
namespace fs = std::filesystem;

struct Tmp {  // core's TempDir
  vitsim::TempDir dir{"vitsim-plot-test-"};
  fs::path path{dir.path()};
  std::string operator/(const std::string& n) const { return (path / n).string(); }
};

vitsim::Report predict(const std::string& scenario) {
  vitsim::ScenarioFile f =
      vitsim::read_scenario_file(std::string(VITSIM_SOURCE_DIR) + "/scenarios/study/" + scenario);
  vitsim::sim::PredictOptions opt;
  opt.progress = false;
  return vitsim::sim::predict(f, opt);
}

using Points = std::vector<std::pair<double, double>>;

// Every curve of a gnuplot SVG: plot group id ("gnuplot_plot_2a") -> (legend text, the data polyline in
// SVG coordinates). The legend sample is a 2-point subpath of the same <path>; the data is the longest.
struct Curve {
  std::string label;
  Points points;
};
std::map<std::string, Curve> curves_of(const pugi::xml_document& doc) {
  std::map<std::string, Curve> out;
  for (const auto& x : doc.select_nodes("//*[local-name()='g'][starts-with(@id, 'gnuplot_plot_')]")) {
    pugi::xml_node g = x.node();
    Curve c;
    if (auto t = g.select_node(".//*[local-name()='text']")) c.label = t.node().child_value();
    for (const auto& px : g.select_nodes(".//*[local-name()='path']")) {
      std::string d = px.node().attribute("d").value();
      std::stringstream subpaths(d);
      std::string sub;
      while (std::getline(subpaths, sub, 'M')) {
        Points pts;
        std::stringstream in(sub);
        std::string tok;
        while (in >> tok) {
          if (tok == "L" || tok == "Z") continue;
          if (tok[0] == 'L') tok = tok.substr(1);
          double x = 0, y = 0;
          if (std::sscanf(tok.c_str(), "%lf,%lf", &x, &y) == 2) pts.push_back({x, y});
        }
        if (pts.size() > c.points.size()) c.points = pts;
      }
    }
    out[g.attribute("id").value()] = c;
  }
  return out;
}

const Curve& by_label(const std::map<std::string, Curve>& curves, const std::string& label,
                      const std::string& panel) {
  for (const auto& [id, c] : curves)
    if (c.label == label && id.size() >= panel.size() &&
        id.compare(id.size() - panel.size(), panel.size(), panel) == 0)
      return c;
  FAIL("no curve labelled '" << label << "' in panel '" << panel << "'");
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("plot: a batch report draws one per-sample-time curve per GPU count", "[study][plot]") {
  const vitsim::Report r = predict("nebula-batch.xml");
  CHECK(vitsim::plot::resolve_kind(r, vitsim::plot::Kind::Auto) == vitsim::plot::Kind::Batch);
  Tmp tmp;
  vitsim::plot::plot_report(r, tmp / "batch.svg", {});
  pugi::xml_document doc;
  pugi::xml_parse_result ok = doc.load_file((tmp / "batch.svg").c_str());
  INFO(ok.description());
  REQUIRE(ok);  // well-formed XML
  REQUIRE(std::string(doc.document_element().name()) == "svg");
  auto curves = curves_of(doc);
  REQUIRE(curves.size() == 2);
  const Curve& one = by_label(curves, "1 GPU", "");
  const Curve& two = by_label(curves, "2 GPUs", "");
  // Five micro-batches each, left to right; per-sample time falls, and SVG y grows downwards.
  for (const Curve* c : {&one, &two}) {
    REQUIRE(c->points.size() == 5);
    for (size_t i = 1; i < c->points.size(); ++i) {
      CHECK(c->points[i].first > c->points[i - 1].first);
      CHECK(c->points[i].second > c->points[i - 1].second);
    }
  }
  // Two GPUs take less time per sample than one at every batch: their curve lies lower (larger y).
  for (size_t i = 0; i < 5; ++i) CHECK(two.points[i].second > one.points[i].second);
}

TEST_CASE("plot: a scaling report draws epoch time and efficiency against GPUs", "[study][plot]") {
  const vitsim::Report r = predict("vector-strong-b64.xml");
  CHECK(vitsim::plot::resolve_kind(r, vitsim::plot::Kind::Auto) == vitsim::plot::Kind::Scaling);
  Tmp tmp;
  const std::string report_path = tmp / "report.json";
  vitsim::write_file_atomic(report_path, vitsim::report_to_json(r));
  // Through the command line, as a user runs it.
  const std::string cmd = std::string(VITSIM_BINARY) + " plot " + report_path + " --out " +
                          (tmp / "scaling.svg") + " --kind scaling 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  pugi::xml_document doc;
  REQUIRE(doc.load_file((tmp / "scaling.svg").c_str()));
  auto curves = curves_of(doc);
  // One series, two panels (a: time, b: efficiency), each with its ideal: linear scaling, 100%.
  REQUIRE(curves.size() == 4);
  const Curve& time = by_label(curves, "vector-strong-b64", "a");
  const Curve& eff = by_label(curves, "vector-strong-b64", "b");
  REQUIRE(time.points.size() == 8);
  REQUIRE(eff.points.size() == 8);
  // The epoch time falls with every GPU added (finding 4): y grows along the curve.
  for (size_t i = 1; i < 8; ++i) CHECK(time.points[i].second > time.points[i - 1].second);
  // Efficiency starts at 100% (the 1-GPU reference) and never rises above it.
  for (size_t i = 1; i < 8; ++i) CHECK(eff.points[i].second >= eff.points[0].second);
  // The ideal (linear) scaling starts at the 1-GPU point and lies below the prediction (less time: larger
  // SVG y) wherever efficiency is below 100% (issue 28 item 9).
  const Curve& ideal = by_label(curves, "ideal (linear) scaling", "a");
  REQUIRE(ideal.points.size() == 8);
  CHECK(ideal.points[0].second == Approx(time.points[0].second).margin(0.5));
  for (size_t i = 1; i < 8; ++i) CHECK(ideal.points[i].second > time.points[i].second);
}

TEST_CASE("plot: the script names each series and its data", "[study][plot]") {
  const vitsim::Report r = predict("vector-strong-b16.xml");
  vitsim::Report both = r;
  const vitsim::Report b64 = predict("vector-strong-b64.xml");
  both.points.insert(both.points.end(), b64.points.begin(), b64.points.end());
  auto series = vitsim::plot::make_series(both, vitsim::plot::Kind::Scaling);
  REQUIRE(series.size() == 2);
  CHECK(series[0].label == "micro-batch 16");
  CHECK(series[1].label == "micro-batch 64");
  CHECK(series[0].time.size() == 8);
  vitsim::plot::Script sc = vitsim::plot::make_script(both, vitsim::plot::Kind::Auto, "out.svg");
  CHECK(sc.text.find("set output \"out.svg\"") != std::string::npos);
  CHECK(sc.text.find("title \"micro-batch 16\"") != std::string::npos);
  CHECK(sc.data.size() == 6);  // time, efficiency and ideal scaling for each series

  // Reports merged for one plot keep their own curves even where their parameters agree (intra- vs
  // inter-node: both sweep the GPU count only).
  const vitsim::Report intra = predict("vector-intranode-cifar100-b64.xml");
  const vitsim::Report inter = predict("vector-internode-b64.xml");
  auto merged =
      vitsim::plot::make_series(vitsim::plot::merge_reports({intra, inter}), vitsim::plot::Kind::Scaling);
  REQUIRE(merged.size() == 2);
  CHECK(merged[0].label == "vector-intranode-cifar100-b64");
  CHECK(merged[1].label == "vector-internode-b64");
  CHECK(merged[0].time.size() == 8);
  CHECK(merged[1].time.size() == 10);
}

TEST_CASE("plot: clear errors for a missing gnuplot and a report with nothing to plot", "[study][plot]") {
  const vitsim::Report r = predict("nebula-batch.xml");
  Tmp tmp;
  vitsim::plot::Options opt;
  opt.gnuplot = "/nonexistent/gnuplot";
  try {
    vitsim::plot::plot_report(r, tmp / "x.svg", opt);
    FAIL("no error for a missing gnuplot");
  } catch (const vitsim::Error& e) {
    CHECK_THAT(e.what(),
               Catch::Contains("cannot run '/nonexistent/gnuplot'") &&
                   Catch::Contains("vitsim plot needs gnuplot (Debian: apt-get install gnuplot-nox"));
  }
  CHECK_FALSE(fs::exists(tmp / "x.svg"));

  vitsim::Report one = r;
  one.points.resize(1);
  CHECK_THROWS_WITH(vitsim::plot::resolve_kind(one, vitsim::plot::Kind::Auto),
                    Catch::Contains("sweeps neither the GPU count nor the micro-batch"));
  CHECK_THROWS_WITH(vitsim::plot::resolve_kind(one, vitsim::plot::Kind::Batch),
                    Catch::Contains("has a single micro-batch (16): a batch plot needs several"));
  std::string kinds;  // the table's names (tests/cli/test_descriptors.cpp checks the manual against them)
  for (const auto& k : vitsim::plot::report_kinds())
    kinds += (kinds.empty() ? "" : ", ") + std::string(k.name);
  CHECK_THROWS_WITH(vitsim::plot::parse_kind("pie"), "unknown plot kind 'pie'; valid: " + kinds);
}

TEST_CASE("plot: the command line names a missing report and a report with nothing to plot",
          "[study][plot]") {
  Tmp tmp;
  auto run = [](const std::string& args, std::string& out) {
    FILE* p = popen((std::string(VITSIM_BINARY) + " " + args + " 2>&1").c_str(), "r");
    REQUIRE(p);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    const int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  std::string out;
  CHECK(run("plot " + (tmp / "none.json") + " --out " + (tmp / "x.svg"), out) == 1);
  CHECK(out ==
        "vitsim: error: " + (tmp / "none.json") + ": cannot open report\n");  // core read_input_file's form

  vitsim::Report one = predict("tesla-strong-b16.xml");
  one.points.resize(1);
  vitsim::write_file_atomic(tmp / "one.json", vitsim::report_to_json(one));
  out.clear();
  CHECK(run("plot " + (tmp / "one.json") + " --out " + (tmp / "x.svg"), out) == 1);
  CHECK_THAT(
      out, Catch::StartsWith("vitsim: error: report 'tesla-strong-b16' sweeps neither the GPU count nor the "
                             "micro-batch: nothing to plot"));
  CHECK_FALSE(fs::exists(tmp / "x.svg"));
}
