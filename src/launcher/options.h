// Options of `lockstep run`, parsed from the command line. Names and meanings follow torchrun
// where the two agree (--nproc-per-node, --nnodes, --node-rank, --master-addr, --master-port,
// --standalone, --max-restarts, --monitor-interval, --log-dir, --tee, --redirects,
// --local-ranks-filter, -m/--module, --no-python); underscores may stand for dashes
// (--nproc_per_node).
//
// [Invocation forms] As torchrun's, plus plain programs:
//   lockstep run [options] script.py ARGS...   the Python interpreter runs script.py
//   lockstep run [options] -m module ARGS...   the Python interpreter runs a module
//   lockstep run [options] --no-python CMD ... CMD runs as given, even a .py file
//   lockstep run [options] PROGRAM ARGS...     any other PROGRAM runs as given
// The interpreter is --python, else $LOCKSTEP_PYTHON, else python3 from PATH; it runs with -u
// (unbuffered), as under torchrun, so that the ranks' lines reach the console as they print.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "lockstep/core/error.h"

namespace lockstep::launcher {

// Bad command-line input: `lockstep run` prints the message and exits with code 2 before it
// starts anything.
class UsageError : public InvalidArgument {
  using InvalidArgument::InvalidArgument;
};

// Which of a child's streams a --tee or --redirects setting covers (torchrun's 0..3).
enum class Streams : uint8_t { none = 0, out = 1, err = 2, both = 3 };
inline bool covers_out(Streams s) {
  return (static_cast<int>(s) & 1) != 0;
}
inline bool covers_err(Streams s) {
  return (static_cast<int>(s) & 2) != 0;
}

// A --tee / --redirects value: one setting for every local rank ("3"), or per local rank
// ("0:3,1:2"; local ranks not named get none).
struct StreamSelection {
  Streams all = Streams::none;
  std::map<int, Streams> per_local_rank;

  Streams for_local_rank(int local_rank) const;
  bool any() const { return all != Streams::none || !per_local_rank.empty(); }
};

struct LaunchOptions {
  int nproc_per_node = 1;  // processes on this node
  int nnodes = 1;          // nodes in the job (elastic: at most, = nnodes_max)
  int node_rank = 0;       // this node, in [0, nnodes); ignored when elastic
  // --nnodes MIN:MAX (docs/launcher.md, [Elastic]): the rendezvous admits MIN..MAX nodes per
  // attempt and assigns their node ranks. --nnodes N is not elastic (nnodes_min = nnodes_max = N).
  bool elastic = false;
  int nnodes_min = 1;
  int nnodes_max = 1;
  std::chrono::milliseconds rdzv_last_call{1000};     // elastic: wait for more nodes after MIN
  std::chrono::milliseconds rdzv_keep_alive{15'000};  // elastic: a silent node is gone after this
  std::string master_addr = "127.0.0.1";  // node 0's address (its launcher hosts the store)
  int master_port = 29500;                // the store's port; 0 picks a free one (one node only)
  bool standalone = false;                // one node, 127.0.0.1 and a free port
  int max_restarts = 0;                   // restarts of the whole local group after a failure
  std::chrono::milliseconds monitor_interval{100};  // how often children and peers are checked
  std::chrono::milliseconds rdzv_timeout{300'000};  // deadline for all nodes to arrive
  std::chrono::milliseconds term_timeout{10'000};   // SIGTERM-to-SIGKILL grace period
  std::string run_id;                               // LOCKSTEP_RUN_ID; empty: node 0 makes one up
  std::string secret_file;  // --secret-file: the job's secret, the same file on every node
  // Set by check_launch_options: the job's secret (--secret-file, else LOCKSTEP_SECRET or
  // LOCKSTEP_SECRET_FILE, else a random one for a one-node job; "" for a job of several nodes
  // without one). Given to the ranks as LOCKSTEP_SECRET; never printed.
  std::string secret;
  // --bind-addr: the address the launcher's store and every rank's listeners bind (given to the
  // ranks as LOCKSTEP_BIND_ADDR). Empty: each binds the address it advertises when this host has
  // it (loopback for --standalone and 127.0.0.1), else every interface.
  std::string bind_addr;
  std::string log_dir;               // DIR/attempt_N/rank_R.log; empty: no files
  StreamSelection tee;               // streams copied to the log files too
  StreamSelection redirects;         // streams sent to the log files only
  std::set<int> local_ranks_filter;  // local ranks shown on the console; empty: all
  bool help = false;                 // --help: print the options and exit 0
  bool module = false;               // -m: program[0] is a Python module
  bool no_python = false;            // --no-python: run program as given
  std::string python;                // --python: the interpreter for scripts

  std::vector<std::string> program;  // PROGRAM ARGS... as given (the script or module first)
  // Set by check_launch_options: the file to execute and its full argv (for a script: the
  // interpreter, -u, the script and its arguments).
  std::string program_path;
  std::vector<std::string> command;
};

// Parses the arguments after `run`. The program starts at the first argument that is not an
// option (or after `--`); everything from there on belongs to it. Throws UsageError naming the
// offending option and value.
LaunchOptions parse_launch_options(std::span<const std::string> args);

// Checks what parsing alone cannot: the program exists and is executable (resolved through PATH
// into program_path), a script exists and an interpreter for it does, -m names a module,
// --node-rank < --nnodes, a fixed port for several nodes, filters and
// per-rank settings within --nproc-per-node. Throws UsageError. Touches nothing but the
// filesystem's metadata.
void check_launch_options(LaunchOptions& options);

// The --help text: one line per option.
std::string launch_help();

}  // namespace lockstep::launcher
