#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <set>
#include <thread>

#include "comm/check.hpp"
#include "vitsim/core/base/mpi_check.hpp"
#include "vitsim/core/base/system.hpp"
#include "vitsim/real/comm.hpp"

// The World's identity as it was recorded at start: no MPI call on the error path.
#undef VITSIM_MPI_CHECK
#define VITSIM_MPI_CHECK(call) VITSIM_MPI_CHECK_AS(::vitsim::real::rank_identity(), call)

namespace vitsim::real {
namespace {

std::mutex identity_mu;
std::string identity = "rank ?";

// Waits for a request, polling so that a deadline can be kept (blocking MPI calls cannot time out).
// Spins briefly for low latency, then backs off to short sleeps so a waiting rank leaves the cores to
// the ones still computing.
void wait_request(const World& world, MPI_Request& req, const char* what) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto deadline = start + std::chrono::duration<double>(world.timeout_s());
  int done = 0;
  for (long iter = 0;; ++iter) {
    VITSIM_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (done) return;
    if (iter < 2000) continue;
    if (clock::now() > deadline)
      world.abort(
          fmt::format("{} did not complete within the {:g} s timeout (run.timeout): another rank died, "
                      "hangs or is far behind; aborting the job",
                      what, world.timeout_s()),
          124);
    std::this_thread::sleep_for(std::chrono::microseconds(iter < 20000 ? 20 : 200));
  }
}

}  // namespace

std::string rank_identity() {
  std::lock_guard<std::mutex> g(identity_mu);
  return identity;
}

World::World(double timeout_s) : timeout_s_(timeout_s) {
  int initialized = 0;
  VITSIM_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) {
    int provided = 0;
    VITSIM_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
    finalize_ = true;
    // The gradient path calls MPI from a communication thread while the training thread never does
    // at the same time: serialized is enough.
    if (provided < MPI_THREAD_SERIALIZED)
      throw Error(fmt::format(
          "MPI provides thread level {}, the trainer needs MPI_THREAD_SERIALIZED or better", provided));
  }
  VITSIM_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  VITSIM_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  VITSIM_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  host_ = hostname();
  {
    std::lock_guard<std::mutex> g(identity_mu);
    identity = fmt::format("rank {} on {}", rank_, host_);
  }
  MPI_Comm local;
  VITSIM_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local));
  VITSIM_MPI_CHECK(MPI_Comm_rank(local, &local_rank_));
  VITSIM_MPI_CHECK(MPI_Comm_size(local, &local_size_));
  VITSIM_MPI_CHECK(MPI_Comm_free(&local));
  auto names = gather(host_, 0, "host-name gather");
  int nodes = 0;
  if (rank_ == 0) nodes = static_cast<int>(std::set<std::string>(names.begin(), names.end()).size());
  broadcast(&nodes, sizeof nodes, 0, "node-count broadcast");
  nodes_ = nodes;
}

World::~World() {
  if (finalize_) MPI_Finalize();
}

void World::abort(const std::string& why, int code) const {
  std::fprintf(stderr, "vitsim: %s: %s\n", rank_identity().c_str(), why.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

void World::barrier(const char* what) {
  MPI_Request req;
  VITSIM_MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
  wait_request(*this, req, what);
}

void World::broadcast(void* data, size_t bytes, int root, const char* what) {
  MPI_Request req;
  VITSIM_MPI_CHECK(MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD, &req));
  wait_request(*this, req, what);
}

std::vector<double> World::allgather(const std::vector<double>& mine, const char* what) {
  std::vector<double> all(mine.size() * size_);
  MPI_Request req;
  VITSIM_MPI_CHECK(MPI_Iallgather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
                                  static_cast<int>(mine.size()), MPI_DOUBLE, MPI_COMM_WORLD, &req));
  wait_request(*this, req, what);
  return all;
}

double World::allreduce_sum(double v, const char* what) {
  double out = 0;
  MPI_Request req;
  VITSIM_MPI_CHECK(MPI_Iallreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req));
  wait_request(*this, req, what);
  return out;
}

std::vector<std::string> World::gather(const std::string& mine, int root, const char* what) {
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(size_);
  MPI_Request req;
  VITSIM_MPI_CHECK(MPI_Igather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, MPI_COMM_WORLD, &req));
  wait_request(*this, req, what);
  std::vector<int> displs(size_, 0);
  int total = 0;
  for (int r = 0; r < size_; ++r) {
    displs[r] = total;
    total += lens[r];
  }
  std::string all(rank_ == root ? total : 0, '\0');
  VITSIM_MPI_CHECK(MPI_Igatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR,
                                root, MPI_COMM_WORLD, &req));
  wait_request(*this, req, what);
  std::vector<std::string> out;
  if (rank_ == root)
    for (int r = 0; r < size_; ++r) out.push_back(all.substr(displs[r], lens[r]));
  return out;
}

namespace {
class MpiCommunicator : public Communicator {
 public:
  explicit MpiCommunicator(World& world) : world_(world) {}
  std::string name() const override { return "mpi"; }
  void allreduce_sum(float* data, size_t n, uint64_t) override {
    // MPI counts are int: large buffers go in pieces.
    const size_t max_chunk = size_t(1) << 30;
    for (size_t off = 0; off < n; off += max_chunk) {
      const int count = static_cast<int>(std::min(max_chunk, n - off));
      MPI_Request req;
      VITSIM_MPI_CHECK(
          MPI_Iallreduce(MPI_IN_PLACE, data + off, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req));
      wait_request(world_, req, "gradient all-reduce");
    }
  }

 private:
  World& world_;
};
}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(World& world) {
  return std::make_unique<MpiCommunicator>(world);
}

}  // namespace vitsim::real
