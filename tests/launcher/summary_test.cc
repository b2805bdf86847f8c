// The success line after several attempts: restarts after failures and elastic membership changes
// are counted apart, as --max-restarts counts them. An attempt's one line says what its rank died
// of, which is all the other nodes get of it.
#include "launcher/summary.h"

#include <gtest/gtest.h>

namespace lockstep::launcher {
namespace {

AttemptResult failed_remotely(int attempt, bool membership_change) {
  AttemptResult a;
  a.attempt = attempt;
  a.end = AttemptEnd::remote_failed;
  a.remote = RemoteFailure{.node_rank = 1,
                           .what = membership_change ? "1 node(s) waiting to join"
                                                     : "rank 1 (local rank 0) exited with code 1",
                           .membership_change = membership_change};
  return a;
}

AttemptResult succeeded(int attempt) {
  AttemptResult a;
  a.attempt = attempt;
  return a;
}

const SummaryContext kContext{.node_rank = 0, .run_id = "r", .max_restarts = 2};

TEST(SuccessSummary, FirstAttemptSaysNothing) {
  EXPECT_EQ(format_success_summary({succeeded(0)}, kContext), "");
}

TEST(SuccessSummary, RestartsAfterFailures) {
  const std::string text = format_success_summary(
      {failed_remotely(0, false), failed_remotely(1, false), succeeded(2)}, kContext);
  EXPECT_NE(text.find("the job succeeded on attempt 2 after 2 restart(s)\n"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("membership"), std::string::npos) << text;
}

TEST(SuccessSummary, MembershipChangesAreNoRestarts) {
  const std::string text = format_success_summary(
      {failed_remotely(0, false), failed_remotely(1, true), succeeded(2)}, kContext);
  EXPECT_NE(text.find("the job succeeded on attempt 2 after 1 restart(s) and 1 membership "
                      "change(s)\n"),
            std::string::npos)
      << text;
  // Every attempt still has its line, the change named as such.
  EXPECT_NE(text.find("attempt 1: node 1 failed: 1 node(s) waiting to join"), std::string::npos)
      << text;
}

AttemptResult failed_locally(int exit_code, int signal, std::vector<std::string> stderr_tail) {
  AttemptResult a;
  a.end = AttemptEnd::failed;
  a.host = "h0";
  a.root_cause = RankExit{.rank = 2, .local_rank = 0, .exit_code = exit_code, .signal = signal};
  a.root_cause->stderr_tail = std::move(stderr_tail);
  return a;
}

TEST(DescribeAttempt, ARankThatReturnedAnErrorCodeIsDescribedByItsLastStderrLine) {
  EXPECT_EQ(
      describe_attempt(failed_locally(2, 0, {"starting", "error: host h2 is unreachable", ""})),
      "rank 2 (local rank 0) exited with code 2 on h0; its last stderr line: error: host h2 "
      "is unreachable");
}

TEST(DescribeAttempt, AHeadlineWinsOverTheLastLine) {
  AttemptResult a = failed_locally(1, 0, {"Traceback ...", "ValueError: bad"});
  a.root_cause->headline = "ValueError: bad (train.py:3)";
  EXPECT_EQ(describe_attempt(a),
            "rank 2 (local rank 0) exited with code 1 on h0: ValueError: bad "
            "(train.py:3)");
}

TEST(DescribeAttempt, NoLastLineForSignalsOrSilence) {
  EXPECT_EQ(describe_attempt(failed_locally(0, 9, {"working"})),
            "rank 2 (local rank 0) was killed by SIGKILL on h0");
  EXPECT_EQ(describe_attempt(failed_locally(3, 0, {})),
            "rank 2 (local rank 0) exited with code 3 on h0");
}

}  // namespace
}  // namespace lockstep::launcher
