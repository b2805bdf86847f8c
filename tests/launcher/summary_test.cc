// The success line after several attempts: restarts after failures and elastic membership changes
// are counted apart, as --max-restarts counts them.
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

}  // namespace
}  // namespace lockstep::launcher
