// The NCCL gradient path: device buffers, its own CUDA stream, the unique id bootstrapped over MPI.
// Built only when nccl.h, libnccl and the CUDA runtime were found (VITSIM_HAVE_NCCL); it needs no
// Torch, so it compiles and links on a machine whose LibTorch is CPU-only.
#include "vitsim/real/comm.hpp"

#ifdef VITSIM_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "comm/check.hpp"
#endif

#include "vitsim/core/base/error.hpp"

namespace vitsim::real {

#ifdef VITSIM_HAVE_NCCL
namespace {

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(World& world, int device, void* compute_stream)
      : world_(world), device_(device), compute_(static_cast<cudaStream_t>(compute_stream)) {
    VITSIM_CUDA_CHECK(cudaSetDevice(device_));
    VITSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    VITSIM_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    ncclUniqueId id;
    if (world_.rank() == 0) VITSIM_NCCL_CHECK(ncclGetUniqueId(&id));
    world_.broadcast(&id, sizeof id, 0, "NCCL unique-id broadcast");
    // Non-blocking init so a missing peer cannot hang us past the timeout.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    VITSIM_NCCL_CHECK(ncclCommInitRankConfig(&comm_, world_.size(), id, world_.rank(), &config));
    wait_comm("NCCL communicator initialisation");
  }
  ~NcclCommunicator() override {
    for (auto& e : ready_events_) cudaEventDestroy(e);
    if (comm_) ncclCommDestroy(comm_);
    cudaEventDestroy(done_);
    cudaStreamDestroy(stream_);
  }
  std::string name() const override { return "nccl"; }

  uint64_t mark_ready() override {
    std::lock_guard<std::mutex> g(mu_);
    cudaEvent_t e;
    VITSIM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    VITSIM_CUDA_CHECK(cudaEventRecord(e, compute_));
    ready_events_.push_back(e);
    return ready_events_.size();  // 1-based: 0 means "no event"
  }

  void allreduce_sum(float* data, size_t n, uint64_t ready_token) override {
    VITSIM_CUDA_CHECK(cudaSetDevice(device_));
    if (ready_token > 0) {
      cudaEvent_t e;
      {
        std::lock_guard<std::mutex> g(mu_);
        e = ready_events_.at(ready_token - 1);
      }
      VITSIM_CUDA_CHECK(cudaStreamWaitEvent(stream_, e, 0));
    }
    ncclResult_t rc = ncclAllReduce(data, data, n, ncclFloat32, ncclSum, comm_, stream_);
    if (rc != ncclSuccess && rc != ncclInProgress) VITSIM_NCCL_CHECK(rc);
    VITSIM_CUDA_CHECK(cudaEventRecord(done_, stream_));
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + std::chrono::duration<double>(world_.timeout_s());
    for (long iter = 0;; ++iter) {
      cudaError_t q = cudaEventQuery(done_);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) VITSIM_CUDA_CHECK(q);
      ncclResult_t async = ncclSuccess;
      VITSIM_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
      if (async != ncclSuccess && async != ncclInProgress) VITSIM_NCCL_CHECK(async);
      if (clock::now() > deadline) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        world_.abort(fmt::format("NCCL all-reduce of {} floats did not complete within the {:g} s timeout "
                                 "(run.timeout); aborting the job",
                                 n, world_.timeout_s()),
                     124);
      }
      if (iter > 1000) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    std::lock_guard<std::mutex> g(mu_);
    if (ready_token == ready_events_.size()) {  // the last bucket of a step: recycle the events
      for (auto& e : ready_events_) VITSIM_CUDA_CHECK(cudaEventDestroy(e));
      ready_events_.clear();
    }
  }

 private:
  void wait_comm(const char* what) {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + std::chrono::duration<double>(world_.timeout_s());
    for (;;) {
      ncclResult_t state = ncclSuccess;
      VITSIM_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) VITSIM_NCCL_CHECK(state);
      if (clock::now() > deadline)
        world_.abort(fmt::format("{} did not complete within the {:g} s timeout", what, world_.timeout_s()),
                     124);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  World& world_;
  int device_;
  cudaStream_t compute_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t done_ = nullptr;
  ncclComm_t comm_ = nullptr;
  std::mutex mu_;
  std::vector<cudaEvent_t> ready_events_;
};

}  // namespace

bool nccl_built() {
  return true;
}
std::unique_ptr<Communicator> make_nccl_communicator(World& world, int device, void* compute_stream) {
  return std::make_unique<NcclCommunicator>(world, device, compute_stream);
}

#else

bool nccl_built() {
  return false;
}
std::unique_ptr<Communicator> make_nccl_communicator(World&, int, void*) {
  throw Error("this vitsim was built without NCCL (nccl.h, libnccl and the CUDA runtime were not all found)");
}

#endif

}  // namespace vitsim::real
