// lockstep bench: nccl-tests style collective benchmarks (see docs/bench.md).
//
// With --nranks N this process starts N local ranks (copies of itself) and waits for them;
// without it, it is one rank of a job and joins through env:// like any lockstep program.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cli/bench_compare.h"
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

// One group per backend of --backend (the first from init, the others as subgroups of every rank).
std::vector<std::shared_ptr<ProcessGroup>> groups_for(const std::shared_ptr<ProcessGroup>& pg,
                                                      const std::vector<std::string>& backends) {
  std::vector<int> everyone(static_cast<size_t>(pg->size()));
  for (int r = 0; r < pg->size(); ++r) everyone[static_cast<size_t>(r)] = r;
  std::vector<std::shared_ptr<ProcessGroup>> groups{pg};
  for (size_t i = 1; i < backends.size(); ++i)
    groups.push_back(pg->new_group(everyone, {.backend = backends[i]}));
  return groups;
}

int run_as_rank(const bench::BenchOptions& options) {
  std::shared_ptr<ProcessGroup> pg;
  const std::vector<std::string> backends = bench::backend_list(options.backend);
  try {
    pg = init_process_group({.backend = backends[0]});
  } catch (const ConfigError& e) {
    if (launched()) throw;
    throw ConfigError(std::string(e.what()) +
                      "\n(or let lockstep bench start local ranks: lockstep bench --nranks N)");
  }
  const size_t wrong_rows = backends.size() > 1
                                ? bench::run_comparison(groups_for(pg, backends), options, stdout)
                                : bench::run_benchmark(*pg, options, stdout);
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
