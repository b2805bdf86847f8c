// The MPI backend: every op of the ProcessGroup API as an MPI call over Open MPI (or another MPI
// with MPI_THREAD_MULTIPLE), for jobs started by mpirun or srun. Each group is its own MPI
// communicator. Built only when CMake finds MPI (LOCKSTEP_HAVE_MPI); this header needs no <mpi.h>.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "comm/backend.h"
#include "comm/job_place.h"
#include "lockstep/store/store.h"

namespace lockstep {

// Defined in backend.cc: the symbol the lockstep::mpi component's link forces in
// (group/optional_backends.h).
extern "C" void lockstep_link_mpi_backend();

// Creates the group's communicator (collective over the members, within config.timeout; see
// mpi/communicator.h). Initialises MPI on first use. Throws ConfigError when the ranks are not
// MPI_COMM_WORLD's (a job not started by mpirun), TimeoutError naming the members that never came.
std::unique_ptr<Backend> make_mpi_backend(const GroupConfig& config);

namespace mpi {

// [MPI bootstrap] For init_process_group under mpirun without MASTER_ADDR: rank 0 of
// MPI_COMM_WORLD hosts the job's TcpStore (on MASTER_PORT, or a free port) and MPI_Ibcast tells
// every other rank its address (127.0.0.1 when the whole job is on one host, else rank 0's host
// name). Collective over MPI_COMM_WORLD. Throws ConfigError when the place's rank or world size
// is not MPI's, TimeoutError when the broadcast does not complete within timeout.
std::shared_ptr<Store> open_bootstrap_store(const JobPlace& rv, std::chrono::milliseconds timeout);

}  // namespace mpi

}  // namespace lockstep
