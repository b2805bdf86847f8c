// The environment each rank starts with: the launcher's own, minus the variables the launcher
// sets, plus those. Pure functions, no side effects.
//
// [torchrun's variables] Every variable torchrun (1.13 and 2.x, LocalElasticAgent._start_workers
// and start_processes) gives a worker, with its meaning there, for a job of one role ("default"):
//   RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE   place in the job and on the node
//   GROUP_RANK, GROUP_WORLD_SIZE                     this node's rank, number of nodes
//   ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME            = RANK, WORLD_SIZE, "default"
//   MASTER_ADDR, MASTER_PORT                         a free port on node 0 for the script's own
//                                                    store, which its rank 0 hosts (as under
//                                                    torchrun's c10d rendezvous)
//   TORCHELASTIC_RESTART_COUNT, _MAX_RESTARTS, _RUN_ID
//   TORCHELASTIC_USE_AGENT_STORE=False               so torch's env:// makes rank 0 the host
//   TORCHELASTIC_ERROR_FILE                          where torchrun's @record writes the error
//   NCCL_ASYNC_ERROR_HANDLING (1.13), TORCH_NCCL_ASYNC_ERROR_HANDLING (2.x)
//                                                    "1" unless the user set them
//   OMP_NUM_THREADS                                  when the user has not set it (see below)
// and lockstep's: LOCKSTEP_STORE_ADDR / LOCKSTEP_STORE_PORT (the launcher's store, where
// lockstep's env:// connects as a client: LOCKSTEP_USE_AGENT_STORE=1), LOCKSTEP_MAX_RESTARTS,
// LOCKSTEP_RUN_ID, and LOCKSTEP_ATTEMPT and LOCKSTEP_RESTART_COUNT (both the attempt's number,
// which scopes the ranks' keys in the launcher's store: equal to TORCHELASTIC_RESTART_COUNT, except
// in an elastic job that restarted for nodes joining, which torchrun does not count as a restart).
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
  int group_world_size = 1;  // GROUP_WORLD_SIZE: nodes in the job
  std::string error_file;    // TORCHELASTIC_ERROR_FILE
};

// What every rank of one attempt shares.
struct JobEnvironment {
  std::string master_addr;  // MASTER_ADDR: node 0's address
  int master_port = 0;      // MASTER_PORT: free, for the script's own store
  int store_port = 0;       // LOCKSTEP_STORE_PORT: the launcher's store on node 0
  int restart_count = 0;    // TORCHELASTIC_RESTART_COUNT: restarts after failures
                            // before this attempt
  int attempt = 0;          // LOCKSTEP_ATTEMPT, LOCKSTEP_RESTART_COUNT: attempt number,
                            // from 0 (elastic jobs also restart, uncounted, when nodes
                            // join)
  int max_restarts = 0;
  std::string run_id;
  std::optional<int> omp_num_threads;  // OMP_NUM_THREADS, when the launcher sets it
  std::string secret;                  // LOCKSTEP_SECRET, when the job has one
  std::string bind_addr;               // LOCKSTEP_BIND_ADDR, when --bind-addr is given
};

// Returns "NAME=value" strings: `base` (e.g. environ) with the launcher's variables replaced.
std::vector<std::string> child_environment(const RankPlacement& placement,
                                           const JobEnvironment& job, char* const* base);

// OMP_NUM_THREADS the launcher gives each rank when the user has not set it:
// max(1, cores / local processes).
int default_omp_threads(int cores, int local_processes);

}  // namespace lockstep::launcher
