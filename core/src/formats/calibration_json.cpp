#include "vitsim/core/formats/calibration.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <type_traits>
#include <utility>

#include "base/json_reader.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/platform/platform_props.hpp"

// The calibration file: reading (strictly checked) and writing its JSON.
namespace vitsim {
using json = nlohmann::json;
using detail::JsonField, detail::JsonPath;

namespace {
json model_json(const ViTConfig& m) {
  return {{"image_size", m.image_size}, {"patch", m.patch},     {"channels", m.channels},
          {"width", m.width},           {"depth", m.depth},     {"heads", m.heads},
          {"mlp_ratio", m.mlp_ratio},   {"classes", m.classes}, {"preset", m.preset}};
}

// Whole numbers must be JSON integers within int's range: the JSON library would cast 16.5 to 16 and
// 1e300 to whatever the hardware makes of it (undefined behaviour).
bool fits_int(const json& v) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned()) return v.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT_MAX);
  const std::int64_t x = v.get<std::int64_t>();
  return x >= INT_MIN && x <= INT_MAX;
}

// A key of `f` read as T through the one field reader: its messages name the file and the dotted path,
// "c.json: devices[0] ('T4').points[1].fwd_s: missing"; an int is a JSON integer within int's range.
template <typename T>
T need(const JsonField& f, const char* key) {
  const JsonField v = f.at(key);
  if constexpr (std::is_same_v<T, int>)
    return static_cast<int>(v.integer(INT_MIN, INT_MAX));
  else if constexpr (std::is_same_v<T, double>)
    return v.number();
  else if constexpr (std::is_same_v<T, bool>)
    return v.boolean();
  else
    return v.string();
}

// An optional key: `fallback` when absent, else read as strictly as need<>.
template <typename T>
T opt(const JsonField& f, const char* key, T fallback) {
  return f.has(key) ? need<T>(f, key) : fallback;
}

// Calls `each` with every element of the list under `key` (none when absent); anything but a list is an
// error.
template <class Each>
void for_each_in(const JsonField& f, const char* key, Each each) {
  if (!f.has(key)) return;
  const JsonField list = f.at(key);
  for (size_t i = 0, n = list.size(); i < n; ++i) each(list[i]);
}
}  // namespace

namespace {
Calibration parse_calibration(const JsonField& top);
}  // namespace

Calibration read_calibration(const std::string& path) {
  return read_calibration_text(read_input_file(path, "calibration file"),
                               path);  // regular files only, size-limited
}

Calibration read_calibration_text(const std::string& text, const std::string& path) {
  // A syntax error, and a number too large (fuzzer finding), are one line.
  const json j = detail::parse_json(text, path);
  const json schema = j.is_object() ? j.value("schema", json()) : json();
  if (schema == "vitsim.calibration/1")
    throw Error(fmt::format(
        "{}: calibration schema vitsim.calibration/1 is no longer read (this vitsim reads {}: affine "
        "batch curves and op-class efficiencies); measure again with vitsim calibrate",
        path, kCalibrationSchema));
  if (schema != kCalibrationSchema)
    throw Error(
        fmt::format("{}: not a vitsim calibration (expected \"schema\": \"{}\")", path, kCalibrationSchema));
  try {
    return parse_calibration(JsonField(j, path, "", JsonPath::Dotted));
  } catch (const json::exception& e) {
    // A value of the wrong type or shape anywhere (the fuzzer found a device without "model").
    throw Error(fmt::format("{}: calibration does not follow {}: {}", path, kCalibrationSchema, e.what()));
  }
}

namespace {
Precision parse_precision_at(const JsonField& f) {
  const std::string name = need<std::string>(f, "precision");
  try {
    return parse_precision(name);
  } catch (const Error& e) {
    f.fail(e.what());
  }
}

ViTConfig parse_model(const JsonField& d) {
  const JsonField m = d.at("model");
  if (!m.raw().is_object()) m.mismatch("an object");
  const std::string mw = m.where();
  ViTConfig model;
  model.preset = opt<std::string>(m, "preset", "");
  model.image_size = need<int>(m, "image_size");
  model.patch = need<int>(m, "patch");
  model.channels = need<int>(m, "channels");
  model.width = need<int>(m, "width");
  model.depth = need<int>(m, "depth");
  model.heads = need<int>(m, "heads");
  model.mlp_ratio = need<double>(m, "mlp_ratio");
  model.classes = need<int>(m, "classes");
  try {
    if (model.image_size < 1 || model.patch < 1 || model.channels < 1 || model.width < 1 || model.depth < 1 ||
        model.heads < 1 || model.classes < 1 || !(model.mlp_ratio > 0) || model.depth > 4096 ||
        model.width > (1 << 20))
      throw Error("sizes must be positive (depth <= 4096, width <= 1048576)");
    model.validate();
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", mw, e.what()));
  }
  return model;
}

// One measured point of a device: its micro-batch, pass times and (optionally) per-layer times, each a
// layer of `model` (`layer_names`) listed once.
ComputePoint parse_point(const JsonField& p, const ViTConfig& model,
                         const std::set<std::string>& layer_names) {
  ComputePoint cp;
  const std::string pw = p.where();
  if (p.has("micro_batch") && p.raw().at("micro_batch").is_number() && !fits_int(p.raw().at("micro_batch")))
    throw Error(fmt::format("{}: micro_batch must be a whole number of samples >= 1, got {}", pw,
                            echo(p.raw().at("micro_batch").dump())));
  cp.micro_batch = need<int>(p, "micro_batch");
  cp.fwd_s = need<double>(p, "fwd_s");
  cp.bwd_s = need<double>(p, "bwd_s");
  cp.optimizer_s = opt<double>(p, "optimizer_s", 0.0);
  // Each figure named on its own: a negative optimizer_s was blamed on fwd_s and bwd_s (issue 27).
  if (cp.micro_batch < 1)
    throw Error(fmt::format("{}: micro_batch must be >= 1, got {}", pw, cp.micro_batch));
  for (const auto& [key, v] : {std::pair<const char*, double>{"fwd_s", cp.fwd_s}, {"bwd_s", cp.bwd_s}})
    if (!(v > 0) || !std::isfinite(v))
      throw Error(fmt::format("{}: {} must be a positive time in seconds, got {}", pw, key, v));
  if (!(cp.optimizer_s >= 0) || !std::isfinite(cp.optimizer_s))
    throw Error(fmt::format("{}: optimizer_s must be a time >= 0 in seconds, got {}", pw, cp.optimizer_s));
  std::set<std::string> listed;
  for_each_in(p, "layers", [&](const JsonField& l) {
    const std::string lw = l.where();
    LayerTime lt{need<std::string>(l, "name"), need<double>(l, "fwd_s"), need<double>(l, "bwd_s")};
    if (!(lt.fwd_s >= 0) || !(lt.bwd_s >= 0) || !std::isfinite(lt.fwd_s) || !std::isfinite(lt.bwd_s))
      throw Error(lw + ": fwd_s and bwd_s must be >= 0");
    if (!layer_names.count(lt.name))
      throw Error(
          fmt::format("{}: '{}' is not a layer of this model (patch_embed, block0.attn .. block{}.mlp, head)",
                      lw, echo(lt.name), model.depth - 1));
    if (!listed.insert(lt.name).second)
      throw Error(fmt::format("{}: layer '{}' is listed twice", lw, lt.name));
    cp.layers.push_back(lt);
  });
  return cp;
}

// Sorts the points by micro-batch. Two points at one micro-batch leave the affine fit's slope undefined
// (it gave 0 ns); a pass that gets faster with more samples is a measurement gone wrong. Falls within
// 5% are measurement noise.
void sort_and_check_points(std::vector<ComputePoint>& points, const std::string& where) {
  if (points.empty()) throw Error(where + ": no measured points");
  std::sort(points.begin(), points.end(), [](auto& a, auto& b) { return a.micro_batch < b.micro_batch; });
  constexpr double kNoise = 0.05;
  for (size_t i = 1; i < points.size(); ++i) {
    const ComputePoint& a = points[i - 1];
    const ComputePoint& b = points[i];
    if (a.micro_batch == b.micro_batch)
      throw Error(fmt::format("{}: two points at micro_batch {}; measure each micro-batch once", where,
                              a.micro_batch));
    const double ta = a.fwd_s + a.bwd_s, tb = b.fwd_s + b.bwd_s;
    if (tb < ta * (1 - kNoise))
      throw Error(fmt::format(
          "{}: fwd_s + bwd_s falls from {:.4g} s at micro_batch {} to {:.4g} s at {} (a larger batch "
          "cannot take less time; more than the 5% of measurement noise)",
          where, ta, a.micro_batch, tb, b.micro_batch));
  }
}

// One measured span: {"low": .., "high": .., "why": ".."}, low in (0, 1], high in [1, 100], why not empty.
MeasuredSpan parse_span(const JsonField& f) {
  const std::string where = f.where();
  if (!f.raw().is_object()) f.mismatch("an object");
  for (const auto& [key, v] : f.raw().items())
    if (key != "low" && key != "high" && key != "why")
      throw Error(fmt::format("{}: unknown key '{}'; valid: low, high, why", where, echo(key)));
  MeasuredSpan s;
  s.low = need<double>(f, "low");
  s.high = need<double>(f, "high");
  s.why = need<std::string>(f, "why");
  if (!(s.low > 0 && s.low <= 1))
    throw Error(fmt::format("{}: low must be a factor in (0, 1] on the figure kept, got {}", where, s.low));
  if (!(s.high >= 1 && s.high <= 100))
    throw Error(
        fmt::format("{}: high must be a factor in [1, 100] on the figure kept, got {}", where, s.high));
  if (s.why.empty()) throw Error(fmt::format("{}: why must say where the span comes from", where));
  return s;
}

void parse_spans(const JsonField& d, DeviceCalibration& dc) {
  if (!d.has("spans")) return;
  const JsonField sp = d.at("spans");
  if (!sp.raw().is_object()) sp.mismatch("an object");
  for (const auto& [key, v] : sp.raw().items())
    if (key != "compute" && key != "sync")
      throw Error(fmt::format("{}: unknown key '{}'; valid: compute, sync", sp.where(), echo(key)));
  if (sp.has("compute")) dc.compute_span = parse_span(sp.at("compute"));
  if (sp.has("sync")) {
    if (dc.sync.ranks == 0)
      throw Error(fmt::format("{}: a sync span without the sync figures (\"sync\") it spans", sp.where()));
    dc.sync_span = parse_span(sp.at("sync"));
  }
}

DeviceCalibration parse_device(const JsonField& entry, const Calibration& c) {
  DeviceCalibration dc;
  dc.device_type = need<std::string>(entry, "device_type");
  const JsonField d = entry.named(echo(dc.device_type));  // each message names the file and the device
  const std::string where = d.where();
  dc.model = parse_model(d);
  dc.precision = parse_precision_at(d);
  dc.peak_flops = opt<double>(d, "peak_flops", 0.0);
  dc.mem_bw = opt<double>(d, "mem_bw", 0.0);
  if (dc.peak_flops < 0 || dc.mem_bw < 0)
    throw Error(where + ": peak_flops and mem_bw must be >= 0 (0 = unknown)");
  // The layer names a point may list: those of this model (core/model/vit.cpp's workload).
  std::set<std::string> layer_names;
  for (const auto& l : build_workload(dc.model).layers) layer_names.insert(l.name);
  for_each_in(d, "points",
              [&](const JsonField& p) { dc.points.push_back(parse_point(p, dc.model, layer_names)); });
  sort_and_check_points(dc.points, where);
  if (d.has("sync")) {
    const JsonField sj = d.at("sync");
    const std::string sw = sj.where();
    if (!sj.raw().is_object()) sj.mismatch("an object");
    for (const auto& [key, v] : sj.raw().items())
      if (key != "ranks" && key != "fixed_s" && key != "per_compute")
        throw Error(fmt::format("{}: unknown key '{}'; valid: ranks, fixed_s, per_compute", sw, echo(key)));
    dc.sync.ranks = need<int>(sj, "ranks");
    dc.sync.fixed_s = need<double>(sj, "fixed_s");
    dc.sync.per_compute = need<double>(sj, "per_compute");
    if (dc.sync.ranks < 2)
      throw Error(fmt::format("{}: ranks must be >= 2 (a sync needs two ranks), got {}", sw, dc.sync.ranks));
    if (!(dc.sync.fixed_s >= 0 && dc.sync.fixed_s < 1))
      throw Error(fmt::format("{}: fixed_s must be in [0, 1) s, got {}", sw, dc.sync.fixed_s));
    if (!(dc.sync.per_compute >= 0 && dc.sync.per_compute <= 1))
      throw Error(fmt::format("{}: per_compute must be in [0, 1], got {}", sw, dc.sync.per_compute));
  }
  parse_spans(d, dc);
  if (d.has("occupancy")) {
    const JsonField oj = d.at("occupancy");
    if (!oj.raw().is_object()) oj.mismatch("an object");
    for (const auto& [key, v] : oj.raw().items())
      if (key != "busy_ranks" && key != "alone_factor")
        throw Error(
            fmt::format("{}: unknown key '{}'; valid: busy_ranks, alone_factor", oj.where(), echo(key)));
    dc.occupancy_busy_ranks = need<int>(oj, "busy_ranks");
    dc.occupancy_alone_factor = need<double>(oj, "alone_factor");
    if (dc.occupancy_busy_ranks < 2)
      throw Error(fmt::format("{}: busy_ranks must be >= 2 (one rank alone against several busy), got {}",
                              oj.where(), dc.occupancy_busy_ranks));
    if (!(dc.occupancy_alone_factor > 0 && dc.occupancy_alone_factor <= 10))
      throw Error(
          fmt::format("{}: alone_factor must be in (0, 10], got {}", oj.where(), dc.occupancy_alone_factor));
  }
  for (size_t k = 0; k < c.devices.size(); ++k)
    if (c.devices[k].device_type == dc.device_type && c.devices[k].precision == dc.precision &&
        same_shape(c.devices[k].model, dc.model))
      throw Error(
          fmt::format("{}: the same device, precision and model as devices[{}]; give each once", where, k));
  return dc;
}

// Kernel families measured (optional: {"softmax": {"elem_s": .., "row_s": ..}, "conv": {"efficiency": ..}}).
void parse_op_kinds(const JsonField& o, DeviceFigures& f) {
  if (!o.has("kinds")) return;
  const JsonField kinds = o.at("kinds");
  if (!kinds.raw().is_object()) kinds.mismatch("an object of op kinds");
  for (const auto& [name, value] : kinds.raw().items()) {
    OpKind kind;
    try {
      kind = parse_op_kind(name);
    } catch (const Error& e) {
      kinds.fail(e.what());
    }
    const JsonField kv = kinds.at(name);
    const std::string kw = kv.where();
    if (!kv.raw().is_object()) kv.mismatch("an object");
    for (const auto& [key, v] : kv.raw().items())
      if (key != "elem_s" && key != "row_s" && key != "efficiency")
        throw Error(fmt::format("{}: unknown key '{}'; valid: elem_s, row_s, efficiency", kw, echo(key)));
    auto& kf = f.kinds[static_cast<size_t>(kind)];
    kf.elem_s = opt<double>(kv, "elem_s", 0.0);
    kf.row_s = opt<double>(kv, "row_s", 0.0);
    kf.efficiency = opt<double>(kv, "efficiency", 0.0);
    if (!(kf.elem_s >= 0) || !(kf.row_s >= 0) || !std::isfinite(kf.elem_s) || !std::isfinite(kf.row_s))
      throw Error(fmt::format("{}: 'elem_s' and 'row_s' must be finite and >= 0", kw));
    if (!(kf.efficiency >= 0 && kf.efficiency <= 1))
      throw Error(fmt::format("{}: 'efficiency' must be in [0, 1], got {}", kw, kf.efficiency));
  }
}

// The keys of one op model, each read with the range it must be in.
class OpModelReader {
 public:
  explicit OpModelReader(const JsonField& o) : o_(o), where_(o.where()) {}
  double positive(const char* key) const {
    const double v = need<double>(o_, key);
    if (!(v > 0))
      throw Error(fmt::format("{}: '{}' must be positive, got {}", where_, key, o_.raw().at(key).dump()));
    return v;
  }
  double fraction(const char* key) const {
    const double v = need<double>(o_, key);
    if (!(v > 0 && v <= 1))
      throw Error(fmt::format("{}: '{}' must be in (0, 1], got {}", where_, key, o_.raw().at(key).dump()));
    return v;
  }
  double non_negative(const char* key) const { return checked(key, need<double>(o_, key)); }
  // An optional key, >= 0 when present.
  double optional_non_negative(const char* key) const {
    const double v = opt<double>(o_, key, 0.0);
    return o_.has(key) ? checked(key, v) : v;
  }

 private:
  double checked(const char* key, double v) const {
    if (!(v >= 0))
      throw Error(fmt::format("{}: '{}' must be >= 0, got {}", where_, key, o_.raw().at(key).dump()));
    return v;
  }
  const JsonField& o_;
  const std::string where_;
};

void parse_tile(const JsonField& o, DeviceFigures& f) {
  const std::string where = o.where();
  const json& tile = o.at("tile").raw();
  if (!tile.is_array() || tile.size() != 2 || !fits_int(tile[0]) || !fits_int(tile[1]) ||
      tile[0].get<int>() < 1 || tile[1].get<int>() < 1)
    throw Error(fmt::format("{}: 'tile' must be [m, n], two positive integers, got {}", where, tile.dump()));
  f.tile_m = tile[0].get<int>();
  f.tile_n = tile[1].get<int>();
}

OpModelCalibration parse_op_model(const JsonField& entry, const Calibration& c) {
  OpModelCalibration oc;
  DeviceFigures& f = oc.figures;
  f.device_type = need<std::string>(entry, "device_type");
  const JsonField o = entry.named(echo(f.device_type));
  const std::string where = o.where();
  oc.precision = parse_precision_at(o);
  const OpModelReader r(o);
  f.peak_flops = r.positive("peak_flops");
  f.mem_bw = r.positive("mem_bw");
  f.sm_count = need<int>(o, "sm_count");
  if (f.sm_count < 1) throw Error(fmt::format("{}: 'sm_count' must be >= 1, got {}", where, f.sm_count));
  parse_tile(o, f);
  f.gemm_efficiency = r.fraction("gemm_efficiency");
  f.gemm_k_half = r.non_negative("gemm_k_half");
  f.gemm_n_half = r.optional_non_negative("gemm_n_half");
  f.attn_efficiency = r.fraction("attn_efficiency");
  f.mem_efficiency = r.fraction("mem_efficiency");
  f.norm_efficiency = r.fraction("norm_efficiency");
  f.matrix_s = r.non_negative("matrix_s");
  f.kernel_s = r.non_negative("kernel_s");
  f.host_op_s = r.non_negative("host_op_s");
  f.sync_s = r.non_negative("sync_s");
  f.async = need<bool>(o, "async");
  parse_op_kinds(o, f);
  oc.samples = opt<int>(o, "samples", 0);
  if (oc.samples < 0) throw Error(fmt::format("{}: 'samples' must be >= 0, got {}", where, oc.samples));
  oc.max_rel_residual = r.optional_non_negative("max_rel_residual");
  oc.median_rel_residual = r.optional_non_negative("median_rel_residual");
  if (c.op_model(f.device_type, oc.precision))
    throw Error(fmt::format("{}: a second op model for device type '{}' at {}", where, f.device_type,
                            precision_name(oc.precision)));
  return oc;
}

LinkCalibration parse_link(const JsonField& l) {
  const std::string where = l.where();
  LinkCalibration lc{need<std::string>(l, "class"), need<double>(l, "bandwidth"), need<double>(l, "latency"),
                     opt<int>(l, "ranks", 0)};
  if (!(lc.bandwidth > 0) || !(lc.latency >= 0) || !std::isfinite(lc.bandwidth) ||
      !std::isfinite(lc.latency) || lc.ranks < 0)
    throw Error(where + ": bandwidth must be positive, latency >= 0, ranks >= 0");
  if (!plausible_bandwidth().contains(lc.bandwidth))
    throw Error(fmt::format("{}: bandwidth {} B/s is not a plausible link bandwidth (expected {})", where,
                            lc.bandwidth, kPlausibleBandwidthText));
  return lc;
}

LoaderCalibration parse_loader(const JsonField& l, const Calibration& c) {
  const std::string where = l.where();
  LoaderCalibration lc{need<std::string>(l, "dataset"), need<int>(l, "resize"),
                       need<double>(l, "images_per_s_per_worker")};
  if (!(lc.images_per_s_per_worker > 0) || !std::isfinite(lc.images_per_s_per_worker))
    throw Error(where + ": images_per_s_per_worker must be positive");
  if (lc.resize < 1) throw Error(fmt::format("{}: resize must be >= 1, got {}", where, lc.resize));
  if (c.loader(lc.dataset, lc.resize))
    throw Error(
        fmt::format("{}: a second loader for dataset '{}' at resize {}", where, echo(lc.dataset), lc.resize));
  return lc;
}

void parse_h2d(const JsonField& top, Calibration& c) {
  if (!top.has("h2d")) return;
  const JsonField h2d = top.at("h2d");
  const std::string where = h2d.where();
  c.h2d_pinned_bw = opt<double>(h2d, "pinned_bw", 0.0);
  c.h2d_pageable_bw = opt<double>(h2d, "pageable_bw", 0.0);
  if (!(c.h2d_pinned_bw >= 0) || !(c.h2d_pageable_bw >= 0) || !std::isfinite(c.h2d_pinned_bw) ||
      !std::isfinite(c.h2d_pageable_bw))
    throw Error(where + ": pinned_bw and pageable_bw must be >= 0 (0 = not measured)");
  for (const auto& [key, bw] :
       {std::pair{"pinned_bw", c.h2d_pinned_bw}, std::pair{"pageable_bw", c.h2d_pageable_bw}})
    if (bw != 0 && !plausible_bandwidth().contains(bw))
      throw Error(
          fmt::format("{}: {} {} B/s is not a plausible copy bandwidth (expected 0 for not measured, or {})",
                      where, key, bw, kPlausibleBandwidthText));
}

Calibration parse_calibration(const JsonField& top) {
  Calibration c;
  c.path = top.where();
  const json& j = top.raw();
  if (j.contains("provenance") && j["provenance"].is_object())
    for (const auto& [k, v] : j["provenance"].items())
      c.provenance[k] = v.is_string() ? v.get<std::string>() : v.dump();
  for_each_in(top, "devices", [&](const JsonField& d) { c.devices.push_back(parse_device(d, c)); });
  for_each_in(top, "op_models", [&](const JsonField& o) { c.op_models.push_back(parse_op_model(o, c)); });
  for_each_in(top, "links", [&](const JsonField& l) { c.links.push_back(parse_link(l)); });
  for_each_in(top, "loaders", [&](const JsonField& l) { c.loaders.push_back(parse_loader(l, c)); });
  parse_h2d(top, c);
  return c;
}
}  // namespace

std::string calibration_to_json(const Calibration& c) {
  json j;
  j["schema"] = kCalibrationSchema;
  j["provenance"] = c.provenance;
  j["devices"] = json::array();
  for (const auto& d : c.devices) {
    json dj{{"device_type", d.device_type},
            {"model", model_json(d.model)},
            {"precision", precision_name(d.precision)},
            {"peak_flops", d.peak_flops},
            {"mem_bw", d.mem_bw},
            {"points", json::array()}};
    for (const auto& p : d.points) {
      json pj{{"micro_batch", p.micro_batch},
              {"fwd_s", p.fwd_s},
              {"bwd_s", p.bwd_s},
              {"optimizer_s", p.optimizer_s}};
      if (!p.layers.empty()) {
        pj["layers"] = json::array();
        for (const auto& l : p.layers)
          pj["layers"].push_back({{"name", l.name}, {"fwd_s", l.fwd_s}, {"bwd_s", l.bwd_s}});
      }
      dj["points"].push_back(pj);
    }
    if (d.sync.ranks > 0)
      dj["sync"] = {
          {"ranks", d.sync.ranks}, {"fixed_s", d.sync.fixed_s}, {"per_compute", d.sync.per_compute}};
    if (d.occupancy_busy_ranks > 0)
      dj["occupancy"] = {{"busy_ranks", d.occupancy_busy_ranks}, {"alone_factor", d.occupancy_alone_factor}};
    for (const auto& [key, span] : {std::pair{"compute", &d.compute_span}, std::pair{"sync", &d.sync_span}})
      if (!span->empty()) dj["spans"][key] = {{"low", span->low}, {"high", span->high}, {"why", span->why}};
    j["devices"].push_back(dj);
  }
  j["op_models"] = json::array();
  for (const auto& o : c.op_models) {
    const DeviceFigures& f = o.figures;
    j["op_models"].push_back(
        {{"device_type", f.device_type},
         {"precision", precision_name(o.precision)},
         {"peak_flops", f.peak_flops},
         {"mem_bw", f.mem_bw},
         {"sm_count", f.sm_count},
         {"tile", {f.tile_m, f.tile_n}},
         {"gemm_efficiency", f.gemm_efficiency},
         {"gemm_k_half", f.gemm_k_half},
         {"gemm_n_half", f.gemm_n_half},
         {"attn_efficiency", f.attn_efficiency},
         {"mem_efficiency", f.mem_efficiency},
         {"norm_efficiency", f.norm_efficiency > 0 ? f.norm_efficiency : f.mem_efficiency},
         {"matrix_s", f.matrix_s},
         {"kernel_s", f.kernel_s},
         {"host_op_s", f.host_op_s},
         {"sync_s", f.sync_s},
         {"async", f.async},
         {"samples", o.samples},
         {"max_rel_residual", o.max_rel_residual},
         {"median_rel_residual", o.median_rel_residual}});
    json kinds = json::object();
    for (int k = 0; k < kOpKinds; ++k) {
      const auto& kf = f.kinds[static_cast<size_t>(k)];
      json kj = json::object();
      if (kf.elem_s > 0) kj["elem_s"] = kf.elem_s;
      if (kf.row_s > 0) kj["row_s"] = kf.row_s;
      if (kf.efficiency > 0) kj["efficiency"] = kf.efficiency;
      if (!kj.empty()) kinds[op_kind_name(static_cast<OpKind>(k))] = kj;
    }
    if (!kinds.empty()) j["op_models"].back()["kinds"] = kinds;
  }
  j["links"] = json::array();
  for (const auto& l : c.links)
    j["links"].push_back(
        {{"class", l.link_class}, {"bandwidth", l.bandwidth}, {"latency", l.latency}, {"ranks", l.ranks}});
  j["loaders"] = json::array();
  for (const auto& l : c.loaders)
    j["loaders"].push_back({{"dataset", l.dataset},
                            {"resize", l.resize},
                            {"images_per_s_per_worker", l.images_per_s_per_worker}});
  j["h2d"] = {{"pinned_bw", c.h2d_pinned_bw}, {"pageable_bw", c.h2d_pageable_bw}};
  return j.dump(2) + "\n";
}

}  // namespace vitsim
