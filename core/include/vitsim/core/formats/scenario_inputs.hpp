#pragma once
// The files a scenario reads, for check_output_paths. Apart from the scenario parser
// (core/formats/scenario.hpp), which knows nothing of what-ifs: the what-if specs a scenario's edits name
// come from core/formats/whatif.hpp.
#include <vector>

#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/scenario.hpp"

namespace vitsim {

// The scenario itself, every platform and DeepSpeed config it names or sweeps, every what-if spec its
// edits name.
std::vector<NamedPath> scenario_inputs(const ScenarioFile& f);

}  // namespace vitsim
