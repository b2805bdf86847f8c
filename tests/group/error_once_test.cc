// [Errors once] in src/comm/work.cc: an op's error reaches each rank once. A rank that waits on
// the op gets it as an exception, and nothing is logged besides; a rank that drops the op's Work
// unobserved gets it logged, once.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lockstep/core/error.h"
#include "support/messages.h"
#include "support/spawn.h"

namespace lockstep::testing {
namespace {

// Every rank passes a different count: a MismatchError on every rank, naming the counts.
void mismatched_all_reduce(ProcessGroup& pg, bool wait) {
  std::vector<float> x(4 + static_cast<size_t>(pg.rank()), 1.0f);
  WorkPtr work = pg.all_reduce(view(x));
  if (wait) {
    message_of<MismatchError>([&] { work->wait(); });
  } else {
    work.reset();  // waits for the op, which fails; nobody looked at the error
  }
}

TEST(ErrorsOnce, AnErrorTheCallerWaitsForIsNotLoggedToo) {
  ::testing::internal::CaptureStderr();
  spawn_groups(2, [](ProcessGroup& pg) { mismatched_all_reduce(pg, true); });
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count_of(log, "all_reduce #0"), 0u) << log;
}

TEST(ErrorsOnce, AnErrorNobodyLookedAtIsLoggedOncePerRank) {
  ::testing::internal::CaptureStderr();
  spawn_groups(2, [](ProcessGroup& pg) { mismatched_all_reduce(pg, false); });
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count_of(log, "whose Work was dropped without wait()"), 2u) << log;
  EXPECT_EQ(count_of(log, "[lockstep error"), 2u) << log;
}

}  // namespace
}  // namespace lockstep::testing
