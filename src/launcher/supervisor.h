// Supervisor: runs one attempt of the local group. Starts every local rank, routes their output,
// and watches them until all have ended.
//
// [Stopping] The first rank to fail (non-zero exit or a signal) is the root cause. Every other
// running rank then gets SIGTERM on its process group, and SIGKILL when term_timeout passes. A
// termination signal sent to the launcher is forwarded to every rank the same way (a second one
// escalates to SIGKILL at once). A failure reported by another node (RemoteCheck) stops the local
// ranks too. When every rank has ended, leftover descendants are killed and the pipes drained.
//
// Not thread-safe; runs on the launcher's main thread (see child_process.h).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/attempt.h"
#include "launcher/child_env.h"
#include "launcher/rank_output.h"
#include "lockstep/core/deadline.h"

namespace lockstep::launcher {

class Guardian;
class SignalCatcher;

struct AttemptPlan {
  int attempt = 0;
  int node_rank = 0;
  int rank_offset = 0;  // global rank of local rank 0
  int world_size = 1;
  int nproc = 1;  // local ranks
  int nnodes = 1;
  JobEnvironment job;
  std::string program_path;
  std::vector<std::string> argv;
  std::vector<OutputRoute> routes;  // one per local rank
  std::string log_dir;              // this attempt's directory; empty: no log files
  std::string error_dir;            // where each rank's TORCHELASTIC_ERROR_FILE goes
  std::chrono::milliseconds monitor_interval{100};
  std::chrono::milliseconds term_timeout{10'000};
  std::string host;
};

// Polled every monitor interval while ranks run: a failure another node reported, if any.
// May throw (e.g. NetworkError when node 0 is gone); the supervisor then stops its ranks and
// reports the error as a remote failure.
using RemoteCheck = std::function<std::optional<RemoteFailure>()>;

class Supervisor {
 public:
  Supervisor(AttemptPlan plan, Guardian& guardian, SignalCatcher& signals, RemoteCheck remote);
  ~Supervisor();  // SIGKILLs and reaps whatever still runs (only on an exception path)
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Blocks until every local rank has ended. Call once.
  AttemptResult run();

 private:
  struct Slot;
  void start_all();
  void pump(std::chrono::milliseconds wait);
  void read_pipe(Slot& slot, StreamKind stream);
  void reap();
  void on_exit(size_t index, int status);
  void handle_signals();
  void check_remote();
  void begin_stop(int sig);
  void enforce_kill_deadline();
  std::chrono::milliseconds next_wait() const;
  bool any_running() const;
  void finish();
  void describe(RankExit& exit) const;

  AttemptPlan plan_;
  Guardian& guardian_;
  SignalCatcher& signals_;
  RemoteCheck remote_;
  std::vector<std::unique_ptr<Slot>> slots_;
  AttemptResult result_;
  int root_slot_ = -1;
  bool stopping_ = false;
  std::optional<Deadline> kill_deadline_;
  Clock::time_point next_remote_check_;
};

}  // namespace lockstep::launcher
