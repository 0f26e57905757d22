// `vitsim calibrate --from-gemm-table` (calibrate/imports.hpp): a table of GEMM times that
// bench/gpu/gemm_shapes.py measured on one device, read and fitted by the op model's own fit (fit_op_model).
// Pure: no Torch, no MPI.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "vitsim/calibrate/imports.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/json_reader.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/model/vit.hpp"

namespace vitsim::calibrate {
namespace {

using detail::JsonField;

constexpr const char* kDtypes[] = {"fp16", "bf16", "fp32", "tf32"};

// A positive integer dimension of a row (m, n, k, batch): JSON integers, as the script writes them.
double dimension(const JsonField& row, const char* key) {
  return static_cast<double>(row.at(key).integer(1, 1LL << 40));
}

// A count that is 0 or absent for a square (tokens, micro_batch: null there).
int optional_count(const JsonField& row, const char* key) {
  if (!row.has(key) || row.at(key).is_null()) return 0;
  return static_cast<int>(row.at(key).integer(1, 1 << 30));
}

GemmTableRow read_row(const JsonField& row, size_t index) {
  GemmTableRow r;
  r.index = static_cast<int>(index);
  r.op = row.at("op").string();
  if (r.op.empty()) row.at("op").fail("empty op name");
  const JsonField cls = row.at("class");
  const std::string cname = cls.string();
  if (cname == "gemm")
    r.cls = OpClass::Gemm;
  else if (cname == "attn_matmul")
    r.cls = OpClass::AttnMatmul;
  else
    cls.fail(fmt::format("unknown class '{}'; valid: gemm, attn_matmul", cname));
  const JsonField pass = row.at("pass");
  const std::string pname = pass.string();
  if (pname != "fwd" && pname != "bwd") pass.fail(fmt::format("unknown pass '{}'; valid: fwd, bwd", pname));
  r.pass = pname == "fwd" ? Pass::Fwd : Pass::Bwd;
  if (row.has("model") && !row.at("model").is_null()) r.model = row.at("model").string();
  r.tokens = optional_count(row, "tokens");
  r.micro_batch = optional_count(row, "micro_batch");
  r.batch = dimension(row, "batch");
  r.m = dimension(row, "m");
  r.n = dimension(row, "n");
  r.k = dimension(row, "k");
  const JsonField dtype = row.at("dtype");
  r.dtype = dtype.string();
  if (std::find(std::begin(kDtypes), std::end(kDtypes), r.dtype) == std::end(kDtypes))
    dtype.fail(fmt::format("unknown dtype '{}'; valid: {}", r.dtype, fmt::join(kDtypes, ", ")));
  const JsonField median = row.at("median_s");
  r.median_s = median.number();
  if (!(r.median_s > 0)) median.fail(fmt::format("a time must be positive, got {}", r.median_s));
  // 1 hour: far beyond any GEMM the script times; a larger value is a unit mistake (ms or us written as s).
  if (r.median_s > 3600) median.fail(fmt::format("{} s for one GEMM: the table holds seconds", r.median_s));
  return r;
}

// The name an op of the table has in the fit and its messages: "vit_b_16.t197.b32.qkv.wgrad", "square.4096".
std::string row_name(const GemmTableRow& r) {
  if (r.model.empty()) return fmt::format("{}.{:g}", r.op, r.m);
  return fmt::format("{}.t{}.b{}.{}", r.model, r.tokens, r.micro_batch, r.op);
}

}  // namespace

GemmTable parse_gemm_table(const std::string& path, const std::string& text) {
  const nlohmann::json j = detail::parse_json(text, path);
  const JsonField root(j, path, "");
  if (!j.is_object()) root.mismatch("an object (a GEMM table of bench/gpu/gemm_shapes.py)");
  const std::string other = detail::what_schema(j);
  if (!other.empty())
    root.fail(fmt::format("this is {}, not a GEMM table (bench/gpu/gemm_shapes.py writes one)", other));
  const JsonField schema = root.at("schema");
  if (schema.string() != kGemmTableSchema)
    schema.fail(fmt::format("'{}' is not a GEMM table's schema ({}, bench/gpu/gemm_shapes.py)",
                            schema.string(), kGemmTableSchema));
  GemmTable t;
  t.path = path;
  const JsonField device = root.at("device");
  t.device_name = device.at("name").string();
  t.device_kind = device.at("kind").string();
  if (device.has("sm_count")) t.sm_count = static_cast<int>(device.at("sm_count").integer(1, 1 << 20));
  if (device.has("torch")) t.torch = device.at("torch").string();
  if (device.has("cuda") && !device.at("cuda").is_null()) t.cuda = device.at("cuda").string();
  const JsonField shapes = root.at("shapes");
  const size_t n = shapes.size();
  if (n == 0) shapes.fail("no shape: the table is empty");
  for (size_t i = 0; i < n; ++i) t.rows.push_back(read_row(shapes[i], i));
  return t;
}

const char* gemm_table_dtype(Precision p) {
  // fp32 is PyTorch's default matmul path (TF32 off since 1.12): the gpu_flops_fp32 peak vitsim's fp32
  // GEMMs run at. The table's tf32 rows are another path, at another peak: not fitted.
  switch (p) {
    case Precision::FP16:
      return "fp16";
    case Precision::BF16:
      return "bf16";
    default:
      return "fp32";
  }
}

std::vector<OpSample> gemm_table_samples(const GemmTable& t, Precision p) {
  const std::string dtype = gemm_table_dtype(p);
  std::vector<OpSample> out;
  std::set<std::string> has;
  for (const GemmTableRow& r : t.rows) {
    has.insert(r.dtype);
    if (r.dtype != dtype) continue;
    OpSample s;
    s.op = matmul_op(row_name(r), r.pass, r.cls, r.batch, r.m, r.n, r.k, precision_bytes(p));
    s.seconds = r.median_s;
    out.push_back(std::move(s));
  }
  if (out.empty())
    throw Error(fmt::format("{}: /shapes: no row of dtype {} (the scenario's precision {}); the table has {}",
                            t.path, dtype, precision_name(p), fmt::join(has, ", ")));
  return out;
}

GemmImport import_gemm_table(const GemmTable& t, Precision p, const DeviceFigures& platform) {
  GemmImport imp;
  imp.samples = gemm_table_samples(t, p);
  imp.platform = platform;
  // Efficiencies are fractions of the peak (at most 1): a table faster than the peak cannot be fitted, only
  // clamped (every GEMM then predicted slower than measured). A datasheet peak is never beaten; a platform's
  // assumed one (a CPU's) can be.
  const OpSample* fastest = &imp.samples.front();
  for (const OpSample& s : imp.samples)
    if (s.op.flops / s.seconds > fastest->op.flops / fastest->seconds) fastest = &s;
  const double best = fastest->op.flops / fastest->seconds;
  if (best > platform.peak_flops)
    throw Error(fmt::format(
        "{}: {} runs at {}, above the {} peak of {} ({}): the op model's efficiencies cannot exceed 1; pass "
        "the device's datasheet peak with --peak-flops",
        t.path, fastest->op.name, units::format_flops(best), precision_name(p), platform.device_type,
        units::format_flops(platform.peak_flops)));
  // The same fit as calibrate's op-model phase, with its options (harness/phases.hpp kWeightByTime false:
  // relative errors, every sample alike).
  const OpModelCalibration fit = fit_op_model(imp.samples, platform, OpFitOptions{});
  imp.fitted = fit.figures;
  imp.calibration = fit;
  imp.calibration.precision = p;
  // A table of GEMMs cannot tell the host's time per op from the device's fixed cost per kernel, and its
  // times are back-to-back calls, not ops issued by a training step: the fit's per-kernel time is a
  // nuisance figure here (it keeps launch-bound small shapes from biasing the efficiencies), and the
  // file keeps the platform's host_op_s (kernel_s, sync_s, mem_bw and the memory-bound figures are not
  // fitted: no memory-bound op in the table).
  imp.calibration.figures.host_op_s = platform.host_op_s;
  return imp;
}

std::vector<GemmFitLine> gemm_fit_lines(const GemmImport& imp) {
  std::vector<GemmFitLine> out;
  for (const OpSample& s : imp.samples) {
    GemmFitLine l;
    l.name = s.op.name;
    l.op = s.op;
    l.measured_s = s.seconds;
    l.fitted_s = op_sample_time(s.op, imp.fitted);
    l.platform_s = op_device_time(s.op, imp.platform);
    out.push_back(l);
  }
  return out;
}

std::string describe(const GemmTable& t, const GemmImport& imp) {
  const DeviceFigures& f = imp.calibration.figures;
  return fmt::format(
      "GEMM table {}: {} rows of {} on {} ({}{}); fitted gemm_efficiency {:.3f}, attn_efficiency {:.3f}, "
      "tile {}x{}, gemm_k_half {:g}, gemm_n_half {:g}, matrix_s {}; median |fit - measured| {:.1f}%, "
      "largest {:.1f}%",
      t.path, imp.samples.size(), precision_name(imp.calibration.precision), t.device_name,
      t.torch.empty() ? "torch ?" : "torch " + t.torch, t.cuda.empty() ? "" : ", CUDA " + t.cuda,
      f.gemm_efficiency, f.attn_efficiency, f.tile_m, f.tile_n, f.gemm_k_half, f.gemm_n_half,
      units::format_time(f.matrix_s), 100 * imp.calibration.median_rel_residual,
      100 * imp.calibration.max_rel_residual);
}

}  // namespace vitsim::calibrate
