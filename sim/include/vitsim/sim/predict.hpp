#pragma once
// `vitsim predict`: every point of a scenario simulated in its own process (SimGrid allows one engine
// per process), up to `jobs` at once, gathered into one Report.
#include <string>

#include "vitsim/core/formats/report.hpp"
#include "vitsim/core/formats/scenario.hpp"

namespace vitsim::sim {

struct PredictOptions {
  std::string calibration;  // path, "" = none
  int jobs = 0;             // 0 = the machine's cores
  std::string trace_path;   // "" = no trace; else a Chrome trace JSON of every point (core/formats/trace.hpp)
  std::string
      trace_ranks;       // --trace-ranks LIST (core's parse_rank_list); "" = the first 64 ranks of each point
  bool progress = true;  // a progress line on stderr for runs longer than a second
  double price_per_kwh = -1;  // >= 0: the energy price, over the platforms' price_per_kwh (docs/model.md
                              // "Energy and cost per epoch")
  long long epochs = 0;       // > 0: the whole run's epochs (predict --epochs), over training.epochs
};

Report predict(const ScenarioFile& file, const PredictOptions& opt);

}  // namespace vitsim::sim
