// The MPI runtime of this process: initialised on first use with MPI_THREAD_MULTIPLE (every
// group runs its ops on its own progress thread), finalised at exit.
//
// [Leftover requests] MPI cannot cancel a collective. An op that times out or is abandoned leaves
// its request with MPI; it is handed to adopt_leftover() and tested again at exit. MPI_Finalize
// waits for every process of the job, so a process that still has leftovers after a short grace
// period exits without it: mpirun then ends the job, instead of this process and its peers
// waiting on each other.
#pragma once

#include <chrono>
#include <shared_mutex>
#include <string>

#include "backends/mpi/mpi.h"

namespace lockstep::mpi {

// Initialises MPI unless the program already has (then its thread level must be
// MPI_THREAD_MULTIPLE). Thread-safe, idempotent. Throws ConfigError when MPI cannot give
// MPI_THREAD_MULTIPLE or is already finalised.
void ensure_initialized();

// Rank and size of MPI_COMM_WORLD. REQUIRES ensure_initialized().
int world_rank();
int world_size();

// "MPI_ERR_TRUNCATE: message truncated": the class name and MPI's own text for an error code.
std::string error_text(int code);

// Keeps a request that an op gave up on (timeout); see [Leftover requests].
void adopt_leftover(MPI_Request request);

// [Communicator changes] Open MPI's ob1 (4.1) crashes in MPI_Comm_create_group when another thread
// tests requests at the same moment. Creating and freeing a communicator holds this exclusively;
// the p2p channel, which tests requests continually, holds it shared around its MPI calls.
std::shared_mutex& communicator_changes();
// Frees comm (holding communicator_changes) unless it is null or MPI is finalised already.
void free_communicator(MPI_Comm& comm);

}  // namespace lockstep::mpi
