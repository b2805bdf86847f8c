// A rank that dies of its own uncaught exception (std::terminate, SIGABRT) is told from one the
// launcher stopped: the summary names the exception, and never says "after the launcher stopped
// it" of a rank that aborted itself, even one that aborted while being stopped.
#include <gtest/gtest.h>

#include "launcher_test_util.h"

namespace lockstep::testing {
namespace {

TEST(LauncherAbort, AnUncaughtExceptionIsTheRankOwnAbortNamedWithItsText) {
  auto r =
      launch({"--standalone", "--nproc-per-node", "3", test_binary()}, child_mode_env("uncaught"));
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
  for (int rank : {0, 2}) {
    // "  rank 0 (local rank 0, pid 123) was killed by SIGABRT (it aborted itself: ...)"
    const size_t at = summary.find("  rank " + std::to_string(rank) + " (local rank " +
                                   std::to_string(rank) + ", pid ");
    ASSERT_NE(at, std::string::npos) << summary;
    const std::string line = summary.substr(at, summary.find('\n', at) - at);
    EXPECT_NE(line.find(") was killed by SIGABRT (it aborted itself: an uncaught exception"),
              std::string::npos)
        << line;
    EXPECT_EQ(line.find("after the launcher stopped it"), std::string::npos)
        << "rank " << rank << " aborted itself after the launcher's SIGTERM: " << line;
  }
}

}  // namespace
}  // namespace lockstep::testing
