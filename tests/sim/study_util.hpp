// Helpers shared by the study's tests (test_study.cpp, test_study_findings.cpp): predict a shipped study
// scenario through the simulator, pick a point of its report, read a figure from a shipped platform file.
#pragma once

#include <catch2/catch.hpp>
#include <pugixml.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/model/vit.hpp"
#include "vitsim/core/results/report.hpp"
#include "vitsim/sim/predict/predict.hpp"

namespace study {

inline std::string src(const std::string& rel) {
  return std::string(VITSIM_SOURCE_DIR) + "/" + rel;
}

// A scenario of the repository (relative to scenarios/), predicted with the given --set overrides.
inline vitsim::Report predict_file(const std::string& rel, const std::vector<std::string>& sets = {}) {
  vitsim::ScenarioFile f = vitsim::read_scenario_file(src("scenarios/" + rel));
  for (const auto& s : sets) vitsim::apply_override(f, s);
  vitsim::sim::PredictOptions opt;
  opt.progress = false;
  return vitsim::sim::predict(f, opt);
}

// A shipped study scenario (scenarios/study/), predicted with the given --set overrides.
inline vitsim::Report predict(const std::string& scenario, const std::vector<std::string>& sets = {}) {
  return predict_file("study/" + scenario, sets);
}

// The point of a report with the given GPU count (and micro-batch, when several are swept).
inline const vitsim::ReportPoint& at(const vitsim::Report& r, int gpus, int micro_batch = 0) {
  for (const auto& p : r.points)
    if (p.gpus == gpus && (micro_batch == 0 || p.micro_batch == micro_batch)) return p;
  FAIL("report " << r.scenario << " has no point with " << gpus << " GPUs, micro-batch " << micro_batch);
  throw std::logic_error("unreachable");
}

inline double epoch(const vitsim::Report& r, int gpus) {
  return at(r, gpus).epoch_time_s;
}
inline double compute(const vitsim::Breakdown& b) {
  return b.compute_fwd + b.compute_bwd;
}

// Gradient bytes all-reduced per step: every vit_b_16 parameter (1000-class head kept) in `elem` bytes.
inline double gradient_bytes(int elem) {
  return static_cast<double>(vitsim::build_workload(vitsim::vit_preset("vit_b_16")).total_params()) * elem;
}

// A bandwidth attribute of a platform element, by id (a NIC <link> or a node's <cluster>).
inline double platform_bw(const std::string& platform, const std::string& id, const char* attr) {
  pugi::xml_document doc;
  REQUIRE(doc.load_file(src(platform).c_str()));
  pugi::xpath_node n = doc.select_node(("//*[@id='" + id + "']").c_str());
  REQUIRE(n);
  return vitsim::units::parse(n.node().attribute(attr).value(), vitsim::units::Kind::Bandwidth);
}

}  // namespace study
