// What NCCL would run where a point names a collective other than `auto` (nccl_would_run, collective.hpp),
// and the words the `auto` collective's notes share with it (nccl_comm.hpp: size_text, op_text).
#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "collectives/nccl_comm.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim::sim {

const char* op_text(CollOp op) {
  return op == CollOp::ReduceScatter ? "reduce-scatter"
         : op == CollOp::AllGather   ? "all-gather"
                                     : "all-reduce";
}

std::string size_text(double bytes) {
  static const std::pair<double, const char*> prefixes[] = {
      {1ULL << 30, "GiB"}, {1ULL << 20, "MiB"}, {1 << 10, "KiB"}};
  for (const auto& [size, name] : prefixes)
    if (bytes >= size) {
      const double x = bytes / size;
      return x == std::floor(x) ? fmt::format("{:.0f} {}", x, name) : fmt::format("{:.2f} {}", x, name);
    }
  return fmt::format("{:.0f} B", bytes);
}

std::vector<std::string> nccl_would_run(const Group& g, const CollectiveContext& c, const std::string& forced,
                                        const std::set<std::pair<CollOp, double>>& calls) {
  std::vector<std::string> out;
  if (g.size() < 2 || !c.facts || calls.empty()) return out;
  std::optional<NcclComm> comm;
  try {
    comm = nccl_comm(g, c);
  } catch (const Error& e) {
    return {fmt::format("what NCCL would run here is not known: {}", e.what())};
  }
  if (!comm) return out;
  const NcclVersion& v = *comm->version;
  // NCCL's algorithm that the named collective is (the registry's CollectiveInfo::nccl_algo), else none.
  const std::optional<NcclAlgo> same = collective_info(forced).nccl_algo;
  for (const auto& [op, bytes] : calls) {
    NcclChoice n;
    try {
      n = comm->choose(nccl_func_of(op), bytes);
    } catch (const Error& e) {
      out.push_back(fmt::format("{} {} on {} ranks: what NCCL would run is not known: {}", size_text(bytes),
                                op_text(op), g.size(), e.what()));
      continue;
    }
    std::string line = fmt::format("{} {} on {} ranks: the collective '{}' is named; NCCL {} would run {}/{}",
                                   size_text(bytes), op_text(op), g.size(), forced, v.name,
                                   nccl_algo_name(n.algo), nccl_proto_name(n.proto));
    const NcclCost* best = nullptr;  // NCCL's fastest protocol for the named algorithm
    for (const NcclCost& k : n.table)
      if (same && k.algo == *same && k.time_us >= 0 && (!best || k.time_us < best->time_us)) best = &k;
    if (same && n.algo == *same)
      line += " too";
    else if (best)
      line +=
          fmt::format(", its estimate {} against {} for {}/{} (x{:.2f})",
                      units::format_time(n.time_us * 1e-6), units::format_time(best->time_us * 1e-6),
                      nccl_algo_name(best->algo), nccl_proto_name(best->proto), best->time_us / n.time_us);
    else
      line += fmt::format(", its estimate {}", units::format_time(n.time_us * 1e-6));
    out.push_back(line + " (parallelism.collective=auto runs NCCL's choice)");
  }
  return out;
}

}  // namespace vitsim::sim
