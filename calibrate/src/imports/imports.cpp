// `vitsim calibrate --from-nccl-tests / --from-torch-profile` (calibrate/imports.hpp): the measurements users
// already have (import_nccl_tests.cpp, import_torch_profile.cpp) merged into a calibration file. Pure: no
// Torch, no MPI.
#include "vitsim/calibrate/imports.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/system.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/identity.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/platform/platform.hpp"

namespace vitsim::calibrate {
namespace fs = std::filesystem;

namespace {

void say_import(const ImportOptions& o, const std::string& line) {
  if (o.verbose) fmt::print("vitsim calibrate: {}\n", line);
}

// The nccl-tests log as the calibration's link entry (an entry of the same class and ranks replaced).
void import_nccl_log(const Scenario& s, const ImportOptions& o, Calibration& c) {
  const std::string text = read_input_file(o.nccl_tests, "nccl-tests log");
  const NcclTestsLog log = parse_nccl_tests(o.nccl_tests, text);
  // What the scenario's trainer reduces per step: the whole fp32 gradient (calibrate's own fit limit).
  const double fit_max = o.fit_max_bytes > 0 ? o.fit_max_bytes : 4.0 * build_workload(s.model).total_params();
  const NcclImport imp = import_nccl_tests(log, fit_max, o.link_class);
  c.links.erase(std::remove_if(c.links.begin(), c.links.end(),
                               [&](const LinkCalibration& e) {
                                 return e.link_class == imp.link.link_class && e.ranks == imp.link.ranks;
                               }),
                c.links.end());
  c.links.push_back(imp.link);
  const std::string line = describe(log, imp);
  c.provenance["nccl_tests"] = fmt::format("{} (sha256 {})", line, sha256_hex(text));
  say_import(o, line);
  say_import(o,
             "note: the link fit is a record: predict and plan simulate the platform's links and say in "
             "their notes that they do not use it (write it into a platform's link bandwidth and latency)");
}

// --device-type, else the gpu_model of the scenario platform's first GPU used.
std::string profiled_device_type(const Scenario& s, const ImportOptions& o) {
  if (!o.device_type.empty()) return o.device_type;
  const PlatformFacts facts = read_platform_facts(s.cluster.platform);
  if (facts.nodes.empty()) throw Error(fmt::format("{}: the platform has no node", s.cluster.platform));
  const NodeFacts& node = s.cluster.hosts.empty() ? facts.nodes.front() : facts.node(s.cluster.hosts.front());
  if (node.gpus.empty()) throw Error(fmt::format("{}: node {} has no GPU", s.cluster.platform, node.name));
  return facts.gpu.at(node.gpus.front()).model;
}

// The profiled step as a measured compute point of the device (its entry for the scenario's model and
// precision, made when there is none).
void import_profile(const Scenario& s, const ImportOptions& o, Calibration& c) {
  if (s.training.grad_accum != 1)
    throw Error(fmt::format(
        "--from-torch-profile: the scenario has training.grad_accum {}: a profiled step then holds "
        "{} forward and backward passes; profile (and import with) grad_accum 1",
        s.training.grad_accum, s.training.grad_accum));
  const std::string text = read_input_file(o.torch_profile, "PyTorch profiler trace");
  const TorchProfile prof = parse_torch_profile(o.torch_profile, text);
  const std::string type = profiled_device_type(s, o);
  DeviceCalibration fresh;
  fresh.device_type = type;
  fresh.model = s.model;
  fresh.precision = s.training.precision;
  DeviceCalibration* d = &fresh;
  for (auto& e : c.devices)
    if (e.device_type == type && e.precision == s.training.precision && same_shape(e.model, s.model)) d = &e;
  if (o.peak_flops > 0) d->peak_flops = o.peak_flops;
  if (o.mem_bw > 0) d->mem_bw = o.mem_bw;
  add_torch_profile_point(*d, prof, s.training.micro_batch);
  if (d == &fresh) c.devices.push_back(fresh);
  const std::string line = describe(prof);
  c.provenance["torch_profile"] = fmt::format("{}; device {} at micro-batch {} (sha256 {})", line, type,
                                              s.training.micro_batch, sha256_hex(text));
  say_import(o, fmt::format("{}; recorded as device '{}', micro-batch {}, {}", line, type,
                            s.training.micro_batch, precision_name(s.training.precision)));
}

// The platform's GPU of gpu_model `type` (the scenario's platform): where the GEMM table's fit starts.
GpuFacts platform_gpu(const Scenario& s, const std::string& type) {
  const PlatformFacts facts = read_platform_facts(s.cluster.platform);
  std::set<std::string> models;
  for (const auto& [host, g] : facts.gpu) {
    if (g.model == type) return g;
    models.insert(g.model);
  }
  std::string list;
  for (const auto& m : models) list += (list.empty() ? "" : ", ") + m;
  throw Error(fmt::format("{}: no GPU of gpu_model '{}' (--device-type); its GPUs: {}", s.cluster.platform,
                          type, list.empty() ? "none" : list));
}

// Prints the table's rows against the fit and the platform's figures.
void print_gemm_fit(const GemmImport& imp) {
  fmt::print("vitsim calibrate: {:<40} {:>6} {:>6} {:>6} {:>6} {:>10} {:>8} {:>8}\n", "GEMM", "batch", "m",
             "n", "k", "measured", "fit", "platform");
  for (const GemmFitLine& l : gemm_fit_lines(imp))
    fmt::print("vitsim calibrate: {:<40} {:>6g} {:>6g} {:>6g} {:>6g} {:>10} {:>+7.1f}% {:>+7.1f}%\n", l.name,
               l.op.batch, l.op.m, l.op.n, l.op.k, units::format_time(l.measured_s),
               100 * (l.fitted_s / l.measured_s - 1), 100 * (l.platform_s / l.measured_s - 1));
}

// The GEMM table as the device's op model at the scenario's precision (an entry of the same device type and
// precision replaced), fitted from the platform's figures of that device.
void import_gemms(const Scenario& s, const ImportOptions& o, Calibration& c) {
  const std::string text = read_input_file(o.gemm_table, "GEMM table");
  const GemmTable table = parse_gemm_table(o.gemm_table, text);
  const std::string type = profiled_device_type(s, o);
  const Precision p = s.training.precision;
  DeviceFigures start = device_figures(platform_gpu(s, type), p);
  if (o.peak_flops > 0) start.peak_flops = o.peak_flops;
  if (o.mem_bw > 0) start.mem_bw = o.mem_bw;
  const GemmImport imp = import_gemm_table(table, p, start);
  c.op_models.erase(std::remove_if(c.op_models.begin(), c.op_models.end(),
                                   [&](const OpModelCalibration& e) {
                                     return e.figures.device_type == type && e.precision == p;
                                   }),
                    c.op_models.end());
  c.op_models.push_back(imp.calibration);
  const std::string line = describe(table, imp);
  c.provenance["gemm_table"] = fmt::format("{}; device {} (sha256 {})", line, type, sha256_hex(text));
  if (!o.verbose) return;
  print_gemm_fit(imp);
  say_import(o, fmt::format("{}; recorded as device '{}' at {}", line, type, precision_name(p)));
  say_import(o,
             fmt::format(
                 "kept the peak {} ({}), bandwidth {} ({}), {} SMs, host_op_s {}, kernel_s {} and the "
                 "memory-bound figures of the platform: a table of GEMMs timed back to back measures none of "
                 "them (the fit's own per-kernel time, {}, is not kept)",
                 units::format_flops(start.peak_flops), o.peak_flops > 0 ? "--peak-flops" : "the platform's",
                 units::format_bandwidth(start.mem_bw), o.mem_bw > 0 ? "--mem-bw" : "the platform's",
                 start.sm_count, units::format_time(start.host_op_s), units::format_time(start.kernel_s),
                 units::format_time(imp.fitted.host_op_s)));
  if (table.sm_count > 0 && table.sm_count != start.sm_count)
    say_import(o,
               fmt::format("note: the table's device has {} {} and the platform's {} {}: was it measured on "
                           "another GPU than '{}'?",
                           table.sm_count, table.device_kind == "cpu" ? "threads" : "SMs", start.sm_count,
                           start.async ? "SMs" : "threads", type));
}

// Read back before it replaces `out`: a merge the reader refuses (a point that breaks the batch curve)
// must not destroy the file it was merged into.
void write_read_back(const std::string& out, const Calibration& c) {
  const std::string tmp = out + ".vitsim-import";
  write_file_atomic(tmp, calibration_to_json(c));
  try {
    read_calibration(tmp);
  } catch (const Error& e) {
    fs::remove(tmp);
    throw Error(fmt::format("{}: the merged calibration would not read back: {}", out, e.what()));
  }
  fs::rename(tmp, out);
}

}  // namespace

Calibration import_measurements(const Scenario& s, const ImportOptions& o) {
  if (o.out.empty()) throw Error("calibrate: --out FILE is required");
  if (o.nccl_tests.empty() && o.torch_profile.empty() && o.gemm_table.empty())
    throw Error(
        "calibrate: nothing to import (--from-nccl-tests FILE, --from-torch-profile FILE or "
        "--from-gemm-table "
        "FILE)");
  if (!o.force && !o.append && fs::exists(o.out))
    throw Error(fmt::format(
        "{}: calibration file exists; pass --force to overwrite it (or --append to merge)", o.out));
  check_writable(o.out);
  Calibration c;
  if (o.append && fs::exists(o.out)) c = read_calibration(o.out);
  std::string earlier;
  if (!c.provenance.empty()) earlier = fmt::format("{} ({})", c.provenance["command"], c.provenance["date"]);
  c.provenance.clear();
  c.provenance["date"] = now_utc();
  c.provenance["command"] = o.command;
  if (!earlier.empty()) c.provenance["appended_to"] = earlier;
  if (!o.nccl_tests.empty()) import_nccl_log(s, o, c);
  if (!o.torch_profile.empty()) import_profile(s, o, c);
  if (!o.gemm_table.empty()) import_gemms(s, o, c);
  write_read_back(o.out, c);
  say_import(o, fmt::format("wrote {}", o.out));
  return read_calibration(o.out);
}

}  // namespace vitsim::calibrate
