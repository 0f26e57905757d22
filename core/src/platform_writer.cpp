#include "vitsim/core/platform_writer.hpp"
#include "vitsim/core/suggest.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "vitsim/core/energy.hpp"
#include "vitsim/core/platform_flat.hpp"
#include "vitsim/core/transport.hpp"
#include "vitsim/core/units.hpp"

namespace vitsim {

using ojson = nlohmann::ordered_json;

namespace {

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The closest of `names` (canonical) whose own name or an alias is near `typed`; empty when none is close.
// Aliases and normalised names are the catalogue's own; the distance is core/suggest's edit_distance.
std::string closest(const std::string& typed, const std::vector<std::pair<std::string, std::vector<std::string>>>& names) {
  const std::string t = normalise_name(typed);
  std::string best;
  size_t best_d = std::string::npos;
  for (const auto& [name, aliases] : names) {
    std::vector<std::string> all = aliases;
    all.push_back(name);
    for (const auto& a : all) {
      const std::string n = normalise_name(a);
      size_t d = edit_distance(t, n);
      // A typed prefix of a name ("h100" of "h100sxm") is close whatever its length.
      if (!t.empty() && n.rfind(t, 0) == 0) d = std::min<size_t>(d, 1);
      if (d < best_d) best_d = d, best = name;
    }
  }
  return best_d <= std::max<size_t>(2, t.size() / 3) ? best : std::string();
}

std::string xml_attr(const std::string& v) {
  std::string out = "\"";
  for (char c : v) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out + "\"";
}

std::string props_xml(const Props& props, const std::string& indent) {
  std::string out;
  for (const auto& [k, v] : props) out += indent + "<prop id=" + xml_attr(k) + " value=" + xml_attr(v) + "/>\n";
  return out;
}

// Sets `key` in place when present, else appends it.
void set_prop(Props& props, const std::string& key, const std::string& value) {
  for (auto& [k, v] : props)
    if (k == key) {
      v = value;
      return;
    }
  props.emplace_back(key, value);
}

const std::string* find_prop(const Props& props, const std::string& key) {
  for (const auto& [k, v] : props)
    if (k == key) return &v;
  return nullptr;
}

// Bandwidth with its unit, written as a decimal GBps figure ("400GBps", "3.125GBps").
std::string gbps_text(double bytes_per_s) { return fmt::format("{:g}GBps", bytes_per_s / 1e9); }

// ------------------------------------------------------------------------------------- JSON helpers
struct Json {
  const std::string& file;
  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw Error(Origin{file, 0}, where.empty() ? what : where + ": " + what);
  }
  // The file's JSON, its key order kept; malformed JSON fails naming the file.
  ojson parse(const std::string& text) const {
    try {
      return ojson::parse(text);
    } catch (const nlohmann::json::exception& e) {
      fail("", e.what());
    }
  }
  void keys(const ojson& j, const std::string& where, const std::vector<std::string>& valid) const {
    if (!j.is_object()) fail(where, "expected an object");
    for (auto it = j.begin(); it != j.end(); ++it)
      if (std::find(valid.begin(), valid.end(), it.key()) == valid.end())
        fail(where.empty() ? it.key() : where + "." + it.key(), fmt::format("unknown key; valid: {}", join(valid)));
  }
  // A string, or a number written back as its shortest text (0.35 -> "0.35", 32 -> "32").
  std::string text(const ojson& j, const std::string& where) const {
    if (j.is_string()) return j.get<std::string>();
    if (j.is_number_integer()) return std::to_string(j.get<long long>());
    if (j.is_number()) return fmt::format("{}", j.get<double>());
    fail(where, "expected a string or a number");
  }
  std::string quantity(const ojson& j, const std::string& where, units::Kind kind) const {
    std::string t = text(j, where);
    double v = 0;
    try {
      v = units::parse(t, kind);
    } catch (const Error& e) {
      fail(where, e.what());
    }
    // Times may be zero; bandwidths, rates and sizes must be positive.
    if (!std::isfinite(v) || v < 0 || (v == 0 && kind != units::Kind::Time))
      fail(where, fmt::format("'{}' must be {}", t, kind == units::Kind::Time ? "non-negative" : "positive"));
    return t;
  }
  int integer(const ojson& j, const std::string& where, int lo, int hi) const {
    if (!j.is_number_integer()) fail(where, "expected an integer");
    const long long v = j.get<long long>();
    if (v < lo || v > hi) fail(where, fmt::format("{} is out of range [{}, {}]", v, lo, hi));
    return static_cast<int>(v);
  }
  Props props(const ojson& j, const std::string& where) const {
    if (!j.is_object()) fail(where, "expected an object of property: value");
    Props out;
    for (auto it = j.begin(); it != j.end(); ++it) out.emplace_back(it.key(), text(it.value(), where + "." + it.key()));
    return out;
  }
};

std::string require_source(const Json& js, const ojson& j, const std::string& where) {
  if (!j.contains("source") || !j["source"].is_string() || j["source"].get<std::string>().size() < 8)
    js.fail(where, "has no source (every figure needs one: datasheet, public measurement or ASSUMPTION)");
  return j["source"].get<std::string>();
}

const std::vector<std::string>& precisions() {
  static const std::vector<std::string> p{"fp32", "tf32", "fp16", "bf16", "fp8"};
  return p;
}

}  // namespace

std::string normalise_name(const std::string& name) {
  std::string out;
  for (char c : name)
    if (c != '-' && c != '_' && c != ' ' && c != '.') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// ----------------------------------------------------------------------------------------- catalogue
namespace {
Catalogue parse_catalogue_json(const std::string& json_text, const std::string& origin);
}

// A wrong JSON type (a number where a string belongs) is nlohmann's exception: one line naming the file.
Catalogue parse_catalogue(const std::string& json_text, const std::string& origin) {
  try {
    return parse_catalogue_json(json_text, origin);
  } catch (const nlohmann::json::exception& e) {
    throw Error(Origin{origin, 0}, e.what());
  }
}

namespace {

void parse_catalogue_defaults(const Json& js, const ojson& j, Catalogue& cat) {
  for (auto it = j.at("defaults").begin(); it != j.at("defaults").end(); ++it) {
    const std::string where = "defaults." + it.key();
    js.keys(it.value(), where, {"value", "source"});
    cat.defaults.push_back({it.key(), js.text(it.value().at("value"), where), require_source(js, it.value(), where)});
  }
}

void parse_catalogue_archs(const Json& js, const ojson& j, Catalogue& cat) {
  for (auto it = j.at("architectures").begin(); it != j.at("architectures").end(); ++it) {
    const std::string where = "architectures." + it.key();
    js.keys(it.value(), where, {"gemm_efficiency", "mem_efficiency", "source"});
    CatalogueArch a;
    a.name = it.key();
    a.source = require_source(js, it.value(), where);
    for (auto e = it.value().at("gemm_efficiency").begin(); e != it.value().at("gemm_efficiency").end(); ++e) {
      if (std::find(precisions().begin(), precisions().end(), e.key()) == precisions().end())
        js.fail(where + ".gemm_efficiency." + e.key(), "unknown precision; valid: " + join(precisions()));
      const double v = e.value().get<double>();
      if (!(v > 0 && v <= 1)) js.fail(where + ".gemm_efficiency." + e.key(), "must be in (0, 1]");
      a.gemm_efficiency[e.key()] = v;
    }
    if (!a.gemm_efficiency.count("fp32")) js.fail(where, "gemm_efficiency needs an fp32 figure");
    a.mem_efficiency = it.value().at("mem_efficiency").get<double>();
    if (!(a.mem_efficiency > 0 && a.mem_efficiency <= 1)) js.fail(where + ".mem_efficiency", "must be in (0, 1]");
    cat.archs[a.name] = a;
  }
}

// Names and aliases of one list (GPUs, links), unique once normalised.
class UniqueNames {
 public:
  explicit UniqueNames(const Json& js) : js_(js) {}
  void add(const std::string& name, const std::vector<std::string>& aliases, const std::string& where) {
    one(name, where + ".name");
    for (const auto& a : aliases) one(a, where + ".aliases");
  }

 private:
  void one(const std::string& name, const std::string& where) {
    if (!seen_.insert(normalise_name(name)).second) js_.fail(where, fmt::format("name '{}' is not unique", name));
  }
  const Json& js_;
  std::set<std::string> seen_;
};

CatalogueGpu parse_catalogue_gpu(const Json& js, const ojson& e, const std::string& where, const Catalogue& cat) {
  js.keys(e, where, {"name", "model", "aliases", "vendor", "arch", "flops", "memory_sold", "memory", "mem_bw",
                     "sm_count", "tdp", "host_link", "gpu_link", "note", "source"});
  CatalogueGpu g;
  g.name = e.at("name").get<std::string>();
  g.model = e.at("model").get<std::string>();
  g.aliases = e.value("aliases", std::vector<std::string>{});
  g.vendor = e.at("vendor").get<std::string>();
  g.arch = e.at("arch").get<std::string>();
  if (!cat.archs.count(g.arch)) js.fail(where + ".arch", fmt::format("unknown architecture '{}'", g.arch));
  js.keys(e.at("flops"), where + ".flops", precisions());
  for (auto f = e.at("flops").begin(); f != e.at("flops").end(); ++f)
    if (!f.value().is_null()) g.flops[f.key()] = js.quantity(f.value(), where + ".flops." + f.key(), units::Kind::Flops);
  for (const char* p : {"fp32", "fp16", "bf16"})
    if (!g.flops.count(p)) js.fail(where + ".flops", fmt::format("needs {} (the rate it runs at, fp32's if no fast path)", p));
  g.memory_sold = js.quantity(e.at("memory_sold"), where + ".memory_sold", units::Kind::Bytes);
  g.memory = js.quantity(e.at("memory"), where + ".memory", units::Kind::Bytes);
  g.mem_bw = js.quantity(e.at("mem_bw"), where + ".mem_bw", units::Kind::Bandwidth);
  g.sm_count = js.integer(e.at("sm_count"), where + ".sm_count", 1, 100000);
  g.tdp = e.at("tdp").get<std::string>();
  try {
    parse_power(g.tdp);
  } catch (const Error&) {
    js.fail(where + ".tdp", fmt::format("'{}' is not a power in watts (\"700W\")", g.tdp));
  }
  g.host_link = e.at("host_link").get<std::string>();
  if (!e.at("gpu_link").is_null()) {
    js.keys(e.at("gpu_link"), where + ".gpu_link", {"name", "bw"});
    g.gpu_link = e.at("gpu_link").at("name").get<std::string>();
    g.gpu_link_bw = js.quantity(e.at("gpu_link").at("bw"), where + ".gpu_link.bw", units::Kind::Bandwidth);
  }
  g.note = e.value("note", "");
  g.source = require_source(js, e, where);
  return g;
}

CatalogueLink parse_catalogue_link(const Json& js, const ojson& e, const std::string& where) {
  js.keys(e, where, {"name", "aliases", "kind", "line_rate", "effective", "transport", "source"});
  CatalogueLink l;
  l.name = e.at("name").get<std::string>();
  l.aliases = e.value("aliases", std::vector<std::string>{});
  l.kind = e.at("kind").get<std::string>();
  l.line_rate = e.at("line_rate").get<std::string>();
  l.effective = e.at("effective").get<std::string>();
  // Fabrics whose rate is the GPU's (NVSwitch) and RoCE (a transport over any Ethernet speed) say so in words.
  if (l.kind != "transport" && l.line_rate.rfind("per ", 0) != 0) {
    js.quantity(l.line_rate, where + ".line_rate", units::Kind::Bandwidth);
    js.quantity(l.effective, where + ".effective", units::Kind::Bandwidth);
  }
  l.transport = e.at("transport").get<std::string>();
  parse_transport(l.transport, Origin{js.file, 0}, where + ".transport");
  l.source = require_source(js, e, where);
  return l;
}

// The defaults the writer reads must be there, and the power fractions numbers in (0, 1] (core's strict
// reader: "0.5x" is not 0.5).
void check_catalogue_defaults(const Json& js, const Catalogue& cat) {
  for (const char* d : {"gpu_gemm_tile", "gpu_kernel_overhead", "gpu_sync_overhead", "host_op_overhead", "gpu_reserved",
                        "pcie_lat", "h2d_lat", "gpu_busy_power_fraction", "gpu_idle_power_fraction"})
    cat.default_entry(d);
  for (const char* d : {"gpu_busy_power_fraction", "gpu_idle_power_fraction"}) {
    const std::string& v = cat.default_value(d);
    try {
      units::parse_number(v, units::fraction());
    } catch (const Error&) {
      js.fail(std::string("defaults.") + d, fmt::format("'{}' must be a fraction of the TDP in (0, 1]", echo(v)));
    }
  }
}

Catalogue parse_catalogue_json(const std::string& json_text, const std::string& origin) {
  const Json js{origin};
  const ojson j = js.parse(json_text);
  js.keys(j, "", {"format", "about", "defaults", "architectures", "gpus", "links"});
  if (j.value("format", "") != "vitsim.catalogue/1") js.fail("format", "expected \"vitsim.catalogue/1\"");
  Catalogue cat;
  parse_catalogue_defaults(js, j, cat);
  parse_catalogue_archs(js, j, cat);
  UniqueNames gpu_names(js);
  for (size_t i = 0; i < j.at("gpus").size(); ++i) {
    const ojson& e = j.at("gpus")[i];
    const std::string where = fmt::format("gpus[{}] ({})", i, e.value("name", "?"));
    CatalogueGpu g = parse_catalogue_gpu(js, e, where, cat);
    gpu_names.add(g.name, g.aliases, where);
    cat.gpus.push_back(std::move(g));
  }
  UniqueNames link_names(js);
  for (size_t i = 0; i < j.at("links").size(); ++i) {
    const ojson& e = j.at("links")[i];
    const std::string where = fmt::format("links[{}] ({})", i, e.value("name", "?"));
    CatalogueLink l = parse_catalogue_link(js, e, where);
    link_names.add(l.name, l.aliases, where);
    cat.links.push_back(std::move(l));
  }
  for (const auto& g : cat.gpus) {
    cat.link(g.host_link);
    if (!g.gpu_link.empty()) cat.link(g.gpu_link);
  }
  check_catalogue_defaults(js, cat);
  return cat;
}

// A catalogue entry (a GPU, a link) by its name or an alias as users type them (normalise_name); an unknown
// name is an error that lists the known ones and the nearest.
template <typename Entry>
const Entry& find_entry(const std::vector<Entry>& entries, const std::string& name, const char* what, const char* list_flag) {
  const std::string n = normalise_name(name);
  for (const auto& e : entries) {
    if (normalise_name(e.name) == n) return e;
    for (const auto& a : e.aliases)
      if (normalise_name(a) == n) return e;
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> names;
  std::vector<std::string> known;
  for (const auto& e : entries) names.push_back({e.name, e.aliases}), known.push_back(e.name);
  const std::string near = closest(name, names);
  throw Error(fmt::format("unknown {} '{}'{}; known: {} (vitsim platform {})", what, name,
                          near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near), join(known), list_flag));
}

}  // namespace

const CatalogueGpu& Catalogue::gpu(const std::string& name) const { return find_entry(gpus, name, "GPU", "--list-gpus"); }

const CatalogueLink& Catalogue::link(const std::string& name) const { return find_entry(links, name, "link", "--list-links"); }

const CatalogueArch& Catalogue::arch_of(const CatalogueGpu& g) const { return archs.at(g.arch); }

const CatalogueDefault& Catalogue::default_entry(const std::string& name) const {
  for (const auto& d : defaults)
    if (d.name == name) return d;
  throw Error(fmt::format("catalogue: no default '{}'", name));
}
const std::string& Catalogue::default_value(const std::string& name) const { return default_entry(name).value; }

const Catalogue& builtin_catalogue() {
  static const Catalogue cat = parse_catalogue(builtin_catalogue_text(), "data/catalogue.json (built in)");
  return cat;
}

namespace {
// A GPU's power for the energy model (core/energy.hpp): the catalogue's fraction `which` of its TDP, in watts.
std::string catalogue_power(const Catalogue& cat, const CatalogueGpu& g, const char* which) {
  return fmt::format("{:g}W", units::parse_number(cat.default_value(which), units::fraction()) * parse_power(g.tdp));
}
}  // namespace

std::vector<std::pair<std::string, std::string>> catalogue_gpu_props(const Catalogue& cat, const CatalogueGpu& g,
                                                                      const std::string& precision,
                                                                      std::string* used_precision) {
  const CatalogueArch& a = cat.arch_of(g);
  // Without a measured figure for the precision: bf16 takes fp16's when the chip runs bf16 on the same tensor path
  // (same peak, above fp32's); otherwise, and for fp16, the fp32 figure (the chip runs it at the fp32 rate).
  std::vector<std::string> order{precision};
  auto peak = [&](const char* p) { return units::parse(g.flops.at(p), units::Kind::Flops); };
  if (precision == "bf16" && peak("bf16") == peak("fp16") && peak("bf16") > peak("fp32")) order.push_back("fp16");
  order.push_back("fp32");
  std::string used;
  for (const std::string& p : order)
    if (a.gemm_efficiency.count(p)) {
      used = p;
      break;
    }
  if (used_precision) *used_precision = used;
  return {{"gpu_model", g.model},
          {"gpu_flops_fp32", g.flops.at("fp32")},
          {"gpu_flops_fp16", g.flops.at("fp16")},
          {"gpu_flops_bf16", g.flops.at("bf16")},
          {"gpu_mem_bw", g.mem_bw},
          {"gpu_mem", g.memory},
          {"gpu_sm_count", std::to_string(g.sm_count)},
          {"gpu_gemm_tile", cat.default_value("gpu_gemm_tile")},
          {"gpu_gemm_efficiency", fmt::format("{:.2f}", a.gemm_efficiency.at(used))},
          {"gpu_mem_efficiency", fmt::format("{:.2f}", a.mem_efficiency)},
          {"gpu_kernel_overhead", cat.default_value("gpu_kernel_overhead")},
          {"gpu_sync_overhead", cat.default_value("gpu_sync_overhead")},
          {"host_op_overhead", cat.default_value("host_op_overhead")},
          {"gpu_reserved", cat.default_value("gpu_reserved")},
          {"gpu_power_busy", catalogue_power(cat, g, "gpu_busy_power_fraction")},
          {"gpu_power_idle", catalogue_power(cat, g, "gpu_idle_power_fraction")}};
}

GpuTypeSpec gpu_type_from_catalogue(const Catalogue& cat, const CatalogueGpu& gpu, const std::string& precision) {
  const CatalogueGpu* g = &gpu;
  GpuTypeSpec t;
  t.name = g->name;
  std::string used;
  t.props = catalogue_gpu_props(cat, *g, precision, &used);
  const CatalogueLink& host = cat.link(g->host_link);
  t.pcie = {host.effective, cat.default_value("pcie_lat"), host.effective, cat.default_value("h2d_lat")};
  t.gpu_link_bw = g->gpu_link_bw;
  t.notes.push_back(fmt::format("{} ({} {}): fp32 {}, fp16 {}, bf16 {}{}{}, memory {} ({} as sold), {}, {} {}, "
                                "TDP {}{}: {}",
                                g->name, g->vendor, g->arch, g->flops.at("fp32"), g->flops.at("fp16"), g->flops.at("bf16"),
                                g->flops.count("tf32") ? ", tf32 " + g->flops.at("tf32") : "",
                                g->flops.count("fp8") ? ", fp8 " + g->flops.at("fp8") : "", g->memory, g->memory_sold,
                                g->mem_bw, g->sm_count, g->vendor == "AMD" ? "CUs" : "SMs", g->tdp,
                                g->gpu_link.empty() ? "" : ", " + g->gpu_link + " " + g->gpu_link_bw + " per direction",
                                g->source));
  if (!g->note.empty()) t.notes.push_back("(" + g->note + ")");
  const CatalogueArch& a = cat.arch_of(*g);
  t.notes.push_back(fmt::format("gpu_gemm_efficiency {:.2f} ({}{}), gpu_mem_efficiency {:.2f}: {}", a.gemm_efficiency.at(used),
                                used, used == precision ? "" : ", no " + precision + " figure", a.mem_efficiency, a.source));
  t.notes.push_back(fmt::format("PCIe: {} at {} ({} line): {}", host.name, host.effective, host.line_rate, host.source));
  return t;
}

// --------------------------------------------------------------------------------------- spec parsing
Props nic_transport_props(const std::string& transport) {
  const std::string t = normalise_name(transport);
  if (t == "tcp" || t == "sockets" || t == "socket")
    return {{"transport", "tcp"}, {"tcp_mtu", "1500"}, {"nccl_socket_nthreads", "1"}, {"nccl_nsocks_perthread", "1"},
            {"socket_bw", "2GBps"}, {"tcp_stack_latency", "20us"}};
  if (t == "ib" || t == "infiniband" || t == "roce" || t == "rocev2")
    return {{"transport", "ib"}, {"ib_mtu", "4096"}, {"ib_stack_latency", "1us"}};
  throw Error(fmt::format("unknown NIC transport '{}'; valid: tcp (NCCL sockets), roce, ib", transport));
}

std::string parse_topology_kind(const std::string& name) {
  const std::string t = normalise_name(name);
  if (t == "star" || t == "nonblocking") return "star";
  if (t == "fattree") return "fat-tree";
  if (t == "dragonfly" || t == "torus") return t;
  throw Error(fmt::format("unknown topology '{}'; valid: star (non-blocking), fat-tree (--oversubscription, "
                          "--pod-nodes), torus (--torus-dims), dragonfly (--pod-nodes, --global-links)", name));
}

const CatalogueLink* catalogue_nic(const std::string& speed, const Catalogue& cat) {
  try {
    units::parse(speed, units::Kind::Bandwidth);
    return nullptr;
  } catch (const Error&) {
  }
  const CatalogueLink* l = nullptr;
  try {
    l = &cat.link(speed);
  } catch (const Error& e) {
    throw Error(fmt::format("neither a rate with its unit (\"400Gbps\") nor a catalogue NIC: {}", e.what()));
  }
  if (l->kind != "nic")
    throw Error(fmt::format("'{}' is {} link, not a NIC; NICs: 1gbe ... 400gbe, edr, hdr, ndr, xdr, or a rate (\"400Gbps\")",
                            l->name, l->kind == "intranode" ? "an intranode" : "a " + l->kind));
  return l;
}

namespace {

void parse_pcie(const Json& js, const ojson& j, const std::string& where, PcieSpec& p) {
  js.keys(j, where, {"bw", "lat", "h2d_bw", "h2d_lat"});
  if (j.contains("bw")) p.bw = js.quantity(j["bw"], where + ".bw", units::Kind::Bandwidth);
  if (j.contains("lat")) p.lat = js.quantity(j["lat"], where + ".lat", units::Kind::Time);
  if (j.contains("h2d_bw")) p.h2d_bw = js.quantity(j["h2d_bw"], where + ".h2d_bw", units::Kind::Bandwidth);
  if (j.contains("h2d_lat")) p.h2d_lat = js.quantity(j["h2d_lat"], where + ".h2d_lat", units::Kind::Time);
}

void parse_fabric(const Json& js, const ojson& j, const std::string& where, FabricSpec& f) {
  js.keys(j, where, {"fabric", "bw", "lat", "staging_bw"});
  if (j.contains("fabric")) {
    f.kind = j["fabric"].get<std::string>();
    static const std::vector<std::string> kinds{"pcie_host", "pcie_p2p", "nvlink", "nvswitch", "nvlink_bridge"};
    if (std::find(kinds.begin(), kinds.end(), f.kind) == kinds.end())
      js.fail(where + ".fabric", fmt::format("unknown fabric '{}'; valid: {}", f.kind, join(kinds)));
  }
  if (j.contains("bw")) f.bw = js.quantity(j["bw"], where + ".bw", units::Kind::Bandwidth);
  if (j.contains("lat")) f.lat = js.quantity(j["lat"], where + ".lat", units::Kind::Time);
  if (j.contains("staging_bw")) f.staging_bw = js.quantity(j["staging_bw"], where + ".staging_bw", units::Kind::Bandwidth);
}

void parse_nic(const Json& js, const ojson& j, const std::string& where, NicSpec& n, const Catalogue& cat) {
  js.keys(j, where, {"count", "speed", "lat", "transport", "rail_optimised", "props"});
  if (j.contains("count")) n.count = js.integer(j["count"], where + ".count", 1, 64);
  if (j.contains("speed")) {
    const std::string s = js.text(j["speed"], where + ".speed");
    const CatalogueLink* l = nullptr;
    try {
      l = catalogue_nic(s, cat);
    } catch (const Error& e) {
      js.fail(where + ".speed", fmt::format("'{}': {}", s, e.what()));
    }
    if (!l) {
      n.speed = js.quantity(j["speed"], where + ".speed", units::Kind::Bandwidth);
    } else {
      n.speed = l->line_rate;
      n.transport = l->transport;  // a "transport" key in the same object wins (read below)
    }
  }
  if (j.contains("lat")) n.lat = js.quantity(j["lat"], where + ".lat", units::Kind::Time);
  if (j.contains("transport")) {
    n.transport = j["transport"].get<std::string>();
    try {
      nic_transport_props(n.transport);
    } catch (const Error& e) {
      js.fail(where + ".transport", e.what());
    }
  }
  if (j.contains("rail_optimised")) n.rail_optimised = j["rail_optimised"].get<bool>();
  if (j.contains("props"))
    for (const auto& [k, v] : js.props(j["props"], where + ".props")) set_prop(n.props, k, v);
}

}  // namespace

namespace {
PlatformSpec parse_platform_spec_json(const std::string& json_text, const std::string& path, const Catalogue& cat);
}

PlatformSpec parse_platform_spec(const std::string& json_text, const std::string& path, const Catalogue& cat) {
  try {
    return parse_platform_spec_json(json_text, path, cat);
  } catch (const nlohmann::json::exception& e) {
    throw Error(Origin{path, 0}, e.what());
  }
}

namespace {

// price_per_gpu_hour and price_per_kwh, kept as written in the zone's properties.
void parse_prices(const Json& js, const ojson& j, PlatformSpec& spec) {
  if (j.contains("price_per_gpu_hour")) {
    const std::string p = js.text(j["price_per_gpu_hour"], "price_per_gpu_hour");
    try {
      (void)units::parse_number(p, units::non_negative());
    } catch (const Error&) {
      js.fail("price_per_gpu_hour", fmt::format("'{}' is not a non-negative number (currency units per GPU-hour)", p));
    }
    spec.zone_props.emplace_back("price_per_gpu_hour", p);
  }
  if (j.contains("price_per_kwh")) {
    const std::string p = js.text(j["price_per_kwh"], "price_per_kwh");
    try {
      parse_price_per_kwh(p, "price_per_kwh");
    } catch (const Error& e) {
      js.fail("", e.what());
    }
    spec.zone_props.emplace_back("price_per_kwh", p);
  }
}

// One entry of gpu_types: a catalogue GPU and/or its own props and PCIe figures.
GpuTypeSpec parse_gpu_type(const Json& js, const std::string& name, const ojson& e, const Catalogue& cat) {
  const std::string where = "gpu_types." + name;
  js.keys(e, where, {"catalogue", "efficiency_precision", "props", "pcie"});
  GpuTypeSpec t;
  t.name = name;
  const std::string precision = e.value("efficiency_precision", "bf16");
  if (precision != "fp32" && precision != "fp16" && precision != "bf16")
    js.fail(where + ".efficiency_precision", fmt::format("'{}': valid: fp32, fp16, bf16", precision));
  if (e.contains("catalogue")) {
    const CatalogueGpu* g = nullptr;
    try {
      g = &cat.gpu(e["catalogue"].get<std::string>());
    } catch (const Error& err) {
      js.fail(where + ".catalogue", err.what());
    }
    t = gpu_type_from_catalogue(cat, *g, precision);
    t.name = name;
  }
  if (e.contains("pcie")) parse_pcie(js, e["pcie"], where + ".pcie", t.pcie);
  if (e.contains("props"))
    for (const auto& [k, v] : js.props(e["props"], where + ".props")) set_prop(t.props, k, v);
  if (!find_prop(t.props, "gpu_flops_fp32"))
    js.fail(where, "names no catalogue GPU (\"catalogue\": \"h100-sxm\") and gives no gpu_flops_fp32 in props");
  if (t.pcie.bw.empty() || t.pcie.h2d_bw.empty()) js.fail(where, "needs pcie.bw and pcie.h2d_bw (no catalogue GPU to take them from)");
  if (t.pcie.lat.empty()) t.pcie.lat = cat.default_value("pcie_lat");
  if (t.pcie.h2d_lat.empty()) t.pcie.h2d_lat = cat.default_value("h2d_lat");
  return t;
}

// What every node has unless it says otherwise: "node" props, "intranode" and "nic".
struct NodeDefaults {
  Props props;
  FabricSpec fabric;
  NicSpec nic;
};

NodeDefaults parse_node_defaults(const Json& js, const ojson& j, const Catalogue& cat) {
  NodeDefaults d;
  if (j.contains("node")) {
    js.keys(j["node"], "node", {"cpu_cores", "loader_bw", "loader_image_overhead", "h2d_pageable_bw"});
    const std::map<std::string, units::Kind> kinds{{"loader_bw", units::Kind::Bandwidth},
                                                   {"loader_image_overhead", units::Kind::Time},
                                                   {"h2d_pageable_bw", units::Kind::Bandwidth}};
    for (auto it = j["node"].begin(); it != j["node"].end(); ++it) {
      const std::string where = "node." + it.key();
      if (it.key() == "cpu_cores") d.props.emplace_back(it.key(), std::to_string(js.integer(it.value(), where, 1, 1 << 20)));
      else d.props.emplace_back(it.key(), js.quantity(it.value(), where, kinds.at(it.key())));
    }
  }
  if (j.contains("intranode")) parse_fabric(js, j["intranode"], "intranode", d.fabric);
  if (j.contains("nic")) parse_nic(js, j["nic"], "nic", d.nic, cat);
  return d;
}

void parse_topology(const Json& js, const ojson& j, TopologySpec& topo) {
  if (!j.contains("topology")) return;
  const ojson& t = j["topology"];
  js.keys(t, "topology", {"kind", "oversubscription", "pod_nodes", "uplink_lat", "torus_dims", "global_links"});
  try {
    topo.kind = parse_topology_kind(t.value("kind", "star"));
  } catch (const Error& e) {
    js.fail("topology.kind", e.what());
  }
  if (t.contains("oversubscription")) topo.oversubscription = t["oversubscription"].get<double>();
  if (t.contains("pod_nodes")) topo.pod_nodes = js.integer(t["pod_nodes"], "topology.pod_nodes", 1, 1 << 20);
  if (t.contains("uplink_lat")) topo.uplink_lat = js.quantity(t["uplink_lat"], "topology.uplink_lat", units::Kind::Time);
  if (t.contains("torus_dims")) topo.torus_dims = js.text(t["torus_dims"], "topology.torus_dims");
  if (t.contains("global_links")) topo.global_links = js.integer(t["global_links"], "topology.global_links", 1, 1 << 10);
}

// One node (of "nodes", or one of a node group), the defaults overridden by what it gives.
NodeSpec parse_node(const Json& js, const ojson& n, const std::string& where, const std::string& id, const PlatformSpec& spec,
                    const NodeDefaults& d, const Catalogue& cat) {
  NodeSpec node;
  node.id = id;
  node.gpus = js.integer(n.at("gpus"), where + ".gpus", 1, 1 << 16);
  node.gpu_type = n.at("gpu").get<std::string>();
  auto t = spec.gpu_types.find(node.gpu_type);
  if (t == spec.gpu_types.end()) {
    std::vector<std::string> names;
    for (const auto& [k, v] : spec.gpu_types) names.push_back(k);
    js.fail(where + ".gpu", fmt::format("'{}' is not a gpu_types entry; entries: {}", node.gpu_type, join(names)));
  }
  node.pcie = t->second.pcie;
  if (n.contains("pcie")) parse_pcie(js, n["pcie"], where + ".pcie", node.pcie);
  node.fabric = d.fabric;
  if (n.contains("intranode")) parse_fabric(js, n["intranode"], where + ".intranode", node.fabric);
  node.nic = d.nic;
  if (n.contains("nic")) parse_nic(js, n["nic"], where + ".nic", node.nic, cat);
  node.props = d.props;
  if (n.contains("props"))
    for (const auto& [k, v] : js.props(n["props"], where + ".props")) set_prop(node.props, k, v);
  return node;
}

// "nodes" (each named) and "node_groups" (PREFIX0 .. PREFIX<count-1>, zero-padded).
void parse_nodes(const Json& js, const ojson& j, const NodeDefaults& d, const Catalogue& cat, PlatformSpec& spec) {
  if (j.contains("nodes"))
    for (size_t i = 0; i < j["nodes"].size(); ++i) {
      const std::string where = fmt::format("nodes[{}]", i);
      js.keys(j["nodes"][i], where, {"id", "gpus", "gpu", "pcie", "intranode", "nic", "props"});
      spec.nodes.push_back(parse_node(js, j["nodes"][i], where, j["nodes"][i].at("id").get<std::string>(), spec, d, cat));
    }
  if (j.contains("node_groups"))
    for (size_t i = 0; i < j["node_groups"].size(); ++i) {
      const ojson& g = j["node_groups"][i];
      const std::string where = fmt::format("node_groups[{}]", i);
      js.keys(g, where, {"prefix", "count", "gpus", "gpu", "pcie", "intranode", "nic", "props"});
      const int count = js.integer(g.at("count"), where + ".count", 1, 1 << 20);
      const size_t width = std::to_string(count - 1).size();
      for (int k = 0; k < count; ++k)
        spec.nodes.push_back(
            parse_node(js, g, where, fmt::format("{}{:0{}d}", g.at("prefix").get<std::string>(), k, width), spec, d, cat));
    }
}

PlatformSpec parse_platform_spec_json(const std::string& json_text, const std::string& path, const Catalogue& cat) {
  const Json js{path};
  const ojson j = js.parse(json_text);
  js.keys(j, "", {"id", "comment", "price_per_gpu_hour", "price_per_kwh", "gpu_types", "node", "intranode", "nic", "topology",
                  "zone_props", "nodes", "node_groups"});
  PlatformSpec spec;
  spec.id = j.value("id", "platform");
  spec.comment = j.value("comment", "");
  parse_prices(js, j, spec);
  if (!j.contains("gpu_types") || j["gpu_types"].empty()) js.fail("gpu_types", "missing: name at least one GPU type");
  for (auto it = j["gpu_types"].begin(); it != j["gpu_types"].end(); ++it)
    spec.gpu_types[it.key()] = parse_gpu_type(js, it.key(), it.value(), cat);
  const NodeDefaults defaults = parse_node_defaults(js, j, cat);
  parse_topology(js, j, spec.topology);
  parse_nodes(js, j, defaults, cat, spec);
  if (j.contains("zone_props"))
    for (const auto& [k, v] : js.props(j["zone_props"], "zone_props")) set_prop(spec.zone_props, k, v);
  try {
    check_platform_spec(spec);
  } catch (const Error& e) {
    js.fail("", e.what());
  }
  return spec;
}
}  // namespace

namespace {

std::vector<unsigned long> torus_dims_of(const TopologySpec& topo) {
  try {
    return parse_torus_dims(topo.torus_dims);
  } catch (const Error& e) {
    throw Error(fmt::format("torus dimensions '{}': {} (--torus-dims 4x4x2: nodes per dimension)", topo.torus_dims, e.what()));
  }
}

// The topology's own checks: a fat-tree's pods and oversubscription, a torus's dimensions against the nodes, a
// dragonfly's groups; every topology but the star states the NIC transport per NIC link.
void check_topology(const PlatformSpec& spec) {
  const TopologySpec& topo = spec.topology;
  parse_topology_kind(topo.kind);
  const bool star = topo.kind == "star", fat_tree = topo.kind == "fat-tree", torus = topo.kind == "torus";
  if (!fat_tree && topo.oversubscription != 1)
    throw Error(fmt::format("oversubscription applies to a fat-tree, not a {}", topo.kind));
  if (!torus && !topo.torus_dims.empty()) throw Error(fmt::format("torus dimensions apply to a torus, not a {}", topo.kind));
  if (topo.kind != "dragonfly" && topo.global_links != 1)
    throw Error(fmt::format("global links apply to a dragonfly, not a {}", topo.kind));
  if (fat_tree) {
    if (!(topo.oversubscription >= 1) || !std::isfinite(topo.oversubscription))
      throw Error(fmt::format("fat-tree oversubscription {} must be at least 1 (1 = non-blocking, 4 = 4:1)", topo.oversubscription));
    if (topo.pod_nodes < 1) throw Error("fat-tree needs nodes per pod (--pod-nodes N, at least 1)");
  }
  if (torus) {
    if (topo.pod_nodes != 0) throw Error("a torus has no pods (--pod-nodes applies to a fat-tree or a dragonfly)");
    if (topo.torus_dims.empty()) throw Error("a torus needs its dimensions (--torus-dims 4x4x2: nodes per dimension)");
    size_t cells = 1;
    for (unsigned long d : torus_dims_of(topo)) cells *= d;
    if (cells != spec.nodes.size())
      throw Error(fmt::format("torus dimensions {} hold {} nodes, the platform has {}", topo.torus_dims, cells, spec.nodes.size()));
  }
  if (topo.kind == "dragonfly") {
    if (topo.pod_nodes < 1) throw Error("a dragonfly needs nodes per group (--pod-nodes N, at least 1)");
    if (spec.nodes.size() <= static_cast<size_t>(topo.pod_nodes))
      throw Error(fmt::format("a dragonfly of {} nodes in groups of {} has one group: use a star, or smaller groups",
                              spec.nodes.size(), topo.pod_nodes));
  }
  if (!star && find_prop(spec.zone_props, "transport"))
    throw Error(fmt::format("a {} writes the NIC transport on each NIC link (its fabric links carry none): drop 'transport' "
                            "from zone_props and give it as the NIC's", topo.kind));
}

}  // namespace

void check_platform_spec(const PlatformSpec& spec) {
  if (spec.nodes.empty()) throw Error("no nodes: give at least one (--nodes N, or \"nodes\"/\"node_groups\" in a spec)");
  std::set<std::string> ids;
  for (const auto& n : spec.nodes) {
    if (!ids.insert(n.id).second) throw Error(fmt::format("node '{}' is named twice", n.id));
    if (n.gpus < 1) throw Error(fmt::format("node '{}': GPUs per node must be at least 1", n.id));
    const GpuTypeSpec& t = spec.gpu_types.at(n.gpu_type);
    const std::string& k = n.fabric.kind;
    if ((k == "nvlink" || k == "nvswitch" || k == "nvlink_bridge") && n.fabric.bw.empty() && t.gpu_link_bw.empty())
      throw Error(fmt::format("node '{}': fabric {} needs a per-GPU NVLink bandwidth, and GPU type '{}' has no NVLink or "
                              "Infinity Fabric in the catalogue; use pcie_p2p or pcie_host, or give the bandwidth "
                              "(--intranode-bw)", n.id, k, n.gpu_type));
    if (k == "nvlink_bridge" && n.gpus > 2)
      throw Error(fmt::format("node '{}': NVLink bridges join GPUs two by two; with {} GPUs a node the cluster layout gives "
                              "every pair the same path (not yet): use pcie_p2p (a ring of more than 2 GPUs crosses PCIe "
                              "anyway) or nvswitch", n.id, n.gpus));
    if (spec.nodes.size() > 1 && n.nic.speed.empty())
      throw Error(fmt::format("node '{}': no NIC speed (--nic-speed 400Gbps or a catalogue NIC: ndr, 100gbe, ...)", n.id));
  }
  check_topology(spec);
}

// --------------------------------------------------------------------------------------------- writer
namespace {

struct NodeLinks {
  std::string lane_bw, bb_bw, bb_lat;
  Props fabric_props;  // intranode_transport, staging_bw
};

NodeLinks node_links(const PlatformSpec& spec, const NodeSpec& n) {
  const GpuTypeSpec& t = spec.gpu_types.at(n.gpu_type);
  NodeLinks out;
  out.lane_bw = n.pcie.bw;
  out.bb_lat = n.fabric.lat;
  const std::string& k = n.fabric.kind;
  if (k.empty()) {
    out.bb_bw = n.fabric.bw.empty() ? n.pcie.bw : n.fabric.bw;  // as written; default: never below the lane
  } else if (k == "pcie_host") {
    const std::string staging = n.fabric.staging_bw.empty() ? builtin_catalogue().link("pcie_host").effective : n.fabric.staging_bw;
    out.bb_bw = n.fabric.bw.empty() ? staging : n.fabric.bw;
    out.fabric_props = {{"intranode_transport", "pcie_host"}, {"staging_bw", staging}};
  } else if (k == "pcie_p2p") {
    out.bb_bw = n.fabric.bw.empty() ? n.pcie.bw : n.fabric.bw;
    out.fabric_props = {{"intranode_transport", "pcie_p2p"}};
  } else {  // nvlink, nvswitch, nvlink_bridge: GPU to GPU over the GPU's NVLink, both its own link and the backbone
    const std::string bw = n.fabric.bw.empty() ? t.gpu_link_bw : n.fabric.bw;
    out.lane_bw = bw;
    out.bb_bw = bw;
    out.fabric_props = {{"intranode_transport", "nvlink"}};
  }
  return out;
}

// The bandwidth of a node's NIC link: count x speed (NCCL spreads its channels over every NIC).
std::string nic_bw(const NicSpec& nic) {
  if (nic.count == 1) return nic.speed;
  return gbps_text(nic.count * units::parse(nic.speed, units::Kind::Bandwidth));
}

// "  - text" wrapped at 110 columns, continuation lines indented under the text.
std::string bullet(const std::string& text) {
  std::string out = "  -", word;
  size_t col = 3;
  std::istringstream words(text);
  while (words >> word) {
    if (col + 1 + word.size() > 110 && col > 4) out += "\n   ", col = 3;
    out += ' ' + word;
    col += 1 + word.size();
  }
  return out + "\n";
}

std::string default_comment(const PlatformSpec& spec, Layout layout) {
  std::map<std::string, int> per_type;
  int gpus = 0;
  for (const auto& n : spec.nodes) per_type[n.gpu_type] += n.gpus, gpus += n.gpus;
  const NodeSpec& first = spec.nodes.front();
  std::string types;
  for (const auto& [t, c] : per_type) types += (types.empty() ? "" : ", ") + fmt::format("{} x {}", c, t);
  const std::string fabric = first.fabric.kind.empty() ? "as written" : first.fabric.kind;
  const bool multi = spec.nodes.size() > 1;
  const std::string nics = multi ? fmt::format("{} x {} NIC{}, {}", first.nic.count, first.nic.speed, first.nic.count > 1 ? "s" : "",
                                               first.nic.transport.empty() ? "no transport" : first.nic.transport)
                                 : "no NIC (one node)";
  const TopologySpec& topo = spec.topology;
  const std::string core = topo.kind == "star"     ? std::string("non-blocking switch (star)")
                           : topo.kind == "torus"  ? fmt::format("torus {}", topo.torus_dims)
                           : topo.kind == "dragonfly" ? fmt::format("dragonfly: groups of {} nodes", topo.pod_nodes)
                                                  : fmt::format("fat-tree: pods of {} nodes, up-links {:g}:1 oversubscribed",
                                                                topo.pod_nodes, topo.oversubscription);
  std::string c = fmt::format("  {}: {} node{}, {} GPUs ({}).\n\n", spec.id, spec.nodes.size(), multi ? "s" : "", gpus, types);
  auto row = [](const std::string& text) { return fmt::format("   | {:<32}|\n", text); };
  c += fmt::format("      {:<30}{}\n", first.id, multi ? "...   " + spec.nodes.back().id : "");
  c += "   +---------------------------------+\n";
  c += row(fmt::format("gpu0 ... gpu{} ({})", first.gpus - 1, first.gpu_type));
  c += row("GPU<->GPU: " + fabric);
  c += row(nics);
  c += "   +----------------+----------------+\n";
  if (multi) c += "                    |\n   +---- " + core + " ----+\n";
  c += "\n  Every figure with its source (data/catalogue.json, docs/sources.md):\n";
  for (const auto& [name, t] : spec.gpu_types)
    for (const auto& note : t.notes) c += bullet(note);
  const Catalogue& cat = builtin_catalogue();
  for (const char* d : {"gpu_gemm_tile", "gpu_kernel_overhead", "gpu_sync_overhead", "host_op_overhead", "gpu_reserved", "pcie_lat", "h2d_lat",
                        "gpu_busy_power_fraction", "gpu_idle_power_fraction"})
    c += bullet(fmt::format("{} {}: {}", d, cat.default_value(d), cat.default_entry(d).source));
  if (!first.fabric.kind.empty()) {
    const CatalogueLink& l = cat.link(first.fabric.kind == "nvlink_bridge" ? "nvlink3_bridge"
                                      : first.fabric.kind == "nvlink"      ? "infinity_fabric"
                                                                           : first.fabric.kind);
    c += bullet(fmt::format("GPU<->GPU {}{}: {}", first.fabric.kind, first.fabric.bw.empty() ? "" : " at " + first.fabric.bw + " (given)",
                            first.fabric.kind == "nvlink" ? "direct links (NVLink without a switch, Infinity Fabric), ASSUMPTION: "
                                                            "collectives spread over every link, as NCCL/RCCL run a ring per link; " +
                                                                l.source
                                                          : l.source));
    c += bullet(fmt::format("GPU<->GPU latency {}: ASSUMPTION (NCCL's per-step cost inside a node); an 8-byte all_reduce_perf "
                            "on one node replaces it", first.fabric.lat));
  }
  if (multi) {
    c += bullet(fmt::format("NICs: {} x {} line rate, {} per end (NIC, cable and switch: ASSUMPTION; ping replaces it); the node's "
                            "NICs are one link of {} (NCCL spreads its channels over every NIC){}",
                            first.nic.count, first.nic.speed, first.nic.lat, nic_bw(first.nic),
                            !first.nic.rail_optimised ? ""
                            : layout == Layout::FlatStar
                                ? "; rail-optimised: each NIC is a rail, its own link, GPU k of G on rail k x NICs / G"
                                : "; rail-optimised: in this layout a rail is not a separate path (the flat-star layout has rails)"));
    if (!first.nic.transport.empty())
      c += bullet(fmt::format("transport {}: README 'Platform files' (link transports) and docs/sources.md give each setting's source",
                              normalise_name(first.nic.transport) == "roce" ? "roce (written as ib: RoCE v2 runs NCCL's verbs)"
                                                                            : first.nic.transport));
  }
  if (spec.topology.kind == "fat-tree")
    c += bullet(fmt::format("fat-tree: each pod's up-link is its nodes' NIC capacity / {:g}, latency {} (a leaf-to-spine hop: "
                            "ASSUMPTION); a route between pods crosses both pods' up-links",
                            spec.topology.oversubscription, spec.topology.uplink_lat));
  if (spec.topology.kind == "torus")
    c += bullet(fmt::format("torus {}: nodes in order, the first dimension fastest; each node has a link to its next neighbour in "
                            "every dimension at one NIC's line rate {} each way, latency {} a hop (ASSUMPTION); routes go "
                            "dimension by dimension, each the shorter way round (SimGrid's TorusZone)",
                            spec.topology.torus_dims, first.nic.speed, spec.topology.uplink_lat));
  if (spec.topology.kind == "dragonfly")
    c += bullet(fmt::format("dragonfly: groups of {} consecutive nodes, non-blocking inside a group (ASSUMPTION: a balanced "
                            "dragonfly's local links carry its minimal routes, Kim et al. 2008); each pair of groups joined by "
                            "{} global link{} of {} each way, latency {} (ASSUMPTION); minimal routes, one global hop",
                            spec.topology.pod_nodes, spec.topology.global_links, spec.topology.global_links > 1 ? "s" : "",
                            first.nic.speed, spec.topology.uplink_lat));
  std::string node;
  for (const auto& [k, v] : first.props) node += (node.empty() ? "" : ", ") + k + " " + v;
  if (!node.empty())
    c += bullet(node + ": given, or the defaults (14 CPU cores a GPU, as a DGX H100's 112 for 8; the study's loader figures, "
                       "docs/sources.md): ASSUMPTIONS that `vitsim calibrate` replaces");
  if (const std::string* p = find_prop(spec.zone_props, "price_per_gpu_hour")) c += bullet("price per GPU-hour " + *p + ": as given");
  if (const std::string* p = find_prop(spec.zone_props, "price_per_kwh")) c += bullet("price per kWh " + *p + ": as given");
  return c;
}

}  // namespace

namespace {

// The XML of one platform spec in one layout, piece by piece.
class PlatformXml {
 public:
  PlatformXml(const PlatformSpec& spec, Layout layout)
      : spec_(spec),
        layout_(layout),
        flat_(layout == Layout::FlatStar),
        multi_(spec.nodes.size() > 1),
        fat_tree_(spec.topology.kind == "fat-tree"),
        grouped_(fat_tree_ || spec.topology.kind == "dragonfly"),
        link_transport_(spec.topology.kind != "star"),
        zone_transport_(spec.nodes.front().nic.transport),
        pod_(spec.nodes.size(), 0) {
    if (multi_ && grouped_) {
      pods_ = static_cast<int>((spec.nodes.size() + spec.topology.pod_nodes - 1) / spec.topology.pod_nodes);
      for (size_t i = 0; i < spec.nodes.size(); ++i) pod_[i] = static_cast<int>(i) / spec.topology.pod_nodes;
    }
  }

  std::string write() const {
    std::string out = "<?xml version=\"1.0\"?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n";
    std::string comment = spec_.comment.empty() ? default_comment(spec_, layout_) : spec_.comment;
    while (!comment.empty() && std::isspace(static_cast<unsigned char>(comment.back()))) comment.pop_back();
    out += "<!--\n" + comment + "\n\n  " + (spec_.generated_by.empty() ? "Generated by vitsim platform." : spec_.generated_by) +
           "\n-->\n";
    out += "<platform version=\"4.1\">\n";
    // Flat star: no routes are listed; vitsim builds one star zone (per pod for a fat-tree) in code, each GPU's
    // route its lane + its node's backbone + its NIC (docs/platforms.md: layouts).
    out += "  <zone id=" + xml_attr(spec_.id) + (flat_ ? " routing=\"None\">\n" : " routing=\"Full\">\n");
    out += props_xml(zone_props(), "    ");
    out += flat_ && multi_ && grouped_ ? pod_zones() : nodes();
    out += "  </zone>\n</platform>\n";
    return out;
  }

 private:
  // The NIC transport of the platform: on the zone for a star (one zone what-if switches it), on each NIC
  // link for the other topologies (their fabric links, a fat-tree's up-links, run as written).
  Props zone_props() const {
    Props zone_props = spec_.zone_props;
    if (multi_ && !link_transport_ && !zone_transport_.empty()) {
      Props t = nic_transport_props(zone_transport_);
      for (const auto& [k, v] : spec_.nodes.front().nic.props) set_prop(t, k, v);
      Props merged;
      if (const std::string* p = find_prop(zone_props, "price_per_gpu_hour")) merged.emplace_back("price_per_gpu_hour", *p);
      if (const std::string* p = find_prop(zone_props, "price_per_kwh")) merged.emplace_back("price_per_kwh", *p);
      for (const auto& kv : t) set_prop(merged, kv.first, kv.second);
      for (const auto& kv : zone_props) set_prop(merged, kv.first, kv.second);
      zone_props = merged;
    }
    if (flat_) zone_props.insert(zone_props.begin(), {std::string(kFlatStarProp), std::string(kFlatStarValue)});
    const TopologySpec& topo = spec_.topology;
    if (topo.kind == "torus" || topo.kind == "dragonfly") {
      // core/platform_flat.hpp: each torus link, each global link between two groups.
      const NicSpec& nic = spec_.nodes.front().nic;
      Props t{{"vitsim_topology", topo.kind}};
      if (topo.kind == "torus") t.emplace_back("vitsim_torus_dims", topo.torus_dims);
      t.emplace_back("vitsim_link_bw", topo.global_links == 1 ? nic.speed : gbps_text(topo.global_links * units::parse(nic.speed, units::Kind::Bandwidth)));
      t.emplace_back("vitsim_link_lat", topo.uplink_lat);
      zone_props.insert(zone_props.begin() + 1, t.begin(), t.end());
    }
    return zone_props;
  }

  std::string cluster(const NodeSpec& n, const std::string& indent) const {
    const GpuTypeSpec& t = spec_.gpu_types.at(n.gpu_type);
    const NodeLinks l = node_links(spec_, n);
    Props props = t.props;
    for (const auto& [k, v] : n.props) set_prop(props, k, v);
    for (const auto& [k, v] : l.fabric_props) set_prop(props, k, v);
    std::string o = indent + fmt::format(
        "<cluster id={} prefix={} suffix=\"\" radical=\"0-{}\" speed={} bw={} lat={} sharing_policy=\"SPLITDUPLEX\" "
        "bb_bw={} bb_lat={} bb_sharing_policy=\"FATPIPE\" loopback_bw={} loopback_lat={} router_id={}>\n",
        xml_attr(n.id), xml_attr(n.id + "-gpu"), n.gpus - 1, xml_attr(*find_prop(props, "gpu_flops_fp32")), xml_attr(l.lane_bw),
        xml_attr(n.pcie.lat), xml_attr(l.bb_bw), xml_attr(l.bb_lat), xml_attr(n.pcie.h2d_bw), xml_attr(n.pcie.h2d_lat),
        xml_attr(n.id + "-router"));
    o += props_xml(props, indent + "  ");
    o += indent + "</cluster>\n";
    return o;
  }

  std::string nic(const NodeSpec& n, const std::string& indent) const {
    Props lp;
    // A node whose transport differs from the zone's (or every node but a star's) states its own.
    if (!n.nic.transport.empty() && (link_transport_ || normalise_name(n.nic.transport) != normalise_name(zone_transport_)))
      lp = nic_transport_props(n.nic.transport);
    for (const auto& [k, v] : n.nic.props)
      if (link_transport_ || !lp.empty() || n.nic.props != spec_.nodes.front().nic.props || zone_transport_.empty()) set_prop(lp, k, v);
    // Flat layout, rail-optimised: one link per NIC ("<node>-nic<r>", a rail); GPU k of G uses rail k x R / G.
    const bool rails = flat_ && n.nic.rail_optimised && n.nic.count > 1;
    std::string o;
    for (int r = 0; r < (rails ? n.nic.count : 1); ++r) {
      const std::string head = indent + "<link id=" + xml_attr(n.id + "-nic" + (rails ? std::to_string(r) : "")) +
                               " bandwidth=" + xml_attr(rails ? n.nic.speed : nic_bw(n.nic)) + " latency=" + xml_attr(n.nic.lat) +
                               " sharing_policy=\"SPLITDUPLEX\"";
      o += lp.empty() ? head + "/>\n" : head + ">\n" + props_xml(lp, indent + "  ") + indent + "</link>\n";
    }
    return o;
  }

  // A pod's up-link carries what its nodes' NICs can send, divided by the oversubscription.
  std::string uplinks() const {
    std::string o;
    for (int p = 0; p < pods_; ++p) {
      double down = 0;
      for (size_t i = 0; i < spec_.nodes.size(); ++i)
        if (pod_[i] == p) down += units::parse(nic_bw(spec_.nodes[i].nic), units::Kind::Bandwidth);
      o += fmt::format("    <link id=\"pod{}-uplink\" bandwidth={} latency={} sharing_policy=\"SPLITDUPLEX\"/>\n", p,
                       xml_attr(gbps_text(down / spec_.topology.oversubscription)), xml_attr(spec_.topology.uplink_lat));
    }
    return o;
  }

  // Flat fat-tree: a pod is a zone, its nodes and their NICs; the pods' up-links join them (vitsim builds a
  // star of pods). Dragonfly: a group is a zone; vitsim joins each pair of groups by a global link.
  std::string pod_zones() const {
    std::string out;
    for (int p = 0; p < pods_; ++p) {
      out += fmt::format("    <zone id=\"{}{}\" routing=\"None\">\n", fat_tree_ ? "pod" : "group", p);
      for (size_t i = 0; i < spec_.nodes.size(); ++i)
        if (pod_[i] == p) out += cluster(spec_.nodes[i], "      ");
      for (size_t i = 0; i < spec_.nodes.size(); ++i)
        if (pod_[i] == p) out += nic(spec_.nodes[i], "      ");
      out += "    </zone>\n";
    }
    return fat_tree_ ? out + uplinks() : out;
  }

  // Every node's cluster, then (several nodes) the NICs, up-links and, in the cluster layout, a route per pair.
  std::string nodes() const {
    std::string out;
    for (const auto& n : spec_.nodes) out += cluster(n, "    ");
    if (!multi_) return out;
    for (const auto& n : spec_.nodes) out += nic(n, "    ");
    if (fat_tree_) out += uplinks();
    if (!flat_) out += routes();
    return out;
  }

  std::string routes() const {
    std::string out;
    for (size_t i = 0; i < spec_.nodes.size(); ++i)
      for (size_t k = i + 1; k < spec_.nodes.size(); ++k) {
        const std::string& a = spec_.nodes[i].id;
        const std::string& b = spec_.nodes[k].id;
        std::string links = fmt::format("<link_ctn id=\"{}-nic\" direction=\"UP\"/>", a);
        if (pod_[i] != pod_[k])
          links += fmt::format("<link_ctn id=\"pod{}-uplink\" direction=\"UP\"/><link_ctn id=\"pod{}-uplink\" direction=\"DOWN\"/>",
                               pod_[i], pod_[k]);
        links += fmt::format("<link_ctn id=\"{}-nic\" direction=\"DOWN\"/>", b);
        out += fmt::format("    <zoneRoute src=\"{0}\" dst=\"{1}\" gw_src=\"{0}-router\" gw_dst=\"{1}-router\">{2}</zoneRoute>\n",
                           a, b, links);
      }
    return out;
  }

  const PlatformSpec& spec_;
  const Layout layout_;
  const bool flat_, multi_, fat_tree_;
  const bool grouped_;         // fat-tree pods, dragonfly groups
  const bool link_transport_;  // the NIC transport on each NIC link (every topology but the star)
  const std::string& zone_transport_;
  std::vector<int> pod_;  // each node's pod (fat-tree)
  int pods_ = 1;
};

}  // namespace

std::string write_platform_xml(const PlatformSpec& spec, Layout layout) {
  check_platform_spec(spec);
  if (layout != Layout::ClusterPerNode && layout != Layout::FlatStar) throw Error("unknown platform layout");
  if (layout == Layout::ClusterPerNode && (spec.topology.kind == "torus" || spec.topology.kind == "dragonfly") && spec.nodes.size() > 1)
    throw Error(fmt::format("a {} is written in the flat-star layout, whose routes vitsim computes (--layout flat-star; auto picks it)",
                            spec.topology.kind));
  return PlatformXml(spec, layout).write();
}

// --------------------------------------------------------------------------------------------- tables
std::string catalogue_gpu_table(const Catalogue& cat) {
  std::string out = fmt::format("{:<15} {:<14} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>9} {:>10} {:>5} {:>6} {:<10} {:<24} {}\n", "name",
                                "arch", "fp32", "tf32", "fp16", "bf16", "fp8", "sold", "memory", "mem_bw", "SMs", "TDP", "host",
                                "GPU link/direction", "aliases");
  auto f = [](const CatalogueGpu& g, const char* p) { return g.flops.count(p) ? g.flops.at(p) : std::string("-"); };
  for (const auto& g : cat.gpus) {
    const double gib = units::parse(g.memory, units::Kind::Bytes) / (1024.0 * 1024 * 1024);
    out += fmt::format("{:<15} {:<14} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>9} {:>10} {:>5} {:>6} {:<10} {:<24} {}\n", g.name, g.arch,
                       f(g, "fp32"), f(g, "tf32"), f(g, "fp16"), f(g, "bf16"), f(g, "fp8"), g.memory_sold, fmt::format("{:.1f}GiB", gib), g.mem_bw,
                       g.sm_count, g.tdp, g.host_link, g.gpu_link.empty() ? "-" : g.gpu_link + " " + g.gpu_link_bw, join(g.aliases));
  }
  out += "Dense peaks (no sparsity); memory as vitsim uses it (GiB); sources: data/catalogue.json, docs/sources.md.\n";
  return out;
}

std::string catalogue_link_table(const Catalogue& cat) {
  std::string out = fmt::format("{:<15} {:<10} {:<22} {:<22} {:<10} {}\n", "name", "kind", "line rate", "vitsim writes", "transport", "aliases");
  for (const auto& l : cat.links)
    out += fmt::format("{:<15} {:<10} {:<22} {:<22} {:<10} {}\n", l.name, l.kind, l.line_rate, l.effective, l.transport, join(l.aliases));
  out += "Rates per direction; sources: data/catalogue.json, docs/sources.md.\n";
  return out;
}

}  // namespace vitsim
