// The environment each rank starts with: the launcher's own, minus the variables the launcher
// sets, plus those (RANK, LOCAL_RANK, WORLD_SIZE, ...). Pure functions, no side effects.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace lockstep::launcher {

// Where one rank sits in the job.
struct RankPlacement {
  int rank = 0;              // RANK: global rank
  int local_rank = 0;        // LOCAL_RANK: rank on this node
  int world_size = 1;        // WORLD_SIZE: ranks in the job
  int local_world_size = 1;  // LOCAL_WORLD_SIZE: ranks on this node
  int group_rank = 0;        // GROUP_RANK: this node's rank
};

// What every rank of one attempt shares.
struct JobEnvironment {
  std::string master_addr;             // MASTER_ADDR
  int master_port = 0;                 // MASTER_PORT: the store the launcher on node 0 hosts
  int restart_count = 0;               // LOCKSTEP_RESTART_COUNT: attempt number, from 0
  int max_restarts = 0;                // LOCKSTEP_MAX_RESTARTS
  std::string run_id;                  // LOCKSTEP_RUN_ID
  std::optional<int> omp_num_threads;  // OMP_NUM_THREADS, when the launcher sets it
};

// Returns "NAME=value" strings: `base` (e.g. environ) with the launcher's variables replaced.
// Also sets LOCKSTEP_USE_AGENT_STORE=1: the store at MASTER_PORT is already running, so no rank
// starts one.
std::vector<std::string> child_environment(const RankPlacement& placement,
                                           const JobEnvironment& job, char* const* base);

// OMP_NUM_THREADS the launcher gives each rank when the user has not set it:
// max(1, cores / local processes).
int default_omp_threads(int cores, int local_processes);

}  // namespace lockstep::launcher
