#include "vitsim/sim/compute/registries.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/model/framework.hpp"
#include "vitsim/sim/collectives/collective.hpp"
#include "vitsim/sim/compute/compute_model.hpp"

namespace vitsim::sim {

std::vector<Registry> registries() {
  Registry coll{"collectives",
                "parallelism.collective: the collective algorithms, with the NCCL algorithm and "
                "protocol each stands for",
                {}};
  for (const CollectiveInfo& c : collectives()) coll.entries.push_back({c.name, c.stands_for, c.description});
  Registry compute{"compute-models", "compute.model: where each device's compute times come from", {}};
  for (const ComputeModelInfo& m : compute_models())
    compute.entries.push_back({m.name, m.stands_for, m.description});
  Registry fw{"frameworks", "training.framework: whose code runs the optimizer step, and its version", {}};
  for (const FrameworkInfo& f : frameworks()) fw.entries.push_back({f.name, f.stands_for, f.description});
  return {coll, compute, fw};
}

std::vector<std::string> registry_names() {
  std::vector<std::string> out;
  for (const Registry& r : registries()) out.push_back(r.name);
  return out;
}

std::string registry_listing(const std::string& which, bool json) {
  const std::vector<Registry> all = registries();
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  std::string text;
  if (which.empty()) {
    for (const Registry& r : all) {
      out.push_back({{"name", r.name}, {"about", r.about}});
      text += r.name + "\t" + r.about + "\n";
    }
    return json ? out.dump(2) + "\n" : text;
  }
  for (const Registry& r : all) {
    if (r.name != which) continue;
    for (const RegistryEntry& e : r.entries) {
      out.push_back({{"name", e.name}, {"stands_for", e.stands_for}, {"description", e.description}});
      text += e.name + "\t" + e.stands_for + "\t" + e.description + "\n";
    }
    return json ? out.dump(2) + "\n" : text;
  }
  std::string valid;
  for (const Registry& r : all) valid += (valid.empty() ? "" : ", ") + r.name;
  throw Error(fmt::format("unknown list '{}'; valid: {}", which, valid));
}

}  // namespace vitsim::sim
