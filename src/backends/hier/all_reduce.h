// The hierarchical all_reduce. It works as follows:
//
//   1. intra-host reduce: the ranks of each host reduce their inputs into their host leader's
//      output over shared memory (the host group's shm backend, op kind reduce, root 0);
//   2. inter-host all_reduce: the host leaders all_reduce their partial results in place (the
//      LeaderStage: tcp between hosts);
//   3. intra-host broadcast: each leader broadcasts the result to its host's ranks over shared
//      memory.
//
// Only stage 2 crosses the network, and it moves one buffer per host rather than one per rank.
// avg runs as sum through all stages and the leaders divide once by the group size before
// stage 3. f16/bf16 sum, avg and prod run stages 1 and 2 on an f32 copy, so that partial sums are
// rounded once (in the narrowing before stage 3), as on the flat backends. Stages 1 and 3 are
// skipped for a rank alone on its host, stage 2 when there is one host.
//
// Each stage checks the op on its own ranks (shm descriptors, tcp headers) before moving data,
// so ranks that disagree about the op fail with a MismatchError; a failure on one host reaches
// the others through the backend's abort (HierBackend).
#pragma once

#include <vector>

#include "algorithms/algorithms.h"
#include "backends/hier/leader_stage.h"
#include "comm/backend.h"

namespace lockstep::hier {

struct HierAllReduce {
  Backend* host_group = nullptr;   // shm over this host's ranks; null when alone on the host
  std::vector<int> host_ranks;     // group ranks of this host (index = rank in host_group)
  int host_rank = 0;               // this rank's index in host_ranks (0: the host's leader)
  LeaderStage* leaders = nullptr;  // null on non-leaders and when there is one host
  int group_size = 1;
  Scratch* scratch = nullptr;  // f32 copies of 16-bit data
};

// Runs op (kind all_reduce, normal form) through the three stages. Collective over the group.
// Errors of stages 1 and 3 name ranks of the whole group (see rank_names.h).
void all_reduce_hierarchical(const HierAllReduce& h, const Op& op);

}  // namespace lockstep::hier
