// The job's default group over the mpi backend, shared by every test of this executable. The
// executable runs as every rank of an mpirun job (tests/CMakeLists.txt: -np 2 and -np 4), so each
// test body runs on every rank at once and must issue the same collectives on all of them.
#pragma once

#include "lockstep/group/process_group.h"

namespace lockstep::testing {

// The group init_process_group({.backend = "mpi"}) made: under mpirun, without MASTER_ADDR.
// Created before the first test, destroyed after the last (before MPI_Finalize).
ProcessGroup& world();

// "world 4 rank 1": for failure messages.
std::string where(const ProcessGroup& pg);

}  // namespace lockstep::testing
