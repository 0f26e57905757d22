#pragma once
// What-ifs: edits of a platform file applied before simulating, one line each (docs/plan.md,
// "What-ifs"). They act on an in-memory copy of the XML (pugixml) that is written to a
// temporary folder; the scenario then points at the copy. The original file is never touched.
//
//   link:GLOB:bandwidth=Q | link:GLOB:latency=Q      a <link> by id (glob * ?), e.g.
//   link:tesla3-nic:bandwidth=1.25GBps link:NODEGLOB.pcie|.backbone|.h2d:bandwidth=Q   a node's PCIe lane,
//   GPU-to-GPU backbone, host->device copy path gpu:NODEGLOB=NODE                                 the GPUs of
//   these nodes become NODE's GPU model (gpu_* props) gpu:NODEGLOB=SPEC.json:TYPE                       ...
//   or a gpu_types entry of a `vitsim platform` spec prop:NODEGLOB:KEY=VALUE                           set
//   any <prop> of these nodes (gpu_mem, loader_bw, cpu_cores...) zone:KEY=VALUE set a <prop> of the top zone
//   (price_per_gpu_hour) nodes:remove=GLOB[ GLOB...]                       remove nodes, their routes and
//   their NIC links nodes:add=K[:like=NODE]                           add K copies of NODE (default: the last
//   node), with routes nodes:count=N                                     add copies of the last node, or
//   remove the last nodes, to N loader:workers=N                                  a scenario edit
//   (loader.workers), applied by resolve()
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/scenario.hpp"

namespace vitsim {

struct PlatformFacts;

// What one edit did, for the output and the tests: the edit and the elements/attributes it changed.
struct WhatIfEffect {
  std::string edit;
  std::vector<std::string>
      changes;  // "link tesla3-nic bandwidth: 0.125GBps -> 1.25GBps", "node vec54 added", ...
};

// Applies the platform edits in order to the platform XML text; returns the edited text. `base_dir`
// resolves relative spec paths. Throws Error("what-if '<edit>': ...") naming what is wrong and the
// valid names. A loader:workers edit is accepted and left to the scenario.
std::string apply_what_ifs(const std::string& platform_path, const std::vector<std::string>& edits,
                           std::vector<WhatIfEffect>* effects = nullptr, const std::string& base_dir = ".",
                           long long max_routes = kDefaultMaxRoutes);

// The kinds of edit (the word before the first ':'), in the order messages list them: link, gpu, prop,
// zone, nodes, loader. The table behind it is in core/src/formats/whatif.cpp; the nodes kind in
// whatif_nodes.cpp.
std::vector<std::string> what_if_kinds();

// The edits among `edits` that name only nodes a point does not use, one note each: "what-if 'EDIT': edits
// node vec5, which this point does not use (it runs on vec0, vec1): it changes nothing here". The kinds
// that name nodes: gpu:NODES=..., prop:NODES:..., link:NODE.pcie|backbone|h2d:...; `facts` is the platform
// the point ran on (the edited copy: the node names are the same), `used_hosts` its GPU host per rank.
// The words that mark such a note (plan's "why nothing changed" picks the top pick's notes by them).
inline constexpr const char* kWhatIfUnusedMark = "which this point does not use";
std::vector<std::string> what_if_unused_notes(const std::vector<std::string>& edits,
                                              const PlatformFacts& facts,
                                              const std::vector<std::string>& used_hosts);

// The files these edits read (gpu:NODES=SPEC.json:TYPE), resolved as apply_what_ifs resolves them.
std::vector<std::string> what_if_files(const std::vector<std::string>& edits,
                                       const std::string& base_dir = ".");

// Owns a temporary folder of edited platforms: apply() rewrites each point's cluster.platform to an
// edited copy when the point has what-ifs (one copy per distinct platform and edit list).
class EditedPlatforms {
 public:
  EditedPlatforms() = default;
  EditedPlatforms(const EditedPlatforms&) = delete;
  EditedPlatforms& operator=(const EditedPlatforms&) = delete;
  ~EditedPlatforms();
  void apply(std::vector<Scenario>& points);
  // The NCCL connections each link of a platform carries (one per link of facts.links, in order; the
  // simulator's nccl_net_connections, which needs NCCL's topology): where set, an edited link's effect is
  // weighed with them, as the simulation will (a socket link's goodput counts its connections).
  using LinkConnections = std::function<std::vector<int>(const PlatformFacts&, const Scenario&)>;
  void set_link_connections(LinkConnections f) { connections_ = std::move(f); }
  // Every effect, per edited copy, in creation order.
  const std::vector<WhatIfEffect>& effects() const { return effects_; }

 private:
  std::unique_ptr<TempDir> dir_;
  std::map<std::string, std::string> cache_;  // platform + edits -> edited path
  std::vector<WhatIfEffect> effects_;
  LinkConnections connections_;
};

}  // namespace vitsim
