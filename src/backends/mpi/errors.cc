#include "backends/mpi/errors.h"

#include "backends/mpi/mpi.h"
#include "backends/mpi/runtime.h"
#include "lockstep/core/error.h"

namespace lockstep::mpi {

void check_mpi(int code, const std::string& what, int rank, const char* call) {
  if (code == MPI_SUCCESS) return;
  int error_class = code;
  MPI_Error_class(code, &error_class);
  std::string message = detail::concat("mpi backend: ", what, " failed on rank ", rank, " in ",
                                       call, ": ", error_text(code));
  if (error_class == MPI_ERR_TRUNCATE)
    throw MismatchError(message +
                        ". A peer sent more data than this rank expected: every rank "
                        "must pass the same counts");
  throw NetworkError(message);
}

}  // namespace lockstep::mpi
