// monitored_barrier with ranks as threads: it passes when every rank comes, and otherwise every
// rank that came gets a TimeoutError naming all the ranks that did not, within the timeout plus a
// bound.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>

#include "lockstep/core/deadline.h"
#include "lockstep/core/error.h"
#include "support/spawn.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;

// Runs a 4-rank group in which the ranks in `absent` skip one monitored_barrier(timeout); returns
// the error message each present rank got (empty: no error).
std::vector<std::string> barrier_without(const std::set<int>& absent,
                                         std::chrono::milliseconds timeout,
                                         Clock::duration* slowest) {
  std::vector<std::string> errors(4);
  std::atomic<int64_t> slowest_ns{0};
  spawn_groups(4, [&](ProcessGroup& pg) {
    pg.monitored_barrier(10s);  // an earlier barrier that everyone passes
    if (absent.count(pg.rank())) return;
    auto started = Clock::now();
    try {
      pg.monitored_barrier(timeout);
    } catch (const TimeoutError& e) {
      errors[static_cast<size_t>(pg.rank())] = e.what();
    }
    int64_t took = (Clock::now() - started).count();
    int64_t seen = slowest_ns.load();
    while (took > seen && !slowest_ns.compare_exchange_weak(seen, took)) {
    }
  });
  *slowest = Clock::duration(slowest_ns.load());
  return errors;
}

TEST(MonitoredBarrier, PassesWhenEveryRankArrives) {
  std::atomic<int> passed{0};
  spawn_groups(4, [&](ProcessGroup& pg) {
    for (int i = 0; i < 3; ++i) pg.monitored_barrier(10s);
    ++passed;
  });
  EXPECT_EQ(passed.load(), 4);
}

TEST(MonitoredBarrier, NamesEveryMissingRank) {
  Clock::duration slowest{};
  auto errors = barrier_without({1, 3}, 700ms, &slowest);
  for (int r : {0, 2}) {
    const std::string& e = errors[static_cast<size_t>(r)];
    EXPECT_NE(e.find("monitored_barrier #1"), std::string::npos) << e;
    EXPECT_NE(e.find("ranks [1, 3] of 4 did not arrive"), std::string::npos)
        << "rank " << r << ": " << e;
  }
  EXPECT_LT(slowest, 700ms + 5s);
}

TEST(MonitoredBarrier, MissingCollectorIsNamedToo) {
  Clock::duration slowest{};
  auto errors = barrier_without({0, 2}, 500ms, &slowest);
  for (int r : {1, 3}) {
    const std::string& e = errors[static_cast<size_t>(r)];
    EXPECT_NE(e.find("no verdict from rank 0"), std::string::npos) << e;
    EXPECT_NE(e.find("ranks [0, 2] of 4 did not arrive"), std::string::npos)
        << "rank " << r << ": " << e;
  }
  EXPECT_LT(slowest, 2 * 500ms + 5s);
}

}  // namespace
}  // namespace lockstep::testing
