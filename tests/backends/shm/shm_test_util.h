// Helpers of the shm backend tests: finding segments in /dev/shm, the one-line reports that
// child processes print for the parent to check, and jobs of child processes.
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backends/shm/segment.h"
#include "lockstep/core/deadline.h"
#include "lockstep/core/error.h"
#include "lockstep/store/tcp_store.h"
#include "net/socket.h"
#include "support/child_mode.h"
#include "support/subprocess.h"

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

// ---- jobs of child processes ----

using Env = std::map<std::string, std::optional<std::string>>;

// A job of `world` child processes running child test <suite>.DISABLED_<name>, over a store
// this process hosts.
class Job {
 public:
  Job(const std::string& name, int world, const std::string& suite = "ShmChild")
      : server_({.bind_host = "127.0.0.1"}) {
    for (int r = 0; r < world; ++r)
      children_.emplace_back(child_argv(suite + ".DISABLED_" + name),
                             Env{{"RANK", std::to_string(r)},
                                 {"WORLD_SIZE", std::to_string(world)},
                                 {"MASTER_ADDR", "127.0.0.1"},
                                 {"MASTER_PORT", std::to_string(server_.port())},
                                 {"LOCKSTEP_USE_AGENT_STORE", "1"},
                                 {"LOCKSTEP_RESTART_COUNT", std::nullopt},
                                 {"LOCKSTEP_TIMEOUT", "60"}});
  }
  TcpStore store() {
    return TcpStore(
        {.host = "127.0.0.1", .port = server_.port(), .timeout = std::chrono::seconds(60)});
  }
  Child& child(int r) { return children_[static_cast<size_t>(r)]; }
  ProcessResult wait(int r) { return child(r).wait(std::chrono::seconds(120)); }
  // This process and every child: the possible creators of the job's segments.
  std::vector<pid_t> pids() const {
    std::vector<pid_t> p{::getpid()};
    for (const auto& c : children_) p.push_back(c.pid());
    return p;
  }

 private:
  TcpStoreServer server_;
  std::vector<Child> children_;
};

inline int64_t caught_at(const std::string& output) {
  size_t p = output.find("at_ns=");
  return p == std::string::npos ? -1 : std::stoll(output.substr(p + 6));
}

inline void expect_no_segments(const Job& job) {
  EXPECT_EQ(segments_created_by(job.pids()), std::vector<std::string>{}) << "left in /dev/shm";
}

// Runs child test <suite>.DISABLED_<loop> on `world` processes. Kills rank `victim` once every
// rank is looping (has set test/ready/<rank> in the store), then checks that every survivor
// failed with a NetworkError naming the victim (rank, host and pid) within one second of the
// kill, and that no segment is left in /dev/shm.
inline void kill_and_check(const std::string& loop, int world, int victim,
                           const std::string& suite = "ShmChild") {
  Job job(loop, world, suite);
  TcpStore store = job.store();
  std::vector<std::string> ready;
  for (int r = 0; r < world; ++r) ready.push_back("test/ready/" + std::to_string(r));
  store.wait(ready, std::chrono::seconds(60));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const pid_t victim_pid = job.child(victim).pid();
  const int64_t killed_at = now_ns();
  job.child(victim).kill(SIGKILL);
  const std::string named =
      detail::concat("rank ", victim, " (host ", net::hostname(), ", pid ", victim_pid, ")");
  for (int r = 0; r < world; ++r) {
    if (r == victim) continue;
    auto result = job.wait(r);
    SCOPED_TRACE("rank " + std::to_string(r) + " output:\n" + result.output);
    EXPECT_TRUE(contains(result.output, "CAUGHT NetworkError"));
    EXPECT_TRUE(contains(result.output, named));
    EXPECT_TRUE(contains(result.output, "died")) << "a dead rank, not a timeout or a goodbye";
    const int64_t at = caught_at(result.output);
    ASSERT_GT(at, 0);
    const double seconds = static_cast<double>(at - killed_at) / 1e9;
    std::printf("rank %d failed %.3f s after the kill\n", r, seconds);
    EXPECT_LT(seconds, 1.0);
  }
  job.wait(victim);
  expect_no_segments(job);
}

}  // namespace lockstep::testing
