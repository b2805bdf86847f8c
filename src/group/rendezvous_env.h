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
  std::string source;           // "RANK/WORLD_SIZE", "Slurm", "Open MPI" or "options"
  // Where master_addr and master_port came from when not from MASTER_ADDR / MASTER_PORT
  // ("the first host of SLURM_JOB_NODELIST=...", "SLURM_JOB_ID=..."), for the INFO log.
  std::string derived;
};

// [Slurm] Without MASTER_PORT, a Slurm job's ranks agree on 15000 + the last 4 digits of
// SLURM_JOB_ID, as PyTorch Lightning's SLURM environment does: the same in every task of the job,
// and different for jobs that share a node most of the time.
int slurm_port(unsigned long long job_id);

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// Reads rank, world size and master address for init_method from `lookup` (the environment by
// default), preferring options' explicit values, then RANK/WORLD_SIZE, then Slurm, then Open MPI.
// Throws one ConfigError that names every missing or malformed variable.
EnvRendezvous read_rendezvous(const InitOptions& options, const EnvLookup& lookup);
EnvLookup process_env();
// The job's ranks on this host, from the same family of variables read_rendezvous reads
// (LOCAL_WORLD_SIZE, SLURM_NTASKS_PER_NODE or OMPI_COMM_WORLD_LOCAL_SIZE); -1 when it is unset or
// malformed.
int local_world_size_from(const EnvLookup& lookup);

}  // namespace lockstep
