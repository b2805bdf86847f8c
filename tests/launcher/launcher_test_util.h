// Helpers for the launcher tests: run the real `lockstep run` binary, temporary directories,
// and pids that children report through files.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "support/messages.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace lockstep::testing {

using EnvChanges = std::map<std::string, std::optional<std::string>>;

// argv for `lockstep run ARGS...`.
std::vector<std::string> lockstep_run(const std::vector<std::string>& args);

// Runs `lockstep run ARGS...` to completion; also measures its wall time.
struct LaunchResult {
  ProcessResult process;
  double seconds = 0;
};
LaunchResult launch(const std::vector<std::string>& args, const EnvChanges& env = {},
                    std::chrono::milliseconds timeout = std::chrono::seconds(60));

// The lines of text that start with prefix, with the prefix removed.
std::vector<std::string> lines_with_prefix(const std::string& text, const std::string& prefix);
// The text from the launcher's summary rule on ("" when there is no summary).
std::string summary_of(const std::string& output);

// Waits until every file exists and holds a pid; returns them. Fails the test (ADD_FAILURE)
// and returns what it found at the timeout.
std::vector<pid_t> wait_for_pid_files(const std::vector<std::string>& paths,
                                      std::chrono::milliseconds timeout);
// Waits until none of pids is alive; returns the ones still alive at the timeout.
std::vector<pid_t> still_alive_after(const std::vector<pid_t>& pids,
                                     std::chrono::milliseconds timeout);
// SIGKILLs whatever is left (clean-up after a failed assertion).
void kill_all(const std::vector<pid_t>& pids);

// This test binary's path (to start it again as a rank, see child_mode_test.cc).
std::string test_binary();
// Environment that makes the test binary, started as a rank, run LauncherChild.DISABLED_Main in
// `mode`.
EnvChanges child_mode_env(const std::string& mode);

bool file_exists(const std::string& path);

}  // namespace lockstep::testing
