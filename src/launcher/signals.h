// Signals sent to the launcher, turned into something its poll loop can wait on (a self-pipe).
//
// SIGINT, SIGTERM, SIGHUP and SIGQUIT are "termination" signals: the launcher forwards them to
// every child's process group and stops. SIGCHLD only wakes the loop. SIGPIPE is ignored (a
// closed console must not kill the launcher and orphan the ranks). One SignalCatcher per process;
// construct it on the main thread.
#pragma once

#include <string>
#include <vector>

namespace lockstep::launcher {

class SignalCatcher {
 public:
  SignalCatcher();   // installs the handlers
  ~SignalCatcher();  // restores the previous dispositions
  SignalCatcher(const SignalCatcher&) = delete;
  SignalCatcher& operator=(const SignalCatcher&) = delete;

  // Readable (POLLIN) whenever a signal has arrived since the last drain().
  int fd() const;
  // Empties the pipe and returns the termination signals that arrived, oldest first. Never
  // blocks.
  std::vector<int> drain();
  // The first termination signal seen by any drain() so far; 0 if none.
  int first_termination() const { return first_termination_; }

 private:
  int first_termination_ = 0;
};

// "SIGKILL" for 9; "signal 40" for signals without a name.
std::string signal_name(int sig);

}  // namespace lockstep::launcher
