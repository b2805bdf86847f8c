// What one attempt of the job produced: how it ended, the root cause, and the other failures.
// Plain data shared by the supervisor (which fills it), the node sync and the summary.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::launcher {

// How one rank ended.
struct RankExit {
  int rank = 0;
  int local_rank = 0;
  pid_t pid = -1;
  int exit_code = 0;  // when signal == 0
  int signal = 0;     // the signal that killed it; 0 if it exited
  // The launcher had signalled it before it ended, and it ended by that signal or by exiting: a
  // rank that crashed or aborted itself (SIGABRT, SIGSEGV, ...) did so on its own even then.
  bool stopped_by_launcher = false;
  std::chrono::system_clock::time_point time;  // when the launcher saw it end
  std::vector<std::string> stderr_tail;        // its last stderr lines
  std::string headline;    // what it died of, e.g. a Python exception line with its frame
  std::string error_file;  // TORCHELASTIC_ERROR_FILE, when @record wrote it

  bool failed() const { return signal != 0 || exit_code != 0; }
  // Whether the signal that killed it is one a process raises on itself (abort(), a crash), never
  // one the launcher sends.
  bool died_by_itself() const;
  // The launcher's exit code for this failure: the exit code, or 128 + signal.
  int status_code() const { return signal != 0 ? 128 + signal : exit_code; }
};

// What a C++ rank died of, from its last stderr lines: "uncaught <type>: <what()>" when
// std::terminate reported an uncaught exception there ("terminate called after throwing an
// instance of ..."), else "".
std::string uncaught_exception(const std::vector<std::string>& stderr_tail);

// What the ranks' own diagnoses say about a hang: the ranks that timed out in a collective name
// those that never entered it (src/debug/status_keys.h, blame keys).
struct Culprit {
  std::vector<int> ranks;          // never entered the op
  std::vector<int> waiting_ranks;  // timed out waiting for them
  std::string op;                  // "all_reduce #2 (f32, 4 bytes, ...)"
};

// A failure reported by another node through the store.
struct RemoteFailure {
  int node_rank = 0;
  int exit_code = 1;  // the code that node's launcher exits with
  std::string what;   // one line, e.g. "rank 5 (local rank 1) exited with code 3 on host-b"
  // False when the job must end rather than restart (that node's launcher was interrupted, or
  // node 0's store is gone).
  bool restartable = true;
  // Elastic jobs: the attempt ended because nodes are waiting to join, not for a failure; the
  // restart that follows does not count against --max-restarts.
  bool membership_change = false;
};

enum class AttemptEnd {
  succeeded,      // every local rank exited 0
  failed,         // a local rank failed: root_cause is set
  remote_failed,  // another node failed: remote is set
  interrupted,    // the launcher got SIGINT/SIGTERM/...: signal is set
};

struct AttemptResult {
  int attempt = 0;
  AttemptEnd end = AttemptEnd::succeeded;
  std::optional<RankExit> root_cause;    // the first local rank to fail
  std::vector<RankExit> other_failures;  // every other local rank that failed, in order seen
  std::optional<Culprit> culprit;        // when the ranks blamed other ranks for a hang
  std::optional<RemoteFailure> remote;
  int signal = 0;
  std::string host;  // this node's hostname
  // Elastic jobs: the world this attempt ran, e.g. "world size 4 on 2 nodes (node rank 1)"; shown
  // in the summary's attempt lines. Empty otherwise.
  std::string membership;
};

}  // namespace lockstep::launcher
