// The GPU and interconnect catalogue (platform_writer.hpp): data/catalogue.json parsed and checked, its GPUs
// as platform properties and GPU types (the tables of `--list-gpus` / `--list-links`: catalogue_tables.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "platform/platform_writer_detail.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/model/energy.hpp"
#include "vitsim/core/platform/figure_range.hpp"
#include "vitsim/core/platform/platform_props.hpp"
#include "vitsim/core/platform/platform_writer.hpp"
#include "vitsim/core/platform/transport.hpp"

namespace vitsim {

using namespace platform_detail;

namespace {

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

std::string default_fabric(const CatalogueGpu& g) {
  if (g.gpu_link == "nvlink3" || g.gpu_link == "nvlink4" || g.gpu_link == "nvlink5") return "nvswitch";
  if (g.gpu_link == "nvlink2" || g.gpu_link == "infinity_fabric") return "nvlink";
  if (g.arch.find("geforce") != std::string::npos || g.name.rfind("GTX", 0) == 0) return "pcie_host";
  return "pcie_p2p";
}

Props default_node_props(int gpus_per_node) {
  return {{"cpu_cores", std::to_string(14 * gpus_per_node)},
          {"loader_bw", "600MBps"},
          {"loader_image_overhead", "100us"}};
}

std::string normalise_name(const std::string& name) {
  std::string out;
  for (char c : name)
    if (c != '-' && c != '_' && c != ' ' && c != '.')
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

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
    js.keys(it.value(), where, {"value", "source", "range", "range_source"});
    CatalogueDefault d;
    d.name = it.key();
    d.value = js.text(it.value().at("value"), where);
    d.source = require_source(js, it.value(), where);
    if (it.value().contains("range")) {
      d.range = js.text(it.value().at("range"), where + ".range");
      if (!it.value().contains("range_source")) js.fail(where, "a range needs its range_source");
      d.range_source = js.text(it.value().at("range_source"), where + ".range_source");
    }
    cat.defaults.push_back(std::move(d));
  }
}

// [low, high] at `at`, holding `value` as catalogue_gpu_props writes it (2 digits): a range that would
// exclude its own value is refused here, naming the entry, not when a platform is written.
std::pair<double, double> read_range(const Json& js, const ojson& r, const std::string& at, double value) {
  if (!r.is_array() || r.size() != 2 || !r[0].is_number() || !r[1].is_number())
    js.fail(at, "expected [low, high]");
  const double low = r[0].get<double>(), high = r[1].get<double>(), written = std::round(value * 100) / 100;
  if (!(low <= written && written <= high))
    js.fail(at, fmt::format("[{}, {}] excludes its own value {:.2f}", low, high, written));
  return {low, high};
}

// An architecture's (or one GPU's own) efficiency figures, each in (0, 1], and their ranges.
void parse_efficiency_figures(const Json& js, const ojson& e, const std::string& where, CatalogueArch& a) {
  for (auto f = e.at("gemm_efficiency").begin(); f != e.at("gemm_efficiency").end(); ++f) {
    if (std::find(precisions().begin(), precisions().end(), f.key()) == precisions().end())
      js.fail(where + ".gemm_efficiency." + f.key(), "unknown precision; valid: " + join(precisions()));
    const double v = js.field(f.value(), where + ".gemm_efficiency." + f.key()).number();
    if (!(v > 0 && v <= 1)) js.fail(where + ".gemm_efficiency." + f.key(), "must be in (0, 1]");
    a.gemm_efficiency[f.key()] = v;
    a.gemm_efficiency_range.erase(f.key());  // a GPU's own figure drops its architecture's range
  }
  if (e.contains("gemm_efficiency_range"))
    for (auto f = e.at("gemm_efficiency_range").begin(); f != e.at("gemm_efficiency_range").end(); ++f) {
      const std::string at = where + ".gemm_efficiency_range." + f.key();
      if (!e.at("gemm_efficiency").contains(f.key()))
        js.fail(at, "no gemm_efficiency figure of that precision");
      a.gemm_efficiency_range[f.key()] = read_range(js, f.value(), at, a.gemm_efficiency.at(f.key()));
    }
  if (e.contains("mem_efficiency")) {
    a.mem_efficiency = js.field(e, where).at("mem_efficiency").number();
    if (!(a.mem_efficiency > 0 && a.mem_efficiency <= 1))
      js.fail(where + ".mem_efficiency", "must be in (0, 1]");
    a.mem_efficiency_range.reset();
  }
  if (e.contains("mem_efficiency_range")) {
    if (!e.contains("mem_efficiency")) js.fail(where + ".mem_efficiency_range", "no mem_efficiency figure");
    a.mem_efficiency_range =
        read_range(js, e.at("mem_efficiency_range"), where + ".mem_efficiency_range", a.mem_efficiency);
  }
}

void parse_catalogue_archs(const Json& js, const ojson& j, Catalogue& cat) {
  for (auto it = j.at("architectures").begin(); it != j.at("architectures").end(); ++it) {
    const std::string where = "architectures." + it.key();
    js.keys(it.value(), where,
            {"gemm_efficiency", "gemm_efficiency_range", "mem_efficiency", "mem_efficiency_range", "nccl",
             "source"});
    CatalogueArch a;
    a.name = it.key();
    a.source = require_source(js, it.value(), where);
    (void)js.field(it.value(), where).at("gemm_efficiency");
    (void)js.field(it.value(), where).at("mem_efficiency");
    parse_efficiency_figures(js, it.value(), where, a);
    if (!a.gemm_efficiency.count("fp32")) js.fail(where, "gemm_efficiency needs an fp32 figure");
    if (it.value().contains("nccl")) {
      const ojson& n = it.value().at("nccl");
      js.keys(n, where + ".nccl", {"sm", "nvls", "source"});
      a.nccl_sm = js.integer(n.at("sm"), where + ".nccl.sm", 10, 1000);
      if (!n.at("nvls").is_boolean()) js.fail(where + ".nccl.nvls", "expected true or false");
      a.nvls = n.at("nvls").get<bool>();
      a.nccl_source = require_source(js, n, where + ".nccl");
    }
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
    if (!seen_.insert(normalise_name(name)).second)
      js_.fail(where, fmt::format("name '{}' is not unique", name));
  }
  const Json& js_;
  std::set<std::string> seen_;
};

CatalogueGpu parse_catalogue_gpu(const Json& js, const ojson& e, const std::string& where,
                                 const Catalogue& cat) {
  js.keys(e, where,
          {"name", "model", "aliases", "vendor", "arch", "flops", "memory_sold", "memory", "mem_bw",
           "sm_count", "tdp", "host_link", "gpu_link", "note", "efficiency", "source"});
  CatalogueGpu g;
  const OField f = js.field(e, where);
  g.name = f.at("name").string();
  g.model = f.at("model").string();
  if (f.has("aliases")) g.aliases = f.at("aliases").strings();
  g.vendor = f.at("vendor").string();
  g.arch = f.at("arch").string();
  if (!cat.archs.count(g.arch)) js.fail(where + ".arch", fmt::format("unknown architecture '{}'", g.arch));
  js.keys(e.at("flops"), where + ".flops", precisions());
  for (auto it = e.at("flops").begin(); it != e.at("flops").end(); ++it)
    if (!it.value().is_null())
      g.flops[it.key()] = js.quantity(it.value(), where + ".flops." + it.key(), units::Kind::Flops);
  for (const char* p : {"fp32", "fp16", "bf16"})
    if (!g.flops.count(p))
      js.fail(where + ".flops", fmt::format("needs {} (the rate it runs at, fp32's if no fast path)", p));
  g.memory_sold = js.quantity(e.at("memory_sold"), where + ".memory_sold", units::Kind::Bytes);
  g.memory = js.quantity(e.at("memory"), where + ".memory", units::Kind::Bytes);
  g.mem_bw = js.quantity(e.at("mem_bw"), where + ".mem_bw", units::Kind::Bandwidth);
  g.sm_count = js.integer(e.at("sm_count"), where + ".sm_count", 1, 100000);
  g.tdp = f.at("tdp").string();
  try {
    parse_power(g.tdp);
  } catch (const Error&) {
    js.fail(where + ".tdp", fmt::format("'{}' is not a power in watts (\"700W\")", g.tdp));
  }
  g.host_link = f.at("host_link").string();
  if (!f.at("gpu_link").is_null()) {
    js.keys(e.at("gpu_link"), where + ".gpu_link", {"name", "bw"});
    g.gpu_link = f.at("gpu_link").at("name").string();
    g.gpu_link_bw = js.quantity(e.at("gpu_link").at("bw"), where + ".gpu_link.bw", units::Kind::Bandwidth);
  }
  if (f.has("note")) g.note = f.at("note").string();
  g.source = require_source(js, e, where);
  return g;
}

// A GPU's own figures where a public measurement of that GPU differs from its architecture's (a power-capped
// part of a larger chip's family): its architecture's figures with those it states replaced, and its source
// first.
CatalogueArch parse_gpu_figures(const Json& js, const ojson& e, const std::string& gpu_where,
                                const Catalogue& cat, const CatalogueGpu& g) {
  const std::string where = gpu_where + ".efficiency";
  js.keys(e, where,
          {"gemm_efficiency", "gemm_efficiency_range", "range_source", "mem_efficiency",
           "mem_efficiency_range", "source"});
  CatalogueArch a = cat.archs.at(g.arch);
  a.name = g.name;
  (void)js.field(e, where).at("gemm_efficiency");
  parse_efficiency_figures(js, e, where, a);
  if (e.contains("gemm_efficiency_range") != e.contains("range_source"))
    js.fail(where, "gemm_efficiency_range and range_source go together (what each end is)");
  if (e.contains("range_source")) a.range_source = js.text(e.at("range_source"), where + ".range_source");
  a.source = require_source(js, e, where) + "; its other figures: architecture " + g.arch + "'s";
  return a;
}

CatalogueLink parse_catalogue_link(const Json& js, const ojson& e, const std::string& where) {
  js.keys(e, where, {"name", "aliases", "kind", "line_rate", "effective", "transport", "source"});
  CatalogueLink l;
  const OField f = js.field(e, where);
  l.name = f.at("name").string();
  if (f.has("aliases")) l.aliases = f.at("aliases").strings();
  l.kind = f.at("kind").string();
  l.line_rate = f.at("line_rate").string();
  l.effective = f.at("effective").string();
  // Fabrics whose rate is the GPU's (NVSwitch) and RoCE (a transport over any Ethernet speed) say so in
  // words.
  if (l.kind != "transport" && l.line_rate.rfind("per ", 0) != 0) {
    js.quantity(l.line_rate, where + ".line_rate", units::Kind::Bandwidth);
    js.quantity(l.effective, where + ".effective", units::Kind::Bandwidth);
  }
  l.transport = f.at("transport").string();
  parse_transport(l.transport, Origin{js.file, 0}, where + ".transport");
  l.source = require_source(js, e, where);
  return l;
}

// The defaults the writer reads must be there, and the power fractions numbers in (0, 1] (core's strict
// reader: "0.5x" is not 0.5).
void check_catalogue_defaults(const Json& js, const Catalogue& cat) {
  for (const char* d :
       {"gpu_gemm_tile", "gpu_kernel_overhead", "gpu_sync_overhead", "host_op_overhead", "gpu_reserved",
        "pcie_lat", "h2d_lat", "gpu_busy_power_fraction", "gpu_idle_power_fraction"})
    cat.default_entry(d);
  for (const char* d : {"gpu_busy_power_fraction", "gpu_idle_power_fraction"}) {
    const std::string& v = cat.default_value(d);
    try {
      units::parse_number(v, units::fraction());
    } catch (const Error&) {
      js.fail(std::string("defaults.") + d,
              fmt::format("'{}' must be a fraction of the TDP in (0, 1]", echo(v)));
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
    if (e.contains("efficiency"))
      cat.gpu_figures[g.name] = parse_gpu_figures(js, e.at("efficiency"), where, cat, g);
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
const Entry* match_entry(const std::vector<Entry>& entries, const std::string& name) {
  const std::string n = normalise_name(name);
  for (const auto& e : entries) {
    if (normalise_name(e.name) == n) return &e;
    for (const auto& a : e.aliases)
      if (normalise_name(a) == n) return &e;
  }
  return nullptr;
}

// The entries whose name or an alias holds every part of `typed` (split at '-', '_', ' ', '.'): "a100-40gb"
// is A100-PCIe-40GB and A100-SXM-40GB, not A10 (2 edits away); with `first_only`, those holding its first
// part, the family ("a100-96gb": the four A100s); none for a first part under 3 characters.
template <typename Entry>
std::vector<std::string> variants_of(const std::vector<Entry>& entries, const std::string& typed,
                                     bool first_only) {
  std::vector<std::string> parts;
  std::string part;
  for (char c : typed + "-") {
    if (c == '-' || c == '_' || c == ' ' || c == '.') {
      if (!part.empty()) parts.push_back(normalise_name(part));
      part.clear();
    } else {
      part += c;
    }
  }
  if (parts.empty() || parts.front().size() < 3) return {};
  auto holding = [&](size_t n) {
    std::vector<std::string> out;
    for (const auto& e : entries) {
      std::vector<std::string> all = e.aliases;
      all.push_back(e.name);
      const bool has = std::any_of(all.begin(), all.end(), [&](const std::string& a) {
        const std::string norm = normalise_name(a);
        return std::all_of(parts.begin(), parts.begin() + n,
                           [&](const std::string& p) { return norm.find(p) != std::string::npos; });
      });
      if (has) out.push_back(e.name);
    }
    return out;
  };
  return holding(first_only ? 1 : parts.size());
}

template <typename Entry>
const Entry& find_entry(const std::vector<Entry>& entries, const std::string& name, const char* what,
                        const char* list_flag) {
  if (const Entry* e = match_entry(entries, name)) return *e;
  std::vector<std::pair<std::string, std::vector<std::string>>> names;
  std::vector<std::string> known;
  for (const auto& e : entries) names.push_back({e.name, e.aliases}), known.push_back(e.name);
  // What the name holds, else the nearest spelling, else its family.
  std::vector<std::string> variants = variants_of(entries, name, false);
  if (variants.empty())
    if (const std::string near = closest(name, names); !near.empty()) variants = {near};
  if (variants.empty()) variants = variants_of(entries, name, true);
  std::string hint;
  if (variants.size() == 1)
    hint = fmt::format(" (did you mean '{}'?)", variants.front());
  else if (variants.size() > 1)
    hint = fmt::format(" (did you mean one of {}?)", join(variants));
  throw Error(fmt::format("unknown {} '{}'{}; known: {} (vitsim platform {})", what, name, hint, join(known),
                          list_flag));
}

}  // namespace

const CatalogueGpu& Catalogue::gpu(const std::string& name) const {
  return find_entry(gpus, name, "GPU", "--list-gpus");
}

const CatalogueGpu* Catalogue::find_gpu(const std::string& name) const {
  return match_entry(gpus, name);
}

std::string catalogue_gpu_link_kind(const CatalogueGpu& g) {
  if (g.gpu_link.empty()) return "none";
  const bool switched =
      g.gpu_link.find("nvlink") != std::string::npos && g.gpu_link.find("bridge") == std::string::npos;
  return switched ? "nvswitch" : "nvlink";
}

const CatalogueLink& Catalogue::link(const std::string& name) const {
  return find_entry(links, name, "link", "--list-links");
}

const CatalogueArch& Catalogue::arch_of(const CatalogueGpu& g) const {
  if (auto own = gpu_figures.find(g.name); own != gpu_figures.end()) return own->second;
  return archs.at(g.arch);
}

const CatalogueDefault& Catalogue::default_entry(const std::string& name) const {
  for (const auto& d : defaults)
    if (d.name == name) return d;
  throw Error(fmt::format("catalogue: no default '{}'", name));
}
const std::string& Catalogue::default_value(const std::string& name) const {
  return default_entry(name).value;
}

const Catalogue& builtin_catalogue() {
  static const Catalogue cat = parse_catalogue(builtin_catalogue_text(), "data/catalogue.json (built in)");
  return cat;
}

namespace {
// A GPU's power for the energy model (core/model/energy.hpp): the catalogue's fraction `which` of its TDP, in
// watts.
std::string catalogue_power(const Catalogue& cat, const CatalogueGpu& g, const char* which) {
  return fmt::format("{:g}W",
                     units::parse_number(cat.default_value(which), units::fraction()) * parse_power(g.tdp));
}
}  // namespace

std::vector<std::pair<std::string, std::string>> catalogue_gpu_props(const Catalogue& cat,
                                                                     const CatalogueGpu& g,
                                                                     const std::string& precision,
                                                                     std::string* used_precision) {
  const CatalogueArch& a = cat.arch_of(g);
  // Without a measured figure for the precision: bf16 takes fp16's when the chip runs bf16 on the same tensor
  // path (same peak, above fp32's); otherwise, and for fp16, the fp32 figure (the chip runs it at the fp32
  // rate).
  std::vector<std::string> order{precision};
  auto peak = [&](const char* p) { return units::parse(g.flops.at(p), units::Kind::Flops); };
  if (precision == "bf16" && peak("bf16") == peak("fp16") && peak("bf16") > peak("fp32"))
    order.push_back("fp16");
  order.push_back("fp32");
  std::string used;
  for (const std::string& p : order)
    if (a.gemm_efficiency.count(p)) {
      used = p;
      break;
    }
  if (used_precision) *used_precision = used;
  std::vector<std::pair<std::string, std::string>> props{
      {"gpu_model", g.model},
      {"gpu_flops_fp32", g.flops.at("fp32")},
      {"gpu_flops_fp16", g.flops.at("fp16")},
      {"gpu_flops_bf16", g.flops.at("bf16")},
      {"gpu_mem_bw", g.mem_bw},
      {"gpu_mem", g.memory},
      {"gpu_sm_count", std::to_string(g.sm_count)},
      {"gpu_arch", g.arch},
      {"gpu_link", catalogue_gpu_link_kind(g)},
      {"gpu_gemm_tile", cat.default_value("gpu_gemm_tile")},
      {"gpu_gemm_efficiency", fmt::format("{:.2f}", a.gemm_efficiency.at(used))},
      {"gpu_mem_efficiency", fmt::format("{:.2f}", a.mem_efficiency)},
      {"gpu_kernel_overhead", cat.default_value("gpu_kernel_overhead")},
      {"gpu_sync_overhead", cat.default_value("gpu_sync_overhead")},
      {"host_op_overhead", cat.default_value("host_op_overhead")},
      {"gpu_reserved", cat.default_value("gpu_reserved")},
      {"gpu_power_busy", catalogue_power(cat, g, "gpu_busy_power_fraction")},
      {"gpu_power_idle", catalogue_power(cat, g, "gpu_idle_power_fraction")}};
  // NCCL's view of the GPU (the tuner, sim/src/collectives/nccl_platform.cpp): its fabric's bandwidth and its
  // host link, after gpu_arch and gpu_link above.
  auto at = std::find_if(props.begin(), props.end(), [](const auto& p) { return p.first == "gpu_link"; }) + 1;
  if (!g.gpu_link.empty()) at = props.insert(at, {"gpu_link_bw", g.gpu_link_bw}) + 1;
  props.insert(at, {"gpu_host_link", g.host_link});
  // Ranges (core/platform/figure_range.hpp): the public runs' spread of the architecture's efficiency, and
  // the assumptions' plausible spans; each beside its value and checked against it.
  const std::string eff = fmt::format("{:.2f}", a.gemm_efficiency.at(used));
  if (auto r = a.gemm_efficiency_range.find(used); r != a.gemm_efficiency_range.end())
    props.push_back(range_prop(
        "gpu_gemm_efficiency", units::parse_number(eff, units::fraction()), r->second.first, r->second.second,
        a.range_source.empty()
            ? fmt::format(
                  "public measurement, spread of the runs behind {} {} (docs/sources.md \"Catalogue\")",
                  a.name, used)
            : fmt::format("{} (docs/sources.md \"Catalogue\")", a.range_source)));
  if (a.mem_efficiency_range)
    props.push_back(range_prop(
        "gpu_mem_efficiency", units::parse_number(fmt::format("{:.2f}", a.mem_efficiency), units::fraction()),
        a.mem_efficiency_range->first, a.mem_efficiency_range->second,
        fmt::format("public measurement, spread of the runs behind {} memory (docs/sources.md \"Catalogue\")",
                    a.name)));
  for (const auto& d : cat.defaults) {
    if (d.range.empty()) continue;
    for (const auto& [key, value] : props)
      if (key == d.name) {
        const PlatformProp& p = platform_prop(key);
        (void)parse_figure_range(p, d.range + "; " + d.range_source, units::parse(value, p.unit, p.range),
                                 Origin{"data/catalogue.json: defaults." + d.name, 0});
        props.emplace_back(key + std::string(kRangeSuffix), d.range + "; " + d.range_source);
        break;
      }
  }
  return props;
}

GpuTypeSpec gpu_type_from_catalogue(const Catalogue& cat, const CatalogueGpu& gpu,
                                    const std::string& precision) {
  const CatalogueGpu* g = &gpu;
  GpuTypeSpec t;
  t.name = g->name;
  std::string used;
  t.props = catalogue_gpu_props(cat, *g, precision, &used);
  const CatalogueLink& host = cat.link(g->host_link);
  t.pcie = {host.effective, cat.default_value("pcie_lat"), host.effective, cat.default_value("h2d_lat")};
  t.gpu_link_bw = g->gpu_link_bw;
  t.default_fabric = default_fabric(*g);
  t.notes.push_back(fmt::format(
      "{} ({} {}): fp32 {}, fp16 {}, bf16 {}{}{}, memory {} ({} as sold), {}, {} {}, "
      "TDP {}{}: {}",
      g->name, g->vendor, g->arch, g->flops.at("fp32"), g->flops.at("fp16"), g->flops.at("bf16"),
      g->flops.count("tf32") ? ", tf32 " + g->flops.at("tf32") : "",
      g->flops.count("fp8") ? ", fp8 " + g->flops.at("fp8") : "", g->memory, g->memory_sold, g->mem_bw,
      g->sm_count, g->vendor == "AMD" ? "CUs" : "SMs", g->tdp,
      g->gpu_link.empty() ? "" : ", " + g->gpu_link + " " + g->gpu_link_bw + " per direction", g->source));
  if (!g->note.empty()) t.notes.push_back("(" + g->note + ")");
  const CatalogueArch& a = cat.arch_of(*g);
  t.notes.push_back(fmt::format(
      "gpu_gemm_efficiency {:.2f} ({}{}), gpu_mem_efficiency {:.2f}: {}", a.gemm_efficiency.at(used), used,
      used == precision ? "" : ", no " + precision + " figure", a.mem_efficiency, a.source));
  t.notes.push_back(
      fmt::format("PCIe: {} at {} ({} line): {}", host.name, host.effective, host.line_rate, host.source));
  if (a.nccl_sm > 0)
    t.notes.push_back(fmt::format("NCCL: gpu_arch {} (SM {}, NVLS {}), gpu_link {}: {}", g->arch, a.nccl_sm,
                                  a.nvls ? "behind NVSwitch" : "no", catalogue_gpu_link_kind(*g),
                                  a.nccl_source));
  return t;
}

}  // namespace vitsim
