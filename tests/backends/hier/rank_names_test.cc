// Renumbering the ranks of a host group's errors as ranks of the whole group.
#include <gtest/gtest.h>

#include "backends/hier/rank_names.h"

namespace lockstep::hier {
namespace {

const std::vector<int> kMembers = {2, 5};  // host rank 0 is group rank 2, host rank 1 is 5

TEST(HierRankNames, RenumbersEveryRankMention) {
  EXPECT_EQ(to_group_ranks("reduce #3: rank 1 sent 4000 bytes, rank 0 expected 4096", kMembers),
            "reduce #3: rank 5 sent 4000 bytes, rank 2 expected 4096");
  EXPECT_EQ(to_group_ranks("rank 1 (host h, pid 9) died. Check rank 1's output", kMembers),
            "rank 5 (host h, pid 9) died. Check rank 5's output");
}

TEST(HierRankNames, LeavesOtherNumbersAndWordsAlone) {
  EXPECT_EQ(to_group_ranks("ranks 0 and 1; crank 1; rank 7; rank 1x; rank ", kMembers),
            "ranks 0 and 1; crank 1; rank 7; rank 1x; rank ");
  EXPECT_EQ(to_group_ranks("rank 99999999999999999999", kMembers), "rank 99999999999999999999");
}

TEST(HierRankNames, StopsWhereAReasonFromOutsideTheHostBegins) {
  const std::string outside = std::string(kOutsideHost) + "rank 1 (host b) died";
  EXPECT_EQ(to_group_ranks("rank 0 aborted broadcast #4: " + outside, kMembers),
            "rank 2 aborted broadcast #4: " + outside);
}

TEST(HierRankNames, RenumbersTheHostsRelayAfterAReasonFromOutside) {
  // Members {2, 5}: host rank 0 is rank 2, host rank 1 is rank 5.
  const std::string outside = std::string(kOutsideHost) + "rank 1 (host b) is in broadcast #0";
  EXPECT_EQ(
      to_group_ranks(outside + " (relayed by rank 0 (host a) to rank 1 in reduce #0)", kMembers),
      outside + " (relayed by rank 2 (host a) to rank 5 in reduce #0)");
}

}  // namespace
}  // namespace lockstep::hier
