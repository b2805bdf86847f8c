// Status keys: what a rank publishes is what the others read, and the description names the
// ranks that never entered an op and each rank's last completed op.
#include "debug/status_keys.h"

#include <gtest/gtest.h>

#include "lockstep/store/hash_store.h"

namespace lockstep::debug {
namespace {

TEST(StatusKeys, PublishedStatusIsReadBack) {
  HashStore store;
  publish_status(store, "g", 0, {.entered = 58, .started = 58, .completed = 57});
  publish_status(store, "g", 2, {.entered = 57, .started = 57, .completed = 56});
  store.set(status_key("g", 3), "garbage");
  RankStatuses s = read_statuses(store, "g", 4, std::chrono::milliseconds(50));
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0]->entered, 58u);
  EXPECT_EQ(s[0]->completed, 57u);
  EXPECT_FALSE(s[1].has_value());  // never published
  EXPECT_EQ(s[2]->started, 57u);
  EXPECT_FALSE(s[3].has_value());  // malformed
}

TEST(StatusKeys, DescriptionNamesRanksThatNeverEntered) {
  // Op #57: ranks 0 and 1 are in it, ranks 2 and 3 stopped after #56 and #55.
  RankStatuses s = {Progress{58, 58, 57}, Progress{58, 58, 57}, Progress{57, 57, 57},
                    Progress{56, 56, 56}};
  EXPECT_EQ(ranks_not_entered(s, 57), (std::vector<int>{2, 3}));
  EXPECT_EQ(describe_statuses(s, 57),
            "ranks [2, 3] never entered it; last completed: rank 0 #56, rank 1 #56, rank 2 #56, "
            "rank 3 #55");
}

TEST(StatusKeys, DescriptionWhenEveryRankEnteredOrIsUnknown) {
  RankStatuses s = {Progress{1, 1, 0}, std::nullopt};
  EXPECT_EQ(describe_statuses(s, 0),
            "every rank entered it; no status from ranks [1]; last completed: rank 0 none, rank 1 "
            "unknown");
}

}  // namespace
}  // namespace lockstep::debug
