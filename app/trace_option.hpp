#pragma once
// --trace-ranks LIST of `vitsim predict` and `vitsim train` (core/results/trace.hpp): one check for both, so
// that a bad list is the same command-line error (exit 2) from either.
#include <string>

#include "commands.hpp"
#include "vitsim/core/results/trace.hpp"

namespace vitsim::app {

inline void add_trace_ranks(CLI::App* c, std::string& list) {
  c->add_option("--trace-ranks", list, "ranks the trace keeps, e.g. 0,3,8-15 (default: the first 64)");
}

// Throws UsageError when --trace-ranks was given without --trace or its list does not parse.
inline void check_trace_ranks(const CLI::App* c, const std::string& list, const std::string& trace_path) {
  if (c->count("--trace-ranks") == 0) return;
  if (trace_path.empty())
    throw UsageError("--trace-ranks needs --trace FILE: it chooses the ranks the trace keeps");
  try {
    parse_rank_list(list);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

}  // namespace vitsim::app
