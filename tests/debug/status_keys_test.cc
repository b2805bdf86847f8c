// Status keys: what a rank publishes is what the others read, and the description names the
// ranks that never entered an op and each rank's last completed op.
#include "debug/status_keys.h"

#include <gtest/gtest.h>

#include "lockstep/store/hash_store.h"

namespace lockstep::debug {
namespace {

TEST(StatusKeys, PublishedStatusIsReadBack) {
  HashStore store;
  publish_status(store, "g", 0, Progress{.entered = 58, .started = 58, .completed = 57});
  publish_status(store, "g", 2, Progress{.entered = 57, .started = 57, .completed = 56});
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

TEST(StatusKeys, TheCollectiveARankRunsIsReadBack) {
  HashStore store;
  publish_status(store, "g", 0, RankStatus({1, 1, 0}, "broadcast", 0));
  publish_status(store, "g", 1, RankStatus({3, 3, 2}, "all_gather_v", 2));
  store.set(status_key("g", 2), "1 1 0 broadcast");  // a kind without its number
  RankStatuses s = read_statuses(store, "g", 3, std::chrono::milliseconds(50));
  ASSERT_TRUE(s[0] && s[1]);
  EXPECT_EQ(s[0]->op_kind, "broadcast");
  EXPECT_EQ(s[0]->op_seq, 0u);
  EXPECT_EQ(s[1]->op_kind, "all_gather_v");
  EXPECT_EQ(s[1]->op_seq, 2u);
  EXPECT_FALSE(s[2].has_value());
}

TEST(StatusKeys, DescriptionComparesTheRanksOpsNotOnlyTheirNumbers) {
  // Every rank entered #0, but rank 1 runs broadcast there and the others all_reduce.
  RankStatuses s = {RankStatus({1, 1, 0}, "all_reduce", 0), RankStatus({1, 1, 0}, "broadcast", 0),
                    RankStatus({1, 1, 0}, "all_reduce", 0), RankStatus({1, 1, 0}, "all_reduce", 0)};
  EXPECT_EQ(describe_statuses(s, 0),
            "every rank entered #0, but not the same collective: ranks [0, 2, 3] in all_reduce "
            "#0, rank 1 is in broadcast #0 (the ranks called collectives in a different order); "
            "last completed: rank 0 none, rank 1 none, rank 2 none, rank 3 none");
}

TEST(StatusKeys, DescriptionSaysWhereTheRanksThatNeverEnteredAre) {
  RankStatuses s = {RankStatus({58, 58, 57}, "all_reduce", 57),
                    RankStatus({57, 57, 56}, "broadcast", 56)};
  EXPECT_EQ(describe_statuses(s, 57),
            "ranks [1] never entered it (rank 1 is in broadcast #56); last completed: rank 0 #56, "
            "rank 1 #55");
}

}  // namespace
}  // namespace lockstep::debug
