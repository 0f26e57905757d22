#pragma once
// Processes and collectives for the real trainer, without Torch.
//
// World is the MPI process group: who this rank is (rank, local rank, host), control-plane
// collectives (barrier, broadcast, gathers) and the bootstrap for NCCL. Communicator is the gradient
// data path, one narrow interface with two implementations: MPI on host memory and NCCL on device
// memory (its own CUDA stream). Every collective waits at most the run's timeout: one that does not
// finish (a rank died or hangs) prints who waited for what and aborts the whole job (MPI_Abort), so
// mpirun exits non-zero instead of hanging. Every MPI, CUDA and NCCL return code is checked.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace vitsim::real {

class World {
 public:
  // Initialises MPI (thread level: serialized at least) unless already initialised.
  explicit World(double timeout_s);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // rank among the processes of this host
  int local_size() const { return local_size_; }
  int nodes() const { return nodes_; }  // distinct hosts in the job
  const std::string& host() const { return host_; }
  double timeout_s() const { return timeout_s_; }
  void set_timeout_s(double t) { timeout_s_ = t; }

  void barrier(const char* what);
  void broadcast(void* data, size_t bytes, int root, const char* what);
  // Every rank's values, rank-major; all ranks pass the same count.
  std::vector<double> allgather(const std::vector<double>& mine, const char* what);
  // Rank `root` gets every rank's string (others get an empty vector).
  std::vector<std::string> gather(const std::string& mine, int root, const char* what);
  double allreduce_sum(double v, const char* what);
  // Prints "vitsim: rank R on HOST: <why>" and ends every process of the job with `code`.
  [[noreturn]] void abort(const std::string& why, int code) const;

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, nodes_ = 1;
  std::string host_;
  double timeout_s_;
  bool finalize_ = false;
};

// "rank R on HOST" once the World exists ("rank ? on HOST" before): the prefix of every failure.
std::string rank_identity();

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string name() const = 0;  // "mpi" or "nccl"
  // Called on the training thread when a buffer's contents are final. NCCL records an event on the
  // compute stream that the communication stream waits on; MPI needs nothing. Returns a token for
  // allreduce_sum.
  virtual uint64_t mark_ready() { return 0; }
  // Sums n floats in place across the ranks (host memory for MPI, device memory for NCCL) and returns
  // when the result is in place. May run on a communication thread, one call at a time.
  virtual void allreduce_sum(float* data, size_t n, uint64_t ready_token) = 0;
};

std::unique_ptr<Communicator> make_mpi_communicator(World& world);
// Built when NCCL and the CUDA runtime were found (VITSIM_HAVE_NCCL); `compute_stream` is the
// cudaStream_t the gradients are produced on (nullptr: the legacy default stream).
bool nccl_built();
std::unique_ptr<Communicator> make_nccl_communicator(World& world, int device, void* compute_stream);

}  // namespace vitsim::real
