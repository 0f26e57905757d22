// The <prop>s of a GPU host, a node and a link, read by their rows of the platform-property table
// (core/platform/platform_props.hpp): each row gives the unit, the range a present value must lie in and the
// default; the messages are the reader's own (docs/platforms.md).
#include <fmt/format.h>

#include "platform/platform_read.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/model/energy.hpp"
#include "vitsim/core/platform/figure_range.hpp"
#include "vitsim/core/platform/platform_props.hpp"
#include "vitsim/core/platform/platform_writer.hpp"

namespace vitsim::platform_read {

namespace {

// Reads a node's or GPU's <prop>s by their rows of the property table (core/platform/platform_props.hpp):
// each row gives the unit, the range a present value must lie in and the default.
struct PropReader {
  const Props& props;
  const Origin& where;
  const std::string* get(const std::string& key) const {
    auto it = props.find(key);
    return it == props.end() ? nullptr : &it->second.first;
  }
  const std::string* get(const PlatformProp& p) const { return get(std::string(p.key)); }
  Origin origin(const std::string& key) const {
    auto it = props.find(key);
    return it == props.end() ? where : it->second.second;
  }
  // A figure with its unit, range-checked where it is read (bandwidths > 0: 0 would mean "unlimited" to
  // SimGrid and "absent" to vitsim, so it is neither).
  double quantity(const PlatformProp& p, double def) const {
    const std::string key(p.key);
    const auto* v = get(key);
    if (!v) {
      if (p.required)
        throw Error(where, fmt::format("GPU host lacks property '{}' ({})", key, units::kind_name(p.unit)));
      return def;
    }
    try {
      const double x = units::parse(*v, p.unit, p.range);
      check_prop_plausible(p, x);
      return x;
    } catch (const Error& e) {
      throw Error(origin(key), fmt::format("property {}: {}", key, e.what()));
    }
  }
  double quantity(const PlatformProp& p) const { return quantity(p, p.default_value); }
  double number(const PlatformProp& p, double def) const {
    const std::string key(p.key);
    const auto* v = get(key);
    if (!v) {
      if (p.required)
        throw Error(where, fmt::format("GPU host lacks property '{}' (a number {})", key, p.range.str()));
      return def;
    }
    double x = 0;
    try {
      x = units::parse_number(*v, p.range);
    } catch (const Error&) {
      const std::string range = p.range.str();
      throw Error(origin(key), fmt::format("property {}: '{}' is not a number {}{}", key, echo(*v),
                                           range.find("..") != std::string::npos ? "in " : "", range));
    }
    try {
      check_prop_plausible(p, x);
    } catch (const Error& e) {
      throw Error(origin(key), fmt::format("property {}: {}", key, e.what()));
    }
    return x;
  }
  double number(const PlatformProp& p) const { return number(p, p.default_value); }
  int integer(const PlatformProp& p) const {
    const std::string key(p.key);
    const auto* v = get(key);
    if (!v) return static_cast<int>(p.default_value);
    try {
      return static_cast<int>(units::parse_integer(*v, p.int_low(), p.int_high()));
    } catch (const Error&) {
      throw Error(origin(key), fmt::format("property {}: '{}' is not an integer in {} .. {}", key, echo(*v),
                                           p.int_low(), p.int_high()));
    }
  }
};

const PlatformProp& prop(const char* key) {
  return platform_prop(key);
}

// "MxN": two positive integers in the row's range.
void read_tile(const PropReader& r, GpuFacts& g) {
  const PlatformProp& p = prop("gpu_gemm_tile");
  const auto* tile = r.get(p);
  if (!tile) return;
  const auto x = tile->find('x');
  auto whole = [&](const std::string& t, int& out) {
    if (t.find_first_not_of("0123456789") != std::string::npos) return false;  // no sign, no spaces
    try {
      out = static_cast<int>(units::parse_integer(t, p.int_low(), p.int_high()));  // core's one strict reader
    } catch (const Error&) {
      return false;
    }
    return true;
  };
  if (x == std::string::npos || !whole(tile->substr(0, x), g.tile_m) || !whole(tile->substr(x + 1), g.tile_n))
    throw Error(
        r.origin("gpu_gemm_tile"),
        fmt::format("property gpu_gemm_tile: '{}' is not MxN with two positive integers, e.g. 128x128",
                    echo(*tile)));
}

// Power (core/model/energy.hpp): both figures or neither; idle not above busy.
void read_power(const PropReader& r, GpuFacts& g) {
  const auto* busy = r.get("gpu_power_busy");
  const auto* idle = r.get("gpu_power_idle");
  auto power = [&](const char* key, const std::string& v) {
    try {
      return parse_power(v);
    } catch (const Error& e) {
      throw Error(r.origin(key), fmt::format("property {}: {}", key, e.what()));
    }
  };
  if (busy) g.power_busy_w = power("gpu_power_busy", *busy);
  if (idle) g.power_idle_w = power("gpu_power_idle", *idle);
  if (busy && !idle)
    throw Error(r.origin("gpu_power_busy"),
                "property gpu_power_busy without gpu_power_idle: state both (watts) or neither");
  if (idle && !busy)
    throw Error(r.origin("gpu_power_idle"),
                "property gpu_power_idle without gpu_power_busy: state both (watts) or neither");
  if (busy && g.power_idle_w > g.power_busy_w)
    throw Error(
        r.origin("gpu_power_idle"),
        fmt::format("property gpu_power_idle: {} is above gpu_power_busy {}", echo(*idle), echo(*busy)));
}

// "pcie<gen>_x<lanes>" (the catalogue's host links: "pcie4_x16"): a generation 1 to 6 (NCCL rates each:
// src/graph/xml.cc kvDictPciGen) and a width of 1 to 32 lanes, a power of two; false otherwise.
bool parse_pcie_link(const std::string& text, int& gen, int& lanes) {
  const auto x = text.find("_x");
  if (text.rfind("pcie", 0) != 0 || x == std::string::npos) return false;
  try {
    gen = static_cast<int>(units::parse_integer(text.substr(4, x - 4), 1, 6));
    lanes = static_cast<int>(units::parse_integer(text.substr(x + 2), 1, 32));
  } catch (const Error&) {
    return false;
  }
  return (lanes & (lanes - 1)) == 0;
}

// NCCL's view of the GPU (GpuFacts::arch, link, link_bw, pcie_*): each stated property checked, each
// unstated one taken from gpu_model's catalogue entry where the catalogue has the GPU.
void read_nccl_view(const PropReader& r, GpuFacts& g) {
  const Catalogue& cat = builtin_catalogue();
  const CatalogueGpu* c = cat.find_gpu(g.model);
  if (const auto* arch = r.get("gpu_arch")) {
    if (!cat.archs.count(*arch)) {
      std::string known;
      for (const auto& [name, a] : cat.archs) known += (known.empty() ? "" : ", ") + name;
      throw Error(r.origin("gpu_arch"),
                  fmt::format("property gpu_arch: unknown architecture '{}'; known: {}", echo(*arch), known));
    }
    g.arch = *arch;
  } else if (c) {
    g.arch = c->arch;
  }
  if (const auto* link = r.get("gpu_link")) {
    if (*link != "none" && *link != "nvlink" && *link != "nvswitch")
      throw Error(r.origin("gpu_link"), fmt::format("property gpu_link: '{}' is not one of: {}", echo(*link),
                                                    prop("gpu_link").choices));
    g.link = *link;
  } else if (c) {
    g.link = catalogue_gpu_link_kind(*c);
  }
  if (r.get("gpu_link_bw"))
    g.link_bw = r.quantity(prop("gpu_link_bw"));
  else if (c && !c->gpu_link_bw.empty())
    g.link_bw = units::parse(c->gpu_link_bw, units::Kind::Bandwidth);
  if (!g.link.empty() && g.link != "none" && !(g.link_bw > 0))
    throw Error(
        r.origin("gpu_link"),
        fmt::format("property gpu_link {} needs gpu_link_bw, the GPU's NVLink bandwidth per direction",
                    g.link));
  const auto* host = r.get("gpu_host_link");
  const std::string host_link = host ? *host : c ? c->host_link : "";
  if (!host_link.empty() && !parse_pcie_link(host_link, g.pcie_gen, g.pcie_lanes))
    throw Error(
        r.origin("gpu_host_link"),
        fmt::format("property gpu_host_link: '{}' is not pcie<generation>_x<lanes> (generation 1 to 6, "
                    "lanes a power of two up to 32), e.g. pcie4_x16",
                    echo(host_link)));
}

}  // namespace

GpuFacts gpu_facts(const Props& p, const Origin& where) {
  PropReader r{p, where};
  GpuFacts g;
  const auto* model = r.get("gpu_model");
  g.model = model ? *model : "";
  g.flops_fp32 = r.quantity(prop("gpu_flops_fp32"));
  g.flops_fp16 = r.quantity(prop("gpu_flops_fp16"), g.flops_fp32);
  g.flops_bf16 = r.quantity(prop("gpu_flops_bf16"), g.flops_fp16);
  g.mem_bw = r.quantity(prop("gpu_mem_bw"));
  g.mem_bytes = r.quantity(prop("gpu_mem"));
  // One of gpu_gemm_efficiency (the compute model's) and gpu_efficiency (legacy, one figure per step) is
  // required; each defaults to the other.
  const bool has_gemm = r.get("gpu_gemm_efficiency") != nullptr;
  const bool has_legacy = r.get("gpu_efficiency") != nullptr;
  if (!has_gemm && !has_legacy)
    throw Error(where,
                "GPU host lacks property 'gpu_gemm_efficiency' (or the legacy 'gpu_efficiency'), a number "
                "in (0, 1]: the fraction of peak a large GEMM reaches");
  if (has_gemm) g.gemm_efficiency = r.number(prop("gpu_gemm_efficiency"));
  if (has_legacy) g.efficiency = r.number(prop("gpu_efficiency"));
  if (!has_gemm) g.gemm_efficiency = g.efficiency;
  if (!has_legacy) g.efficiency = g.gemm_efficiency;
  g.attn_efficiency = r.number(prop("gpu_attn_efficiency"), g.gemm_efficiency);
  g.mem_efficiency = r.number(prop("gpu_mem_efficiency"));
  g.gemm_k_half = r.number(prop("gpu_gemm_k_half"));
  g.sm_count = r.integer(prop("gpu_sm_count"));
  read_tile(r, g);
  g.kernel_overhead = r.quantity(prop("gpu_kernel_overhead"));
  g.sync_overhead = r.quantity(prop("gpu_sync_overhead"));
  g.host_op_overhead = r.quantity(prop("host_op_overhead"));
  g.reserved_bytes = r.quantity(prop("gpu_reserved"));
  g.step_cv = r.number(prop("gpu_step_cv"));
  read_power(r, g);
  if (const auto* kind = r.get("device_kind")) {
    if (*kind == "gpu")
      g.async = true;
    else if (*kind == "cpu")
      g.async = false;
    else
      throw Error(r.origin("device_kind"), fmt::format("property device_kind: '{}' is not one of: {}",
                                                       echo(*kind), prop("device_kind").choices));
  }
  read_nccl_view(r, g);
  return g;
}

LinkFacts link_facts(const Props& p, const Origin& where, std::string id, std::string what, Transport t,
                     double line, double lat, bool split_duplex) {
  PropReader r{p, where};
  LinkFacts l;
  l.id = std::move(id);
  l.what = std::move(what);
  l.split_duplex = split_duplex;
  l.transport = t;
  l.bandwidth = line;
  l.latency = lat;
  l.origin = where;
  // Settings are named per transport (tcp_mtu, ib_mtu, ...), so a zone can state both and a what-if that
  // switches the transport picks the matching ones.
  if (t == Transport::Tcp) l.mtu = r.integer(prop("tcp_mtu"));
  if (t == Transport::Ib) l.mtu = r.integer(prop("ib_mtu"));
  if (t == Transport::Efa) l.mtu = r.integer(prop("efa_mtu"));
  if (t == Transport::Tcpx || t == Transport::Tcpxo) l.mtu = r.integer(prop("tcpx_mtu"));
  if (t == Transport::Efa) l.net_latency = r.quantity(prop("efa_net_latency"));
  if (l.what == "NIC" && r.get(prop("nic_count"))) l.nic_count = r.integer(prop("nic_count"));
  l.socket_nthreads = r.integer(prop("nccl_socket_nthreads"));
  l.nsocks_perthread = r.integer(prop("nccl_nsocks_perthread"));
  if (l.socket_nthreads * l.nsocks_perthread > 64)
    throw Error(
        r.origin("nccl_nsocks_perthread"),
        fmt::format("nccl_socket_nthreads x nccl_nsocks_perthread = {} x {} exceeds NCCL's 64 sockets",
                    l.socket_nthreads, l.nsocks_perthread));
  l.socket_bw = r.quantity(prop("socket_bw"));
  l.staging_bw = r.quantity(prop("staging_bw"));
  const PlatformProp& lat_prop = prop(t == Transport::Ib || t == Transport::Efa ? "ib_stack_latency"
                                      : t == Transport::Tcp                     ? "tcp_stack_latency"
                                                                                : "tcpx_stack_latency");
  if ((t == Transport::Tcp || t == Transport::Ib || is_cloud_transport(t)) && r.get(lat_prop))
    l.stack_latency = r.quantity(lat_prop);
  if (!(line > 0))
    throw Error(where, fmt::format("link '{}' with a transport needs a positive bandwidth", l.id));
  return l;
}

void figure_ranges(const Props& own, const Props& in_effect, const Origin& where, const std::string& element,
                   std::vector<FigureRange>& out) {
  for (const auto& [key, stated] : own) {
    const std::string_view base = range_base_key(key);
    if (base.empty()) continue;
    const PlatformProp* p = find_platform_prop(base);
    if (!p)
      throw Error(stated.second, fmt::format("property {}: '{}' is not a property vitsim reads "
                                             "(docs/platform-properties.md)",
                                             key, echo(base)));
    PropReader r{in_effect, where};
    double value = p->default_value;
    const bool figure =
        p->type == PropType::Quantity || p->type == PropType::Number || p->type == PropType::Integer;
    if (figure && r.get(*p)) {
      value = p->type == PropType::Quantity  ? r.quantity(*p)
              : p->type == PropType::Integer ? r.integer(*p)
                                             : r.number(*p);
    } else if (figure && (p->required || p->default_text.empty() || p->default_text.front() == '=' ||
                          p->default_text.front() == '(')) {
      throw Error(stated.second, fmt::format("property {}: {} is not stated here ({}); state the value "
                                             "beside its range",
                                             key, p->key, element));
    }
    FigureRange fr = parse_figure_range(*p, stated.first, value, stated.second);
    fr.element = element;
    out.push_back(std::move(fr));
  }
}

void node_facts(NodeFacts& n, const Props& p) {
  PropReader r{p, n.origin};
  n.cpu_cores = r.integer(prop("cpu_cores"));
  // Absent = not modelled; a stated bandwidth must be > 0 (0 is not "absent", it is a loader that never
  // delivers).
  n.loader_bw = r.quantity(prop("loader_bw"));
  n.loader_image_overhead = r.quantity(prop("loader_image_overhead"));
  n.h2d_pageable_bw = r.quantity(prop("h2d_pageable_bw"));
}

}  // namespace vitsim::platform_read
