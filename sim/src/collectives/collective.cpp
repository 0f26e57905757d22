#include "vitsim/sim/collectives/collective.hpp"

#include <fmt/format.h>

#include <map>
#include <utility>

#include "collectives/transfers.hpp"
#include "vitsim/core/base/enum_names.hpp"
#include "vitsim/core/base/error.hpp"

namespace vitsim::sim {

namespace {
constexpr EnumNames<CollOp, 3> kCollOps{{{CollOp::AllReduce, "allreduce"},
                                         {CollOp::ReduceScatter, "reduce_scatter"},
                                         {CollOp::AllGather, "allgather"}}};

std::map<std::string, CollectiveFactory>& registry() {
  static std::map<std::string, CollectiveFactory> r;
  return r;
}
}  // namespace

const char* coll_op_name(CollOp op) {
  return name_of(kCollOps, op);
}

bool register_collective(const std::string& name, CollectiveFactory f) {
  registry()[name] = std::move(f);
  return true;
}

std::vector<std::string> collective_names() {
  std::vector<std::string> out;
  for (const auto& [k, v] : registry()) out.push_back(k);
  return out;
}

std::unique_ptr<Collective> make_collective(const std::string& name) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string valid;
    for (const auto& n : collective_names()) valid += (valid.empty() ? "" : ", ") + n;
    throw Error(fmt::format("unknown collective '{}'; valid: {}", name, valid));
  }
  return it->second();
}

void Collective::run_deferred(const Group& g, int me, double bytes, CollOp op, Deferred& d) const {
  sleep_lead(&d);
  run(g, me, bytes, op);
}

}  // namespace vitsim::sim
