// Where this process sits in the job, as far as a bootstrap that finds the job's store needs it
// (the mpi backend's [MPI bootstrap], reached from init_process_group).
#pragma once

#include <string>

namespace lockstep {

struct JobPlace {
  int rank = -1;
  int world_size = -1;
  int local_world_size = -1;  // -1: unknown
  int master_port = -1;       // -1: any free port
  std::string source;         // where rank and world size came from ("Open MPI", ...)
};

}  // namespace lockstep
