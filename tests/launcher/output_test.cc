// Output routing: [rankN] prefixes, whole lines only, per-attempt log files, --redirects, --tee
// and --local-ranks-filter.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <sstream>

#include "launcher_test_util.h"

namespace lockstep::testing {
namespace {

TEST(LauncherOutput, LinesOfDifferentRanksNeverInterleave) {
  // 3 ranks each write 150 lines of 3000 digits to stdout and as many to stderr, every line in
  // three write(2) calls (printf, printf, echo), so the launcher's reads end mid-line all the
  // time.
  const int kRanks = 3, kLines = 150;
  std::string script =
      "x=$(printf '%03000d' 0); i=0; while [ $i -lt " + std::to_string(kLines) +
      " ]; do printf \"O$RANK-$i-\"; printf %s \"$x\"; echo; "
      "printf \"E$RANK-$i-\" >&2; printf %s \"$x\" >&2; echo >&2; i=$((i+1)); done";
  auto r =
      launch({"--standalone", "--nproc-per-node", std::to_string(kRanks), "/bin/sh", "-c", script});
  ASSERT_EQ(r.process.exit_code, 0) << r.process.output.substr(0, 2000);
  std::map<std::pair<int, char>, int> next;  // (rank, stream) -> next line number expected
  int good = 0, bad = 0;
  std::istringstream in(r.process.output);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("[rank", 0) != 0) continue;
    int prefix_rank = -1, rank = -1, number = -1, used = 0;
    char stream = 0;
    bool parsed = std::sscanf(line.c_str(), "[rank%d]: %c%d-%d-%n", &prefix_rank, &stream, &rank,
                              &number, &used) == 4;
    std::string digits = parsed ? line.substr(static_cast<size_t>(used)) : "";
    if (!parsed || prefix_rank != rank || digits != std::string(3000, '0')) {
      ++bad;
      continue;
    }
    auto key = std::make_pair(rank, stream);
    EXPECT_EQ(number, next[key]) << "lines of one stream must keep their order";
    next[key] = number + 1;
    ++good;
  }
  EXPECT_EQ(bad, 0) << "lines that were cut or mixed";
  EXPECT_EQ(good, 2 * kRanks * kLines);
}

TEST(LauncherOutput, UnterminatedLastLineIsKept) {
  auto r = launch({"--standalone", "/bin/sh", "-c", "printf 'no newline at the end'"});
  ASSERT_EQ(r.process.exit_code, 0);
  EXPECT_EQ(count_of(r.process.output, "[rank0]: no newline at the end\n"), 1u) << r.process.output;
}

const char* kBothStreams = "echo \"out of $RANK\"; echo \"err of $RANK\" >&2";

TEST(LauncherOutput, LogDirHoldsOneFilePerRankPerAttempt) {
  TempDir dir;
  auto r = launch({"--standalone", "--nproc-per-node", "2", "--log-dir", dir.file("logs"),
                   "/bin/sh", "-c", kBothStreams});
  ASSERT_EQ(r.process.exit_code, 0) << r.process.output;
  for (int rank = 0; rank < 2; ++rank) {
    std::string log = read_file(dir.file("logs/attempt_0/rank_" + std::to_string(rank) + ".log"));
    std::string n = std::to_string(rank);
    EXPECT_EQ(count_of(log, "out of " + n + "\n"), 1u) << log;
    EXPECT_EQ(count_of(log, "err of " + n + "\n"), 1u) << log;
    EXPECT_EQ(count_of(log, "[rank"), 0u) << "files hold the raw lines";
    EXPECT_EQ(count_of(r.process.output, "[rank" + n + "]: out of " + n), 1u) << "console too";
  }
  EXPECT_FALSE(file_exists(dir.file("logs/attempt_1")));
}

TEST(LauncherOutput, RedirectsSendStdoutToTheFileOnly) {
  TempDir dir;
  auto r = launch({"--standalone", "--nproc-per-node", "2", "--log-dir", dir.path(), "--redirects",
                   "1", "/bin/sh", "-c", kBothStreams});
  ASSERT_EQ(r.process.exit_code, 0) << r.process.output;
  EXPECT_EQ(count_of(r.process.output, "out of"), 0u) << r.process.output;
  EXPECT_EQ(count_of(r.process.output, "]: err of"), 2u) << r.process.output;
  std::string log = read_file(dir.file("attempt_0/rank_1.log"));
  EXPECT_EQ(log, "out of 1\n") << "the file gets the redirected stream only";
}

TEST(LauncherOutput, TeePerLocalRankCopiesOnlyThoseStreams) {
  TempDir dir;
  auto r = launch({"--standalone", "--nproc-per-node", "2", "--log-dir", dir.path(), "--tee", "0:2",
                   "/bin/sh", "-c", kBothStreams});
  ASSERT_EQ(r.process.exit_code, 0) << r.process.output;
  EXPECT_EQ(read_file(dir.file("attempt_0/rank_0.log")), "err of 0\n");
  EXPECT_EQ(read_file(dir.file("attempt_0/rank_1.log")), "");
  EXPECT_EQ(count_of(r.process.output, "]: out of"), 2u) << "tee keeps the console";
}

TEST(LauncherOutput, LocalRanksFilterLimitsTheConsoleNotTheFiles) {
  TempDir dir;
  auto r = launch({"--standalone", "--nproc-per-node", "3", "--log-dir", dir.path(),
                   "--local-ranks-filter", "1", "/bin/sh", "-c", kBothStreams});
  ASSERT_EQ(r.process.exit_code, 0) << r.process.output;
  EXPECT_EQ(count_of(r.process.output, "[rank1]: "), 2u) << r.process.output;
  EXPECT_EQ(count_of(r.process.output, "[rank0]: "), 0u);
  EXPECT_EQ(count_of(r.process.output, "[rank2]: "), 0u);
  std::string log = read_file(dir.file("attempt_0/rank_2.log"));
  EXPECT_EQ(count_of(log, "out of 2\n"), 1u) << log;
  EXPECT_EQ(count_of(log, "err of 2\n"), 1u) << log;
}

}  // namespace
}  // namespace lockstep::testing
