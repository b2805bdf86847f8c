// Every collective of the ProcessGroup API as one nonblocking MPI call on the group's
// communicator: all_reduce -> MPI_Iallreduce, broadcast -> MPI_Ibcast, reduce -> MPI_Ireduce,
// all_gather(_v) -> MPI_Iallgather(v), gather(_v) -> MPI_Igather(v), scatter(_v) ->
// MPI_Iscatter(v), reduce_scatter(_v) -> MPI_Ireduce_scatter(_block), all_to_all(_v) ->
// MPI_Ialltoall(v), barrier -> MPI_Ibarrier. MPI picks its own algorithm: Op::algorithm is
// ignored.
//
// Buffers: the in-place forms of the API become MPI_IN_PLACE; any other overlap of input and
// output (which MPI forbids) goes through a scratch copy of the input. avg is a sum followed by
// finish_collective's division. Counts and displacements must fit MPI's int.
#pragma once

#include "algorithms/algorithms.h"
#include "backends/mpi/mpi.h"
#include "comm/op.h"

namespace lockstep::mpi {

struct Started {
  MPI_Request request = MPI_REQUEST_NULL;
  const char* call = "";  // the MPI function, for error messages
};

// Starts op (any kind but send and recv) on comm, where this process is `rank`.
// Throws InvalidArgument when a count or displacement exceeds INT_MAX, and the check_mpi error
// when MPI refuses the call.
Started start_collective(const Op& op, MPI_Comm comm, int rank, Scratch& scratch);

// After the request completed: divides avg results by size.
void finish_collective(const Op& op, int rank, int size);

// count as an MPI int; throws InvalidArgument naming op and what when it does not fit.
int mpi_count(size_t count, const Op& op, const char* what);
// Throws that InvalidArgument for every count and displacement op would pass to MPI, before any
// call (the backend's check(), on the caller's thread).
void check_counts(const Op& op);

}  // namespace lockstep::mpi
