#include "vitsim/core/whatif.hpp"

#include <fmt/format.h>
#include <fnmatch.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <pugixml.hpp>
#include <set>
#include <sstream>

#include "vitsim/core/io.hpp"
#include "vitsim/core/platform_writer.hpp"
#include "vitsim/core/platform.hpp"
#include "vitsim/core/units.hpp"

namespace vitsim {
namespace fs = std::filesystem;

namespace {

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : sep) + x;
  return out;
}

bool glob_match(const std::string& pattern, const std::string& name) {
  return fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

// The unit each known property carries, so that a what-if with a bad value fails on the edit itself
// (with the same range the platform reader applies: bandwidths and speeds > 0, times >= 0).
const std::map<std::string, units::Kind>& prop_kinds() {
  static const std::map<std::string, units::Kind> k{
      {"gpu_flops_fp32", units::Kind::Flops}, {"gpu_flops_fp16", units::Kind::Flops},
      {"gpu_flops_bf16", units::Kind::Flops}, {"gpu_mem_bw", units::Kind::Bandwidth},
      {"gpu_mem", units::Kind::Bytes},        {"gpu_reserved", units::Kind::Bytes},
      {"gpu_kernel_overhead", units::Kind::Time}, {"loader_bw", units::Kind::Bandwidth},
      {"loader_image_overhead", units::Kind::Time}, {"h2d_pageable_bw", units::Kind::Bandwidth},
      {"gpu_sync_overhead", units::Kind::Time}, {"host_op_overhead", units::Kind::Time},
      {"socket_bw", units::Kind::Bandwidth},  {"staging_bw", units::Kind::Bandwidth},
      {"tcp_stack_latency", units::Kind::Time}, {"ib_stack_latency", units::Kind::Time},
  };
  return k;
}

class Editor {
 public:
  Editor(pugi::xml_document& doc, std::string edit, std::string base_dir, long long max_routes)
      : doc_(doc), edit_(std::move(edit)), base_dir_(std::move(base_dir)), max_routes_(max_routes) {}

  WhatIfEffect run() {
    WhatIfEffect eff;
    eff.edit = edit_;
    const auto colon = edit_.find(':');
    if (colon == std::string::npos) fail("expected KIND:..., KIND one of link, gpu, prop, zone, nodes, loader");
    const std::string kind = edit_.substr(0, colon);
    const std::string rest = edit_.substr(colon + 1);
    if (kind == "link") link(rest);
    else if (kind == "gpu") gpu(rest);
    else if (kind == "prop") prop(rest);
    else if (kind == "zone") zone_prop(rest);
    else if (kind == "nodes") nodes(rest);
    else if (kind == "loader") {
      if (rest.rfind("workers=", 0) != 0) fail("expected loader:workers=N");
      changes_.push_back(fmt::format("scenario loader.workers = {}", rest.substr(8)));
    } else
      fail(fmt::format("unknown kind '{}'; valid: gpu, link, loader, nodes, prop, zone", kind));
    eff.changes = std::move(changes_);
    return eff;
  }

 private:
  pugi::xml_document& doc_;
  std::string edit_;
  std::string base_dir_;
  long long max_routes_;
  std::vector<std::string> changes_;

  [[noreturn]] void fail(const std::string& why) const { throw Error(fmt::format("what-if '{}': {}", echo(edit_, 60), why)); }

  pugi::xml_node top_zone() const {
    auto z = doc_.document_element().child("zone");
    if (!z) fail("the platform has no <zone>");
    return z;
  }
  std::vector<pugi::xml_node> clusters() const {
    std::vector<pugi::xml_node> out;
    for (auto x : doc_.select_nodes("//cluster")) out.push_back(x.node());
    return out;
  }
  std::vector<std::string> cluster_names() const {
    std::vector<std::string> out;
    for (auto c : clusters()) out.push_back(c.attribute("id").value());
    return out;
  }
  std::vector<pugi::xml_node> match_clusters(const std::string& glob) const {
    std::vector<pugi::xml_node> out;
    for (auto c : clusters())
      if (glob_match(glob, c.attribute("id").value())) out.push_back(c);
    if (out.empty()) fail(fmt::format("no node matches '{}'; nodes: {}", glob, join(cluster_names())));
    return out;
  }
  pugi::xml_node cluster(const std::string& name) const {
    for (auto c : clusters())
      if (name == c.attribute("id").value()) return c;
    fail(fmt::format("no node '{}'; nodes: {}", name, join(cluster_names())));
  }

  // "TARGET:NAME=VALUE" -> target, name, value (the target may itself hold no ':').
  struct Assign {
    std::string target, name, value;
  };
  Assign split_assign(const std::string& rest, bool with_target) const {
    const auto eq = rest.find('=');
    if (eq == std::string::npos) fail("expected NAME=VALUE");
    Assign a;
    a.value = rest.substr(eq + 1);
    std::string left = rest.substr(0, eq);
    if (with_target) {
      const auto c = left.rfind(':');
      if (c == std::string::npos || c == 0) fail("expected TARGET:NAME=VALUE");
      a.target = left.substr(0, c);
      a.name = left.substr(c + 1);
    } else {
      a.name = left;
    }
    if (a.name.empty() || a.value.empty()) fail("expected NAME=VALUE with both given");
    return a;
  }
  void check_unit(const std::string& value, units::Kind kind, bool may_be_zero = false) const {
    try {
      units::parse(value, kind, kind == units::Kind::Time || may_be_zero ? units::non_negative() : units::positive());
    } catch (const Error& e) {
      fail(e.what());
    }
  }
  // Plain-number properties, with the platform reader's ranges.
  void check_number(const std::string& key, const std::string& value) const {
    try {
      if (key == "gpu_efficiency" || key == "gpu_gemm_efficiency" || key == "gpu_attn_efficiency" ||
          key == "gpu_mem_efficiency")
        units::parse_number(value, units::fraction());
      else if (key == "gpu_gemm_k_half")
        units::parse_number(value, units::closed(0, 1e12));
      else if (key == "cpu_cores" || key == "gpu_sm_count")
        units::parse_integer(value, 1, 1 << 20);
    } catch (const Error& e) {
      fail(fmt::format("{}: {}", key, e.what()));
    }
  }
  void set_attr(pugi::xml_node n, const char* attr, const std::string& value, const std::string& what) {
    auto a = n.attribute(attr);
    const std::string before = a ? a.value() : "(unset)";
    if (!a) a = n.append_attribute(attr);
    a.set_value(value.c_str());
    changes_.push_back(fmt::format("{} {}: {} -> {}", what, attr, before, value));
  }
  void set_prop(pugi::xml_node owner, const std::string& key, const std::string& value, const std::string& what) {
    pugi::xml_node p = owner.find_child_by_attribute("prop", "id", key.c_str());
    std::string before = "(unset)";
    if (p) {
      before = p.attribute("value").value();
    } else {
      pugi::xml_node last;
      for (auto q : owner.children("prop")) last = q;
      p = last ? owner.insert_child_after("prop", last) : owner.prepend_child("prop");
      p.append_attribute("id") = key.c_str();
      p.append_attribute("value");
    }
    p.attribute("value").set_value(value.c_str());
    changes_.push_back(fmt::format("{} prop {}: {} -> {}", what, key, before, value));
  }

  void link(const std::string& rest) {
    Assign a = split_assign(rest, true);
    if (a.name != "bandwidth" && a.name != "latency") fail(fmt::format("unknown link attribute '{}'; valid: bandwidth, latency", a.name));
    const bool bw = a.name == "bandwidth";
    check_unit(a.value, bw ? units::Kind::Bandwidth : units::Kind::Time);
    for (const auto& [suffix, bw_attr, lat_attr] :
         {std::tuple<std::string, const char*, const char*>{".pcie", "bw", "lat"},
          {".backbone", "bb_bw", "bb_lat"},
          {".h2d", "loopback_bw", "loopback_lat"}}) {
      if (a.target.size() > suffix.size() && a.target.compare(a.target.size() - suffix.size(), suffix.size(), suffix) == 0) {
        for (auto c : match_clusters(a.target.substr(0, a.target.size() - suffix.size())))
          set_attr(c, bw ? bw_attr : lat_attr, a.value, fmt::format("node {}{}", c.attribute("id").value(), suffix));
        return;
      }
    }
    std::vector<std::string> ids;
    bool any = false;
    for (auto x : doc_.select_nodes("//link")) {
      pugi::xml_node l = x.node();
      ids.push_back(l.attribute("id").value());
      if (!glob_match(a.target, l.attribute("id").value())) continue;
      set_attr(l, a.name.c_str(), a.value, fmt::format("link {}", l.attribute("id").value()));
      any = true;
    }
    if (!any)
      fail(fmt::format("no link matches '{}'; links: {}; or NODE.pcie, NODE.backbone, NODE.h2d", a.target,
                       ids.size() > 12 ? join({ids.begin(), ids.begin() + 12}) + ", ..." : join(ids)));
  }

  // GPU properties of another node of this platform, or of a `vitsim platform` spec's GPU type.
  std::vector<std::pair<std::string, std::string>> gpu_source(const std::string& src) const {
    std::vector<std::pair<std::string, std::string>> props;
    const auto js = src.find(".json:");
    if (js != std::string::npos) {
      fs::path file = src.substr(0, js + 5);
      const std::string type = src.substr(js + 6);
      if (file.is_relative() && !fs::exists(file)) file = fs::path(base_dir_) / file;
      // A `vitsim platform` spec (platforms/specs/*.json): the type's properties as the writer states them.
      PlatformSpec spec;
      try {
        spec = parse_platform_spec(read_input_file(file.string(), "GPU type spec"), file.string());
      } catch (const Error& e) {
        fail(e.what());
      }
      auto t = spec.gpu_types.find(type);
      if (t == spec.gpu_types.end()) {
        std::vector<std::string> valid;
        for (const auto& [k, v] : spec.gpu_types) valid.push_back(k);
        fail(fmt::format("{} has no GPU type '{}'; types: {}", file.string(), type, join(valid)));
      }
      for (const auto& [k, v] : t->second.props)
        if (k.rfind("gpu_", 0) == 0) props.push_back({k, v});
    } else {
      pugi::xml_node c = cluster(src);
      for (auto p : c.children("prop")) {
        std::string id = p.attribute("id").value();
        if (id.rfind("gpu_", 0) == 0) props.push_back({id, p.attribute("value").value()});
      }
    }
    if (std::none_of(props.begin(), props.end(), [](auto& p) { return p.first == "gpu_flops_fp32"; }))
      fail(fmt::format("'{}' gives no gpu_flops_fp32", src));
    return props;
  }

  void gpu(const std::string& rest) {
    const auto eq = rest.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == rest.size()) fail("expected gpu:NODES=NODE or gpu:NODES=SPEC.json:TYPE");
    auto props = gpu_source(rest.substr(eq + 1));
    for (auto c : match_clusters(rest.substr(0, eq))) {
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
        changes_.push_back(fmt::format("{} prop {}: {} -> (removed)", what, p.attribute("id").value(), p.attribute("value").value()));
        c.remove_child(p);
      }
      for (const auto& [k, v] : props) set_prop(c, k, v, what);
      for (const auto& [k, v] : props)
        if (k == "gpu_flops_fp32") set_attr(c, "speed", v, what);
    }
  }

  void prop(const std::string& rest) {
    Assign a = split_assign(rest, true);
    if (auto it = prop_kinds().find(a.name); it != prop_kinds().end())
      check_unit(a.value, it->second, a.name == "gpu_reserved");
    check_number(a.name, a.value);
    for (auto c : match_clusters(a.target)) set_prop(c, a.name, a.value, fmt::format("node {}", c.attribute("id").value()));
  }

  void zone_prop(const std::string& rest) {
    Assign a = split_assign(rest, false);
    pugi::xml_node z = top_zone();
    set_prop(z, a.name, a.value, fmt::format("zone {}", z.attribute("id").value()));
  }

  // --- nodes: the layout `vitsim platform` writes (README "Platform files"): clusters in a Full
  // zone, one NIC <link> per node, a <zoneRoute> per pair: src's NIC UP, then dst's NIC DOWN.
  std::vector<pugi::xml_node> routes_of(const pugi::xml_node& zone) const {
    std::vector<pugi::xml_node> out;
    for (auto r : zone.children("zoneRoute")) out.push_back(r);
    return out;
  }
  // The link ids a node puts on its routes (its NIC): UP links where it is the source.
  std::vector<std::string> nic_links(const pugi::xml_node& zone, const std::string& node) const {
    for (auto r : zone.children("zoneRoute")) {
      const bool src = node == r.attribute("src").value();
      const bool dst = node == r.attribute("dst").value();
      if (!src && !dst) continue;
      std::vector<std::string> out;
      for (auto l : r.children("link_ctn"))
        if (std::string(l.attribute("direction").value()) == (src ? "UP" : "DOWN")) out.push_back(l.attribute("id").value());
      if (!out.empty()) return out;
    }
    fail(fmt::format("node '{}' has no zoneRoute with UP/DOWN NIC links to copy (a one-node platform, or not "
                     "the layout vitsim platform writes)", node));
  }

  void remove_nodes(const std::vector<std::string>& names) {
    std::set<std::string> gone(names.begin(), names.end());
    std::set<std::string> maybe_unused;
    pugi::xml_node zone = top_zone();
    for (auto r : routes_of(zone)) {
      if (!gone.count(r.attribute("src").value()) && !gone.count(r.attribute("dst").value())) continue;
      for (auto l : r.children("link_ctn")) maybe_unused.insert(l.attribute("id").value());
      zone.remove_child(r);
    }
    for (const auto& n : names) {
      pugi::xml_node c = cluster(n);
      c.parent().remove_child(c);
      changes_.push_back(fmt::format("node {} removed", n));
    }
    std::set<std::string> used;
    for (auto x : doc_.select_nodes("//link_ctn")) used.insert(x.node().attribute("id").value());
    for (const auto& id : maybe_unused) {
      if (used.count(id)) continue;
      pugi::xml_node l = zone.find_child_by_attribute("link", "id", id.c_str());
      if (!l) continue;
      zone.remove_child(l);
      changes_.push_back(fmt::format("link {} removed", id));
    }
    if (clusters().empty()) fail("no node left");
  }

  std::string fresh_name(const std::string& like, std::set<std::string>& taken) const {
    size_t d = like.size();
    while (d > 0 && std::isdigit(static_cast<unsigned char>(like[d - 1]))) --d;
    const std::string base = like.substr(0, d);
    const size_t width = like.size() - d;
    long k = width ? std::stol(like.substr(d)) + 1 : 1;
    for (;; ++k) {
      std::string name = width ? fmt::format("{}{:0{}}", base, k, width) : fmt::format("{}_{}", base, k);
      if (taken.insert(name).second) return name;
    }
  }

  static std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
    return s;
  }

  void add_nodes(int count, const std::string& like_name) {
    pugi::xml_node zone = top_zone();
    {
      // The layout is a Full zone: a route per pair of nodes. Estimate before building it.
      const double have = static_cast<double>(std::distance(zone.children("cluster").begin(), zone.children("cluster").end()));
      const double total = have + count;
      const double routes = total * (total - 1) / 2;
      constexpr double kBytesPerRoute = 600;  // measured: ~330 B of XML + pugixml nodes, and SimGrid's copy
      if (routes > static_cast<double>(max_routes_))
        fail(fmt::format("{} nodes in a Full zone need {:.3g} routes (one per pair, about {} to build and "
                         "simulate); the limit is {} routes: raise it with --set simulation.max_routes=N",
                         static_cast<long long>(total), routes, units::format_bytes(routes * kBytesPerRoute), max_routes_));
    }
    pugi::xml_node like = cluster(like_name);
    if (like.parent() != zone) fail(fmt::format("node '{}' is not in the top zone", like_name));
    const auto like_nics = nic_links(zone, like_name);
    std::set<std::string> taken;
    for (const auto& n : cluster_names()) taken.insert(n);
    for (int i = 0; i < count; ++i) {
      // Existing nodes of the top zone and their NICs, before this one is added.
      std::vector<std::pair<std::string, std::vector<std::string>>> peers;
      for (auto c : zone.children("cluster")) {
        std::string n = c.attribute("id").value();
        peers.push_back({n, nic_links(zone, n)});
      }
      const std::string name = fresh_name(like_name, taken);
      pugi::xml_node last_cluster;
      for (auto c : zone.children("cluster")) last_cluster = c;
      pugi::xml_node c = zone.insert_copy_after(like, last_cluster);
      c.attribute("id").set_value(name.c_str());
      for (const char* a : {"prefix", "router_id"}) {
        std::string v = c.attribute(a).value();
        if (v.find(like_name) == std::string::npos)
          fail(fmt::format("node '{}': its {} '{}' does not contain its name, so a copy cannot be renamed", like_name, a, v));
        c.attribute(a).set_value(replace_all(v, like_name, name).c_str());
      }
      std::vector<std::string> nics;
      pugi::xml_node last_link;
      for (auto l : zone.children("link")) last_link = l;
      for (const auto& id : like_nics) {
        if (id.find(like_name) == std::string::npos)
          fail(fmt::format("node '{}': its NIC link '{}' does not contain its name, so a copy cannot be renamed", like_name, id));
        pugi::xml_node src = zone.find_child_by_attribute("link", "id", id.c_str());
        if (!src) fail(fmt::format("no <link id=\"{}\"> in the top zone", id));
        pugi::xml_node l = last_link ? zone.insert_copy_after(src, last_link) : zone.append_copy(src);
        last_link = l;
        nics.push_back(replace_all(id, like_name, name));
        l.attribute("id").set_value(nics.back().c_str());
      }
      const std::string router = c.attribute("router_id").value();
      for (const auto& [peer, peer_nics] : peers) {
        pugi::xml_node r = zone.append_child("zoneRoute");
        pugi::xml_node pc = cluster(peer);
        r.append_attribute("src") = peer.c_str();
        r.append_attribute("dst") = name.c_str();
        r.append_attribute("gw_src") = pc.attribute("router_id").value();
        r.append_attribute("gw_dst") = router.c_str();
        for (const auto& id : peer_nics) {
          auto l = r.append_child("link_ctn");
          l.append_attribute("id") = id.c_str();
          l.append_attribute("direction") = "UP";
        }
        for (const auto& id : nics) {
          auto l = r.append_child("link_ctn");
          l.append_attribute("id") = id.c_str();
          l.append_attribute("direction") = "DOWN";
        }
      }
      changes_.push_back(fmt::format("node {} added (a copy of {}, {} routes)", name, like_name, peers.size()));
    }
  }

  void nodes(const std::string& rest) {
    if (rest.rfind("remove=", 0) == 0) {
      std::istringstream in(rest.substr(7));
      std::vector<std::string> names;
      std::string g;
      while (in >> g)
        for (auto c : match_clusters(g)) names.push_back(c.attribute("id").value());
      if (names.empty()) fail("expected nodes:remove=NAME[ NAME...]");
      std::sort(names.begin(), names.end());
      names.erase(std::unique(names.begin(), names.end()), names.end());
      remove_nodes(names);
      return;
    }
    auto number = [&](const std::string& v) {
      size_t used = 0;
      long n = -1;
      try {
        n = std::stol(v, &used);
      } catch (const std::logic_error&) {
      }
      if (used != v.size() || n < 0 || n > 100000) fail(fmt::format("'{}' is not a node count (0 .. 100000)", echo(v)));
      return static_cast<int>(n);
    };
    auto names = cluster_names();
    if (rest.rfind("add=", 0) == 0) {
      std::string v = rest.substr(4);
      std::string like = names.back();
      if (auto p = v.find(":like="); p != std::string::npos) {
        like = v.substr(p + 6);
        v = v.substr(0, p);
      }
      add_nodes(number(v), like);
      return;
    }
    if (rest.rfind("count=", 0) == 0) {
      const int want = number(rest.substr(6));
      if (want < 1) fail("a platform needs at least one node");
      const int have = static_cast<int>(names.size());
      if (want > have) add_nodes(want - have, names.back());
      if (want < have) remove_nodes({names.begin() + want, names.end()});
      if (want == have) changes_.push_back(fmt::format("already {} nodes", have));
      return;
    }
    fail("expected nodes:remove=NAMES, nodes:add=K[:like=NODE] or nodes:count=N");
  }
};

}  // namespace

std::string apply_what_ifs(const std::string& platform_path, const std::vector<std::string>& edits,
                           std::vector<WhatIfEffect>* effects, const std::string& base_dir, long long max_routes) {
  const std::string text = read_input_file(platform_path, "platform file");
  pugi::xml_document doc;
  auto res = doc.load_buffer(text.data(), text.size(), pugi::parse_full);
  if (!res) throw Error(Origin{platform_path, 0}, fmt::format("malformed XML: {}", res.description()));
  for (const auto& e : edits) {
    WhatIfEffect eff = Editor(doc, e, base_dir, max_routes).run();
    if (effects) effects->push_back(std::move(eff));
  }
  // Name the edits in the copy, for whoever opens it.
  std::string note = " Edited by vitsim what-ifs from " + platform_path + ": ";
  for (const auto& e : edits) note += "[" + e + "] ";
  pugi::xml_node root = doc.document_element();
  std::string safe;
  for (char ch : note) safe += (ch == '-' && !safe.empty() && safe.back() == '-') ? ' ' : ch;  // no "--" in comments
  doc.insert_child_before(pugi::node_comment, root).set_value(safe.c_str());
  std::ostringstream out;
  doc.save(out, "  ");
  return out.str();
}

EditedPlatforms::~EditedPlatforms() = default;  // the TempDir removes the edited copies

void EditedPlatforms::apply(std::vector<Scenario>& points) {
  for (auto& s : points) {
    std::vector<std::string> edits;
    for (const auto& e : s.what_ifs)
      if (e.rfind("loader:", 0) != 0) edits.push_back(e);
    if (edits.empty()) continue;
    const std::string key = s.cluster.platform + "\n" + join(edits, "\n");
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
        read_platform_text(s.cluster.platform + " (as edited by the what-ifs)", text);
      } catch (const Error& e) {
        // A line of the in-memory copy would mislead (the copy is re-indented): name the platform alone.
        std::string what = e.what();
        const std::string tag = " (as edited by the what-ifs):";
        if (auto at = what.find(tag); at != std::string::npos) {
          size_t end = at + tag.size();
          while (end < what.size() && std::isdigit(static_cast<unsigned char>(what[end]))) ++end;
          if (end < what.size() && what[end] == ':' && end > at + tag.size()) what.erase(at + tag.size() - 1, end - (at + tag.size() - 1));
        }
        throw Error(s.origin_of("whatif.edits"), what);
      }
      const std::string path = fmt::format("{}/{}-{}.xml", dir_->path(), fs::path(s.cluster.platform).stem().string(), cache_.size());
      write_file_atomic(path, text);
      for (auto& e : eff) effects_.push_back(std::move(e));
      it = cache_.emplace(key, path).first;
    }
    s.cluster.platform = it->second;
  }
}

std::vector<std::string> what_if_files(const std::vector<std::string>& edits, const std::string& base_dir) {
  std::vector<std::string> out;
  for (const auto& e : edits) {
    const auto eq = e.find('=');
    if (e.rfind("gpu:", 0) != 0 || eq == std::string::npos) continue;
    const std::string src = e.substr(eq + 1);
    const auto js = src.find(".json:");
    if (js == std::string::npos) continue;
    fs::path file = src.substr(0, js + 5);
    if (file.is_relative() && !fs::exists(file)) file = fs::path(base_dir) / file;  // as gpu_source does
    out.push_back(file.string());
  }
  return out;
}

}  // namespace vitsim
