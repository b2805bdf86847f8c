// Helpers of the shm backend tests: finding segments in /dev/shm, and the one-line reports that
// child processes print for the parent to check.
#pragma once

#include <dirent.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "backends/shm/segment.h"
#include "lockstep/core/deadline.h"
#include "lockstep/core/error.h"

namespace lockstep::testing {

// The lockstep segments in /dev/shm that a process with one of these pids created (the creator's
// pid is part of the name: lockstep-<group>-<pid>-<token>).
inline std::vector<std::string> segments_created_by(const std::vector<pid_t>& pids) {
  std::vector<std::string> found;
  DIR* dir = ::opendir("/dev/shm");
  if (!dir) return found;
  while (dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name.rfind(shm::kSegmentPrefix, 0) != 0) continue;
    for (pid_t pid : pids)
      if (name.find("-" + std::to_string(pid) + "-") != std::string::npos) found.push_back(name);
  }
  ::closedir(dir);
  return found;
}

inline std::vector<std::string> segments_of_this_process() {
  return segments_created_by({::getpid()});
}

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

inline void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// The error's lockstep type: "MismatchError", "NetworkError", ...
inline const char* error_type(const std::exception& e) {
  return dynamic_cast<const MismatchError*>(&e)     ? "MismatchError"
         : dynamic_cast<const NetworkError*>(&e)    ? "NetworkError"
         : dynamic_cast<const TimeoutError*>(&e)    ? "TimeoutError"
         : dynamic_cast<const ConfigError*>(&e)     ? "ConfigError"
         : dynamic_cast<const InvalidArgument*>(&e) ? "InvalidArgument"
                                                    : "other";
}

// Prints "CAUGHT <type> at_ns=<steady ns>: <message>".
inline void report(const std::exception& e) {
  say(detail::concat("CAUGHT ", error_type(e), " at_ns=", now_ns(), ": ", e.what()));
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace lockstep::testing
