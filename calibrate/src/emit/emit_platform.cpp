// `vitsim calibrate --emit-platform`: the machines measured as a PlatformSpec, written by core's one writer
// of the platform format (core/platform/platform_writer.hpp). No Torch, no MPI: the tests build it alone.
//
// Each node's devices of one type are a node of the spec (one <cluster>): their lanes carry the fitted ring
// edge (bandwidth B, latency a/2 each way, so a device-to-device route has the fitted latency a), the
// backbone B with no latency (FATPIPE), the loopback the measured host-to-device copy. Several clusters are
// joined by NIC links of the fitted inter-node edge (latency a/2 per end) in a non-blocking star, one
// zoneRoute per pair.
#include <fmt/format.h>

#include <algorithm>

#include "vitsim/calibrate/calibrate.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/platform/figure_range.hpp"
#include "vitsim/core/platform/platform_props.hpp"
#include "vitsim/core/platform/platform_writer.hpp"

namespace vitsim::calibrate {
namespace {
// Quantities with their units, as SimGrid and core/units read them; 6 significant digits.
std::string bw(double v) {
  return fmt::format("{:.6g}MBps", v / 1e6);
}
std::string lat(double v) {
  return fmt::format("{:.6g}us", v * 1e6);
}
std::string flops(double v) {
  return fmt::format("{:.6g}Gf", v / 1e9);
}
std::string bytes(double v) {
  return fmt::format("{:.6g}MiB", v / (1024.0 * 1024.0));
}

// A property (core/platform/platform_props.hpp) with its value in SI units, written in its row's unit.
std::pair<std::string, std::string> prop(const char* key, double si) {
  const PlatformProp& p = platform_prop(key);
  std::string text;
  if (p.type == PropType::Integer) {
    text = std::to_string(static_cast<long long>(si));
  } else if (p.type != PropType::Quantity) {
    text = fmt::format("{:g}", si);
  } else {
    switch (p.unit) {
      case units::Kind::Bandwidth:
        text = bw(si);
        break;
      case units::Kind::Time:
        text = lat(si);
        break;
      case units::Kind::Flops:
        text = flops(si);
        break;
      case units::Kind::Bytes:
        text = bytes(si);
        break;
    }
  }
  return {std::string(p.key), text};
}
}  // namespace

PlatformSpec calibrated_platform_spec(const PlatformText& p) {
  if (p.nodes.empty()) throw Error("platform: no node to write");
  PlatformSpec spec;
  spec.id = p.name;
  spec.generated_by = "Written by `vitsim calibrate --emit-platform` (core/platform/platform_writer.hpp).";
  std::string sketch = fmt::format(
      "  {}: written by `vitsim calibrate --emit-platform` from measurements on these machines.\n\n", p.name);
  for (const auto& n : p.nodes) {
    if (n.devices.empty()) throw Error(fmt::format("platform: node {} has no device", n.id));
    if (!(n.link_bw > 0) || !(n.h2d_bw > 0))
      throw Error(fmt::format("platform: node {} needs a positive link and host-to-device bandwidth", n.id));
    // Consecutive devices of one type are one cluster; a node with several types has one per type.
    std::vector<std::vector<const PlatformDevice*>> runs;
    for (const auto& d : n.devices) {
      if (runs.empty() || runs.back().front()->gpu_model != d.gpu_model) runs.emplace_back();
      runs.back().push_back(&d);
    }
    for (size_t r = 0; r < runs.size(); ++r) {
      const PlatformDevice& d = *runs[r].front();
      NodeSpec node;
      node.id = runs.size() == 1 ? n.id : fmt::format("{}-{}", n.id, r);
      node.gpus = static_cast<int>(runs[r].size());
      node.gpu_type = node.id;  // the figures are this cluster's own (each host measured its own rate)
      GpuTypeSpec t;
      t.name = node.id;
      t.props = {{"gpu_model", d.gpu_model},
                 prop("gpu_flops_fp32", d.flops),
                 prop("gpu_mem_bw", d.mem_bw),
                 prop("gpu_mem", d.mem_bytes),
                 prop("gpu_efficiency", d.efficiency)};
      if (d.cpu) t.props.emplace_back("device_kind", "cpu");
      // A measured figure's spread (core/platform/figure_range.hpp), checked against the value as written.
      // The value as written (6 digits) may round past an end the median sat on: the range holds it.
      if (d.flops_low > 0) {
        const double v = units::parse(t.props[1].second, units::Kind::Flops);
        t.props.push_back(range_prop("gpu_flops_fp32", v, std::min(v, d.flops_low), std::max(v, d.flops_high),
                                     d.flops_why));
      }
      t.pcie = {bw(n.link_bw), lat(n.link_lat / 2), bw(n.h2d_bw), "0us"};
      node.pcie = t.pcie;
      spec.gpu_types[t.name] = std::move(t);
      node.fabric.bw = bw(n.link_bw);  // kind "": the backbone as written
      node.fabric.lat = "0us";
      node.nic.speed = p.nic_bw > 0 ? bw(p.nic_bw) : "";
      node.nic.lat = lat(p.nic_lat / 2);
      node.props = {prop("cpu_cores", n.cpu_cores), prop("h2d_pageable_bw", n.h2d_bw)};
      if (n.h2d_bw_low > 0) {
        const double v = units::parse(node.props[1].second, units::Kind::Bandwidth);
        node.props.push_back(range_prop("h2d_pageable_bw", v, std::min(v, n.h2d_bw_low),
                                        std::max(v, n.h2d_bw_high), n.h2d_why));
      }
      if (n.loader_image_overhead > 0)
        node.props.push_back(prop("loader_image_overhead", n.loader_image_overhead));
      sketch += fmt::format("     +---- {} ({} device{} of type {}) ----+\n     |  ", node.id, node.gpus,
                            node.gpus == 1 ? "" : "s", d.gpu_model);
      for (int i = 0; i < node.gpus; ++i) sketch += fmt::format("{}{}-gpu{}", i ? " <=> " : "", node.id, i);
      sketch += "\n     +------------------------------------------+\n";
      spec.nodes.push_back(std::move(node));
    }
  }
  if (spec.nodes.size() > 1) {
    if (!(p.nic_bw > 0)) throw Error("platform: several clusters need a positive NIC bandwidth");
    sketch += "     (clusters joined pairwise through their NIC links)\n";
  }
  spec.comment = sketch + "\n" + p.provenance;
  return spec;
}

std::string calibrated_platform_xml(const PlatformText& p) {
  return write_platform_xml(calibrated_platform_spec(p));
}

}  // namespace vitsim::calibrate
