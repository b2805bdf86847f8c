// Ranks of a hierarchical group that disagree about an all_reduce: within a host (caught by the
// shm descriptors), between hosts (caught by the leaders' tcp headers), and an op kind that
// differs between hosts. The ranks that disagree get a MismatchError naming them by their rank
// in the whole group; every other rank fails too, at once, with the cause.
#include <gtest/gtest.h>

#include <functional>

#include "hier_test_util.h"

namespace lockstep::testing {
namespace {

constexpr double kFast = 5.0;  // seconds: far below the 20 s op timeout

void expect_all_fail_fast(const std::vector<Outcome>& outcomes) {
  for (size_t r = 0; r < outcomes.size(); ++r) {
    EXPECT_NE(outcomes[r].type, "none") << "rank " << r << " did not fail";
    EXPECT_NE(outcomes[r].type, "TimeoutError") << "rank " << r << ": " << outcomes[r].what;
    EXPECT_LT(outcomes[r].seconds, kFast) << "rank " << r << ": " << outcomes[r].what;
  }
}

TEST(HierMismatch, CountDiffersWithinAHost) {
  auto outcomes = run_ranks("a,a,b,b", [](ProcessGroup& pg) {
    std::vector<float> x(pg.rank() == 3 ? 1000 : 1024, 1.0f);
    pg.all_reduce(view(x))->wait();
  });
  expect_all_fail_fast(outcomes);
  // Host b's ranks compare descriptors: each names the other by its rank in the whole group.
  for (int r : {2, 3}) {
    const Outcome& o = outcomes[static_cast<size_t>(r)];
    EXPECT_EQ(o.type, "MismatchError") << o.what;
    EXPECT_TRUE(contains(o.what, "all_reduce #0")) << o.what;
  }
  EXPECT_TRUE(contains(outcomes[2].what, "rank 3 sent 4000 bytes, rank 2 expected 4096"))
      << outcomes[2].what;
  EXPECT_TRUE(contains(outcomes[3].what, "rank 2 sent 4096 bytes, rank 3 expected 4000"))
      << outcomes[3].what;
  // Host a learns it from host b's abort, with the cause.
  for (int r : {0, 1})
    EXPECT_TRUE(contains(outcomes[static_cast<size_t>(r)].what, "4000")) << outcomes[r].what;
}

TEST(HierMismatch, DtypeDiffersBetweenHosts) {
  auto outcomes = run_ranks("a,a,b,b", [](ProcessGroup& pg) {
    if (pg.rank() < 2) {
      std::vector<float> x(256, 1.0f);
      pg.all_reduce(view(x))->wait();
    } else {
      std::vector<double> x(256, 1.0);
      pg.all_reduce(view(x))->wait();
    }
  });
  expect_all_fail_fast(outcomes);
  // The leaders (ranks 0 and 2) compare headers.
  for (int r : {0, 2}) {
    const Outcome& o = outcomes[static_cast<size_t>(r)];
    EXPECT_EQ(o.type, "MismatchError") << o.what;
  }
  EXPECT_TRUE(contains(outcomes[0].what, "rank 2 passes f64 data, rank 0 passes f32"))
      << outcomes[0].what;
  EXPECT_TRUE(contains(outcomes[2].what, "rank 0 passes f32 data, rank 2 passes f64"))
      << outcomes[2].what;
  for (int r : {1, 3})
    EXPECT_TRUE(contains(outcomes[static_cast<size_t>(r)].what, "f64")) << outcomes[r].what;
}

TEST(HierMismatch, OpKindDiffersBetweenHosts) {
  auto outcomes = run_ranks("a,a,b,b", [](ProcessGroup& pg) {
    std::vector<float> x(4096, 1.0f);
    if (pg.rank() < 2)
      pg.all_reduce(view(x))->wait();
    else
      pg.broadcast(view(x), {.root = 0})->wait();
  });
  expect_all_fail_fast(outcomes);
  bool named = false;
  for (const Outcome& o : outcomes)
    named |= o.type == "MismatchError" && contains(o.what, "all_reduce") &&
             contains(o.what, "broadcast");
  EXPECT_TRUE(named) << "no rank named both calls: " << outcomes[0].what;
}

// The case: rank 1 calls broadcast then all_reduce, the others the reverse. Rank 1 runs
// its broadcast on the flat mesh while rank 0 waits for it in the host's shm stage: the ranks of
// host a must find the mismatch at once, as shm and tcp do, and name both calls.
// Ranks for which broadcast_first says so call broadcast, then all_reduce; the others the reverse.
std::vector<Outcome> in_different_orders(const std::function<bool(int)>& broadcast_first) {
  return run_ranks("a,a,b,b", [&](ProcessGroup& pg) {
    std::vector<float> x(1024, 1.0f);
    if (broadcast_first(pg.rank())) {
      pg.broadcast(view(x), {.root = 0})->wait();
      pg.all_reduce(view(x))->wait();
    } else {
      pg.all_reduce(view(x))->wait();
      pg.broadcast(view(x), {.root = 0})->wait();
    }
  });
}

TEST(HierMismatch, OrderDiffersWithinAHost) {
  auto outcomes = in_different_orders([](int rank) { return rank == 1; });
  expect_all_fail_fast(outcomes);
  for (size_t r = 0; r < outcomes.size(); ++r) {
    const Outcome& o = outcomes[r];
    EXPECT_EQ(o.type, "MismatchError") << "rank " << r << ": " << o.what;
    EXPECT_TRUE(contains(o.what, "rank 1") && contains(o.what, "broadcast #0") &&
                contains(o.what, "all_reduce #0"))
        << "rank " << r << ": " << o.what;
    // The cause leads, once, with at most one relay ([Relays] in comm/failure.h).
    EXPECT_TRUE(
        o.what.starts_with("all_reduce #0 (hierarchical: the reduce within a host): rank 1 "
                           "is in broadcast #0 while rank 0 is in all_reduce #0"))
        << "rank " << r << ": " << o.what;
    EXPECT_EQ(o.what.find("(relayed by"), o.what.rfind("(relayed by"))
        << "rank " << r << ": " << o.what;
  }
}

// A whole host in another op: host b's ranks call broadcast first, host a's all_reduce. Host a's
// leader sends its leaders' stage to host b, whose ranks read only from the broadcast's root: the
// early frame carries all_reduce #0 where they are in broadcast #0 ([Early frames] in
// tcp_transport.h), so every rank fails at once instead of at the deadline.
TEST(HierMismatch, OrderDiffersBetweenWholeHosts) {
  auto outcomes = in_different_orders([](int rank) { return rank >= 2; });
  expect_all_fail_fast(outcomes);
  for (size_t r = 0; r < outcomes.size(); ++r) {
    const Outcome& o = outcomes[r];
    EXPECT_EQ(o.type, "MismatchError") << "rank " << r << ": " << o.what;
    EXPECT_TRUE(contains(o.what, "is in all_reduce #0 while rank") &&
                contains(o.what, "is in broadcast #0"))
        << "rank " << r << ": " << o.what;
  }
}

}  // namespace
}  // namespace lockstep::testing
