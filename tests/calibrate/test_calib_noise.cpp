// Issue 37 item 4, "calibrate knows when it is noisy" (docs/calibrate-validate.md "Noisy rounds"): the rounds
// of the phases interleaved over time, a phase whose rounds spread beyond the limit repeated, the spread
// and the step-to-step variability as closed forms, and the calibration file's new fields (step_cv, rounds)
// read, written and refused. Round times are injected: nothing here is timed.
#include <catch2/catch.hpp>

#include <cmath>
#include <deque>
#include <nlohmann/json.hpp>

#include "test_util.hpp"
#include "vitsim/calibrate/calibrate.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/formats/calibration.hpp"

using namespace vitsim;
using namespace vitsim::calibrate;
using json = nlohmann::json;
using Catch::Contains;

TEST_CASE("noisy rounds: the spread about the kept (median) round", "[calib][noise]") {
  CHECK(round_spread({}) == 0);
  CHECK(round_spread({0.5}) == 0);
  // Two rounds: the kept one is the lower (index (2 - 1) / 2 = 0), the spread (high - low) / low.
  CHECK(round_spread({2.0, 1.0}) == Approx(1.0));
  // Three: the whole range over the middle, in any order.
  CHECK(round_spread({1.3, 1.0, 1.1}) == Approx(0.3 / 1.1));
  // Four: kept index 1, neighbours 0 and 2: a lone slow round (x2) is left out.
  CHECK(round_spread({1.0, 2.0, 1.02, 1.01}) == Approx(0.02 / 1.01));
  // Five: kept index 2, neighbours 1 and 3: the slowest and the fastest are left out.
  CHECK(round_spread({0.5, 1.01, 1.02, 1.03, 2.0}) == Approx(0.02 / 1.02));
  CHECK_THROWS_AS(round_spread({0.0, 0.0, 1.0}), Error);  // a kept round of no time is a bug upstream
}

TEST_CASE("the sync span: each round's rest summed over the micro-batches, over the fit's",
          "[calib][noise]") {
  // Fitted rests 1 ms and 3 ms at two micro-batches (sum 4 ms). Round A {1, 3}: x1; round B {0.2, 2.6}: x0.7;
  // round C {2, 4}: x1.5. The span x0.7..x1.5, every round's factor kept in order.
  const SyncSpanFigure f = sync_span_of({{1e-3, 3e-3}, {0.2e-3, 2.6e-3}, {2e-3, 4e-3}}, {1e-3, 3e-3});
  REQUIRE(f.rounds.size() == 3);
  CHECK(f.rounds[0] == Approx(1));
  CHECK(f.rounds[1] == Approx(0.7));
  CHECK(f.rounds[2] == Approx(1.5));
  CHECK(f.low == Approx(0.7));
  CHECK(f.high == Approx(1.5));
  // The case the per-micro-batch ratio blew up on (issue 37, docs/benchmarks.md: a kept rest of 0.05 ms at
  // one micro-batch made another round's 1.3 ms there x26): the micro-batch weighs by its size, (1.3 + 2) /
  // (0.05 + 2) = x1.61 and (0.05 + 2) / 2.05 = x1.
  const SyncSpanFigure g = sync_span_of({{0.05e-3, 2e-3}, {1.3e-3, 2e-3}}, {0.05e-3, 2e-3});
  CHECK(g.high == Approx(3.3 / 2.05));
  CHECK(g.low == 1);  // 1 is within the span: the figure lies within its rounds
  // A rest below zero counts as none (as the fit takes it); a round of no rest at all floors at x0.01.
  CHECK(sync_span_of({{-1e-3, -1e-3}, {1e-3, 1e-3}}, {1e-3, 1e-3}).low == 0.01);
  CHECK(sync_span_of({{-1e-3, -1e-3}, {1e-3, 1e-3}}, {1e-3, 1e-3}).rounds[0] == 0);
  // Rounds above the fit only: low is 1 (the figure's own end); a factor beyond x100 caps there.
  CHECK(sync_span_of({{2e-3}, {3e-3}}, {1e-3}).low == 1);
  CHECK(sync_span_of({{2e-3}, {300e-3}}, {1e-3}).high == 100);
  // Nothing to span: one round, or no fitted rest.
  CHECK(sync_span_of({{1e-3}}, {1e-3}).rounds.empty());
  CHECK(sync_span_of({{1e-3}, {2e-3}}, {0}).rounds.empty());
  CHECK_THROWS_AS(sync_span_of({{1e-3}, {2e-3, 1e-3}}, {1e-3}), Error);  // rounds of other micro-batches
}

TEST_CASE("noisy rounds: the step-to-step coefficient of variation, within rounds", "[calib][noise]") {
  // One round {1, 3}: mean 2, sample standard deviation sqrt(((1-2)^2 + (3-2)^2) / 1) = sqrt(2).
  CHECK(step_cv_of({{1, 3}}) == Approx(std::sqrt(2.0) / 2));
  // Two rounds, cv^2 of 0.5 and 0: the root mean square sqrt(0.25) = 0.5.
  CHECK(step_cv_of({{1, 3}, {10, 10}}) == Approx(0.5));
  // Rounds at different speeds but the same relative jitter: that jitter, not the rounds' difference
  // (the machine's speed between rounds moves every rank at once).
  const double cv = std::sqrt(2.0) * 0.1 / 1.1;  // {1, 1.2}: sd 0.1 sqrt(2), mean 1.1
  CHECK(step_cv_of({{1, 1.2}, {10, 12}}) == Approx(cv));
  // Rounds of one step say nothing of the step-to-step spread: left out, and none at all gives 0.
  CHECK(step_cv_of({{1, 1.2}, {5}}) == Approx(cv));
  CHECK(step_cv_of({{5}, {}}) == 0);
  CHECK_THROWS_AS(step_cv_of({{0, 0}}), Error);
}

// Issue 37 item 2: the device type's step cv is the median of its ranks' and micro-batches' cvs, and their
// least and most its spread (what predict --interval samples); a cv beyond the file's bound [0, 1) is capped.
TEST_CASE("noisy rounds: a device type's step cv and its spread from its ranks' and micro-batches' cvs",
          "[calib][noise][straggler]") {
  const StepCvFigure f = step_cv_figure({0.05, 0.01, 0.02});
  CHECK(f.value == Approx(0.02));  // the middle of three
  CHECK(f.low == 0.01);
  CHECK(f.high == 0.05);
  const StepCvFigure one = step_cv_figure({0.03});  // one rank at one micro-batch: no spread
  CHECK(one.low == one.value);
  CHECK(one.high == one.value);
  const StepCvFigure wild =
      step_cv_figure({0.5, 3.0, 4.0});  // a median beyond the bound: capped, as the high
  CHECK(wild.value == 0.999);
  CHECK(wild.high == 0.999);
  CHECK(wild.low == 0.5);
  CHECK_THROWS_AS(step_cv_figure({}), Error);
  // As calibrate writes it, the file reads back (low <= value <= high < 1).
  MeasuredFigure m{f.value, "measured: a test's figure", f.low, f.high};
  CHECK(m.ranged());
}

namespace {
// A phase whose round figures are injected: each measure_round takes the next figure; its spread is
// round_spread of those taken so far. `log` records the order the rounds ran in.
struct FakePhase {
  std::string name;
  std::deque<double> figures;
  std::vector<double> taken;
};
std::vector<RoundedPhase> rounded(std::vector<FakePhase>& fakes, std::string& log) {
  std::vector<RoundedPhase> out;
  for (FakePhase& f : fakes)
    out.push_back({f.name,
                   [&f, &log] {
                     REQUIRE_FALSE(f.figures.empty());  // the scheduler ran more rounds than injected
                     f.taken.push_back(f.figures.front());
                     f.figures.pop_front();
                     log += f.name.substr(0, 1);
                   },
                   [&f] { return round_spread(f.taken); }});
  return out;
}
}  // namespace

TEST_CASE("noisy rounds: interleaved over time, a noisy phase repeated up to the limit", "[calib][noise]") {
  std::vector<FakePhase> fakes = {
      // quiet: spread 0.02 / 1.01 < 0.10, never repeated
      {"compute", {1.0, 1.02, 1.01}, {}},
      // one slow round (1.5): spread (1.5 - 1.0) / 1.02 after 3; one repeat (1.01) leaves it out: 0.02 / 1.01
      {"step", {1.0, 1.5, 1.02, 1.01}, {}},
      // the machine keeps disturbing it: (3 - 1) / 2 after 3 rounds, (3 - 1) / 2 after 4 (kept 2, neighbours
      // 1 and 3), and after 5 the neighbours of the median 3 are 2 and 4: 2 / 3
      {"ops", {1, 2, 3, 4, 5}, {}}};
  std::string log;
  std::vector<std::string> said;
  const std::vector<RoundCheck> checks = run_rounds(rounded(fakes, log), RoundRules{3, 2, 0.10},
                                                    [&](const std::string& l) { said.push_back(l); });
  // Round 1 of each phase in turn, then round 2, ...; then one more of each noisy phase, in turn.
  CHECK(log ==
        "csocsocso"
        "so"
        "o");
  REQUIRE(checks.size() == 3);
  CHECK(checks[0].rounds == 3);
  CHECK(checks[0].repeats == 0);
  CHECK(checks[0].spread == Approx(0.02 / 1.01));
  CHECK_FALSE(checks[0].noisy);
  CHECK(checks[1].rounds == 4);
  CHECK(checks[1].repeats == 1);
  CHECK(checks[1].spread == Approx(0.02 / 1.01));
  CHECK_FALSE(checks[1].noisy);
  CHECK(checks[2].rounds == 5);
  CHECK(checks[2].repeats == 2);
  CHECK(checks[2].spread == Approx(2.0 / 3));
  CHECK(checks[2].noisy);
  for (const RoundCheck& c : checks) CHECK(c.limit == 0.10);
  // A line per repeat (step once, ops twice) and one warning for the phase left noisy.
  REQUIRE(said.size() == 4);
  CHECK(said[0] == "step rounds spread 49.0% (limit 10%): repeating, round 4 of at most 5");
  CHECK(said[1] == "ops rounds spread 100.0% (limit 10%): repeating, round 4 of at most 5");
  CHECK(said[2] == "ops rounds spread 100.0% (limit 10%): repeating, round 5 of at most 5");
  CHECK_THAT(said[3], Contains("warning: the ops rounds still spread 66.7% after 2 repeat(s) (limit 10%)"));
  // No repeats allowed: the noisy phases say so at once, after their first rounds.
  std::vector<FakePhase> again = {{"compute", {1.0, 1.5, 1.02}, {}}};
  std::string log2;
  said.clear();
  const auto none = run_rounds(rounded(again, log2), RoundRules{3, 0, 0.10},
                               [&](const std::string& l) { said.push_back(l); });
  CHECK(log2 == "ccc");
  CHECK(none[0].noisy);
  CHECK(none[0].repeats == 0);
  REQUIRE(said.size() == 1);
  CHECK_THAT(said[0], Contains("warning: the compute rounds still spread"));
  CHECK_THROWS_AS(run_rounds({}, RoundRules{0, 2, 0.1}, [](const std::string&) {}), Error);
}

namespace {
// The shipped local calibration (platforms/local/calibrated.json, written before these fields) with
// `edit` applied to its first device.
std::string calibration_with(const vt::TempDir& d, const std::string& name, const json& step_cv,
                             const json& rounds) {
  json c = json::parse(vt::run("cat " + vt::source("platforms/local/calibrated.json")).out);
  json& dev = c["devices"][0];
  if (!step_cv.is_null()) dev["step_cv"] = step_cv;
  if (!rounds.is_null()) dev["rounds"] = rounds;
  return d.file(name, c.dump(1));
}
json check_json(int rounds, int repeats, double spread, double limit, bool noisy) {
  return {{"rounds", rounds}, {"repeats", repeats}, {"spread", spread}, {"limit", limit}, {"noisy", noisy}};
}
}  // namespace

TEST_CASE("noisy rounds: step_cv and rounds in the calibration file, and older files still read",
          "[calib][noise]") {
  vt::TempDir d;
  // The shipped files predate the fields: they read, with neither.
  for (const char* f : {"platforms/local/calibrated.json", "platforms/local/calibrated-netns.json",
                        "platforms/local/calibrated-hetero.json"}) {
    INFO(f);
    const Calibration c = read_calibration(vt::source(f));
    for (const DeviceCalibration& dev : c.devices) {
      CHECK(dev.step_cv.empty());
      CHECK(dev.rounds.empty());
    }
    CHECK(c.step_cv("cpu") == nullptr);
  }
  const json step_cv = {{"value", 0.021}, {"why", "measured: a test's figure"}};
  const json rounds = {{"compute", check_json(4, 1, 0.04, 0.1, false)},
                       {"step", check_json(5, 2, 0.13, 0.1, true)}};
  const Calibration c = read_calibration(calibration_with(d, "c.json", step_cv, rounds));
  const std::string type = c.devices[0].device_type;
  REQUIRE(c.step_cv(type) != nullptr);
  CHECK(c.step_cv(type)->value == 0.021);
  CHECK(c.step_cv("no-such-device") == nullptr);
  const RoundChecks& r = c.devices[0].rounds;
  CHECK(r.compute.rounds == 4);
  CHECK(r.compute.repeats == 1);
  CHECK_FALSE(r.compute.noisy);
  CHECK(r.step.spread == 0.13);
  CHECK(r.step.noisy);
  // Written and read back alike.
  const Calibration again = read_calibration_text(calibration_to_json(c), "again.json");
  CHECK(again.devices[0].step_cv.why == "measured: a test's figure");
  CHECK(again.devices[0].rounds.step.rounds == 5);
  CHECK(again.devices[0].rounds.step.limit == 0.1);
  // Only the phases that ran are written.
  Calibration one = c;
  one.devices[0].rounds.step = {};
  const json written = json::parse(calibration_to_json(one));
  CHECK(written["devices"][0]["rounds"].contains("compute"));
  CHECK_FALSE(written["devices"][0]["rounds"].contains("step"));
}

TEST_CASE("noisy rounds: bad step_cv and rounds are refused, naming the file, device and field",
          "[calib][noise][negative]") {
  vt::TempDir d;
  auto error_of = [&](const json& step_cv, const json& rounds) {
    const std::string f = calibration_with(d, "bad.json", step_cv, rounds);
    try {
      read_calibration(f);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const json why = "measured: a test's figure";
  // The platform's gpu_step_cv range, [0, 1) (core/src/platform/platform_props_table.cpp).
  CHECK_THAT(
      error_of({{"value", 1.0}, {"why", why}}, nullptr),
      Contains("bad.json: devices[0] ('cpu').step_cv: value must be a coefficient of variation in [0, 1) "
               "of the step, got 1"));
  CHECK_THAT(error_of({{"value", -0.01}, {"why", why}}, nullptr), Contains("got -0.01"));
  CHECK_THAT(error_of({{"value", 0.01}, {"why", ""}}, nullptr),
             Contains("step_cv: why must say where the figure comes from"));
  CHECK_THAT(error_of({{"value", 0.01}, {"why", why}, {"source", "x"}}, nullptr),
             Contains("unknown key 'source'; valid: value, low, high, why"));
  CHECK_THAT(error_of(nullptr, {{"loader", check_json(3, 0, 0.01, 0.1, false)}}),
             Contains("unknown key 'loader'; valid: compute, step"));
  CHECK_THAT(error_of(nullptr, {{"compute", check_json(0, 0, 0.01, 0.1, false)}}),
             Contains("rounds.compute: rounds must be >= 1, got 0"));
  CHECK_THAT(error_of(nullptr, {{"compute", check_json(3, 3, 0.01, 0.1, false)}}),
             Contains("rounds.compute: repeats must be in [0, rounds - 1] = [0, 2], got 3"));
  CHECK_THAT(error_of(nullptr, {{"step", check_json(3, 0, 0.2, 0.1, false)}}),
             Contains("rounds.step: noisy must be true (spread 0.2 against limit 0.1)"));
  CHECK_THAT(error_of(nullptr, {{"step", check_json(3, 0, 0.05, 0, false)}}),
             Contains("rounds.step: limit must be > 0, got 0"));
  CHECK_THAT(error_of(nullptr, {{"step", check_json(3, 0, -0.05, 0.1, false)}}),
             Contains("rounds.step: spread must be >= 0, got -0.05"));
}

TEST_CASE("a calibration's model carries model.class_tokens, written only when not 1",
          "[calib][class_tokens]") {
  // Issue 37 item 1: a calibration measured on a K-token model is that model's, not another's (same_shape);
  // files written before the key (K = 1) read and write unchanged.
  const Calibration shipped = read_calibration(vt::source("platforms/local/calibrated.json"));
  REQUIRE_FALSE(shipped.devices.empty());
  const DeviceCalibration& dev = shipped.devices[0];
  CHECK(dev.model.class_tokens == 1);
  CHECK_FALSE(json::parse(calibration_to_json(shipped))["devices"][0]["model"].contains("class_tokens"));
  Calibration eight = shipped;
  eight.devices[0].model.class_tokens = 8;
  const json written = json::parse(calibration_to_json(eight));
  CHECK(written["devices"][0]["model"]["class_tokens"] == 8);
  const Calibration again = read_calibration_text(written.dump(1), "eight.json");
  CHECK(again.devices[0].model.class_tokens == 8);
  CHECK(again.find(dev.device_type, dev.model, dev.precision) == nullptr);  // K = 1 is another model
  CHECK(again.find(dev.device_type, again.devices[0].model, dev.precision) != nullptr);
  json bad = written;
  bad["devices"][0]["model"]["class_tokens"] = 0;
  CHECK_THROWS_WITH(read_calibration_text(bad.dump(1), "bad.json"),
                    Catch::Contains("model class_tokens must be in [1, 64], got 0"));
}
