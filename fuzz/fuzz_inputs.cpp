// libFuzzer harnesses for vitsim's input readers. One binary per reader (VITSIM_FUZZ_TARGET picks it).
// A reader may reject any input with vitsim::Error; anything else escaping (another exception, a crash,
// a sanitizer report, a hang) is a finding.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "vitsim/core/calibration.hpp"
#include "vitsim/core/deepspeed.hpp"
#include "vitsim/core/error.hpp"
#include "vitsim/core/platform.hpp"
#include "vitsim/core/report.hpp"
#include "vitsim/core/scenario.hpp"
#include "vitsim/core/units.hpp"

namespace {

// The readers take paths: each input goes to one private file, rewritten per run.
const std::string& scratch() {
  static const std::string path = "/tmp/vitsim-fuzz-" + std::to_string(getpid()) + ".in";
  return path;
}

[[maybe_unused]] void write(const uint8_t* data, size_t size) {
  FILE* f = std::fopen(scratch().c_str(), "wb");
  if (!f) std::abort();
  std::fwrite(data, 1, size, f);
  std::fclose(f);
}

void run(const uint8_t* data, size_t size) {
  using namespace vitsim;
  const std::string text(reinterpret_cast<const char*>(data), size);
#if VITSIM_FUZZ_TARGET == 1  // scenario files: parse, then resolve every point
  write(data, size);
  ScenarioFile f = read_scenario_file(scratch());
  if (f.sweeps.size() <= 3) expand(f);
#elif VITSIM_FUZZ_TARGET == 2  // platform facts
  write(data, size);
  read_platform_facts(scratch());
#elif VITSIM_FUZZ_TARGET == 3  // calibration files, with the interpolation they feed
  write(data, size);
  Calibration c = read_calibration(scratch());
  for (const auto& d : c.devices)
    for (int b : {1, 7, 64, 100000}) interpolate(d, b);
#elif VITSIM_FUZZ_TARGET == 4  // DeepSpeed configs
  write(data, size);
  read_deepspeed_config(scratch());
#elif VITSIM_FUZZ_TARGET == 5  // quantities with units
  for (auto k : {units::Kind::Time, units::Kind::Bandwidth, units::Kind::Flops, units::Kind::Bytes}) {
    try {
      units::parse(text, k);
    } catch (const Error&) {
    }
  }
#elif VITSIM_FUZZ_TARGET == 6  // reports (what validate reads)
  Report r = report_from_json(text, "input");
  fill_scaling_efficiency(r);
  report_to_table(r);
  report_to_csv(r);
#else
#error "VITSIM_FUZZ_TARGET must be 1..6"
#endif
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    run(data, size);
  } catch (const vitsim::Error&) {
    // A clean rejection.
  }
  return 0;
}
