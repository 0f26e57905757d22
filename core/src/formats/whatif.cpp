// What-ifs (whatif.hpp): the kinds link, gpu, prop, zone and loader; the table of kinds; applying a list of
// edits to a platform file. PlatformEdit, what every kind shares, is in whatif_edit.cpp; the nodes kind in
// whatif_nodes.cpp.
#include "vitsim/core/formats/whatif.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <pugixml.hpp>
#include <set>
#include <sstream>

#include "platform/whatif_edit.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/platform/figure_range.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/platform/platform_props.hpp"
#include "vitsim/core/platform/platform_writer.hpp"

namespace vitsim {
namespace fs = std::filesystem;

namespace whatif_detail {

namespace {

// Whether prop:NODES:KEY=VALUE checks a property on the edit itself, with the range of its row (the range the
// platform reader applies): the figures with a unit and the plain numbers of GPUs, nodes and links. Left to
// the reader of the edited copy: the zone's props (not a node's), the link settings that are whole numbers
// (tcp_mtu, ib_mtu, nccl_socket_nthreads, nccl_nsocks_perthread), choices, tiles and powers.
bool checked_on_edit(const PlatformProp& p) {
  if (p.owner == PropOwner::Zone) return false;
  return p.type == PropType::Quantity || p.type == PropType::Number ||
         (p.type == PropType::Integer && p.owner != PropOwner::Link);
}

// --- the kinds: link, gpu, prop, zone, loader (nodes: whatif_nodes.cpp)

// link:GLOB:bandwidth|latency=Q, or a node's .pcie / .backbone / .h2d path, whose attributes also go by the
// names docs/plan.md gives them (bw/lat, bb_bw/bb_lat, loopback_bw/loopback_lat: refused as unknown before,
// issue 27).
void edit_link(PlatformEdit& e, const std::string& rest) {
  PlatformEdit::Assign a = e.split_assign(rest, true);
  for (const auto& [suffix, bw_attr, lat_attr] :
       {std::tuple<std::string, std::string, std::string>{".pcie", "bw", "lat"},
        {".backbone", "bb_bw", "bb_lat"},
        {".h2d", "loopback_bw", "loopback_lat"}}) {
    if (a.target.size() > suffix.size() &&
        a.target.compare(a.target.size() - suffix.size(), suffix.size(), suffix) == 0) {
      const bool bw = a.name == "bandwidth" || a.name == bw_attr;
      if (!bw && a.name != "latency" && a.name != lat_attr)
        e.fail(fmt::format("unknown attribute '{}' of NODE{}; valid: bandwidth (or {}), latency (or {})",
                           a.name, suffix, bw_attr, lat_attr));
      e.check_unit(a.value, bw ? units::Kind::Bandwidth : units::Kind::Time);
      for (auto c : e.match_clusters(a.target.substr(0, a.target.size() - suffix.size())))
        e.set_attr(c, (bw ? bw_attr : lat_attr).c_str(), a.value,
                   fmt::format("node {}{}", c.attribute("id").value(), suffix));
      return;
    }
  }
  if (a.name != "bandwidth" && a.name != "latency")
    e.fail(fmt::format("unknown link attribute '{}'; valid: bandwidth, latency", a.name));
  e.check_unit(a.value, a.name == "bandwidth" ? units::Kind::Bandwidth : units::Kind::Time);
  std::vector<std::string> ids;
  bool any = false;
  for (auto x : e.doc().select_nodes("//link")) {
    pugi::xml_node l = x.node();
    ids.push_back(l.attribute("id").value());
    if (!glob_match(a.target, l.attribute("id").value())) continue;
    e.set_attr(l, a.name.c_str(), a.value, fmt::format("link {}", l.attribute("id").value()));
    any = true;
  }
  if (!any)
    e.fail(fmt::format("no link matches '{}'; links: {}; or NODE.pcie, NODE.backbone, NODE.h2d", a.target,
                       ids.size() > 12 ? join({ids.begin(), ids.begin() + 12}) + ", ..." : join(ids)));
}

// gpu:NODES=SPEC:TYPE: the spec file and the GPU type; std::nullopt for gpu:NODES=NODE. Decided by what the
// argument is, not by its extension: SPEC ending in .json, or SPEC an existing file (as given, or beside the
// scenario); a spec without .json was read as a node name before (issue 39 item 26). GPU type names hold no
// ':', so SPEC is what comes before the last one.
std::optional<std::pair<fs::path, std::string>> gpu_spec_source(const std::string& src,
                                                                const std::string& base_dir) {
  const auto js = src.find(".json:");
  const auto colon = js != std::string::npos ? js + 5 : src.rfind(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  fs::path file = src.substr(0, colon);
  std::error_code ec;
  if (file.is_relative() && !fs::exists(file, ec)) file = fs::path(base_dir) / file;  // beside the scenario
  if (js == std::string::npos && !fs::is_regular_file(file, ec)) return std::nullopt;
  return std::make_pair(file, src.substr(colon + 1));
}

// GPU properties of another node of this platform, or of a `vitsim platform` spec's GPU type.
std::vector<std::pair<std::string, std::string>> gpu_source(const PlatformEdit& e, const std::string& src) {
  std::vector<std::pair<std::string, std::string>> props;
  if (const auto spec_source = gpu_spec_source(src, e.base_dir())) {
    const auto& [file, type] = *spec_source;
    // A `vitsim platform` spec (platforms/specs/*.json): the type's properties as the writer states them.
    PlatformSpec spec;
    try {
      spec = parse_platform_spec(read_input_file(file.string(), "GPU type spec"), file.string());
    } catch (const Error& err) {
      e.fail(err.what());
    }
    auto t = spec.gpu_types.find(type);
    if (t == spec.gpu_types.end()) {
      std::vector<std::string> valid;
      for (const auto& [k, v] : spec.gpu_types) valid.push_back(k);
      e.fail(fmt::format("{} has no GPU type '{}'; types: {}", file.string(), type, join(valid)));
    }
    for (const auto& [k, v] : t->second.props)
      if (k.rfind("gpu_", 0) == 0) props.push_back({k, v});
  } else {
    const std::vector<std::string> nodes = e.cluster_names();
    if (src.find(':') != std::string::npos && std::find(nodes.begin(), nodes.end(), src) == nodes.end())
      e.fail(
          fmt::format("'{}' is neither a node ({}) nor SPEC:TYPE with SPEC an existing spec file ('{}' "
                      "is no file, as given or beside the scenario)",
                      src, join(nodes), src.substr(0, src.rfind(':'))));
    pugi::xml_node c = e.cluster(src);
    for (auto p : c.children("prop")) {
      std::string id = p.attribute("id").value();
      if (id.rfind("gpu_", 0) == 0) props.push_back({id, p.attribute("value").value()});
    }
  }
  if (std::none_of(props.begin(), props.end(), [](auto& p) { return p.first == "gpu_flops_fp32"; }))
    e.fail(fmt::format("'{}' gives no gpu_flops_fp32", src));
  return props;
}

// gpu:NODES=NODE | gpu:NODES=SPEC.json:TYPE: the nodes' gpu_* properties (and speed) become the source's.
void edit_gpu(PlatformEdit& e, const std::string& rest) {
  const auto eq = rest.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == rest.size())
    e.fail("expected gpu:NODES=NODE or gpu:NODES=SPEC.json:TYPE");
  auto props = gpu_source(e, rest.substr(eq + 1));
  for (auto c : e.match_clusters(rest.substr(0, eq))) {
    const std::string what = fmt::format("node {}", c.attribute("id").value());
    // Properties of the old GPU that the new one does not state would leak into it: drop them.
    std::vector<pugi::xml_node> old;
    for (auto p : c.children("prop")) {
      std::string id = p.attribute("id").value();
      if (id.rfind("gpu_", 0) == 0 &&
          std::none_of(props.begin(), props.end(), [&](auto& q) { return q.first == id; }))
        old.push_back(p);
    }
    for (auto p : old) {
      e.note(fmt::format("{} prop {}: {} -> (removed)", what, p.attribute("id").value(),
                         p.attribute("value").value()));
      c.remove_child(p);
    }
    for (const auto& [k, v] : props) e.set_prop(c, k, v, what);
    for (const auto& [k, v] : props)
      if (k == "gpu_flops_fp32") e.set_attr(c, "speed", v, what);
  }
}

// A what-if states a figure: the range stated beside the old one (core/platform/figure_range.hpp) no longer
// applies to it, and would refuse a value outside it, so it goes (an edit of the range itself stays).
void drop_range(PlatformEdit& e, pugi::xml_node owner, const std::string& key, const std::string& what) {
  if (!range_base_key(key).empty()) return;
  const std::string id = key + std::string(kRangeSuffix);
  if (pugi::xml_node r = owner.find_child_by_attribute("prop", "id", id.c_str())) {
    e.note(fmt::format("{} prop {}: {} -> (removed)", what, id, r.attribute("value").value()));
    owner.remove_child(r);
  }
}

// prop:NODES:KEY=VALUE, known keys checked for their unit or range.
void edit_prop(PlatformEdit& e, const std::string& rest) {
  PlatformEdit::Assign a = e.split_assign(rest, true);
  // A key vitsim does not read changes nothing (issue 39 item 24: prop:n*:bogus_key=1 was accepted): refused
  // with the node, GPU and link properties a node's <prop> may set (a zone's go by zone:KEY).
  const std::string_view base = range_base_key(a.name);
  const PlatformProp* row = find_platform_prop(base.empty() ? std::string_view(a.name) : base);
  if (!row || row->owner == PropOwner::Zone) {
    std::vector<std::string> keys;
    for (const PlatformProp& q : platform_props())
      if (q.owner != PropOwner::Zone) keys.emplace_back(q.key);
    e.fail(fmt::format(
        "'{}' is not a property vitsim reads on a node{}{}; valid: {} (and a figure's KEY{} for its range; a "
        "zone's properties go by zone:KEY=VALUE)",
        echo(a.name), did_you_mean(a.name, keys), row ? fmt::format(" ({} is the top zone's)", row->key) : "",
        fmt::join(keys, ", "), kRangeSuffix));
  }
  if (const PlatformProp* p = base.empty() ? row : nullptr; p && checked_on_edit(*p)) {
    if (p->type == PropType::Quantity)
      e.check_unit(a.value, p->unit, p->range);
    else
      e.check_number(*p, a.value);
  }
  for (auto c : e.match_clusters(a.target)) {
    const std::string what = fmt::format("node {}", c.attribute("id").value());
    e.set_prop(c, a.name, a.value, what);
    drop_range(e, c, a.name, what);
  }
}

// zone:KEY=VALUE on the top zone.
void edit_zone(PlatformEdit& e, const std::string& rest) {
  PlatformEdit::Assign a = e.split_assign(rest, false);
  pugi::xml_node z = e.top_zone();
  const std::string what = fmt::format("zone {}", z.attribute("id").value());
  e.set_prop(z, a.name, a.value, what);
  drop_range(e, z, a.name, what);
}

// loader:workers=N: a scenario setting, applied by resolve(); here only recorded.
void edit_loader(PlatformEdit& e, const std::string& rest) {
  if (rest.rfind("workers=", 0) != 0) e.fail("expected loader:workers=N");
  e.note(fmt::format("scenario loader.workers = {}", rest.substr(8)));
}

// The kinds, in the order the "expected KIND:..." message lists them. Adding a kind is a row here and
// its edit_ function (docs/plan.md "What-ifs" lists every kind: tests/cli/test_descriptors.cpp checks it).
struct WhatIfKind {
  const char* name;
  void (*apply)(PlatformEdit&, const std::string&);
};
const std::vector<WhatIfKind>& kinds() {
  static const std::vector<WhatIfKind> k{{"link", edit_link}, {"gpu", edit_gpu},     {"prop", edit_prop},
                                         {"zone", edit_zone}, {"nodes", edit_nodes}, {"loader", edit_loader}};
  return k;
}

WhatIfEffect run_edit(pugi::xml_document& doc, const std::string& edit, const std::string& base_dir,
                      long long max_routes) {
  PlatformEdit e(doc, edit, base_dir, max_routes);
  const std::vector<std::string> names = what_if_kinds();
  const auto colon = edit.find(':');
  if (colon == std::string::npos) e.fail("expected KIND:..., KIND one of " + join(names));
  const std::string kind = edit.substr(0, colon);
  const auto it =
      std::find_if(kinds().begin(), kinds().end(), [&](const WhatIfKind& k) { return kind == k.name; });
  if (it == kinds().end()) {
    std::vector<std::string> sorted = names;
    std::sort(sorted.begin(), sorted.end());
    e.fail(fmt::format("unknown kind '{}'; valid: {}", kind, join(sorted)));
  }
  it->apply(e, edit.substr(colon + 1));
  return WhatIfEffect{edit, e.take_changes()};
}

}  // namespace
}  // namespace whatif_detail

std::vector<std::string> what_if_kinds() {
  std::vector<std::string> out;
  for (const auto& k : whatif_detail::kinds()) out.push_back(k.name);
  return out;
}

std::string apply_what_ifs(const std::string& platform_path, const std::vector<std::string>& edits,
                           std::vector<WhatIfEffect>* effects, const std::string& base_dir,
                           long long max_routes) {
  const std::string text = read_input_file(platform_path, "platform file");
  pugi::xml_document doc;
  auto res = doc.load_buffer(text.data(), text.size(), pugi::parse_full);
  if (!res) throw Error(Origin{platform_path, 0}, fmt::format("malformed XML: {}", res.description()));
  for (const auto& e : edits) {
    WhatIfEffect eff = whatif_detail::run_edit(doc, e, base_dir, max_routes);
    if (effects) effects->push_back(std::move(eff));
  }
  // Name the edits in the copy, for whoever opens it.
  std::string note = " Edited by vitsim what-ifs from " + platform_path + ": ";
  for (const auto& e : edits) note += "[" + e + "] ";
  pugi::xml_node root = doc.document_element();
  std::string safe;
  for (char ch : note)
    safe += (ch == '-' && !safe.empty() && safe.back() == '-') ? ' ' : ch;  // no "--" in comments
  doc.insert_child_before(pugi::node_comment, root).set_value(safe.c_str());
  std::ostringstream out;
  doc.save(out, "  ");
  return out.str();
}

EditedPlatforms::~EditedPlatforms() = default;  // the TempDir removes the edited copies

namespace {

// An edit of a link's bandwidth or transport that leaves its effective bandwidth where it was (a faster
// NIC behind NCCL sockets stays socket-limited: transport.hpp): a note naming what still limits the link
// and which edit would move it, so that "+0% time" is not left unexplained (issue 28).
void note_unchanged_links(PlatformFacts before, PlatformFacts after, std::vector<WhatIfEffect>& eff,
                          const EditedPlatforms::LinkConnections& connections, const Scenario& s) {
  if (connections)  // the connections the simulation will weigh each link with
    for (PlatformFacts* f : {&before, &after}) {
      const std::vector<int> c = connections(*f, s);
      for (size_t i = 0; i < f->links.size() && i < c.size(); ++i) f->links[i].connections = c[i];
    }
  for (const auto& a : after.links) {
    const auto it = std::find_if(before.links.begin(), before.links.end(),
                                 [&](const LinkFacts& l) { return l.id == a.id; });
    if (it == before.links.end() || (it->bandwidth == a.bandwidth && it->transport == a.transport)) continue;
    const LinkEffect was = link_effect(*it), now = link_effect(a);
    if (std::fabs(now.bandwidth - was.bandwidth) > 1e-9 * was.bandwidth) continue;
    const std::string fix =
        a.transport == Transport::Tcp
            ? "more NCCL sockets (zone:nccl_socket_nthreads=N or zone:nccl_nsocks_perthread=N, threads x "
              "sockets at most 64), or the verbs transport where the NIC runs RoCE or InfiniBand "
              "(zone:transport=roce)"
        : a.transport == Transport::PcieHost
            ? "peer-to-peer between the GPUs (the cluster's intranode_transport=pcie_p2p or nvlink)"
            : "the link's transport settings (docs/platforms.md)";
    const std::string note = fmt::format("link {}: effective bandwidth unchanged at {} ({}); to move it: {}",
                                         a.id, units::format_bandwidth(now.bandwidth), now.how, fix);
    if (eff.empty()) eff.push_back(WhatIfEffect{"(what the edits leave)", {}});
    eff.back().changes.push_back(note);
  }
}

}  // namespace

void EditedPlatforms::apply(std::vector<Scenario>& points) {
  for (auto& s : points) {
    std::vector<std::string> edits;
    for (const auto& e : s.what_ifs)
      if (e.rfind("loader:", 0) != 0) edits.push_back(e);
    if (edits.empty()) continue;
    const std::string key = s.cluster.platform + "\n" + whatif_detail::join(edits, "\n");
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      if (!dir_) dir_ = std::make_unique<TempDir>("vitsim-whatif-");  // registered: removed on Ctrl-C too
      std::vector<WhatIfEffect> eff;
      std::string text;
      try {
        text = apply_what_ifs(s.cluster.platform, edits, &eff, fs::path(s.file).parent_path().string(),
                              s.simulation.max_routes);
        // The edited copy is read here, under the user's names: an error in it names the scenario line that
        // holds the what-ifs and the platform they edit, never the temporary copy.
        const PlatformFacts after =
            read_platform_text(s.cluster.platform + " (as edited by the what-ifs)", text);
        note_unchanged_links(read_platform_facts(s.cluster.platform), after, eff, connections_, s);
      } catch (const Error& e) {
        // A line of the in-memory copy would mislead (the copy is re-indented): name the platform alone.
        std::string what = e.what();
        const std::string tag = " (as edited by the what-ifs):";
        if (auto at = what.find(tag); at != std::string::npos) {
          size_t end = at + tag.size();
          while (end < what.size() && std::isdigit(static_cast<unsigned char>(what[end]))) ++end;
          if (end < what.size() && what[end] == ':' && end > at + tag.size())
            what.erase(at + tag.size() - 1, end - (at + tag.size() - 1));
        }
        throw Error(s.origin_of("whatif.edits"), what);
      }
      const std::string path = fmt::format("{}/{}-{}.xml", dir_->path(),
                                           fs::path(s.cluster.platform).stem().string(), cache_.size());
      write_file_atomic(path, text);
      for (auto& e : eff) effects_.push_back(std::move(e));
      it = cache_.emplace(key, path).first;
    }
    s.cluster.platform_label = s.cluster.platform + " (as edited by the what-ifs)";
    s.cluster.platform = it->second;
  }
}

namespace {

// The node glob of an edit that names nodes, "" for the kinds that do not (zone, nodes, loader, a link by
// id).
std::string node_glob(const std::string& edit) {
  if (edit.rfind("gpu:", 0) == 0)
    return edit.substr(4, edit.find('=') == std::string::npos ? std::string::npos : edit.find('=') - 4);
  if (edit.rfind("prop:", 0) == 0) {
    const std::string rest = edit.substr(5);
    const auto colon = rest.find(':');
    return colon == std::string::npos ? "" : rest.substr(0, colon);
  }
  if (edit.rfind("link:", 0) == 0) {
    const std::string rest = edit.substr(5);
    for (const char* path : {".pcie:", ".backbone:", ".h2d:"})
      if (const auto at = rest.find(path); at != std::string::npos) return rest.substr(0, at);
  }
  return "";
}

std::string name_list(const std::vector<std::string>& names, size_t most = 4) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < most; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > most) out += fmt::format(" and {} more", names.size() - most);
  return out;
}

}  // namespace

std::vector<std::string> what_if_unused_notes(const std::vector<std::string>& edits,
                                              const PlatformFacts& facts,
                                              const std::vector<std::string>& used_hosts) {
  const std::set<std::string> hosts(used_hosts.begin(), used_hosts.end());
  std::vector<std::string> used;
  for (const NodeFacts& n : facts.nodes)
    if (std::any_of(n.gpus.begin(), n.gpus.end(), [&](const std::string& h) { return hosts.count(h) > 0; }))
      used.push_back(n.name);
  std::vector<std::string> out;
  for (const std::string& e : edits) {
    const std::string glob = node_glob(e);
    if (glob.empty()) continue;
    std::vector<std::string> edited;
    bool touches_used = false;
    for (const NodeFacts& n : facts.nodes)
      if (whatif_detail::glob_match(glob, n.name)) {
        edited.push_back(n.name);
        touches_used = touches_used || std::find(used.begin(), used.end(), n.name) != used.end();
      }
    if (edited.empty() || touches_used) continue;
    out.push_back(fmt::format("what-if '{}': edits node{} {}, {} (it runs on {}): it changes nothing here", e,
                              edited.size() == 1 ? "" : "s", name_list(edited), kWhatIfUnusedMark,
                              name_list(used)));
  }
  return out;
}

std::vector<std::string> what_if_files(const std::vector<std::string>& edits, const std::string& base_dir) {
  std::vector<std::string> out;
  for (const auto& e : edits) {
    const auto eq = e.find('=');
    if (e.rfind("gpu:", 0) != 0 || eq == std::string::npos) continue;
    if (const auto spec_source = whatif_detail::gpu_spec_source(e.substr(eq + 1), base_dir))  // as gpu_source
      out.push_back(spec_source->first.string());
  }
  return out;
}

}  // namespace vitsim
