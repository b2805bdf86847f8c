// MPI error codes as lockstep errors. Every communicator of the backend uses MPI_ERRORS_RETURN, so
// a failing MPI call returns its code and the backend throws: the message names the op, the rank,
// the MPI call and MPI's own text.
#pragma once

#include <string>

namespace lockstep::mpi {

// Throws when code is not MPI_SUCCESS: MismatchError for MPI_ERR_TRUNCATE (a peer sent more than
// this rank expected), NetworkError for everything else.
// `what` is the op as Op::describe() puts it.
void check_mpi(int code, const std::string& what, int rank, const char* call);

}  // namespace lockstep::mpi
