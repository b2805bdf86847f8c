// A hang's culprit: 3 ranks, rank 2 stalls before its third all_reduce, LOCKSTEP_TIMEOUT=4. Ranks
// 0 and 1 time out and name rank 2; the launcher's summary must lead with rank 2 (not with rank 0,
// the first to exit), and every rank must leave a flight-recorder dump: rank 2's is written when
// the launcher's SIGTERM stops it, so `lockstep trace` sees all three.
#include <gtest/gtest.h>

#include <filesystem>

#include "launcher_test_util.h"

namespace lockstep::testing {
namespace {

TEST(LauncherCulprit, StalledRankLeadsTheSummaryAndEveryRankLeavesADump) {
  TempDir trace;
  EnvChanges env = child_mode_env("stall");
  env["LOCKSTEP_TIMEOUT"] = "4";
  env["LOCKSTEP_TRACE_DIR"] = trace.path();
  auto r = launch({"--standalone", "--nproc-per-node", "3", "--term-timeout", "10", test_binary()},
                  env, std::chrono::seconds(90));
  EXPECT_NE(r.process.exit_code, 0) << r.process.output;
  EXPECT_LT(r.seconds, 40.0) << "rank 2 sleeps 60 s unless the launcher stops it";
  EXPECT_EQ(count_of(r.process.output, "STALLING rank=2"), 1u) << r.process.output;
  std::string summary = summary_of(r.process.output);
  EXPECT_NE(summary.find("root cause (named by the ranks' own diagnoses): rank 2 never entered "
                         "all_reduce #2"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("; ranks 0, 1 timed out waiting for it\n"), std::string::npos) << summary;
  EXPECT_NE(summary.find("culprit rank 2:\n"), std::string::npos) << summary;
  EXPECT_NE(summary.find("  rank:       2 (local rank 2)\n"), std::string::npos) << summary;
  EXPECT_NE(summary.find("was killed by SIGTERM after the launcher stopped it"), std::string::npos)
      << summary;
  EXPECT_NE(summary.find("first failure (a consequence):\n"), std::string::npos) << summary;
  EXPECT_EQ(count_of(summary, "root cause"), 1u) << summary;
  EXPECT_NE(summary.find("attempt 0: rank 2 never entered all_reduce #2"), std::string::npos)
      << summary;

  // Every rank dumped: 0 and 1 on their timeout, 2 on the launcher's SIGTERM.
  size_t dumps = 0;
  std::string rank2_dump;
  for (const auto& entry : std::filesystem::directory_iterator(trace.path())) {
    std::string name = entry.path().filename().string();
    if (!name.ends_with(".json")) continue;
    ++dumps;
    if (name.find("-rank2-") != std::string::npos) rank2_dump = read_file(entry.path().string());
  }
  EXPECT_EQ(dumps, 3u) << r.process.output;
  EXPECT_NE(rank2_dump.find("stopped by signal 15"), std::string::npos) << rank2_dump;
  auto merged = run_process({LOCKSTEP_CLI_PATH, "trace", trace.path()});
  EXPECT_EQ(merged.output.find("no dump from"), std::string::npos) << merged.output;
  EXPECT_NE(merged.output.find("rank 2"), std::string::npos) << merged.output;
}

}  // namespace
}  // namespace lockstep::testing
