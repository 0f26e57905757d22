// The World of a vitsim built without MPI (the trainer-only build on a machine with no MPI library):
// one process, rank 0 of 1. Collectives are copies or nothing; abort prints the same line as the MPI
// World and exits. A launcher that starts several such processes (mpirun, srun) would get several
// independent trainers: refused at start instead.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/system.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/real/comm.hpp"

namespace vitsim::real {
namespace {

std::mutex identity_mu;
std::string identity = "rank ?";

// The job size a launcher announces (Open MPI's mpirun; MPICH's Hydra and srun --mpi=pmi2 set PMI_SIZE),
// 1 when none does.
long launcher_size(std::string& var) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    try {
      const long n = static_cast<long>(units::parse_integer(v, 2, 1 << 30));
      var = name;
      return n;
    } catch (const Error&) {
      // not a job size above 1: this variable does not count
    }
  }
  return 1;
}

void check_root(int root, const char* what) {
  if (root != 0) throw Error(fmt::format("{}: root rank {} in a single-process world", what, root));
}

}  // namespace

std::string rank_identity() {
  std::lock_guard<std::mutex> g(identity_mu);
  return identity;
}

World::World(double timeout_s) : timeout_s_(timeout_s) {
  host_ = hostname();
  {
    std::lock_guard<std::mutex> g(identity_mu);
    identity = fmt::format("rank 0 on {}", host_);
  }
  std::string var;
  if (const long n = launcher_size(var); n > 1)
    throw Error(
        fmt::format("{}={}: this vitsim was built without MPI (cmake -DVITSIM_TRAINER_ONLY=ON found none) "
                    "and trains in one process only; rebuild with MPI to train on {} ranks",
                    var, n, n));
}

World::~World() = default;

void World::abort(const std::string& why, int code) const {
  std::fprintf(stderr, "vitsim: %s: %s\n", rank_identity().c_str(), why.c_str());
  std::fflush(stderr);
  std::_Exit(code);
}

void World::barrier(const char*) {}

void World::broadcast(void*, size_t, int root, const char* what) {
  check_root(root, what);
}

std::vector<double> World::allgather(const std::vector<double>& mine, const char*) {
  return mine;
}

std::vector<std::string> World::gather(const std::string& mine, int root, const char* what) {
  check_root(root, what);
  return {mine};
}

double World::allreduce_sum(double v, const char*) {
  return v;
}

std::unique_ptr<Communicator> make_mpi_communicator(World&) {
  throw Error(
      "this vitsim was built without MPI: no MPI gradient communicator (a single process needs none)");
}

}  // namespace vitsim::real
