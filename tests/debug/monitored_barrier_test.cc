// monitored_barrier with ranks as threads: it passes when every rank comes, and otherwise every
// rank that came gets a TimeoutError naming all the ranks that did not, within the timeout plus a
// bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>

#include "lockstep/core/deadline.h"
#include "lockstep/core/error.h"
#include "support/spawn.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;

// When each rank that came to the barrier started it and got its error.
struct Timing {
  std::vector<Clock::time_point> started = std::vector<Clock::time_point>(4);
  std::vector<Clock::time_point> failed = std::vector<Clock::time_point>(4);
  // The longest a present rank waited, from its own start to its error.
  Clock::duration slowest(const std::set<int>& present) const {
    Clock::duration worst{};
    for (int r : present)
      worst = std::max(worst, failed[static_cast<size_t>(r)] - started[static_cast<size_t>(r)]);
    return worst;
  }
};

// Runs a 4-rank group in which the ranks in `absent` skip one monitored_barrier(timeout); returns
// the error message each present rank got (empty: no error), and when.
std::vector<std::string> barrier_without(const std::set<int>& absent,
                                         std::chrono::milliseconds timeout, Timing* timing) {
  std::vector<std::string> errors(4);
  spawn_groups(4, [&](ProcessGroup& pg) {
    pg.monitored_barrier(10s);  // an earlier barrier that everyone passes
    if (absent.count(pg.rank())) return;
    const auto me = static_cast<size_t>(pg.rank());
    timing->started[me] = Clock::now();
    try {
      pg.monitored_barrier(timeout);
    } catch (const TimeoutError& e) {
      errors[me] = e.what();
    }
    timing->failed[me] = Clock::now();
  });
  return errors;
}

// Bounds of the time to an error: never before the stated time (minus a little for clocks
// that round), and within a few seconds after it, even on a loaded 2-core machine.
constexpr auto kEarlySlack = 50ms;
constexpr auto kLateBound = 3s;

TEST(MonitoredBarrier, PassesWhenEveryRankArrives) {
  std::atomic<int> passed{0};
  spawn_groups(4, [&](ProcessGroup& pg) {
    for (int i = 0; i < 3; ++i) pg.monitored_barrier(10s);
    ++passed;
  });
  EXPECT_EQ(passed.load(), 4);
}

TEST(MonitoredBarrier, NamesEveryMissingRank) {
  constexpr auto kTimeout = 1000ms;
  Timing timing;
  auto errors = barrier_without({1, 3}, kTimeout, &timing);
  for (int r : {0, 2}) {
    const std::string& e = errors[static_cast<size_t>(r)];
    EXPECT_NE(e.find("monitored_barrier #1"), std::string::npos) << e;
    EXPECT_NE(e.find("ranks [1, 3] of 4 did not arrive"), std::string::npos)
        << "rank " << r << ": " << e;
    // Rank 0 gives its verdict at its deadline, and rank 2 hears it from rank 0: no error may
    // come before rank 0 has waited the whole timeout.
    EXPECT_GE(timing.failed[static_cast<size_t>(r)] - timing.started[0], kTimeout - kEarlySlack)
        << "rank " << r << " failed early";
  }
  EXPECT_LT(timing.slowest({0, 2}), kTimeout + kLateBound);
  // torch's gloo words too, which its own tests and users' log scanners look for.
  EXPECT_NE(errors[0].find("Rank 0 timed out in monitoredBarrier; Ranks 1, 3 failed to pass "
                           "monitoredBarrier"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[2].find("Rank 2 successfully reached monitoredBarrier, but received errors "
                           "while waiting for send/recv from rank 0"),
            std::string::npos)
      << errors[2];
}

TEST(MonitoredBarrier, MissingCollectorIsNamedToo) {
  constexpr auto kTimeout = 500ms;
  Timing timing;
  auto errors = barrier_without({0, 2}, kTimeout, &timing);
  for (int r : {1, 3}) {
    const auto me = static_cast<size_t>(r);
    const std::string& e = errors[me];
    EXPECT_NE(e.find("no verdict from rank 0"), std::string::npos) << e;
    EXPECT_NE(e.find("ranks [0, 2] of 4 did not arrive"), std::string::npos)
        << "rank " << r << ": " << e;
    // Without rank 0 each rank waits for a verdict twice the timeout (rank 0 may have started
    // later), as the message says.
    EXPECT_NE(e.find("within 1 s"), std::string::npos) << e;
    EXPECT_GE(timing.failed[me] - timing.started[me], 2 * kTimeout - kEarlySlack)
        << "rank " << r << " failed early";
  }
  EXPECT_LT(timing.slowest({1, 3}), 2 * kTimeout + kLateBound);
}

}  // namespace
}  // namespace lockstep::testing
