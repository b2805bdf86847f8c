// lockstep bench: nccl-tests style collective benchmarks (see docs/bench.md).
//
// With --nranks N this process starts N local ranks (copies of itself) and waits for them;
// without it, it is one rank of a job and joins through env:// like any lockstep program.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/bench_local.h"
#include "cli/bench_options.h"
#include "cli/bench_runner.h"
#include "cli/commands.h"
#include "lockstep/group/init.h"

namespace lockstep::cli {
namespace {

// Whether any launcher told this process its rank (RANK, Slurm or Open MPI).
bool launched() {
  for (const char* v : {"RANK", "WORLD_SIZE", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

int run_as_rank(const bench::BenchOptions& options) {
  std::shared_ptr<ProcessGroup> pg;
  try {
    pg = init_process_group({.backend = options.backend});
  } catch (const ConfigError& e) {
    if (launched()) throw;
    throw ConfigError(std::string(e.what()) +
                      "\n(or let lockstep bench start local ranks: lockstep bench --nranks N)");
  }
  const size_t wrong_rows = bench::run_benchmark(*pg, options, stdout);
  if (wrong_rows == 0) return 0;
  if (pg->rank() == 0)
    std::fprintf(stderr,
                 "lockstep bench: %zu rows gave WRONG results: the backend (%s) computed a "
                 "collective incorrectly; please report it with this table\n",
                 wrong_rows, pg->backend_name().c_str());
  return 1;
}

void check_root(const bench::BenchOptions& options) {
  const bool rooted = std::any_of(options.ops.begin(), options.ops.end(), bench::bench_op_rooted);
  if (rooted && options.root >= options.nranks)
    throw bench::UsageError(detail::concat("--root ", options.root, " is not one of the ",
                                           options.nranks, " ranks of --nranks ", options.nranks,
                                           "; use a root in [0, ", options.nranks - 1, "]"));
}

}  // namespace

int bench_command(int argc, char** argv) {
  try {
    const bench::BenchOptions options = bench::parse_bench_options(argc, argv);
    if (options.help) {
      std::fputs(bench::bench_usage().c_str(), stdout);
      return 0;
    }
    if (options.nranks == 0) return run_as_rank(options);
    check_root(options);
    return bench::run_local_job({.nranks = options.nranks,
                                 .master_port = options.master_port,
                                 .rank_args = bench::rank_arguments(argc, argv)});
  } catch (const bench::UsageError& e) {
    std::fprintf(stderr, "lockstep bench: %s\n(see 'lockstep bench --help')\n", e.what());
    return 2;
  }
}

}  // namespace lockstep::cli
