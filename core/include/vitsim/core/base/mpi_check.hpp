#pragma once
// The one check of MPI return codes, for every program that calls MPI (the trainer's World, vitsim-plan-mpi).
// Header-only: core itself links no MPI; include <mpi.h> before this header. A failed call throws
// vitsim::Error("rank R on HOST: MPI call CALL failed: MPI's message (FILE:LINE)"); main maps it to an exit.
#include <fmt/format.h>

#include <string>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/system.hpp"

namespace vitsim {

// "rank R on HOST" for MPI_COMM_WORLD, "rank ? on HOST" outside MPI_Init .. MPI_Finalize.
inline std::string mpi_rank_identity() {
  int initialized = 0, finalized = 0, rank = -1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized && MPI_Comm_rank(MPI_COMM_WORLD, &rank) == MPI_SUCCESS)
    return fmt::format("rank {} on {}", rank, hostname());
  return fmt::format("rank ? on {}", hostname());
}

// The message of a failed call: `who` names the rank, MPI's own text says why.
inline Error mpi_failure(const std::string& who, int rc, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  const std::string why = len > 0 ? std::string(text, static_cast<size_t>(len)) : fmt::format("error {}", rc);
  return Error(fmt::format("{}: MPI call {} failed: {} ({}:{})", who, call, why, file, line));
}

}  // namespace vitsim

// Checks one MPI call; `who` is the rank's identity ("rank 3 on node7"). VITSIM_MPI_CHECK names it itself.
#define VITSIM_MPI_CHECK_AS(who, call)                                           \
  do {                                                                           \
    const int vitsim_rc_ = (call);                                               \
    if (vitsim_rc_ != MPI_SUCCESS)                                               \
      throw ::vitsim::mpi_failure((who), vitsim_rc_, #call, __FILE__, __LINE__); \
  } while (0)
#define VITSIM_MPI_CHECK(call) VITSIM_MPI_CHECK_AS(::vitsim::mpi_rank_identity(), call)
