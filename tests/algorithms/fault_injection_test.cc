// The algorithms over the in-memory transport (memory_mesh.h), with the test's thread steering
// every delivery through a FaultController: no sleeps, no timing, and every outcome exact.
//   - all_reduce, ring and recursive doubling, gives the closed-form sum when every message of
//     rank 1 (or of every rank) is held, then released one at a time, newest link first;
//   - ranks that called collectives in a different order fail with the order MismatchError,
//     whichever order the held messages are released in;
//   - a link that reorders one pair's messages (which no real transport does) is caught by the
//     header check rather than read as data;
//   - a link cut during a ring all_reduce fails every waiting rank at once with a NetworkError
//     naming the cut (not a TimeoutError at the op's deadline).
#include <gtest/gtest.h>

#include <stdexcept>

#include "lockstep/core/error.h"
#include "memory_mesh.h"
#include "mesh_harness.h"

namespace lockstep::testing {
namespace {

// Delivers the held messages one at a time, each once the ranks stand still: newest_first, the
// link whose oldest held message was sent last (the reverse of the send order across links;
// each link keeps its own order, as every transport does), else the oldest. Until every rank
// has finished.
void release_one_by_one(FaultController& faults, bool newest_first) {
  for (;;) {
    faults.wait_quiet();
    if (faults.all_finished()) return;
    auto links = faults.held_links();
    if (links.empty()) throw std::runtime_error("the ranks are stuck with nothing held");
    auto [from, to] = newest_first ? links.back() : links.front();
    faults.release_next(from, to);
  }
}

struct HeldCase {
  Algorithm algorithm;
  int world;
  size_t count;
  int held_rank;  // kAnyRank: every rank's messages
};

std::string name_of(const HeldCase& c) {
  return detail::concat(algorithm_name(c.algorithm), "_world", c.world, "_count", c.count,
                        c.held_rank == kAnyRank ? "_all" : "_rank" + std::to_string(c.held_rank));
}

void PrintTo(const HeldCase& c, std::ostream* os) {
  *os << name_of(c);
}

class HeldAllReduce : public ::testing::TestWithParam<HeldCase> {};

TEST_P(HeldAllReduce, GivesTheClosedFormSumWhenHeldThenReleasedNewestFirst) {
  const HeldCase c = GetParam();
  auto faults = std::make_shared<FaultController>(c.world);
  faults->hold(c.held_rank, kAnyRank);
  auto errors = with_memory_mesh(
      faults,
      [&](MemoryRank& me) {
        TypedBuffer in(DType::f32, c.count), out(DType::f32, c.count);
        in.fill([&](size_t i) { return rank_value(me.rank, i); });
        Op op = me.op(OpKind::all_reduce);
        op.algorithm = c.algorithm;
        op.count = c.count;
        op.input = in.view().data;
        op.output = out.view().data;
        me.run(op);
        expect_elements(
            out, [&](size_t i) { return rank_value_sum(me.size, i); },
            detail::concat("rank ", me.rank, " ", name_of(c)));
      },
      [&] { release_one_by_one(*faults, true); });
  for (int r = 0; r < c.world; ++r) EXPECT_EQ(what_of_error(errors[r]), "") << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(
    RingAndRecursiveDoubling, HeldAllReduce,
    ::testing::Values(HeldCase{Algorithm::ring, 3, 1000, 1}, HeldCase{Algorithm::ring, 4, 1000, 1},
                      HeldCase{Algorithm::ring, 4, 300'000, kAnyRank},
                      HeldCase{Algorithm::recursive_doubling, 3, 1000, 1},
                      HeldCase{Algorithm::recursive_doubling, 4, 1000, 1},
                      HeldCase{Algorithm::recursive_doubling, 5, 1000, kAnyRank}),
    [](const auto& info) { return name_of(info.param); });

// What a relayed error says before " (relayed by ...)": the failure it started from.
std::string root_cause(const std::string& text) {
  return text.substr(0, text.find(" (relayed by "));
}

// Ranks 0 and 1 call all_reduce then broadcast; rank 2 calls broadcast then all_reduce. Rank 2's
// messages are held, then released oldest or newest first. Rank 2 fails at once, in its
// all_reduce #2, on rank 1's all_reduce #1 message (its own check). Oldest first, rank 0, which
// reads rank 2 first in the ring, gets rank 2's broadcast #1 and fails with the order mismatch;
// newest first, rank 2's abort reaches rank 1 first, and rank 0 learns of the mismatch from
// rank 1. Every rank fails with a MismatchError whose root is one of the two checks.
class OrderMismatch : public ::testing::TestWithParam<bool> {};

TEST_P(OrderMismatch, IsCaughtWhicheverOrderTheHeldMessagesArriveIn) {
  const bool newest_first = GetParam();
  auto faults = std::make_shared<FaultController>(3);
  faults->hold(2, kAnyRank);
  auto errors = with_memory_mesh(
      faults,
      [](MemoryRank& me) {
        std::vector<float> data(16, 1.0f);
        auto collective = [&](OpKind kind) {
          Op op = me.op(kind);
          op.algorithm = kind == OpKind::all_reduce ? Algorithm::ring : Algorithm::automatic;
          op.root = 2;
          op.count = data.size();
          op.input = data.data();
          op.output = data.data();
          me.run(op);
        };
        const bool swapped = me.rank == 2;
        collective(swapped ? OpKind::broadcast : OpKind::all_reduce);
        collective(swapped ? OpKind::all_reduce : OpKind::broadcast);
      },
      [&] { release_one_by_one(*faults, newest_first); });
  const std::string order =
      "rank 2 is in broadcast #1 while rank 0 is in all_reduce #1: the ranks called collectives "
      "in a different order. Fix: every rank must issue the same collectives in the same order "
      "(look for a collective under a rank-dependent branch)";
  const std::string skipped =
      "all_reduce #2: rank 1 is at all_reduce #1, rank 2 at #2: one rank skipped or added an op. "
      "Fix: every rank must issue the same number of collectives (and of sends/recvs per pair)";
  EXPECT_EQ(what_of_error(errors[2]), skipped);
  if (!newest_first) {
    EXPECT_EQ(what_of_error(errors[0]), order);
  }
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(errors[r]) << "rank " << r;
    const std::string text = what_of_error(errors[r]);
    EXPECT_EQ(error_class_of(errors[r]), ErrorClass::mismatch) << text;
    EXPECT_TRUE(root_cause(text) == order || root_cause(text) == skipped) << text;
  }
}

INSTANTIATE_TEST_SUITE_P(ReleaseOrders, OrderMismatch, ::testing::Bool(), [](const auto& info) {
  return info.param ? "NewestFirst" : "OldestFirst";
});

TEST(ReorderedLink, IsCaughtByTheHeaderCheckInsteadOfReadAsData) {
  auto faults = std::make_shared<FaultController>(2);
  faults->hold(0, 1);
  auto errors = with_memory_mesh(
      faults,
      [](MemoryRank& me) {
        std::vector<float> data(4, static_cast<float>(me.rank + 1));
        for (OpKind kind : {OpKind::all_reduce, OpKind::broadcast}) {
          Op op = me.op(kind);
          op.count = data.size();
          op.input = data.data();
          op.output = data.data();
          me.run(op);
        }
      },
      [&] {
        // Rank 0 finished both ops (its sends are eager); rank 1 waits in the all_reduce. The
        // broadcast's message overtakes the all_reduce's.
        faults->wait_held(0, 1, 2);
        faults->wait_quiet();
        faults->release_at(0, 1, 1);
        faults->wait_quiet();
        faults->release(0, 1);
      });
  EXPECT_EQ(what_of_error(errors[0]), "");
  EXPECT_EQ(what_of_error(errors[1]),
            "rank 0 is in broadcast #2 while rank 1 is in all_reduce #1: the ranks called "
            "collectives in a different order. Fix: every rank must issue the same collectives in "
            "the same order (look for a collective under a rank-dependent branch)");
}

TEST(CutLink, DuringARingAllReduceFailsEveryWaitingRankNamingTheCut) {
  auto faults = std::make_shared<FaultController>(4);
  faults->hold(2, 3);
  auto errors = with_memory_mesh(
      faults,
      [](MemoryRank& me) {
        std::vector<float> data(1000, 1.0f);
        Op op = me.op(OpKind::all_reduce);
        op.algorithm = Algorithm::ring;
        op.count = data.size();
        op.input = data.data();
        op.output = data.data();
        me.run(op);
      },
      [&] {
        faults->wait_held(2, 3, 1);
        faults->wait_quiet();  // every rank waits: the ring stands still without 2 -> 3
        faults->cut(2, 3);
      });
  const std::string cut = "the link between rank 2 and rank 3 was cut by the fault controller";
  EXPECT_EQ(what_of_error(errors[3]), "all_reduce #1: lost connection to rank 2: " + cut);
  EXPECT_EQ(what_of_error(errors[2]), "all_reduce #1: lost connection to rank 3: " + cut);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(errors[r]) << "rank " << r;
    EXPECT_EQ(error_class_of(errors[r]), ErrorClass::network) << what_of_error(errors[r]);
    EXPECT_NE(what_of_error(errors[r]).find(cut), std::string::npos) << what_of_error(errors[r]);
    EXPECT_NE(what_of_error(errors[r]).find("(relayed by rank "), std::string::npos)
        << what_of_error(errors[r]);
  }
}

}  // namespace
}  // namespace lockstep::testing
