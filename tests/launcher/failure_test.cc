// Tests 2 and 3 of the launcher issue: a failing rank stops its siblings, and the one summary
// names the root cause (rank, pid, exit code or signal, last stderr lines).
#include <gtest/gtest.h>

#include "launcher_test_util.h"

namespace lockstep::testing {
namespace {

// Ranks other than `failing` record their pid and a background child's pid in DIR, then wait.
// The failing rank waits for those files (so every sibling is up), writes to stderr and runs
// `then`.
std::string script(const TempDir& dir, int failing, int siblings, const std::string& then,
                   const std::string& sibling_setup = "") {
  std::string d = dir.path();
  return "if [ \"$RANK\" != " + std::to_string(failing) + " ]; then " + sibling_setup +
         " sleep 30 & echo $! > " + d + "/gpid_$RANK.tmp; mv " + d + "/gpid_$RANK.tmp " + d +
         "/gpid_$RANK; echo $$ > " + d + "/pid_$RANK.tmp; mv " + d + "/pid_$RANK.tmp " + d +
         "/pid_$RANK; wait; exit 0; fi; "
         "echo $$ > " +
         d +
         "/pid_$RANK; "
         "n=0; while [ $(ls " +
         d + " | grep -c '^g\\?pid_[0-9]*$') -lt " + std::to_string(2 * siblings + 1) +
         " ] && [ $n -lt 400 ]; do sleep 0.05; n=$((n+1)); done; "
         "echo \"first line of rank $RANK\" >&2; echo \"boom from rank $RANK\" >&2; " +
         then;
}

TEST(LauncherFailure, ExitCodeThreeStopsSiblingsAndIsTheRootCause) {
  TempDir dir;
  auto r = launch(
      {"--standalone", "--nproc-per-node", "3", "/bin/sh", "-c", script(dir, 1, 2, "exit 3")});
  EXPECT_EQ(r.process.exit_code, 3) << r.process.output;
  EXPECT_LT(r.seconds, 8.0) << "siblings sleep 30 s unless the launcher stops them";
  std::vector<pid_t> pids;
  for (int rank : {0, 2})
    for (const char* kind : {"pid_", "gpid_"})
      pids.push_back(std::atoi(read_file(dir.file(kind + std::to_string(rank))).c_str()));
  auto alive = still_alive_after(pids, std::chrono::seconds(5));
  EXPECT_TRUE(alive.empty()) << alive.size() << " sibling processes outlived the launcher";
  kill_all(alive);

  std::string summary = summary_of(r.process.output);
  std::string failing_pid = read_file(dir.file("pid_1"));
  EXPECT_NE(summary.find("rank:       1 (local rank 1)"), std::string::npos) << summary;
  EXPECT_NE(summary.find("pid:        " + failing_pid), std::string::npos) << summary;
  EXPECT_NE(summary.find("exit:       exited with code 3"), std::string::npos) << summary;
  EXPECT_NE(summary.find("    first line of rank 1\n    boom from rank 1\n"), std::string::npos)
      << summary;
  EXPECT_NE(summary.find("time:       "), std::string::npos);
  EXPECT_NE(summary.find("host:       "), std::string::npos);
  for (int rank : {0, 2})
    EXPECT_NE(summary.find("rank " + std::to_string(rank) + " (local rank " + std::to_string(rank) +
                           ", pid "),
              std::string::npos)
        << "one line for each rank the launcher stopped\n"
        << summary;
  EXPECT_EQ(count_of(summary, "after the launcher stopped it"), 2u) << summary;
  EXPECT_NE(summary.find("attempt 0: rank 1 (local rank 1) exited with code 3"), std::string::npos);
  EXPECT_NE(summary.find("exit code: 3"), std::string::npos);
  EXPECT_EQ(count_of(r.process.output, "root cause"), 1u) << "one summary";
}

TEST(LauncherFailure, SigkillIsNamedWithTheOomHint) {
  TempDir dir;
  auto r = launch({"--standalone", "--nproc-per-node", "2", "/bin/sh", "-c",
                   script(dir, 0, 1, "kill -KILL $$")});
  EXPECT_EQ(r.process.signal, 0);
  EXPECT_EQ(r.process.exit_code, 128 + 9) << r.process.output;
  std::string summary = summary_of(r.process.output);
  EXPECT_NE(summary.find("rank:       0 (local rank 0)"), std::string::npos) << summary;
  EXPECT_NE(summary.find("was killed by SIGKILL (often the out-of-memory killer: check dmesg)"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("boom from rank 0"), std::string::npos) << summary;
  EXPECT_NE(summary.find("rank 1 (local rank 1, pid "), std::string::npos) << summary;
}

TEST(LauncherFailure, RankIgnoringSigtermIsKilledAfterTheGracePeriod) {
  TempDir dir;
  auto r = launch({"--standalone", "--nproc-per-node", "2", "--term-timeout", "1.5", "/bin/sh",
                   "-c", script(dir, 1, 1, "exit 9", "trap '' TERM;")});
  EXPECT_EQ(r.process.exit_code, 9) << r.process.output;
  EXPECT_GE(r.seconds, 1.5) << "the grace period must be honoured";
  EXPECT_LT(r.seconds, 9.0);
  std::string summary = summary_of(r.process.output);
  EXPECT_NE(summary.find("rank 0 (local rank 0, pid "), std::string::npos) << summary;
  EXPECT_NE(summary.find("was killed by SIGKILL after the launcher stopped it"), std::string::npos)
      << summary;
  EXPECT_EQ(summary.find("out-of-memory"), std::string::npos)
      << "the OOM hint is for SIGKILLs the launcher did not send\n"
      << summary;
  auto alive = still_alive_after({std::atoi(read_file(dir.file("gpid_0")).c_str())},
                                 std::chrono::seconds(5));
  EXPECT_TRUE(alive.empty());
  kill_all(alive);
}

}  // namespace
}  // namespace lockstep::testing
