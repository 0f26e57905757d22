// Calibration schema 2: the affine batch curve (interpolate_with_notes, interpolation_note), the refusal
// of schema 1, and the op models ("op_models") read and written.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/formats/calibration.hpp"

using namespace vitsim;

namespace {
ComputePoint point(int b, double fwd, double bwd, double optimizer = 0.01) {
  ComputePoint p;
  p.micro_batch = b;
  p.fwd_s = fwd;
  p.bwd_s = bwd;
  p.optimizer_s = optimizer;
  return p;
}

DeviceCalibration device(std::vector<ComputePoint> points) {
  DeviceCalibration d;
  d.device_type = "cpu";
  d.points = std::move(points);
  return d;
}

double rel(double a, double b) {
  return std::abs(a - b) / std::abs(b);
}

// The file a calibration becomes, read back.
Calibration round_trip(const vt::TempDir& dir, const Calibration& c) {
  return read_calibration(dir.file("c.json", calibration_to_json(c)));
}

const char* kModel =
    R"("model": {"image_size": 32, "patch": 4, "channels": 3, "width": 192, "depth": 6, "heads": 3,
                         "mlp_ratio": 2.0, "classes": 10})";

std::string op_model_json(const std::string& override_key = "", const std::string& value = "") {
  std::string fields[][2] = {{"device_type", "\"T4\""},
                             {"precision", "\"fp16\""},
                             {"peak_flops", "6.5e13"},
                             {"mem_bw", "3.2e11"},
                             {"sm_count", "40"},
                             {"tile", "[128, 64]"},
                             {"gemm_efficiency", "0.7"},
                             {"gemm_k_half", "96"},
                             {"attn_efficiency", "0.4"},
                             {"mem_efficiency", "0.8"},
                             {"norm_efficiency", "0.6"},
                             {"matrix_s", "0"},
                             {"kernel_s", "3e-06"},
                             {"host_op_s", "8e-06"},
                             {"sync_s", "2e-05"},
                             {"async", "true"},
                             {"kinds", R"({"softmax": {"elem_s": 1e-09, "row_s": 5e-08}})"},
                             {"samples", "120"},
                             {"max_rel_residual", "0.09"},
                             {"median_rel_residual", "0.02"}};
  std::string out = "{";
  for (auto& [k, v] : fields) {
    if (k == override_key && value.empty()) continue;  // left out
    out += (out.size() > 1 ? ", \"" : "\"") + k + "\": " + (k == override_key ? value : v);
  }
  return out + "}";
}

std::string calibration_with_op_model(const std::string& op_model) {
  return R"({"schema": "vitsim.calibration/2", "op_models": [)" + op_model + "]}";
}
}  // namespace

TEST_CASE("calibration: an affine calibration reproduces both of its two points", "[calib][affine]") {
  // fwd 4 ms + 0.2 ms per sample, bwd 10 ms + 0.5 ms per sample: measured at 16 and 128.
  const DeviceCalibration d = device({point(16, 0.004 + 0.0002 * 16, 0.010 + 0.0005 * 16, 0.010),
                                      point(128, 0.004 + 0.0002 * 128, 0.010 + 0.0005 * 128, 0.014)});
  for (const auto& p : d.points) {
    const Interpolated r = interpolate_with_notes(d, p.micro_batch);
    CHECK(r.point.micro_batch == p.micro_batch);
    CHECK(r.point.fwd_s == Approx(p.fwd_s).epsilon(1e-12));
    CHECK(r.point.bwd_s == Approx(p.bwd_s).epsilon(1e-12));
    CHECK(r.point.optimizer_s ==
          Approx(0.012).epsilon(1e-12));  // the mean: the step does not depend on the batch
    CHECK_FALSE(r.single_point);
    CHECK_FALSE(r.extrapolated);
    CHECK(r.fit_max_rel_residual < 1e-12);
    CHECK(r.measured_min == 16);
    CHECK(r.measured_max == 128);
  }
  // In between: on the line, not proportional to the batch (the fixed cost stays).
  const ComputePoint mid = interpolate(d, 64);
  CHECK(mid.fwd_s == Approx(0.004 + 0.0002 * 64).epsilon(1e-12));
  CHECK(mid.bwd_s == Approx(0.010 + 0.0005 * 64).epsilon(1e-12));
  CHECK(interpolation_note(d, 64) == "");
  CHECK(interpolation_note(d, 16) == "");
}

TEST_CASE("calibration: three noisy points predict a held-out fourth within their noise", "[calib][affine]") {
  // The law t(b) = 6 ms + 0.25 ms x b (fwd) and twice that (bwd), measured at 8, 32 and 256 with
  // deterministic perturbations of +2%, -2%, +2% (bwd: -2%, +2%, -2%); micro-batch 96 held out.
  auto law = [](double b) { return 0.006 + 0.00025 * b; };
  const double noise = 0.02;
  const DeviceCalibration d = device({point(8, law(8) * (1 + noise), 2 * law(8) * (1 - noise)),
                                      point(32, law(32) * (1 - noise), 2 * law(32) * (1 + noise)),
                                      point(256, law(256) * (1 + noise), 2 * law(256) * (1 - noise))});
  const Interpolated r = interpolate_with_notes(d, 96);
  CHECK_FALSE(r.extrapolated);
  CHECK_FALSE(r.single_point);
  CHECK(rel(r.point.fwd_s, law(96)) <= noise);
  CHECK(rel(r.point.bwd_s, 2 * law(96)) <= noise);
  // The fit does not pass through noisy points: its residual says how far, within twice the noise.
  CHECK(r.fit_max_rel_residual > 0);
  CHECK(r.fit_max_rel_residual <= 2 * noise);
  // Every measured point is reproduced within the noise too (relative residuals weigh small batches alike).
  for (const auto& p : d.points) {
    const ComputePoint q = interpolate(d, p.micro_batch);
    CHECK(rel(q.fwd_s, law(p.micro_batch)) <= noise);
    CHECK(rel(q.bwd_s, 2 * law(p.micro_batch)) <= noise);
  }
}

TEST_CASE("calibration: per-layer times get their own affine fit", "[calib][affine]") {
  ComputePoint a = point(16, 0.030, 0.060), b = point(64, 0.090, 0.180);
  a.layers = {{"patch_embed", 0.010, 0.020}, {"block0.attn", 0.020, 0.040}};
  b.layers = {{"patch_embed", 0.010, 0.020}, {"block0.attn", 0.080, 0.160}};  // patch_embed: fixed cost only
  const DeviceCalibration d = device({a, b});
  const ComputePoint r = interpolate(d, 32);
  REQUIRE(r.layers.size() == 2);
  CHECK(r.layers[0].name == "patch_embed");
  CHECK(r.layers[0].fwd_s == Approx(0.010).epsilon(1e-12));
  CHECK(r.layers[0].bwd_s == Approx(0.020).epsilon(1e-12));
  CHECK(r.layers[1].fwd_s == Approx(0.040).epsilon(1e-12));
  CHECK(r.layers[1].bwd_s == Approx(0.080).epsilon(1e-12));
  // Layer lists that disagree between points: no per-layer split (the simulator falls back to the
  // roofline's).
  b.layers.pop_back();
  CHECK(interpolate(device({a, b}), 32).layers.empty());
}

TEST_CASE("calibration: one measured point scales proportionally and says so", "[calib][affine]") {
  const DeviceCalibration d = device({point(64, 0.32, 0.64, 0.02)});
  const Interpolated r = interpolate_with_notes(d, 16);
  CHECK(r.single_point);
  CHECK(r.extrapolated);
  CHECK(r.point.fwd_s == Approx(0.08).epsilon(1e-12));
  CHECK(r.point.bwd_s == Approx(0.16).epsilon(1e-12));
  CHECK(r.point.optimizer_s == Approx(0.02).epsilon(1e-12));
  CHECK(interpolation_note(d, 16) ==
        "compute on cpu at micro-batch 16: one measured point (micro-batch 64): scaled proportionally");
  CHECK(interpolation_note(d, 256) ==
        "compute on cpu at micro-batch 256: one measured point (micro-batch 64): scaled proportionally");
  // At the measured micro-batch itself: the measurement, nothing to say.
  const Interpolated at = interpolate_with_notes(d, 64);
  CHECK(at.single_point);
  CHECK_FALSE(at.extrapolated);
  CHECK(at.point.fwd_s == Approx(0.32).epsilon(1e-12));
  CHECK(interpolation_note(d, 64) == "");
  // The same micro-batch measured twice is still one point: their mean, proportionally.
  const DeviceCalibration twice = device({point(64, 0.30, 0.60), point(64, 0.34, 0.68)});
  const Interpolated t = interpolate_with_notes(twice, 32);
  CHECK(t.single_point);
  CHECK(t.point.fwd_s == Approx(0.16).epsilon(1e-12));
  CHECK(t.point.bwd_s == Approx(0.32).epsilon(1e-12));
}

TEST_CASE("calibration: extrapolation is flagged, interpolation is not", "[calib][affine]") {
  const DeviceCalibration d = device({point(48, 0.0092, 0.0135), point(96, 0.0191, 0.0262),
                                      point(192, 0.0412, 0.0589), point(384, 0.0800, 0.1117)});
  for (int b : {48, 64, 100, 384}) {
    INFO(b);
    CHECK_FALSE(interpolate_with_notes(d, b).extrapolated);
    CHECK(interpolation_note(d, b) == "");
  }
  for (int b : {1, 47, 385, 512}) {
    INFO(b);
    const Interpolated r = interpolate_with_notes(d, b);
    CHECK(r.extrapolated);
    CHECK_FALSE(r.single_point);
    CHECK(r.point.fwd_s > 0);  // clamped, never zero or negative
    CHECK(r.point.bwd_s > 0);
  }
  CHECK(interpolation_note(d, 512) ==
        "compute on cpu at micro-batch 512: extrapolated beyond the measured 48..384 (affine fit)");
  CHECK(interpolation_note(d, 16) ==
        "compute on cpu at micro-batch 16: extrapolated below the measured 48..384 (affine fit)");
  // A fit whose fixed part is negative is clamped at a small positive time, not below.
  const DeviceCalibration steep = device({point(100, 0.01, 0.02), point(200, 0.03, 0.06)});
  CHECK(interpolate(steep, 10).fwd_s == Approx(1e-12));
  DeviceCalibration none;
  none.device_type = "cpu";
  CHECK_THROWS_WITH(interpolate(none, 8), "calibration of cpu: no measured points");
}

TEST_CASE("calibration: the shipped calibrations read as schema 2 and fit their points closely",
          "[calib][affine]") {
  for (const char* f : {"platforms/local/calibrated.json", "platforms/local/calibrated-netns.json",
                        "platforms/local/calibrated-hetero.json"}) {
    INFO(f);
    const Calibration c = read_calibration(vt::source(f));
    REQUIRE_FALSE(c.devices.empty());
    for (const auto& d : c.devices) {
      const Interpolated r = interpolate_with_notes(d, d.points.front().micro_batch);
      CHECK(r.point.layers.size() == d.points.front().layers.size());
      // CPU compute on these machines is close to affine over 48..384 (docs/benchmarks.md).
      CHECK(r.fit_max_rel_residual < 0.1);
    }
  }
}

TEST_CASE("calibration: schema 1 is refused with one line, other schemas are not calibrations",
          "[calib][negative]") {
  vt::TempDir dir;
  const std::string old = dir.file("old.json", R"({"schema": "vitsim.calibration/1", "devices": []})");
  const std::string expected =
      old +
      ": calibration schema vitsim.calibration/1 is no longer read (this vitsim reads "
      "vitsim.calibration/2: affine batch curves and op-class efficiencies); measure again "
      "with vitsim calibrate";
  CHECK_THROWS_WITH(read_calibration(old), expected);
  CHECK(expected.find('\n') == std::string::npos);
  // Through the binary: that one line, exit status 1.
  const auto r = vt::run(std::string(VITSIM_BINARY) + " predict " +
                         vt::source("scenarios/local/fmnist-vit.xml") + " -q --calibration " + old);
  CHECK(r.status == 1);
  CHECK(r.out == "vitsim: error: " + expected + "\n");
  for (const char* schema : {"\"vitsim.calibration/3\"", "\"vitsim.report/1\"", "2"}) {
    INFO(schema);
    const std::string other = dir.file("other.json", std::string(R"({"schema": )") + schema + "}");
    CHECK_THROWS_WITH(read_calibration(other),
                      other + ": not a vitsim calibration (expected \"schema\": \"vitsim.calibration/2\")");
  }
  // A whole number written as a fraction is refused, not truncated.
  const std::string frac = dir.file(
      "frac.json", std::string(R"({"schema": "vitsim.calibration/2", "devices": [{"device_type": "cpu",
      "precision": "fp32", )") +
                       kModel + R"(, "points": [{"micro_batch": 16.5, "fwd_s": 0.1, "bwd_s": 0.2}]}]})");
  CHECK_THROWS_WITH(
      read_calibration(frac),
      frac + ": devices[0] ('cpu').points[0]: micro_batch must be a whole number of samples >= 1, got 16.5");
}

TEST_CASE("calibration: op models round-trip through the file", "[calib][ops]") {
  vt::TempDir dir;
  Calibration c;
  c.provenance["host"] = "test";
  OpModelCalibration o;
  o.precision = Precision::BF16;
  o.figures.device_type = "A100";
  o.figures.peak_flops = 312e12;
  o.figures.mem_bw = 1.555e12;
  o.figures.sm_count = 108;
  o.figures.tile_m = 256;
  o.figures.tile_n = 128;
  o.figures.gemm_efficiency = 0.72;
  o.figures.gemm_k_half = 64;
  o.figures.attn_efficiency = 0.35;
  o.figures.mem_efficiency = 0.85;
  o.figures.norm_efficiency = 0.5;
  o.figures.matrix_s = 1e-6;
  o.figures.kernel_s = 2.5e-6;
  o.figures.host_op_s = 7e-6;
  o.figures.sync_s = 1.5e-5;
  o.figures.async = true;
  o.samples = 96;
  o.max_rel_residual = 0.11;
  o.median_rel_residual = 0.03;
  OpModelCalibration cpu = o;
  cpu.precision = Precision::FP32;
  cpu.figures.device_type = "cpu";
  cpu.figures.peak_flops = 1.2e11;
  cpu.figures.sm_count = 2;
  cpu.figures.async = false;
  cpu.figures.gemm_k_half = 0;
  cpu.figures.kinds[static_cast<size_t>(OpKind::Softmax)] = {1.1e-9, 7.3e-8, 0};
  cpu.figures.kinds[static_cast<size_t>(OpKind::Conv)] = {0, 0, 0.31};
  c.op_models = {o, cpu};

  const std::string text = calibration_to_json(c);
  CHECK(text.find("\"schema\": \"vitsim.calibration/2\"") != std::string::npos);
  const Calibration back = round_trip(dir, c);
  REQUIRE(back.op_models.size() == 2);
  const OpModelCalibration* a = back.op_model("A100", Precision::BF16);
  REQUIRE(a != nullptr);
  CHECK(a->precision == Precision::BF16);
  const DeviceFigures& f = a->figures;
  CHECK(f.device_type == "A100");
  CHECK(f.peak_flops == 312e12);
  CHECK(f.mem_bw == 1.555e12);
  CHECK(f.sm_count == 108);
  CHECK(f.tile_m == 256);
  CHECK(f.tile_n == 128);
  CHECK(f.gemm_efficiency == 0.72);
  CHECK(f.gemm_k_half == 64);
  CHECK(f.attn_efficiency == 0.35);
  CHECK(f.mem_efficiency == 0.85);
  CHECK(f.kernel_s == 2.5e-6);
  CHECK(f.host_op_s == 7e-6);
  CHECK(f.sync_s == 1.5e-5);
  CHECK(f.async);
  CHECK(a->samples == 96);
  CHECK(a->max_rel_residual == 0.11);
  CHECK(a->median_rel_residual == 0.03);
  const OpModelCalibration* b = back.op_model("cpu", Precision::FP32);
  REQUIRE(b != nullptr);
  CHECK_FALSE(b->figures.async);
  CHECK(b->figures.sm_count == 2);
  CHECK(b->figures.kinds == cpu.figures.kinds);  // kernel families: only those measured are written
  CHECK(a->figures.kinds == o.figures.kinds);
  CHECK(text.find("\"softmax\": {") != std::string::npos);
  CHECK(text.find("\"gelu\"") == std::string::npos);
  CHECK(back.op_model("A100", Precision::FP32) == nullptr);
  CHECK(back.op_model("T4", Precision::BF16) == nullptr);
  // Deterministic: writing what was read gives the same bytes.
  CHECK(calibration_to_json(back) == text);
  CHECK(calibration_to_json(back) == calibration_to_json(c));

  // A hand-written entry with every key reads too; the fit statistics are optional.
  const Calibration h = read_calibration(dir.file("h.json", calibration_with_op_model(op_model_json())));
  REQUIRE(h.op_models.size() == 1);
  CHECK(h.op_models[0].figures.tile_n == 64);
  CHECK(h.op_models[0].precision == Precision::FP16);
  const Calibration n =
      read_calibration(dir.file("n.json", calibration_with_op_model(op_model_json("samples"))));
  CHECK(n.op_models.at(0).samples == 0);
}

TEST_CASE("calibration: bad op models are refused with the key named", "[calib][ops][negative]") {
  vt::TempDir dir;
  auto error_of = [&](const std::string& key, const std::string& value) {
    const std::string path = dir.file("bad.json", calibration_with_op_model(op_model_json(key, value)));
    try {
      read_calibration(path);
    } catch (const Error& e) {
      const std::string what = e.what();
      // The reader names the entry by index and device type (calibration_with_op_model's 'T4'), by
      // index alone when the device type is what is missing; a key of the entry follows after a dot
      // ("...('T4').sm_count: expected ..."), a message about the entry after ": ".
      const std::string typed = path + ": op_models[0] ('T4')", plain = path + ": op_models[0]";
      std::string rest = what.rfind(typed, 0) == 0 ? what.substr(typed.size()) : "";
      if (rest.empty()) {
        CHECK(what.rfind(plain, 0) == 0);
        rest = what.substr(plain.size());
      }
      return rest.substr(rest.rfind(": ", 0) == 0 ? 2 : 1);
    }
    return std::string("(read without error)");
  };
  CHECK(error_of("gemm_efficiency", "1.5") == "'gemm_efficiency' must be in (0, 1], got 1.5");
  CHECK(error_of("attn_efficiency", "0") == "'attn_efficiency' must be in (0, 1], got 0");
  CHECK(error_of("mem_efficiency", "-0.2") == "'mem_efficiency' must be in (0, 1], got -0.2");
  CHECK(error_of("kernel_s", "-1e-06") == "'kernel_s' must be >= 0, got -1e-06");
  CHECK(error_of("host_op_s", "-1") == "'host_op_s' must be >= 0, got -1");
  CHECK(error_of("sync_s", "-1") == "'sync_s' must be >= 0, got -1");
  CHECK(error_of("gemm_k_half", "-5") == "'gemm_k_half' must be >= 0, got -5");
  CHECK(error_of("peak_flops", "0") == "'peak_flops' must be positive, got 0");
  CHECK(error_of("sm_count", "0") == "'sm_count' must be >= 1, got 0");
  CHECK(error_of("sm_count", "40.5") == "sm_count: expected an integer, found a number (40.5)");
  CHECK(error_of("tile", "[128]") == "'tile' must be [m, n], two positive integers, got [128]");
  CHECK(error_of("tile", "[128, 0]") == "'tile' must be [m, n], two positive integers, got [128,0]");
  CHECK(error_of("async", "1") == "async: expected true or false, found a number (1)");
  CHECK(error_of("precision", "\"fp64\"") == "unknown precision 'fp64'; valid: fp32, fp16, bf16");
  CHECK(error_of("max_rel_residual", "-0.1") == "'max_rel_residual' must be >= 0, got -0.1");
  CHECK(error_of("gemm_efficiency", "") == "gemm_efficiency: missing");
  CHECK(error_of("tile", "") == "tile: missing");
  CHECK(error_of("device_type", "") == "device_type: missing");
  CHECK(error_of("kinds", R"({"softmx": {"elem_s": 1e-9}})") ==
        "kinds: unknown op kind 'softmx'; valid: none, strided, reduce, softmax, softmax_bwd, layer_norm, "
        "layer_norm_bwd, gelu, gelu_bwd, conv, conv_wgrad");
  CHECK(error_of("kinds", R"({"gelu": {"elem": 1e-9}})") ==
        "kinds.gelu: unknown key 'elem'; valid: elem_s, row_s, efficiency");
  CHECK(error_of("kinds", R"({"gelu": {"elem_s": -1e-9}})") ==
        "kinds.gelu: 'elem_s' and 'row_s' must be finite and >= 0");
  CHECK(error_of("kinds", R"({"conv": {"efficiency": 2}})") ==
        "kinds.conv: 'efficiency' must be in [0, 1], got 2");
  CHECK(error_of("kinds", "[]") == "kinds: expected an object of op kinds, found an array");
  // Two op models for one device type and precision: which one would the simulator use?
  const std::string twice =
      dir.file("twice.json", calibration_with_op_model(op_model_json() + ", " + op_model_json()));
  CHECK_THROWS_WITH(read_calibration(twice),
                    twice + ": op_models[1] ('T4'): a second op model for device type 'T4' at fp16");
  const std::string not_list = dir.file("nl.json", R"({"schema": "vitsim.calibration/2", "op_models": {}})");
  CHECK_THROWS_WITH(read_calibration(not_list), not_list + ": op_models: expected an array, found an object");
}
