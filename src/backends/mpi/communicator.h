// The group's own MPI communicator: a subgroup of MPI_COMM_WORLD made of the members' world
// ranks, so that every group (the default one and each new_group) has a separate message space.
#pragma once

#include "backends/mpi/mpi.h"
#include "comm/group_config.h"

namespace lockstep::mpi {

class Communicator {
 public:
  // Collective over the group's members (only them). First waits, through config.store and
  // within config.timeout, until every member has arrived (TimeoutError names the missing
  // ranks), then creates the communicator with MPI_Comm_create_group and MPI_ERRORS_RETURN.
  // Throws ConfigError when the group's ranks are not MPI_COMM_WORLD's (the job was not started
  // by mpirun, or init was given other ranks).
  explicit Communicator(const GroupConfig& config);
  // Frees the communicator (unless MPI is already finalised).
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace lockstep::mpi
