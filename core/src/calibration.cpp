#include "vitsim/core/calibration.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "vitsim/core/error.hpp"

namespace vitsim {
using json = nlohmann::json;

bool same_shape(const ViTConfig& a, const ViTConfig& b) {
  return a.image_size == b.image_size && a.patch == b.patch && a.channels == b.channels && a.width == b.width &&
         a.depth == b.depth && a.heads == b.heads && a.mlp_ratio == b.mlp_ratio && a.classes == b.classes;
}

const DeviceCalibration* Calibration::find(const std::string& type, const ViTConfig& m, Precision p) const {
  for (const auto& d : devices)
    if (d.device_type == type && d.precision == p && same_shape(d.model, m)) return &d;
  return nullptr;
}

const DeviceCalibration* Calibration::find_any(const ViTConfig& m, Precision p) const {
  for (const auto& d : devices)
    if (d.precision == p && same_shape(d.model, m) && d.peak_flops > 0 && d.mem_bw > 0) return &d;
  return nullptr;
}

const LoaderCalibration* Calibration::loader(const std::string& dataset, int resize) const {
  for (const auto& l : loaders)
    if (l.dataset == dataset && l.resize == resize) return &l;
  return nullptr;
}

namespace {
json model_json(const ViTConfig& m) {
  return {{"image_size", m.image_size}, {"patch", m.patch},     {"channels", m.channels},
          {"width", m.width},           {"depth", m.depth},     {"heads", m.heads},
          {"mlp_ratio", m.mlp_ratio},   {"classes", m.classes}, {"preset", m.preset}};
}

template <typename T>
T need(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) throw Error(fmt::format("{}: missing key '{}'", where, key));
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    throw Error(fmt::format("{}: key '{}' has the wrong type: {}", where, key, j.at(key).dump()));
  }
}
}  // namespace

namespace {
Calibration parse_calibration(const json& j, const std::string& path);
}  // namespace

Calibration read_calibration(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("{}: cannot open calibration file", path));
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers too large (fuzzer finding)
    throw Error(fmt::format("{}: malformed JSON: {}", path, e.what()));
  }
  if (!j.is_object() || j.value("schema", json()) != "vitsim.calibration/1")
    throw Error(fmt::format("{}: not a vitsim calibration (expected \"schema\": \"vitsim.calibration/1\")", path));
  try {
    return parse_calibration(j, path);
  } catch (const json::exception& e) {
    // A value of the wrong type or shape anywhere (the fuzzer found a device without "model").
    throw Error(fmt::format("{}: calibration does not follow vitsim.calibration/1: {}", path, e.what()));
  }
}

namespace {
// The list under `key` (empty when absent); anything but a list is an error.
json list_of(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) return json::array();
  if (!j.at(key).is_array()) throw Error(fmt::format("{}: '{}' must be a list, got {}", where, key, j.at(key).dump()));
  return j.at(key);
}

Calibration parse_calibration(const json& j, const std::string& path) {
  Calibration c;
  c.path = path;
  if (j.contains("provenance") && j["provenance"].is_object())
    for (const auto& [k, v] : j["provenance"].items()) c.provenance[k] = v.is_string() ? v.get<std::string>() : v.dump();
  int di = 0;
  for (const auto& d : list_of(j, "devices", path)) {
    std::string where = fmt::format("{}: devices[{}]", path, di++);
    DeviceCalibration dc;
    dc.device_type = need<std::string>(d, "device_type", where);
    if (!d.contains("model") || !d["model"].is_object()) throw Error(where + ": missing object 'model'");
    const json& m = d.at("model");
    dc.model.preset = m.value("preset", "");
    dc.model.image_size = need<int>(m, "image_size", where + ".model");
    dc.model.patch = need<int>(m, "patch", where + ".model");
    dc.model.channels = need<int>(m, "channels", where + ".model");
    dc.model.width = need<int>(m, "width", where + ".model");
    dc.model.depth = need<int>(m, "depth", where + ".model");
    dc.model.heads = need<int>(m, "heads", where + ".model");
    dc.model.mlp_ratio = need<double>(m, "mlp_ratio", where + ".model");
    dc.model.classes = need<int>(m, "classes", where + ".model");
    try {
      dc.precision = parse_precision(need<std::string>(d, "precision", where));
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
    dc.peak_flops = d.value("peak_flops", 0.0);
    dc.mem_bw = d.value("mem_bw", 0.0);
    int pi = 0;
    for (const auto& p : list_of(d, "points", where)) {
      std::string pw = fmt::format("{}.points[{}]", where, pi++);
      ComputePoint cp;
      cp.micro_batch = need<int>(p, "micro_batch", pw);
      cp.fwd_s = need<double>(p, "fwd_s", pw);
      cp.bwd_s = need<double>(p, "bwd_s", pw);
      cp.optimizer_s = p.value("optimizer_s", 0.0);
      if (cp.micro_batch < 1 || !(cp.fwd_s > 0) || !(cp.bwd_s > 0) || cp.optimizer_s < 0)
        throw Error(pw + ": micro_batch must be >= 1 and fwd_s, bwd_s positive");
      for (const auto& l : list_of(p, "layers", pw))
        cp.layers.push_back({need<std::string>(l, "name", pw), need<double>(l, "fwd_s", pw), need<double>(l, "bwd_s", pw)});
      dc.points.push_back(cp);
    }
    if (dc.points.empty()) throw Error(where + ": no measured points");
    std::sort(dc.points.begin(), dc.points.end(), [](auto& a, auto& b) { return a.micro_batch < b.micro_batch; });
    c.devices.push_back(dc);
  }
  int li = 0;
  for (const auto& l : list_of(j, "links", path)) {
    std::string where = fmt::format("{}: links[{}]", path, li++);
    LinkCalibration lc{need<std::string>(l, "class", where), need<double>(l, "bandwidth", where),
                       need<double>(l, "latency", where), l.value("ranks", 0)};
    if (!(lc.bandwidth > 0) || lc.latency < 0) throw Error(where + ": bandwidth must be positive, latency >= 0");
    c.links.push_back(lc);
  }
  int oi = 0;
  for (const auto& l : list_of(j, "loaders", path)) {
    std::string where = fmt::format("{}: loaders[{}]", path, oi++);
    LoaderCalibration lc{need<std::string>(l, "dataset", where), need<int>(l, "resize", where),
                         need<double>(l, "images_per_s_per_worker", where)};
    if (!(lc.images_per_s_per_worker > 0)) throw Error(where + ": images_per_s_per_worker must be positive");
    c.loaders.push_back(lc);
  }
  if (j.contains("h2d")) {
    c.h2d_pinned_bw = j["h2d"].value("pinned_bw", 0.0);
    c.h2d_pageable_bw = j["h2d"].value("pageable_bw", 0.0);
  }
  return c;
}
}  // namespace

std::string calibration_to_json(const Calibration& c) {
  json j;
  j["schema"] = "vitsim.calibration/1";
  j["provenance"] = c.provenance;
  j["devices"] = json::array();
  for (const auto& d : c.devices) {
    json dj{{"device_type", d.device_type}, {"model", model_json(d.model)}, {"precision", precision_name(d.precision)},
            {"peak_flops", d.peak_flops},   {"mem_bw", d.mem_bw},           {"points", json::array()}};
    for (const auto& p : d.points) {
      json pj{{"micro_batch", p.micro_batch}, {"fwd_s", p.fwd_s}, {"bwd_s", p.bwd_s}, {"optimizer_s", p.optimizer_s}};
      if (!p.layers.empty()) {
        pj["layers"] = json::array();
        for (const auto& l : p.layers) pj["layers"].push_back({{"name", l.name}, {"fwd_s", l.fwd_s}, {"bwd_s", l.bwd_s}});
      }
      dj["points"].push_back(pj);
    }
    j["devices"].push_back(dj);
  }
  j["links"] = json::array();
  for (const auto& l : c.links)
    j["links"].push_back({{"class", l.link_class}, {"bandwidth", l.bandwidth}, {"latency", l.latency}, {"ranks", l.ranks}});
  j["loaders"] = json::array();
  for (const auto& l : c.loaders)
    j["loaders"].push_back(
        {{"dataset", l.dataset}, {"resize", l.resize}, {"images_per_s_per_worker", l.images_per_s_per_worker}});
  j["h2d"] = {{"pinned_bw", c.h2d_pinned_bw}, {"pageable_bw", c.h2d_pageable_bw}};
  return j.dump(2) + "\n";
}

ComputePoint interpolate(const DeviceCalibration& d, int b) {
  const auto& pts = d.points;
  auto scale = [](const ComputePoint& p, double f) {
    ComputePoint out = p;
    out.fwd_s *= f;
    out.bwd_s *= f;
    for (auto& l : out.layers) {
      l.fwd_s *= f;
      l.bwd_s *= f;
    }
    return out;  // the optimizer step does not depend on the batch
  };
  if (pts.size() == 1) return scale(pts[0], static_cast<double>(b) / pts[0].micro_batch);
  size_t hi = 1;
  while (hi + 1 < pts.size() && pts[hi].micro_batch < b) ++hi;
  const ComputePoint& p0 = pts[hi - 1];
  const ComputePoint& p1 = pts[hi];
  const double t = static_cast<double>(b - p0.micro_batch) / (p1.micro_batch - p0.micro_batch);
  auto lerp = [t](double a, double c) { return a + t * (c - a); };
  ComputePoint out;
  out.micro_batch = b;
  out.fwd_s = std::max(1e-12, lerp(p0.fwd_s, p1.fwd_s));
  out.bwd_s = std::max(1e-12, lerp(p0.bwd_s, p1.bwd_s));
  out.optimizer_s = std::max(0.0, lerp(p0.optimizer_s, p1.optimizer_s));
  if (p0.layers.size() == p1.layers.size())
    for (size_t i = 0; i < p0.layers.size(); ++i)
      out.layers.push_back({p0.layers[i].name, std::max(0.0, lerp(p0.layers[i].fwd_s, p1.layers[i].fwd_s)),
                            std::max(0.0, lerp(p0.layers[i].bwd_s, p1.layers[i].bwd_s))});
  return out;
}

}  // namespace vitsim
