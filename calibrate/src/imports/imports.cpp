// `vitsim calibrate --from-nccl-tests / --from-torch-profile` (calibrate/imports.hpp): the measurements users
// already have (import_nccl_tests.cpp, import_torch_profile.cpp) merged into a calibration file. Pure: no
// Torch, no MPI.
#include "vitsim/calibrate/imports.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/system.hpp"
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
  if (o.nccl_tests.empty() && o.torch_profile.empty())
    throw Error("calibrate: nothing to import (--from-nccl-tests FILE or --from-torch-profile FILE)");
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
  write_read_back(o.out, c);
  say_import(o, fmt::format("wrote {}", o.out));
  return read_calibration(o.out);
}

}  // namespace vitsim::calibrate
