#include "vitsim/core/formats/scenario_inputs.hpp"

#include <filesystem>

#include "vitsim/core/formats/whatif.hpp"

namespace vitsim {
namespace fs = std::filesystem;

std::vector<NamedPath> scenario_inputs(const ScenarioFile& f) {
  std::vector<NamedPath> out{{f.path, "the scenario"}};
  // Each value once, given or swept: the number of combinations does not matter here.
  auto add = [&](const std::string& key, const std::string& value, const Origin& o) {
    if (value.empty()) return;
    auto path = [&] {  // as Reader::path resolves it
      fs::path p(value);
      if (p.is_absolute() || o.line == 0) return p.string();
      return (fs::path(o.file).parent_path() / p).lexically_normal().string();
    };
    if (key == "cluster.platform")
      out.push_back({path(), "the platform"});
    else if (key == "deepspeed.config")
      out.push_back({path(), "the DeepSpeed config"});
    else if (key == "whatif.edits")
      for (const auto& file : what_if_files(split_list(value, ';'), fs::path(f.path).parent_path().string()))
        out.push_back({file, "the what-if spec"});
  };
  for (const auto& [key, a] : f.attrs) add(key, a.value, a.origin);
  for (const auto& s : f.sweeps)
    for (const auto& v : s.values) add(s.key, v, s.origin);
  return out;
}

}  // namespace vitsim
