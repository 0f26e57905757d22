// libFuzzer harnesses for vitsim's input readers. One binary per reader (VITSIM_FUZZ_TARGET picks it).
// A reader may reject any input with vitsim::Error; anything else escaping (another exception, a crash,
// a sanitizer report, a hang) is a finding.
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "vitsim/core/base/csv.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/calibration.hpp"
#include "vitsim/core/formats/deepspeed.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/results/measured_times.hpp"
#include "vitsim/core/results/plan.hpp"
#include "vitsim/core/results/report.hpp"
#if VITSIM_FUZZ_TARGET >= 7
#include <algorithm>

#include "vitsim/real/data.hpp"
#endif

namespace {

// The readers take paths: each input goes to one private file, rewritten per run.
const std::string& scratch(int which = 0) {
  static const std::string path[2] = {"/tmp/vitsim-fuzz-" + std::to_string(getpid()) + ".in",
                                      "/tmp/vitsim-fuzz-" + std::to_string(getpid()) + ".in2"};
  return path[which];
}

[[maybe_unused]] void write(const uint8_t* data, size_t size, int which = 0) {
  FILE* f = std::fopen(scratch(which).c_str(), "wb");
  if (!f) std::abort();
  std::fwrite(data, 1, size, f);
  std::fclose(f);
}

#if defined(VITSIM_FUZZ_REPORTS)
// VITSIM_FUZZ_REPORTS 1: reports (report_from_json, the kind checks); 2: plans (plan_from_json, merge, rank).
// Beyond "no crash": what the reader accepts, its writer writes back and the reader accepts again.
void fuzz_reports(const std::string& text) {
  using namespace vitsim;
#if VITSIM_FUZZ_REPORTS == 1
  Report r = report_from_json(text, "input");
  for (const char* kind : {"predicted", "measured"}) {
    try {
      require_report_kind(r, kind, "fuzz");
    } catch (const Error&) {
    }
  }
  report_to_table(r);
  report_to_csv(r);
  if (r.schema_version >= 2) {
    try {
      report_from_json(report_to_json(r), "round trip");
    } catch (const Error& e) {
      std::fprintf(stderr, "accepted report not accepted after its own round trip: %s\n", e.what());
      std::abort();
    }
  }
#else
  PlanResult plan = plan_from_json(text, "input");
  try {
    plan_from_json(plan_to_json(plan), "round trip");
  } catch (const Error& e) {
    std::fprintf(stderr, "accepted plan not accepted after its own round trip: %s\n", e.what());
    std::abort();
  }
  try {
    PlanResult merged = merge_plans({plan});
    plan_to_table(merged, 3);
  } catch (const Error&) {
  }
  rank_plan(plan);
  plan_to_table(plan, 0);
  plan_to_csv(plan);
#endif
}
#endif

#if defined(VITSIM_FUZZ_NUMBERS)
// VITSIM_FUZZ_NUMBERS 1: the platform validator (core/platform/platform.cpp's structure check and figure
// reads), on platforms built from the bytes: each byte pair is an operation (open/close a zone, a host, a
// link, a route between two of a few names, a cluster, a prop) with its argument, so the fuzzer reaches deep
// nesting, duplicate names, routes both ways, dangling references and odd figures far more often than
// with raw XML. 2: the strict number readers (units::parse_number, parse_integer, parse with ranges, echo).
std::string platform_from_bytes(const uint8_t* data, size_t size) {
  static const char* names[] = {"a", "b", "c", "z", "l", "r", "1", "c-0"};
  static const char* figures[] = {"1GBps", "0GBps", "-1GBps", "nanGBps", "1e400GBps", "1us", "-1us", "0x10",
                                  "1Gf",   "0f",    "nan",    "inf",     "2.5",       "1",   "",     "16GiB"};
  static const char* props[] = {"gpu_model",      "gpu_flops_fp32", "gpu_mem_bw", "gpu_mem",
                                "gpu_efficiency", "cpu_cores",      "loader_bw",  "h2d_pageable_bw",
                                "gpu_flops_fp16", "transport"};
  std::string x = "<platform version=\"4.1\">\n<zone id=\"top\" routing=\"Full\">\n";
  int depth = 1;
  for (size_t i = 0; i + 1 < size; i += 2) {
    const uint8_t op = data[i] % 10, arg = data[i + 1];
    const char* n1 = names[arg % 8];
    const char* n2 = names[(arg >> 3) % 8];
    const char* f = figures[arg % 16];
    switch (op) {
      case 0:
        x += fmt::format("<zone id=\"{}{}\" routing=\"{}\">\n", n1, i, arg & 0x80 ? "Full" : "Floyd");
        ++depth;
        break;
      case 1:
        if (depth > 1) {
          x += "</zone>\n";
          --depth;
        }
        break;
      case 2:
        x += fmt::format(
            "<host id=\"{}\" speed=\"{}\"><prop id=\"gpu_model\" value=\"G\"/><prop id=\"gpu_flops_fp32\" "
            "value=\"8Tf\"/><prop id=\"gpu_mem_bw\" value=\"1TBps\"/><prop id=\"gpu_mem\" "
            "value=\"8GiB\"/><prop id=\"gpu_efficiency\" value=\"0.5\"/></host>\n",
            n1, arg & 1 ? "1Gf" : f);
        break;
      case 3:
        x += fmt::format("<link id=\"{}\" bandwidth=\"{}\" latency=\"{}\"/>\n", n1, f,
                         figures[(arg >> 4) % 16]);
        break;
      case 4:
        x += fmt::format("<route src=\"{}\" dst=\"{}\"{}><link_ctn id=\"{}\"/></route>\n", n1, n2,
                         arg & 0x40 ? " symmetrical=\"NO\"" : "", names[(arg >> 6) % 4 + 4]);
        break;
      case 5:
        x += fmt::format(
            "<zoneRoute src=\"{}\" dst=\"{}\" gw_src=\"{}\" gw_dst=\"{}\"><link_ctn id=\"l\"/></zoneRoute>\n",
            n1, n2, n2, n1);
        break;
      case 6:
        x += fmt::format(
            "<cluster id=\"{}{}\" prefix=\"{}-\" suffix=\"\" radical=\"0-{}\" speed=\"1Gf\" bw=\"{}\" "
            "lat=\"1us\"><prop id=\"gpu_model\" value=\"G\"/><prop id=\"gpu_flops_fp32\" "
            "value=\"8Tf\"/><prop id=\"gpu_mem_bw\" value=\"1TBps\"/><prop id=\"gpu_mem\" "
            "value=\"8GiB\"/><prop id=\"gpu_efficiency\" value=\"1\"/></cluster>\n",
            n1, i, n1, arg % 4, f);
        break;
      case 7:
        x += fmt::format(
            "<host id=\"h{}\" speed=\"1Gf\"><prop id=\"gpu_model\" value=\"G\"/><prop id=\"gpu_flops_fp32\" "
            "value=\"8Tf\"/><prop id=\"gpu_mem_bw\" value=\"1TBps\"/><prop id=\"gpu_mem\" "
            "value=\"8GiB\"/><prop id=\"gpu_efficiency\" value=\"0.5\"/><prop id=\"{}\" "
            "value=\"{}\"/></host>\n",
            i, props[arg % 10], figures[(arg >> 4) % 16]);
        break;
      case 8:
        x += fmt::format("<router id=\"{}\"/>\n", n1);
        break;
      default:
        for (int k = 0; k < arg % 64; ++k, ++depth)
          x += fmt::format("<zone id=\"d{}_{}\" routing=\"Full\">\n", i, k);
        break;
    }
  }
  while (depth-- > 0) x += "</zone>\n";
  return x + "</platform>\n";
}

void fuzz_numbers(const uint8_t* data, size_t size) {
  using namespace vitsim;
#if VITSIM_FUZZ_NUMBERS == 1
  // Half the inputs as raw XML (the validator on anything), half built from the bytes.
  if (size > 0 && data[0] & 1) {
    read_platform_text("fuzz.xml", std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  } else {
    read_platform_text("fuzz.xml", platform_from_bytes(data + (size > 0), size > 0 ? size - 1 : 0));
  }
#else
  const std::string text(reinterpret_cast<const char*>(data), size);
  const units::Range ranges[] = {units::Range{}, units::positive(), units::non_negative(), units::fraction(),
                                 units::closed(-1, 1)};
  for (const auto& r : ranges) {
    try {
      const double x = units::parse_number(text, r);
      if (!r.contains(x)) std::abort();  // accepted outside its range
    } catch (const Error&) {
    }
    for (auto k : {units::Kind::Time, units::Kind::Bandwidth, units::Kind::Flops, units::Kind::Bytes}) {
      try {
        const double x = units::parse(text, k, r);
        if (!std::isfinite(x) || !r.contains(x)) std::abort();
      } catch (const Error&) {
      }
    }
  }
  try {
    const long long v = units::parse_integer(text, -5, 1LL << 40);
    if (v < -5 || v > (1LL << 40)) std::abort();
  } catch (const Error&) {
  }
  if (echo(text).size() > 80) std::abort();  // the cap holds whatever the input
#endif
}
#endif

#if defined(VITSIM_FUZZ_MEASURED)
// The measured times of `vitsim fit --measured` and `predict --runs` (issue 39): a CSV (RFC 4180) or JSON,
// told apart by the first byte of the input (bit 0: the file named .json or .csv). Beyond "no crash, no
// hang": a CSV the reader accepts, written back cell by cell with csv_cell, reads back to the same rows; its
// rows applied to a small scenario (measured_scenarios, measured_inputs) refuse with vitsim::Error only.
void fuzz_measured(const uint8_t* data, size_t size) {
  using namespace vitsim;
  if (size < 1) return;
  const std::string path = data[0] & 1 ? "input.json" : "input.csv";
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const MeasuredTimes m = read_measured_times(path, text);
  if (!m.report) {
    std::string again = "";
    for (size_t c = 0; c < m.rows.front().keys.size(); ++c)
      again += csv_cell(m.rows.front().keys[c].first) + ",";
    again += std::string(measured_metric_column(m.metric)) + "\n";
    for (const MeasuredTime& row : m.rows) {
      for (const auto& [key, value] : row.keys) again += csv_cell(value) + ",";
      again += fmt::format("{:.17g}\n", row.seconds);
    }
    const MeasuredTimes back = read_measured_times("again.csv", again);
    if (back.rows.size() != m.rows.size()) std::abort();
    for (size_t i = 0; i < m.rows.size(); ++i)
      if (back.rows[i].keys != m.rows[i].keys || back.rows[i].seconds != m.rows[i].seconds) std::abort();
  }
  static const bool written =
      [] {
        const std::string dir = scratch() + ".d";
        std::filesystem::create_directories(dir);
        std::ofstream(dir + "/s.xml")
            << "<scenario><cluster platform=\"p.xml\" nodes=\"1\" gpus_per_node=\"1\"/>"
               "<model preset=\"vit_cifar_tiny\"/><dataset name=\"synthetic\"/></scenario>\n";
        return true;
      }();
  (void)written;
  const ScenarioFile f = read_scenario_file(scratch() + ".d/s.xml");
  measured_inputs(f, m);
  if (m.rows.size() <= 16) measured_scenarios(f, m, true);
}
#endif

void run(const uint8_t* data, size_t size) {
  using namespace vitsim;
  const std::string text(reinterpret_cast<const char*>(data), size);
#if defined(VITSIM_FUZZ_NUMBERS)  // the platform validator and the number readers (issue 12)
  fuzz_numbers(data, size);
  (void)text;
#elif defined(VITSIM_FUZZ_MEASURED)  // measured times: fit --measured, --runs (issue 39)
  fuzz_measured(data, size);
  (void)text;
#elif defined(VITSIM_FUZZ_REPORTS)   // the report and plan readers (issue 12): their own targets
  fuzz_reports(text);
#elif VITSIM_FUZZ_TARGET == 1        // scenario files: parse, then resolve every point
  write(data, size);
  ScenarioFile f = read_scenario_file(scratch());
  if (f.sweeps.size() <= 3) expand(f);
#elif VITSIM_FUZZ_TARGET == 2        // platform facts
  write(data, size);
  // What the platform reader accepts is plausible, values and ranges alike (issue 39 items 13 and 23).
  for (const auto& [host, g] : read_platform_facts(scratch()).gpu)
    if (!units::is_plausible(g.mem_bw, units::Kind::Bandwidth) ||
        !units::is_plausible(g.mem_bytes, units::Kind::Bytes))
      __builtin_trap();
#elif VITSIM_FUZZ_TARGET == 3        // calibration files, with the interpolation they feed
  write(data, size);
  Calibration c = read_calibration(scratch());
  for (const auto& d : c.devices)
    for (int b : {1, 7, 64, 100000}) interpolate(d, b);
  // What the reader accepts is plausible (issue 39: one bound per kind, units::plausible): a figure past it
  // is a finding.
  for (const auto& d : c.devices) {
    const units::Range factor = units::plausible_factor();
    if (!units::is_plausible(d.peak_flops, units::Kind::Flops) ||
        !units::is_plausible(d.mem_bw, units::Kind::Bandwidth) ||
        (!d.compute_span.empty() && !(d.compute_span.low >= factor.lo && d.compute_span.high <= factor.hi)) ||
        (d.occupancy_busy_ranks > 0 && !(d.occupancy_alone_factor >= factor.lo)))
      __builtin_trap();
    for (const auto& p : d.points)
      if (!units::is_plausible(p.fwd_s, units::Kind::Time) ||
          !units::is_plausible(p.bwd_s, units::Kind::Time))
        __builtin_trap();
  }
#elif VITSIM_FUZZ_TARGET == 4        // DeepSpeed configs
  write(data, size);
  read_deepspeed_config(scratch());
#elif VITSIM_FUZZ_TARGET == 5        // quantities with units
  for (auto k : {units::Kind::Time, units::Kind::Bandwidth, units::Kind::Flops, units::Kind::Bytes}) {
    try {
      units::parse(text, k);
    } catch (const Error&) {
    }
  }
#elif VITSIM_FUZZ_TARGET == 6        // reports (what validate reads)
  Report r = report_from_json(text, "input");
  fill_scaling_efficiency(r);
  report_to_table(r);
  report_to_csv(r);
#elif VITSIM_FUZZ_TARGET >= 7
  // Dataset readers (real/src/data*.cpp), then the loader's per-sample path on what they return: get()
  // and the resize/crop/flip/normalise transform, the code every decoded sample goes through.
  if (size < 1) return;
  const uint8_t mode = data[0];
  ++data, --size;
  std::unique_ptr<real::Source> set;
#if VITSIM_FUZZ_TARGET == 7  // IDX pair: [u16 little-endian length of the image file][image file][label file]
  if (size < 2) return;
  const size_t split = std::min<size_t>(size - 2, data[0] | (data[1] << 8));
  write(data + 2, split, 0);
  write(data + 2 + split, size - 2 - split, 1);
  set = std::make_unique<real::MemorySource>(real::read_idx(scratch(0), scratch(1), mode & 1 ? 10 : 256));
#elif VITSIM_FUZZ_TARGET == 8  // CIFAR batch: mode bit 0 picks CIFAR-10 (1 label byte) or CIFAR-100 (2)
  write(data, size);
  const bool hundred = mode & 1;
  set = std::make_unique<real::MemorySource>(
      real::read_cifar({scratch()}, hundred ? 2 : 1, hundred ? 100 : 10));
#else                          // one JPEG or PNG file: mode bit 0 picks 1 or 3 channels
  write(data, size);
  const int channels = mode & 1 ? 3 : 1;
  real::Image decoded = real::decode_image_file(scratch(), channels);
  set = std::make_unique<real::MemorySource>("image", decoded.channels, decoded.height, decoded.width, 1,
                                             std::move(decoded.pixels), std::vector<int32_t>{0});
#endif
  real::Transform t;
  t.image_size = 1 + (mode >> 1) % 48;
  t.augment = mode & 0x80;
  t.norm.mean.assign(set->channels(), 0.5f);
  t.norm.stddev.assign(set->channels(), 0.25f);
  std::vector<float> out(size_t(set->channels()) * t.image_size * t.image_size);
  real::Image image;
  int label = -1;
  for (size_t i = 0; i < std::min<size_t>(set->size(), 8); ++i) {
    set->get(i, image, label);
    if (label < 0 || label >= set->classes()) std::abort();  // the readers promise labels in range
    t.apply(image, 0, i, out.data());
  }
#else
#error "VITSIM_FUZZ_TARGET must be 1..9"
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
