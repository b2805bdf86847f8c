// FlightRecorder: the ring keeps exactly the last N ops, states and times move forward, records
// describe the op as called, and a dump survives the JSON round trip.
#include "debug/flight_recorder.h"

#include <gtest/gtest.h>

#include "core/coarse_clock.h"
#include "debug/flight_recorder_dump.h"
#include "lockstep/core/error.h"

namespace lockstep::debug {
namespace {

Op all_reduce_op(uint64_t seq, size_t count) {
  return {.kind = OpKind::all_reduce, .seq = seq, .dtype = DType::f32, .count = count};
}

// Queues, starts and ends op as the progress queue does.
void run(FlightRecorder& rec, Op op, bool ok = true) {
  op.record_id = rec.on_queued(op);
  rec.on_started(op);
  rec.on_ended(op, ok);
}

TEST(FlightRecorder, RingKeepsTheLastCapacityOps) {
  FlightRecorder rec(8);
  for (uint64_t seq = 0; seq < 20; ++seq) run(rec, all_reduce_op(seq, 4));
  auto ops = rec.snapshot();
  ASSERT_EQ(ops.size(), 8u);
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(ops[i].id, 12 + i);
    EXPECT_EQ(ops[i].seq, 12 + i);
    EXPECT_EQ(ops[i].state, OpState::completed);
  }
  EXPECT_EQ(rec.recorded(), 20u);
  EXPECT_FALSE(rec.find(11).has_value());  // overwritten
  EXPECT_EQ(rec.find(19)->seq, 19u);
  Progress p = rec.progress();
  EXPECT_EQ(p.entered, 20u);
  EXPECT_EQ(p.started, 20u);
  EXPECT_EQ(p.completed, 20u);
}

TEST(FlightRecorder, BeforeWrappingKeepsEveryOp) {
  FlightRecorder rec(2000);
  for (uint64_t seq = 0; seq < 5; ++seq) run(rec, all_reduce_op(seq, 1));
  EXPECT_EQ(rec.snapshot().size(), 5u);
}

TEST(FlightRecorder, StatesAndTimesFollowTheOp) {
  FlightRecorder rec(4);
  Op op = all_reduce_op(0, 1000);
  op.record_id = rec.on_queued(op);
  auto queued = rec.find(op.record_id);
  ASSERT_TRUE(queued);
  EXPECT_EQ(queued->state, OpState::queued);
  EXPECT_GT(queued->enqueued_us, 0);
  EXPECT_EQ(queued->started_us, 0);
  EXPECT_FALSE(rec.running());
  EXPECT_EQ(rec.progress().entered, 1u);
  EXPECT_EQ(rec.progress().started, 0u);

  rec.on_started(op);
  auto running = rec.running();
  ASSERT_TRUE(running);
  EXPECT_EQ(running->state, OpState::started);
  EXPECT_GE(running->started_us, running->enqueued_us);

  rec.on_ended(op, false);
  auto failed = rec.find(op.record_id);
  EXPECT_EQ(failed->state, OpState::failed);
  EXPECT_GE(failed->ended_us, failed->started_us);
  EXPECT_FALSE(rec.running());
  EXPECT_EQ(rec.progress().completed, 0u);  // a failed op is not completed
}

TEST(FlightRecorder, RecordDescribesTheCall) {
  FlightRecorder rec(4);
  run(rec, {.kind = OpKind::all_gather,
            .variable = true,
            .seq = 3,
            .dtype = DType::f64,
            .counts = {1, 2, 3}});
  run(rec, {.kind = OpKind::broadcast, .seq = 4, .dtype = DType::i32, .root = 2, .count = 5});
  run(rec, {.kind = OpKind::send, .seq = 0, .dtype = DType::u8, .peer = 1, .count = 7});
  auto ops = rec.snapshot();
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].op, "all_gather_v");
  EXPECT_EQ(ops[0].count, 6u);
  EXPECT_EQ(ops[0].bytes, 48u);
  EXPECT_EQ(ops[0].root, -1);
  EXPECT_EQ(ops[0].summary(), "all_gather_v #3 (f64, 6 elements)");
  EXPECT_EQ(ops[1].root, 2);
  EXPECT_EQ(ops[1].reduce_op, "");
  EXPECT_EQ(ops[2].label(), "send #0 to rank 1");
  EXPECT_FALSE(ops[2].collective());
  // p2p ops do not count as collectives.
  EXPECT_EQ(rec.progress().completed, 5u);
}

// The p2p engine's entries take the coarse steady readings their callers made; the records show
// them as Unix times, like every other entry's, and in order.
TEST(FlightRecorder, P2PTimesAreUnixTimesInOrder) {
  FlightRecorder rec(4);
  const Op send{.kind = OpKind::send, .peer = 1, .count = 4};
  const int64_t before = now_us();
  const Clock::time_point posted = coarse_now();
  const uint64_t id = rec.on_p2p_posted(send, posted);
  auto started = rec.find(id);
  ASSERT_TRUE(started);
  EXPECT_EQ(started->state, OpState::started);
  EXPECT_EQ(started->ended_us, 0) << "not ended yet";
  EXPECT_EQ(started->enqueued_us, started->started_us);
  // The coarse clock lags by at most a tick; a second covers that and a slow machine.
  EXPECT_NEAR(static_cast<double>(started->started_us), static_cast<double>(before), 1e6);
  rec.on_p2p_ended(id, true, posted + std::chrono::milliseconds(3));
  auto ended = rec.find(id);
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->state, OpState::completed);
  EXPECT_EQ(ended->ended_us - ended->started_us, 3000);
  EXPECT_EQ(rec.progress().entered, 0u) << "p2p ops do not count as collectives";
}

TEST(FlightRecorder, DumpSurvivesTheJsonRoundTrip) {
  FlightRecorder rec(4);
  run(rec, all_reduce_op(0, 1 << 20));
  Op op = all_reduce_op(1, 3);
  op.record_id = rec.on_queued(op);
  Dump d{.group = "default/1",
         .rank = 1,
         .size = 2,
         .global_rank = 3,
         .host = "h\"x",
         .pid = 42,
         .backend = "tcp",
         .reason = "line 1\nline \"2\"\t\\",
         .dumped_us = 17,
         .capacity = rec.capacity(),
         .recorded = rec.recorded(),
         .progress = rec.progress(),
         .ops = rec.snapshot()};
  Dump back = dump_from_json(dump_to_json(d), "test");
  EXPECT_EQ(back.group, d.group);
  EXPECT_EQ(back.global_rank, 3);
  EXPECT_EQ(back.host, d.host);
  EXPECT_EQ(back.reason, d.reason);
  EXPECT_EQ(back.progress.entered, 2u);
  EXPECT_EQ(back.progress.completed, 1u);
  ASSERT_EQ(back.ops.size(), 2u);
  EXPECT_EQ(back.ops[0].reduce_op, "sum");
  EXPECT_EQ(back.ops[0].bytes, 4u << 20);
  EXPECT_EQ(back.ops[0].state, OpState::completed);
  EXPECT_EQ(back.ops[1].state, OpState::queued);
  EXPECT_EQ(back.ops[1].enqueued_us, d.ops[1].enqueued_us);
  EXPECT_EQ(dump_path("dir", "default/1", 1, 42), "dir/default_1-rank1-pid42.json");
}

TEST(FlightRecorder, MalformedDumpIsNamed) {
  try {
    dump_from_json("{\"format\": \"lockstep-flight-recorder\", \"group\": \"g\"}", "x.json");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("x.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("\"rank\" is missing"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lockstep::debug
