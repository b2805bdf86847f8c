// `lockstep bench --backend shm,tcp,mpi`: the same rows timed on one group per backend, printed as
// one table with a time and a busbw column per backend. The backends take turns row by row, so
// that a change in the machine's load hits them all alike.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/bench_options.h"
#include "lockstep/group/process_group.h"

namespace lockstep::cli::bench {

// The names in --backend, split at commas ("shm,tcp" -> {"shm", "tcp"}).
std::vector<std::string> backend_list(const std::string& backend_option);

// Runs every table of options on groups (the same ranks, one backend each; groups[0] also
// measures memcpy). Collective over the groups' ranks. Rank 0 writes to out. Returns the number
// of rows in which some backend's result was wrong.
size_t run_comparison(const std::vector<std::shared_ptr<ProcessGroup>>& groups,
                      const BenchOptions& options, std::FILE* out);

}  // namespace lockstep::cli::bench
