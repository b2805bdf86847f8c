// Test helpers for real child processes: start with extra environment, capture output, wait with
// a deadline, kill.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::testing {

struct ProcessResult {
  int exit_code = -1;  // valid when signal == 0
  int signal = 0;      // the signal that killed it, 0 if it exited
  bool timed_out = false;
  std::string output;  // stdout and stderr together, in the order written
};

// A running child. stdout and stderr go to one pipe, read by wait().
class Child {
 public:
  // Starts argv[0] (searched in PATH) with the parent's environment plus `env` (a value of
  // std::nullopt removes the variable).
  Child(const std::vector<std::string>& argv,
        const std::map<std::string, std::optional<std::string>>& env = {});
  ~Child();  // kills the child (SIGKILL) if it still runs, and reaps it
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  Child(Child&& o) noexcept;

  pid_t pid() const { return pid_; }
  void kill(int sig);
  // Reads output until the child exits or `timeout` passes (then SIGKILL, timed_out = true).
  ProcessResult wait(std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool reaped_ = false;
  ProcessResult result_;
};

// Starts argv and waits for it.
ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::map<std::string, std::optional<std::string>>& env = {},
                          std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Whether a process with this pid still exists (and is not a zombie).
bool process_alive(pid_t pid);
// A TCP port that was free a moment ago on 127.0.0.1.
int free_port();

}  // namespace lockstep::testing
