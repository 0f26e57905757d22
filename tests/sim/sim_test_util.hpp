#pragma once
// Helpers shared by the simulator's tests (tests/sim): comparing two reports' numbers; the local loop's
// point predicted with a calibration.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>

#include "test_util.hpp"

namespace vt {

// Every number of two reports' JSON within `rel` of each other: the same keys, lists of the same length; the
// notes apart (their text may differ where the numbers do not: e.g. the note that a fast path applied).
inline void check_same_numbers(const nlohmann::json& a, const nlohmann::json& b, double rel,
                               const std::string& path = "") {
  INFO(path);
  if (a.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      REQUIRE(b.contains(it.key()));
      check_same_numbers(it.value(), b[it.key()], rel, path + "." + it.key());
    }
  } else if (a.is_array() && path.find("notes") == std::string::npos) {
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i)
      check_same_numbers(a[i], b[i], rel, path + "[" + std::to_string(i) + "]");
  } else if (a.is_number()) {
    CHECK(a.get<double>() == Approx(b.get<double>()).epsilon(rel).margin(1e-300));
  }
}

// The local homogeneous scenario (scenarios/local/validate-homog.xml) at micro-batch 64 on `ranks` ranks,
// predicted with the calibration `calib` and the extra flags `extra`: its one point's JSON.
inline nlohmann::json predict_local_point(const TempDir& d, const std::string& calib, int ranks,
                                          const std::string& extra = "") {
  const std::string out = d / "p.json";
  auto r = vitsim("predict " + source("scenarios/local/validate-homog.xml") +
                  " --set training.micro_batch=64 --set cluster.gpus_per_node=" + std::to_string(ranks) +
                  " --calibration " + calib + " " + extra + " --format json -q --out " + out);
  INFO(r.out);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(run("cat " + out).out)["points"][0];
}

}  // namespace vt
