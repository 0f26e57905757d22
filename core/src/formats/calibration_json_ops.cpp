// The calibration's op models, links, loaders and host-to-device copies: their JSON mapping
// (formats/calibration_json.hpp), read with the checks of each figure.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <nlohmann/json.hpp>
#include <utility>

#include "formats/calibration_json.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/platform/platform_props.hpp"

namespace vitsim::detail {
using json = nlohmann::json;

namespace {

// How a figure of an op model must lie, in the words of its message: "'peak_flops' must be positive, got 0".
enum class Figure { Positive, Fraction, NonNegative };

// A figure of an op model with the range it must be in; an optional one is read when present.
template <class Io, class V>
void figure(Io& io, const char* key, V& v, Figure range, bool optional = false) {
  if (optional && !io.present(true, {key})) return;
  io.number(key, v, finite());
  io.check([&v, key, range](const JsonField& f) {
    const bool ok = range == Figure::Positive ? v > 0 : range == Figure::Fraction ? v > 0 && v <= 1 : v >= 0;
    const char* must = range == Figure::Positive   ? "be positive"
                       : range == Figure::Fraction ? "be in (0, 1]"
                                                   : "be >= 0";
    if (!ok) f.fail(fmt::format("'{}' must {}, got {}", key, must, f.raw().at(key).dump()));
  });
}

// The GEMM output tile, [m, n]: two positive integers.
json tile_json(const DeviceFigures& f) {
  return {f.tile_m, f.tile_n};
}
void read_tile(const JsonField& o, const char* key, DeviceFigures& f) {
  const json& tile = o.at(key).raw();
  if (!tile.is_array() || tile.size() != 2 || !fits_int(tile[0]) || !fits_int(tile[1]) ||
      tile[0].get<int>() < 1 || tile[1].get<int>() < 1)
    o.fail(fmt::format("'{}' must be [m, n], two positive integers, got {}", key, tile.dump()));
  f.tile_m = tile[0].get<int>();
  f.tile_n = tile[1].get<int>();
}

// One kernel family's figures, each written when measured (> 0).
const auto kKindFields = [](auto& io, auto& k) {
  if (io.present(k.elem_s > 0, {"elem_s"})) io.number("elem_s", k.elem_s, finite());
  if (io.present(k.row_s > 0, {"row_s"})) io.number("row_s", k.row_s, finite());
  if (io.present(k.efficiency > 0, {"efficiency"})) io.number("efficiency", k.efficiency, finite());
  io.check([&](const JsonField& f) {
    if (!(k.elem_s >= 0) || !(k.row_s >= 0)) f.fail("'elem_s' and 'row_s' must be finite and >= 0");
    if (!(k.efficiency >= 0 && k.efficiency <= 1))
      f.fail(fmt::format("'efficiency' must be in [0, 1], got {}", k.efficiency));
  });
};
using KindFigures = DeviceFigures::KindFigures;

// Kernel families measured, by name ({"softmax": {"elem_s": .., "row_s": ..}, "conv": {"efficiency": ..}}).
json kinds_json(const DeviceFigures& f) {
  json kinds = json::object();
  for (int k = 0; k < kOpKinds; ++k) {
    const json kj = JsonOut::write(f.kinds[static_cast<size_t>(k)], kKindFields);
    if (!kj.empty()) kinds[op_kind_name(static_cast<OpKind>(k))] = kj;
  }
  return kinds;
}
void read_kinds(const JsonField& o, const char* key, DeviceFigures& f) {
  const JsonField kinds = o.at(key);
  if (!kinds.raw().is_object()) kinds.mismatch("an object of op kinds");
  for (const auto& [name, value] : kinds.raw().items()) {
    OpKind kind;
    try {
      kind = parse_op_kind(name);
    } catch (const Error& e) {
      kinds.fail(e.what());
    }
    JsonIn in(kinds.at(name));
    in.closed<KindFigures>(kKindFields);
    kKindFields(in, f.kinds[static_cast<size_t>(kind)]);
  }
}

// An op model; `c`: the op models read before it (one per device type and precision).
template <class Io, MappedAs<OpModelCalibration> O>
void op_model_fields(Io& io, O& oc, const Calibration& c) {
  auto& f = oc.figures;
  io.string("device_type", f.device_type);
  io.named(echo(f.device_type));
  precision_field(io, oc.precision);
  figure(io, "peak_flops", f.peak_flops, Figure::Positive);
  figure(io, "mem_bw", f.mem_bw, Figure::Positive);
  io.integer("sm_count", f.sm_count, INT_MIN, INT_MAX);
  io.check([&](const JsonField& o) {
    if (f.sm_count < 1) o.fail(fmt::format("'sm_count' must be >= 1, got {}", f.sm_count));
  });
  io.custom("tile", f, tile_json, read_tile);
  figure(io, "gemm_efficiency", f.gemm_efficiency, Figure::Fraction);
  figure(io, "gemm_k_half", f.gemm_k_half, Figure::NonNegative);
  figure(io, "gemm_n_half", f.gemm_n_half, Figure::NonNegative, true);
  figure(io, "attn_efficiency", f.attn_efficiency, Figure::Fraction);
  figure(io, "mem_efficiency", f.mem_efficiency, Figure::Fraction);
  // Written as mem_efficiency where it is 0 (the same for normalisation ops).
  double norm = f.norm_efficiency > 0 ? f.norm_efficiency : f.mem_efficiency;
  figure(io, "norm_efficiency", norm, Figure::Fraction);
  if constexpr (!Io::writing) f.norm_efficiency = norm;
  for (const auto& [key, member] :
       {std::pair{"matrix_s", &DeviceFigures::matrix_s}, std::pair{"kernel_s", &DeviceFigures::kernel_s},
        std::pair{"host_op_s", &DeviceFigures::host_op_s}, std::pair{"sync_s", &DeviceFigures::sync_s}})
    figure(io, key, f.*member, Figure::NonNegative);
  io.boolean("async", f.async);
  const bool measured_kinds = !kinds_json(f).empty();
  if (io.present(measured_kinds, {"kinds"})) io.custom("kinds", f, kinds_json, read_kinds);
  if (io.present(true, {"samples"})) io.integer("samples", oc.samples, INT_MIN, INT_MAX);
  io.check([&](const JsonField& o) {
    if (oc.samples < 0) o.fail(fmt::format("'samples' must be >= 0, got {}", oc.samples));
  });
  figure(io, "max_rel_residual", oc.max_rel_residual, Figure::NonNegative, true);
  figure(io, "median_rel_residual", oc.median_rel_residual, Figure::NonNegative, true);
  io.check([&](const JsonField& o) {
    if (c.op_model(f.device_type, oc.precision))
      o.fail(fmt::format("a second op model for device type '{}' at {}", f.device_type,
                         precision_name(oc.precision)));
  });
}

const auto kLinkFields = [](auto& io, auto& l) {
  io.string("class", l.link_class);
  io.number("bandwidth", l.bandwidth, finite());
  io.number("latency", l.latency, finite());
  if (io.present(true, {"ranks"})) io.integer("ranks", l.ranks, INT_MIN, INT_MAX);
  io.check([&](const JsonField& f) {
    if (!(l.bandwidth > 0) || !(l.latency >= 0) || l.ranks < 0)
      f.fail("bandwidth must be positive, latency >= 0, ranks >= 0");
    if (!plausible_bandwidth().contains(l.bandwidth))
      f.fail(fmt::format("bandwidth {} B/s is not a plausible link bandwidth (expected {})", l.bandwidth,
                         kPlausibleBandwidthText));
  });
};

// A loader; `c`: the loaders read before it (one per dataset and resize).
template <class Io, MappedAs<LoaderCalibration> L>
void loader_fields(Io& io, L& l, const Calibration& c) {
  io.string("dataset", l.dataset);
  io.integer("resize", l.resize, INT_MIN, INT_MAX);
  io.number("images_per_s_per_worker", l.images_per_s_per_worker, finite());
  io.check([&](const JsonField& f) {
    if (!(l.images_per_s_per_worker > 0)) f.fail("images_per_s_per_worker must be positive");
    if (l.resize < 1) f.fail(fmt::format("resize must be >= 1, got {}", l.resize));
    if (c.loader(l.dataset, l.resize))
      f.fail(fmt::format("a second loader for dataset '{}' at resize {}", echo(l.dataset), l.resize));
  });
}

// The host-to-device copy bandwidths (0 = not measured).
const auto kH2dFields = [](auto& io, auto& c) {
  if (io.present(true, {"pinned_bw"})) io.number("pinned_bw", c.h2d_pinned_bw, finite());
  if (io.present(true, {"pageable_bw"})) io.number("pageable_bw", c.h2d_pageable_bw, finite());
  io.check([&](const JsonField& f) {
    if (!(c.h2d_pinned_bw >= 0) || !(c.h2d_pageable_bw >= 0))
      f.fail("pinned_bw and pageable_bw must be >= 0 (0 = not measured)");
    for (const auto& [key, bw] :
         {std::pair{"pinned_bw", c.h2d_pinned_bw}, std::pair{"pageable_bw", c.h2d_pageable_bw}})
      if (bw != 0 && !plausible_bandwidth().contains(bw))
        f.fail(fmt::format("{} {} B/s is not a plausible copy bandwidth (expected 0 for not measured, or {})",
                           key, bw, kPlausibleBandwidthText));
  });
};

template <class Io, MappedAs<Calibration> C>
void op_fields(Io& io, C& c) {
  if (io.present(true, {"op_models"}))
    io.list("op_models", c.op_models, [&](auto& oio, auto& o) { op_model_fields(oio, o, c); });
  if (io.present(true, {"links"})) io.list("links", c.links, kLinkFields);
  if (io.present(true, {"loaders"}))
    io.list("loaders", c.loaders, [&](auto& lio, auto& l) { loader_fields(lio, l, c); });
  if (io.present(true, {"h2d"})) io.object("h2d", c, kH2dFields);
}
}  // namespace

void calibration_op_fields(JsonOut& io, const Calibration& c) {
  op_fields(io, c);
}
void calibration_op_fields(JsonIn& io, Calibration& c) {
  op_fields(io, c);
}

}  // namespace vitsim::detail
