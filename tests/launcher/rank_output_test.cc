// One rank's output as the launcher keeps it for the summary: torch 2.x's own "[rankN]: " tag on
// each traceback line (its excepthook) and "[rankN]:" on its C++ log lines are dropped, so the
// traceback is recognised and the tail reads as the rank wrote it; another rank's tag is kept.
#include "launcher/rank_output.h"

#include <gtest/gtest.h>

namespace lockstep::launcher {
namespace {

RankOutput quiet(int rank) {
  return RankOutput(rank, OutputRoute{.out_to_console = false, .err_to_console = false}, net::Fd());
}

TEST(RankOutput, TorchsRankTagDoesNotHideTheTraceback) {
  RankOutput out = quiet(1);
  out.write(StreamKind::err,
            "[rank1]:[W1203 13:39:48.953 init.cpp:4549] Warning: deprecated\n"
            "[rank1]: Traceback (most recent call last):\n"
            "[rank1]:   File \"/job/train.py\", line 34, in explode\n"
            "[rank1]:     raise RuntimeError(\"boom\")\n"
            "[rank1]: RuntimeError: boom\n");
  ASSERT_TRUE(out.python_error().has_value());
  EXPECT_EQ(out.python_error()->headline(), "RuntimeError: boom (at /job/train.py:34, in explode)");
  auto tail = out.stderr_tail();
  ASSERT_EQ(tail.size(), 5u);
  EXPECT_EQ(tail[0], "[W1203 13:39:48.953 init.cpp:4549] Warning: deprecated");
  EXPECT_EQ(tail[3], "    raise RuntimeError(\"boom\")");
  EXPECT_EQ(tail[4], "RuntimeError: boom");
}

TEST(RankOutput, AnotherRanksTagAndPlainLinesStayAsWritten) {
  RankOutput out = quiet(2);
  out.write(StreamKind::err, "[rank1]: not mine\n[rank2]x\nplain\n");
  auto tail = out.stderr_tail();
  ASSERT_EQ(tail.size(), 3u);
  EXPECT_EQ(tail[0], "[rank1]: not mine");
  EXPECT_EQ(tail[1], "[rank2]x");
  EXPECT_EQ(tail[2], "plain");
  EXPECT_FALSE(out.python_error().has_value());
}

}  // namespace
}  // namespace lockstep::launcher
