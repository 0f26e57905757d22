#pragma once
// Return-code checks for CUDA and NCCL: a failure throws vitsim::Error naming the rank, the host,
// the call and file:line. Internal to real/. MPI calls are checked by core/base/mpi_check.hpp (the same
// message).
#include <fmt/format.h>

#include "vitsim/core/base/error.hpp"
#include "vitsim/real/comm.hpp"

#define VITSIM_FAIL_AT(lib, call, msg)                                                                    \
  throw ::vitsim::Error(fmt::format("{}: {} call {} failed: {} ({}:{})", ::vitsim::real::rank_identity(), \
                                    lib, call, msg, __FILE__, __LINE__))

#define VITSIM_CUDA_CHECK(call)                                                                      \
  do {                                                                                               \
    cudaError_t vitsim_rc_ = (call);                                                                 \
    if (vitsim_rc_ != cudaSuccess)                                                                   \
      VITSIM_FAIL_AT(                                                                                \
          "CUDA", #call,                                                                             \
          fmt::format("error {} {}", static_cast<int>(vitsim_rc_), cudaGetErrorString(vitsim_rc_))); \
  } while (0)

#define VITSIM_NCCL_CHECK(call)                                                                      \
  do {                                                                                               \
    ncclResult_t vitsim_rc_ = (call);                                                                \
    if (vitsim_rc_ != ncclSuccess)                                                                   \
      VITSIM_FAIL_AT(                                                                                \
          "NCCL", #call,                                                                             \
          fmt::format("error {} {}", static_cast<int>(vitsim_rc_), ncclGetErrorString(vitsim_rc_))); \
  } while (0)
