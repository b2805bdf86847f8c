// A rank that dies of its own uncaught exception (std::terminate, SIGABRT) is told from one the
// launcher stopped: the summary names the exception, and never says "after the launcher stopped
// it" of a rank that aborted itself, even one that aborted while being stopped.
#include <gtest/gtest.h>

#include "launcher_test_util.h"

namespace lockstep::testing {
namespace {

TEST(LauncherAbort, AnUncaughtExceptionIsTheRankOwnAbortNamedWithItsText) {
  auto r = launch({"--standalone", "--nproc-per-node", "3", test_binary()},
                  child_mode_env("uncaught"));
  EXPECT_EQ(r.process.exit_code, 128 + 6) << r.process.output;  // SIGABRT
  const std::string summary = summary_of(r.process.output);
  EXPECT_NE(summary.find("root cause (first failure): uncaught lockstep::NetworkError: boom from "
                         "rank 1"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("exit:       was killed by SIGABRT (it aborted itself: an uncaught "
                         "exception or a failed assertion)\n"),
            std::string::npos)
      << summary;
  for (int rank : {0, 2})
    EXPECT_NE(summary.find("rank " + std::to_string(rank) + " (local rank " +
                           std::to_string(rank) + ", pid "),
              std::string::npos)
        << summary;
  EXPECT_EQ(count_of(summary, "after the launcher stopped it"), 0u)
      << "ranks 0 and 2 aborted themselves after the launcher's SIGTERM\n"
      << summary;
  EXPECT_EQ(count_of(summary, "was killed by SIGABRT (it aborted itself"), 3u) << summary;
}

}  // namespace
}  // namespace lockstep::testing
