#pragma once
// The registries that describe themselves, for `vitsim predict --list` and the generated docs lists: the
// collectives (sim/collectives/collective.hpp), the compute models (compute_model.hpp) and the frameworks
// (core/model/framework.hpp), each entry its name, what it stands for and one line.
#include <string>
#include <vector>

namespace vitsim::sim {

struct RegistryEntry {
  std::string name, stands_for, description;
};
struct Registry {
  std::string name;   // "collectives", "compute-models", "frameworks"
  std::string about;  // one line: what the list holds
  std::vector<RegistryEntry> entries;
};

std::vector<Registry> registries();
std::vector<std::string> registry_names();
// One list (`which`, a name of registry_names()) as lines "NAME<TAB>STANDS FOR<TAB>DESCRIPTION", or as a JSON
// array of {"name", "stands_for", "description"} (`json`); with `which` empty, the lists themselves
// ("NAME<TAB>ABOUT", or a JSON array of {"name", "about"}). Throws Error listing the names for an unknown
// one.
std::string registry_listing(const std::string& which, bool json);

}  // namespace vitsim::sim
