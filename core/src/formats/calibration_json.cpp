// The calibration file (calibration.hpp): the one JSON mapping per struct (vitsim/core/base/json_reader.hpp)
// that calibration_to_json writes and read_calibration reads back with its checks; the file's head and its
// devices here, its op models, links, loaders and copies in calibration_json_ops.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "formats/calibration_json.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/calibration.hpp"

namespace vitsim {
using json = nlohmann::json;
using detail::JsonField, detail::JsonPath;

namespace {
using detail::finite, detail::fits_int, detail::precision_field, detail::JsonIn, detail::JsonOut,
    detail::MappedAs;

// Each named figure against the plausible span of its kind (core/base/units.hpp units::plausible; issue 39:
// one bound per kind for platforms, calibrations, fits and shards alike).
void plausible(const JsonField& f, std::initializer_list<std::pair<const char*, double>> figures,
               units::Kind kind) {
  for (const auto& [key, v] : figures) try {
      units::check_plausible(v, kind);
    } catch (const Error& e) {
      f.fail(fmt::format("{}: {}", key, e.what()));
    }
}

template <class Io, MappedAs<ViTConfig> M>
void model_fields(Io& io, M& m) {
  if (io.present(true, {"preset"})) io.string("preset", m.preset);
  io.integer("image_size", m.image_size, INT_MIN, INT_MAX);
  io.integer("patch", m.patch, INT_MIN, INT_MAX);
  io.integer("channels", m.channels, INT_MIN, INT_MAX);
  io.integer("width", m.width, INT_MIN, INT_MAX);
  io.integer("depth", m.depth, INT_MIN, INT_MAX);
  io.integer("heads", m.heads, INT_MIN, INT_MAX);
  io.number("mlp_ratio", m.mlp_ratio, finite());
  io.integer("classes", m.classes, INT_MIN, INT_MAX);
  // model.class_tokens: written only when not 1, so that calibrations written before it read the same.
  if (io.present(m.class_tokens != 1, {"class_tokens"}))
    io.integer("class_tokens", m.class_tokens, INT_MIN, INT_MAX);
  io.check([&](const JsonField& f) {
    try {
      const int smallest =
          std::min({m.image_size, m.patch, m.channels, m.width, m.depth, m.heads, m.classes});
      if (smallest < 1 || !(m.mlp_ratio > 0) || m.depth > 4096 || m.width > (1 << 20))
        throw Error("sizes must be positive (depth <= 4096, width <= 1048576)");
      m.validate();
    } catch (const Error& e) {
      f.fail(e.what());
    }
  });
}

// A layer of `model` (`layer_names`), listed once in its point (`listed`).
template <class Io, MappedAs<LayerTime> L>
void layer_fields(Io& io, L& l, const ViTConfig& model, const std::set<std::string>& layer_names,
                  std::set<std::string>& listed) {
  io.string("name", l.name);
  io.number("fwd_s", l.fwd_s, finite());
  io.number("bwd_s", l.bwd_s, finite());
  io.check([&](const JsonField& f) {
    if (!(l.fwd_s >= 0) || !(l.bwd_s >= 0)) f.fail("fwd_s and bwd_s must be >= 0");
    plausible(f, {{"fwd_s", l.fwd_s}, {"bwd_s", l.bwd_s}}, units::Kind::Time);
    if (!layer_names.count(l.name))
      f.fail(fmt::format("'{}' is not a layer of this model (patch_embed, block0.attn .. block{}.mlp, head)",
                         echo(l.name), model.depth - 1));
    if (!listed.insert(l.name).second) f.fail(fmt::format("layer '{}' is listed twice", l.name));
  });
}

// One measured point of a device: its micro-batch, pass times and (optionally) per-layer times. Each figure
// named on its own: a negative optimizer_s was blamed on fwd_s and bwd_s (issue 27).
template <class Io, MappedAs<ComputePoint> P>
void point_fields(Io& io, P& p, const ViTConfig& model, const std::set<std::string>& layer_names) {
  io.check([&](const JsonField& f) {
    if (f.has("micro_batch") && f.raw().at("micro_batch").is_number() && !fits_int(f.raw().at("micro_batch")))
      f.fail(fmt::format("micro_batch must be a whole number of samples >= 1, got {}",
                         echo(f.raw().at("micro_batch").dump())));
  });
  io.integer("micro_batch", p.micro_batch, INT_MIN, INT_MAX);
  io.number("fwd_s", p.fwd_s, finite());
  io.number("bwd_s", p.bwd_s, finite());
  if (io.present(true, {"optimizer_s"})) io.number("optimizer_s", p.optimizer_s, finite());
  io.check([&](const JsonField& f) {
    if (p.micro_batch < 1) f.fail(fmt::format("micro_batch must be >= 1, got {}", p.micro_batch));
    for (const auto& [key, v] : {std::pair<const char*, double>{"fwd_s", p.fwd_s}, {"bwd_s", p.bwd_s}})
      if (!(v > 0)) f.fail(fmt::format("{} must be a positive time in seconds, got {}", key, v));
    if (!(p.optimizer_s >= 0))
      f.fail(fmt::format("optimizer_s must be a time >= 0 in seconds, got {}", p.optimizer_s));
    plausible(f, {{"fwd_s", p.fwd_s}, {"bwd_s", p.bwd_s}, {"optimizer_s", p.optimizer_s}}, units::Kind::Time);
  });
  std::set<std::string> listed;
  if (io.present(!p.layers.empty(), {"layers"}))
    io.list("layers", p.layers,
            [&](auto& lio, auto& l) { layer_fields(lio, l, model, layer_names, listed); });
}

// Sorts the points by micro-batch. Two points at one micro-batch leave the affine fit's slope undefined
// (it gave 0 ns); a pass that gets faster with more samples is a measurement gone wrong. Falls within
// 5% are measurement noise.
void sort_and_check_points(std::vector<ComputePoint>& points, const JsonField& f) {
  if (points.empty()) f.fail("no measured points");
  std::sort(points.begin(), points.end(), [](auto& a, auto& b) { return a.micro_batch < b.micro_batch; });
  constexpr double kNoise = 0.05;
  for (size_t i = 1; i < points.size(); ++i) {
    const ComputePoint& a = points[i - 1];
    const ComputePoint& b = points[i];
    if (a.micro_batch == b.micro_batch)
      f.fail(fmt::format("two points at micro_batch {}; measure each micro-batch once", a.micro_batch));
    const double ta = a.fwd_s + a.bwd_s, tb = b.fwd_s + b.bwd_s;
    if (tb < ta * (1 - kNoise))
      f.fail(
          fmt::format("fwd_s + bwd_s falls from {:.4g} s at micro_batch {} to {:.4g} s at {} (a larger batch "
                      "cannot take less time; more than the 5% of measurement noise)",
                      ta, a.micro_batch, tb, b.micro_batch));
  }
}

// The step phase's sync figures (closed: another key is refused).
const auto kSyncFields = [](auto& io, auto& s) {
  io.integer("ranks", s.ranks, INT_MIN, INT_MAX);
  io.number("fixed_s", s.fixed_s, finite());
  io.number("per_compute", s.per_compute, finite());
  io.check([&](const JsonField& f) {
    if (s.ranks < 2) f.fail(fmt::format("ranks must be >= 2 (a sync needs two ranks), got {}", s.ranks));
    if (!(s.fixed_s >= 0 && s.fixed_s < 1))
      f.fail(fmt::format("fixed_s must be in [0, 1) s, got {}", s.fixed_s));
    if (!(s.per_compute >= 0 && s.per_compute <= 1))
      f.fail(fmt::format("per_compute must be in [0, 1], got {}", s.per_compute));
  });
};

// One measured span: {"low": .., "high": .., "why": ".."}, low in (0, 1], high in [1, 100], why not empty.
const auto kSpanFields = [](auto& io, auto& s) {
  io.number("low", s.low, finite());
  io.number("high", s.high, finite());
  io.string("why", s.why);
  io.check([&](const JsonField& f) {
    if (!(s.low >= units::plausible_factor().lo && s.low <= 1))
      f.fail(fmt::format("low must be a factor in [0.001, 1] on the figure kept, got {}", s.low));
    if (!(s.high >= 1 && s.high <= 100))
      f.fail(fmt::format("high must be a factor in [1, 100] on the figure kept, got {}", s.high));
    if (s.why.empty()) f.fail("why must say where the span comes from");
  });
};

// The device's spans, each written when measured; a sync span needs the sync figures it spans.
const auto kSpansFields = [](auto& io, auto& d) {
  if (io.present(!d.compute_span.empty(), {"compute"}))
    io.closed_object("compute", d.compute_span, kSpanFields);
  if (io.present(!d.sync_span.empty(), {"sync"})) {
    io.check([&](const JsonField& f) {
      if (d.sync.ranks == 0) f.fail("a sync span without the sync figures (\"sync\") it spans");
    });
    io.closed_object("sync", d.sync_span, kSpanFields);
  }
};

const auto kOccupancyFields = [](auto& io, auto& d) {
  io.integer("busy_ranks", d.occupancy_busy_ranks, INT_MIN, INT_MAX);
  io.number("alone_factor", d.occupancy_alone_factor, finite());
  io.check([&](const JsonField& f) {
    if (d.occupancy_busy_ranks < 2)
      f.fail(fmt::format("busy_ranks must be >= 2 (one rank alone against several busy), got {}",
                         d.occupancy_busy_ranks));
    if (!(d.occupancy_alone_factor >= units::plausible_factor().lo && d.occupancy_alone_factor <= 10))
      f.fail(fmt::format("alone_factor must be in [0.001, 10], got {}", d.occupancy_alone_factor));
  });
};

// The measured step-to-step variability: {"value": .., "low": .., "high": .., "why": ".."}, value in [0, 1)
// as the platform's gpu_step_cv (core/src/platform/platform_props_table.cpp), why not empty; low and high
// (both or neither; older files have neither) the spread measured around it, low <= value <= high < 1.
const auto kStepCvFields = [](auto& io, auto& s) {
  io.number("value", s.value, finite());
  const bool spread = io.present(s.ranged(), {"low", "high"});
  if (spread) {
    io.number("low", s.low, finite());
    io.number("high", s.high, finite());
  }
  io.string("why", s.why);
  io.check([&](const JsonField& f) {
    if (!(s.value >= 0 && s.value < 1))
      f.fail(fmt::format("value must be a coefficient of variation in [0, 1) of the step, got {}", s.value));
    if (spread && !(s.low >= 0 && s.low <= s.value && s.value <= s.high && s.high < 1))
      f.fail(
          fmt::format("low and high must hold the value, 0 <= low <= value <= high < 1, got {} <= {} <= {}",
                      s.low, s.value, s.high));
    if (s.why.empty()) f.fail("why must say where the figure comes from");
  });
};

// One phase's round check (calibration.hpp RoundCheck); noisy is what spread and limit say.
const auto kRoundCheckFields = [](auto& io, auto& r) {
  io.integer("rounds", r.rounds, INT_MIN, INT_MAX);
  io.integer("repeats", r.repeats, INT_MIN, INT_MAX);
  io.number("spread", r.spread, finite());
  io.number("limit", r.limit, finite());
  io.boolean("noisy", r.noisy);
  io.check([&](const JsonField& f) {
    if (r.rounds < 1) f.fail(fmt::format("rounds must be >= 1, got {}", r.rounds));
    if (r.repeats < 0 || r.repeats >= r.rounds)
      f.fail(fmt::format("repeats must be in [0, rounds - 1] = [0, {}], got {}", r.rounds - 1, r.repeats));
    if (!(r.spread >= 0)) f.fail(fmt::format("spread must be >= 0, got {}", r.spread));
    if (!(r.limit > 0)) f.fail(fmt::format("limit must be > 0, got {}", r.limit));
    if (r.noisy != (r.spread > r.limit))
      f.fail(fmt::format("noisy must be {} (spread {} against limit {})",
                         r.spread > r.limit ? "true" : "false", r.spread, r.limit));
  });
};

// The phases with rounds, each written when it ran (closed: another phase name is refused, naming these).
const auto kRoundsFields = [](auto& io, auto& r) {
  if (io.present(!r.compute.empty(), {"compute"})) io.closed_object("compute", r.compute, kRoundCheckFields);
  if (io.present(!r.step.empty(), {"step"})) io.closed_object("step", r.step, kRoundCheckFields);
};

// A device's measured points; `c`: the devices read before it (each device, precision and model once).
template <class Io, MappedAs<DeviceCalibration> D>
void device_fields(Io& io, D& d, const Calibration& c) {
  io.string("device_type", d.device_type);
  io.named(echo(d.device_type));  // each message names the file and the device
  io.object("model", d.model, [](auto& mio, auto& m) { model_fields(mio, m); });
  precision_field(io, d.precision);
  if (io.present(true, {"peak_flops"})) io.number("peak_flops", d.peak_flops, finite());
  if (io.present(true, {"mem_bw"})) io.number("mem_bw", d.mem_bw, finite());
  // The layer names a point may list: those of this model (core/model/vit.cpp's workload).
  std::set<std::string> layer_names;
  io.check([&](const JsonField& f) {
    if (d.peak_flops < 0 || d.mem_bw < 0) f.fail("peak_flops and mem_bw must be >= 0 (0 = unknown)");
    plausible(f, {{"peak_flops", d.peak_flops}}, units::Kind::Flops);
    plausible(f, {{"mem_bw", d.mem_bw}}, units::Kind::Bandwidth);
    for (const auto& l : build_workload(d.model).layers) layer_names.insert(l.name);
  });
  // Before the points: a device given twice was blamed on its points' monotonicity (issue 39 item 25).
  if constexpr (!Io::writing)
    io.check([&](const JsonField& f) {
      for (size_t k = 0; k < c.devices.size(); ++k)
        if (c.devices[k].device_type == d.device_type && c.devices[k].precision == d.precision &&
            same_shape(c.devices[k].model, d.model))
          f.fail(fmt::format("the same device, precision and model as devices[{}]; give each once", k));
    });
  if (io.present(true, {"points"}))
    io.list("points", d.points, [&](auto& pio, auto& p) { point_fields(pio, p, d.model, layer_names); });
  if constexpr (!Io::writing) io.check([&](const JsonField& f) { sort_and_check_points(d.points, f); });
  if (io.present(d.sync.ranks > 0, {"sync"})) io.closed_object("sync", d.sync, kSyncFields);
  if (io.present(!d.compute_span.empty() || !d.sync_span.empty(), {"spans"}))
    io.closed_object("spans", d, kSpansFields);
  if (io.present(d.occupancy_busy_ranks > 0, {"occupancy"}))
    io.closed_object("occupancy", d, kOccupancyFields);
  if (io.present(!d.step_cv.empty(), {"step_cv"})) io.closed_object("step_cv", d.step_cv, kStepCvFields);
  if (io.present(!d.rounds.empty(), {"rounds"})) io.closed_object("rounds", d.rounds, kRoundsFields);
}
}  // namespace

namespace {
// The file's provenance: host, date, versions, command (a value that is not a string is kept as its JSON).
json provenance_json(const std::map<std::string, std::string>& p) {
  return p;
}
void read_provenance(const JsonField& top, const char* key, std::map<std::string, std::string>& p) {
  const json& j = top.raw();
  if (j.contains(key) && j[key].is_object())
    for (const auto& [k, v] : j[key].items()) p[k] = v.is_string() ? v.get<std::string>() : v.dump();
}

template <class Io, MappedAs<Calibration> C>
void calibration_fields(Io& io, C& c) {
  if constexpr (!Io::writing) io.check([&](const JsonField& f) { c.path = f.where(); });
  io.custom("provenance", c.provenance, provenance_json, read_provenance);
  if (io.present(true, {"devices"}))
    io.list("devices", c.devices, [&](auto& dio, auto& d) { device_fields(dio, d, c); });
  detail::calibration_op_fields(io, c);
}
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
    Calibration c;
    JsonIn in(JsonField(j, path, "", JsonPath::Dotted));
    calibration_fields(in, c);
    return c;
  } catch (const json::exception& e) {
    // A value of the wrong type or shape anywhere (the fuzzer found a device without "model").
    throw Error(fmt::format("{}: calibration does not follow {}: {}", path, kCalibrationSchema, e.what()));
  }
}

std::string calibration_to_json(const Calibration& c) {
  json j;
  j["schema"] = kCalibrationSchema;
  JsonOut out(j);
  calibration_fields(out, c);
  return j.dump(2) + "\n";
}

}  // namespace vitsim
