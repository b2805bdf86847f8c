// Test 4 of the launcher issue: --max-restarts restarts the whole local group with a new attempt
// number, and the summary lists every attempt.
#include <gtest/gtest.h>

#include "launcher_test_util.h"

namespace lockstep::testing {
namespace {

TEST(LauncherRestart, SucceedsOnTheSecondAttemptWithRestartCountOne) {
  TempDir dir;
  // Attempt 0: rank 1 fails (once rank 0 has printed its line: under load the launcher could
  // otherwise stop rank 0 before its shell ran) and rank 0 would sleep 30 s; attempt 1: both
  // succeed.
  const std::string printed = dir.file("rank0_printed");
  std::string script =
      "echo \"attempt=$LOCKSTEP_RESTART_COUNT max=$LOCKSTEP_MAX_RESTARTS run=$LOCKSTEP_RUN_ID\"; "
      "if [ \"$LOCKSTEP_RESTART_COUNT\" = 0 ]; then "
      "  if [ \"$RANK\" = 1 ]; then "
      "    i=0; while [ ! -e " +
      printed +
      " ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done; "
      "    echo 'first try fails' >&2; exit 5; fi; "
      "  touch " +
      printed +
      "; sleep 30; fi; "
      "echo \"done rank $RANK\"";
  auto r = launch({"--standalone", "--nproc-per-node", "2", "--max-restarts", "2", "--run-id",
                   "restartjob", "--log-dir", dir.path(), "/bin/sh", "-c", script});
  ASSERT_EQ(r.process.exit_code, 0) << r.process.output;
  EXPECT_LT(r.seconds, 10.0);
  for (int rank = 0; rank < 2; ++rank) {
    std::string p = "[rank" + std::to_string(rank) + "]: ";
    EXPECT_EQ(count_of(r.process.output, p + "attempt=0 max=2 run=restartjob"), 1u)
        << r.process.output;
    EXPECT_EQ(count_of(r.process.output, p + "attempt=1 max=2 run=restartjob"), 1u);
    EXPECT_EQ(count_of(r.process.output, p + "done rank " + std::to_string(rank)), 1u)
        << "only attempt 1 finishes";
  }
  EXPECT_EQ(count_of(r.process.output, "attempt=2"), 0u) << "no third attempt after a success";
  EXPECT_EQ(count_of(r.process.output, "restarting the local group (restart 1 of 2)"), 1u);
  EXPECT_NE(r.process.output.find("attempt 0: rank 1 (local rank 1) exited with code 5"),
            std::string::npos)
      << r.process.output;
  EXPECT_NE(r.process.output.find("attempt 1: succeeded"), std::string::npos);
  EXPECT_EQ(read_file(dir.file("attempt_0/rank_1.log")),
            "attempt=0 max=2 run=restartjob\nfirst try fails\n");
  EXPECT_EQ(read_file(dir.file("attempt_1/rank_1.log")),
            "attempt=1 max=2 run=restartjob\ndone rank 1\n");
}

TEST(LauncherRestart, GivesUpAfterMaxRestartsAndListsEveryAttempt) {
  auto r = launch({"--standalone", "--nproc-per-node", "2", "--max-restarts", "2", "/bin/sh", "-c",
                   "[ \"$RANK\" = 0 ] && exit $((4 + LOCKSTEP_RESTART_COUNT)); sleep 30"});
  EXPECT_EQ(r.process.exit_code, 6) << "the last attempt's root cause\n" << r.process.output;
  EXPECT_LT(r.seconds, 10.0);
  std::string summary = summary_of(r.process.output);
  EXPECT_NE(summary.find("attempt 0: rank 0 (local rank 0) exited with code 4"), std::string::npos)
      << summary;
  EXPECT_NE(summary.find("attempt 1: rank 0 (local rank 0) exited with code 5"), std::string::npos);
  EXPECT_NE(summary.find("attempt 2: rank 0 (local rank 0) exited with code 6"), std::string::npos);
  EXPECT_EQ(count_of(summary, "attempt 3"), 0u);
  EXPECT_EQ(count_of(r.process.output, "restarting the local group"), 2u);
}

}  // namespace
}  // namespace lockstep::testing
