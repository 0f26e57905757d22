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

struct Registered {
  CollectiveInfo info;
  CollectiveFactory make;
};
std::map<std::string, Registered>& registry() {
  static std::map<std::string, Registered> r;
  return r;
}

const Registered& registered(const std::string& name) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string valid;
    for (const auto& n : collective_names()) valid += (valid.empty() ? "" : ", ") + n;
    throw Error(fmt::format("unknown collective '{}'; valid: {}", name, valid));
  }
  return it->second;
}
}  // namespace

const char* coll_op_name(CollOp op) {
  return name_of(kCollOps, op);
}

bool register_collective(CollectiveInfo info, CollectiveFactory f) {
  const std::string name = info.name;
  registry()[name] = {std::move(info), std::move(f)};
  return true;
}

std::vector<std::string> collective_names() {
  std::vector<std::string> out;
  for (const auto& [k, v] : registry()) out.push_back(k);
  return out;
}

std::vector<CollectiveInfo> collectives() {
  std::vector<CollectiveInfo> out;
  for (const auto& [k, v] : registry()) out.push_back(v.info);
  return out;
}

const CollectiveInfo& collective_info(const std::string& name) {
  return registered(name).info;
}

std::unique_ptr<Collective> make_collective(const std::string& name) {
  return registered(name).make();
}

void Collective::run_deferred(const Group& g, int me, double bytes, CollOp op, Deferred& d) const {
  sleep_lead(&d);
  run(g, me, bytes, op);
}

}  // namespace vitsim::sim
