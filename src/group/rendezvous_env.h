// How init_process_group reads the job's shape from the environment (RANK/WORLD_SIZE, Slurm, Open
// MPI, the launcher's store), for the parts that check another environment than this process's
// (`lockstep doctor`, the tests).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "lockstep/group/init.h"

namespace lockstep {

// Where this process sits in the job, as read from the environment.
struct EnvRendezvous {
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;        // -1: unknown
  int local_world_size = -1;  // -1: unknown
  std::string master_addr;    // empty when not needed (file://, explicit store)
  int master_port = -1;
  bool launcher_store = false;  // the store is the launcher's (LOCKSTEP_STORE_ADDR/_PORT)
  std::string source;         // "RANK/WORLD_SIZE", "Slurm", "Open MPI" or "options"
};

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// Reads rank, world size and master address for init_method from `lookup` (the environment by
// default), preferring options' explicit values, then RANK/WORLD_SIZE, then Slurm, then Open MPI.
// Throws one ConfigError that names every missing or malformed variable.
EnvRendezvous read_rendezvous(const InitOptions& options, const EnvLookup& lookup);
EnvLookup process_env();

}  // namespace lockstep
