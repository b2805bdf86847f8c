// Helpers of the shm backend tests: the lockstep segments in /dev/shm and the kill-a-rank check
// (jobs of child processes and their reports: support/child_job.h).
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
#include "shmem/shared_file.h"
#include "support/child_job.h"

namespace lockstep::testing {

// The lockstep segments in /dev/shm that a process with one of these pids created (the creator's
// pid is part of the name: lockstep-<group>-<pid>-<token>).
inline std::vector<std::string> segments_created_by(const std::vector<pid_t>& pids) {
  std::vector<std::string> found;
  DIR* dir = ::opendir("/dev/shm");
  if (!dir) return found;
  while (dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name.rfind(shmem::kSharedPrefix, 0) != 0) continue;
    for (pid_t pid : pids)
      if (name.find("-" + std::to_string(pid) + "-") != std::string::npos) found.push_back(name);
  }
  ::closedir(dir);
  return found;
}

inline std::vector<std::string> segments_of_this_process() {
  return segments_created_by({::getpid()});
}

// ---- jobs of child processes ----

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
