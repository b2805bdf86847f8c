// `lockstep bench --nranks N`: starts N copies of this executable as the ranks of a local job
// (env:// on 127.0.0.1) and waits for them.
#pragma once

#include <string>
#include <vector>

namespace lockstep::cli::bench {

struct LocalJobOptions {
  int nranks = 2;
  int master_port = 0;  // 0: a port that is free when the job starts
  // Arguments of each rank after the executable: {"bench", "--op", "all_reduce", ...}.
  std::vector<std::string> rank_args;
  // How long the other ranks may take to exit once one has failed before they are killed. Peers of
  // a dead rank fail on their own within seconds; this only guards against a hang.
  int failure_grace_seconds = 15;
};

// Starts the ranks (this executable, from /proc/self/exe) with RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and MASTER_PORT set; they inherit stdout and stderr, so
// rank 0's table appears as it is printed. Blocks until every rank has exited. SIGINT and SIGTERM
// to this process are passed on to the ranks. Returns 0 when every rank exited with 0; otherwise
// prints one line per failed rank to stderr (exit code, or signal with a hint for SIGKILL) and
// returns 1.
int run_local_job(const LocalJobOptions& options);

}  // namespace lockstep::cli::bench
