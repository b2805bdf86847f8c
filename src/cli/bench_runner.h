// One rank's part of `lockstep bench`: times every row of every requested table on a ProcessGroup
// and prints the tables on rank 0.
//
// Timing: each iteration starts after a barrier and is timed on every rank; per iteration the
// slowest rank's time counts (an all_reduce max after the row), and a row reports the median of
// those. The check runs once more after the timed iterations, on freshly filled buffers.
#pragma once

#include <cstddef>
#include <cstdio>

#include "cli/bench_options.h"
#include "cli/bench_table.h"
#include "lockstep/group/process_group.h"

namespace lockstep::cli::bench {

// Runs the whole benchmark. Collective: every rank of pg calls it with the same options. Blocks
// for the whole run (each op within the group's timeout). Rank 0 writes to `out` (flushed after
// every row). Returns the number of rows with a wrong result, on every rank. Throws UsageError
// when options.root is not a rank of pg, and rethrows any collective's error.
size_t run_benchmark(ProcessGroup& pg, const BenchOptions& options, std::FILE* out);

// Times and checks one row of op p at layout l (see layout_for), with buffers of its own.
// Collective over pg, like run_benchmark. For tables that interleave several groups.
Row measure_row(ProcessGroup& pg, const OpParams& p, const BenchOptions& options, const Layout& l);

}  // namespace lockstep::cli::bench
