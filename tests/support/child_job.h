// A job of child processes for backend tests: the test binary re-runs itself, once per rank, in
// child mode (child_mode.h), joined through a TcpStore this process hosts. Children report what
// they caught on one line ("CAUGHT <type> at_ns=<steady ns>: <message>") for the parent to check.
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/core/deadline.h"
#include "lockstep/core/error.h"
#include "lockstep/store/tcp_store.h"
#include "support/child_mode.h"
#include "support/messages.h"
#include "support/subprocess.h"

namespace lockstep::testing {

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

// The steady-clock time a child printed with its CAUGHT line (-1: none).
inline int64_t caught_at(const std::string& output) {
  size_t p = output.find("at_ns=");
  return p == std::string::npos ? -1 : std::stoll(output.substr(p + 6));
}

using Env = std::map<std::string, std::optional<std::string>>;

struct JobOptions {
  std::string op_timeout = "60";   // LOCKSTEP_TIMEOUT of the children
  std::chrono::seconds wait{120};  // how long wait() gives each child
};

// A job of `world` child processes running child test <suite>.DISABLED_<name>, over a store
// this process hosts.
class Job {
 public:
  Job(const std::string& name, int world, const std::string& suite, JobOptions options = {})
      : server_({.bind_host = "127.0.0.1"}), options_(options) {
    for (int r = 0; r < world; ++r)
      children_.emplace_back(child_argv(suite + ".DISABLED_" + name),
                             Env{{"RANK", std::to_string(r)},
                                 {"WORLD_SIZE", std::to_string(world)},
                                 {"MASTER_ADDR", "127.0.0.1"},
                                 {"MASTER_PORT", std::to_string(server_.port())},
                                 {"LOCKSTEP_USE_AGENT_STORE", "1"},
                                 {"LOCKSTEP_RESTART_COUNT", std::nullopt},
                                 {"LOCKSTEP_TIMEOUT", options_.op_timeout}});
  }
  TcpStore store() {
    return TcpStore(
        {.host = "127.0.0.1", .port = server_.port(), .timeout = std::chrono::seconds(60)});
  }
  Child& child(int r) { return children_[static_cast<size_t>(r)]; }
  ProcessResult wait(int r) { return child(r).wait(options_.wait); }
  // This process and every child.
  std::vector<pid_t> pids() const {
    std::vector<pid_t> p{::getpid()};
    for (const auto& c : children_) p.push_back(c.pid());
    return p;
  }

 private:
  TcpStoreServer server_;
  JobOptions options_;
  std::vector<Child> children_;
};

}  // namespace lockstep::testing
