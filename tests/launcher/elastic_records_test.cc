// The records of an elastic rendezvous, read back from text (what another launcher wrote).
#include <gtest/gtest.h>

#include "launcher/elastic_records.h"
#include "lockstep/core/error.h"

namespace lockstep::launcher {
namespace {

ElasticRound two_nodes() {
  return ElasticRound{
      .round = 3,
      .run_id = "job7",
      .master_port = 12345,
      .restart_count = 1,
      .max_restarts = 2,
      .members = {{.id = 4, .host = "a", .pid = 10, .nproc = 2, .max_restarts = 2},
                  {.id = 9, .host = "b", .pid = 11, .nproc = 3, .max_restarts = 2}}};
}

TEST(ElasticRecords, RoundRecordRoundTripsAndPlacesEachMember) {
  ElasticRound back = parse_round_record(3, round_record(two_nodes()));
  ASSERT_EQ(back.members.size(), 2u);
  EXPECT_EQ(back.members[1].host, "b");
  auto layout = layout_in_round(back, 9, 2);
  ASSERT_TRUE(layout);
  EXPECT_EQ(layout->node_rank, 1);
  EXPECT_EQ(layout->rank_offset, 2);
  EXPECT_EQ(layout->world_size, 5);
  EXPECT_EQ(layout->attempt, 3);
  EXPECT_EQ(layout->restart_count, 1);
  EXPECT_EQ(layout->master_port, 12345);
  EXPECT_EQ(layout->run_id, "job7");
  EXPECT_FALSE(layout_in_round(back, 5, 2)) << "id 5 is not a member";
}

TEST(ElasticRecords, AnotherMaxRestartsIsAConfigError) {
  try {
    layout_in_round(two_nodes(), 9, 0);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--max-restarts 0 but the store's host (a) with 2"),
              std::string::npos)
        << e.what();
  }
}

TEST(ElasticRecords, MalformedRecordsAreStoreErrorsThatQuoteThem) {
  for (const char* text : {"", "job\t1\t0\t0", "job\tx\t0\t0\n1\ta\t2\t1\t0",
                           "job\t1\t0\t0\n1\ta\t2\tmany\t0", "job\t1\t0\t0\n1\ta"}) {
    try {
      parse_round_record(0, text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find("malformed"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace lockstep::launcher
