#pragma once
// Every rank's records through the job's allgather of doubles (World::allgather): a record is a struct of
// doubles only and crosses as its bytes, so no reader picks a figure out of a row of numbers by position.
// Used by the trainer (real/src/trainer/trainer.cpp: run agreement, replica checksums, the report's
// measurements).
#include <cstring>
#include <type_traits>
#include <vector>

#include "vitsim/real/comm.hpp"

namespace vitsim::real {

// Per rank, its records in order; every rank passes the same count.
template <class Record>
std::vector<std::vector<Record>> allgather_records(World& world, const std::vector<Record>& mine,
                                                   const char* what) {
  static_assert(std::is_trivially_copyable_v<Record> && sizeof(Record) % sizeof(double) == 0,
                "a record is made of doubles only");
  constexpr size_t kDoubles = sizeof(Record) / sizeof(double);
  std::vector<double> flat(mine.size() * kDoubles);
  if (!mine.empty())
    std::memcpy(flat.data(), static_cast<const void*>(mine.data()), flat.size() * sizeof(double));
  const std::vector<double> all = world.allgather(flat, what);
  std::vector<std::vector<Record>> out(static_cast<size_t>(world.size()), std::vector<Record>(mine.size()));
  for (size_t r = 0; r < out.size() && !mine.empty(); ++r)
    std::memcpy(static_cast<void*>(out[r].data()), all.data() + r * flat.size(),
                flat.size() * sizeof(double));
  return out;
}

// Per rank, its one record.
template <class Record>
std::vector<Record> allgather_record(World& world, const Record& mine, const char* what) {
  std::vector<Record> out;
  for (auto& rank : allgather_records(world, std::vector<Record>{mine}, what)) out.push_back(rank.front());
  return out;
}

}  // namespace vitsim::real
