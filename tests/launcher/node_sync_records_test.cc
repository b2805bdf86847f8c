// The records the launchers of a multi-node job exchange through node 0's store
// (src/launcher/node_sync_records.h): what one writes, another reads back; anything else is a
// clear error (or, for a failure report, a failure that says it was malformed), never an
// exception from the standard library.
#include "launcher/node_sync_records.h"

#include <gtest/gtest.h>

#include "lockstep/core/error.h"
#include "support/messages.h"

namespace lockstep::launcher {
namespace {

using testing::expect_error_naming;

TEST(NodeSyncRecords, EntriesAndReportsReadBack) {
  const WorldLayout layout = parse_world_layout(
      {node_entry({"host-a", 4, 1}, "run7", 29501), node_entry({"host-b", 2, 1}, "run7", {})}, 1,
      1);
  EXPECT_EQ(layout.world_size, 6);
  EXPECT_EQ(layout.rank_offset, 4);
  EXPECT_EQ(layout.run_id, "run7");
  EXPECT_EQ(layout.master_port, 29501);
  ASSERT_EQ(layout.nodes.size(), 2u);
  EXPECT_EQ(layout.nodes[1].host, "host-b");
  const RemoteFailure failure = parse_failure_report(failure_report(
      {.node_rank = 1, .exit_code = 3, .what = "rank 5\texited", .restartable = true}));
  EXPECT_EQ(failure.node_rank, 1);
  EXPECT_EQ(failure.exit_code, 3);
  EXPECT_EQ(failure.what, "rank 5 exited");
  EXPECT_TRUE(failure.restartable);
}

// Found by fuzz/node_sync_fuzz.cc: std::stoi threw std::invalid_argument ("stoi") or
// std::out_of_range out of NodeSync::join for an entry whose numbers were not numbers.
TEST(NodeSyncRecords, MalformedNumbersInAnEntryAreAStoreErrorNamingTheNode) {
  expect_error_naming<StoreError>(
      [] {
        parse_world_layout({"host-a\t4\t0\trun\t29501", "host-b\tfour\t0\trun"}, 0, 0);
      },
      {"node 1 registered a malformed entry 'host-b\tfour\t0\trun'",
       "nproc 'four' is not a whole number in [1, 65536]"});
  expect_error_naming<StoreError>(
      [] { parse_world_layout({"host-a\t4\t0\trun\t99999999999"}, 0, 0); },
      {"master_port '99999999999' is not a whole number in [1, 65535]"});
  expect_error_naming<StoreError>([] { parse_world_layout({"host-a\t-3\t0\trun\t1"}, 0, 0); },
                                  {"nproc '-3'"});
  expect_error_naming<StoreError>([] { parse_world_layout({"host-a\t4\t \trun\t1"}, 0, 0); },
                                  {"max_restarts ' '"});
}

// Found by fuzz/node_sync_fuzz.cc: a failure report whose node or exit code was not a number
// threw std::invalid_argument out of NodeSync::check_failure.
TEST(NodeSyncRecords, MalformedFailureReportStillEndsTheAttempt) {
  const RemoteFailure failure = parse_failure_report("node-a\t4\t0\tabc");
  EXPECT_EQ(failure.node_rank, 0);
  EXPECT_EQ(failure.exit_code, 1);
  EXPECT_EQ(failure.what, "malformed failure report 'node-a\t4\t0\tabc'");
  EXPECT_EQ(parse_failure_report("1\t99999999999\tx\t1").what.rfind("malformed", 0), 0u);
  EXPECT_EQ(parse_failure_report("short").what, "malformed failure report 'short'");
}

}  // namespace
}  // namespace lockstep::launcher
