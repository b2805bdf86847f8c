// The hierarchical backend across real processes on two simulated hosts (LOCKSTEP_HOST_ID, which
// the children inherit; the test binary re-runs itself in child mode): a round trip under "auto",
// and a rank SIGKILLed in the middle of 16 MiB all_reduces, a host leader and a non-leader, which
// every survivor on both hosts names within 2 s.
#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "comm/group_config.h"
#include "hier_test_util.h"

namespace lockstep::testing {
namespace {

constexpr int kWorld = 4;
// Ranks 0 and 1 on host "a", 2 and 3 on "b": the children inherit the per-rank list.
constexpr const char* kHosts = "a,a,b,b";

// ---- child entry points ----

TEST(HierChild, DISABLED_RoundTrip) {
  auto pg = init_process_group();
  ASSERT_EQ(pg->backend_name(), "hier");
  const int n = pg->size(), me = pg->rank();
  std::vector<float> x(300001);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((me + 1) * (i % 7));
  pg->all_reduce(view(x))->wait();
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(x[i], n * (n + 1) / 2 * static_cast<float>(i % 7)) << "all_reduce element " << i;
  std::vector<int64_t> b(1000, me == 1 ? 77 : 0);
  pg->broadcast(view(b), {.root = 1})->wait();
  for (int64_t v : b) ASSERT_EQ(v, 77);
  pg->barrier()->wait();
  say("ROUND TRIP OK rank " + std::to_string(me));
}

TEST(HierChild, DISABLED_AllReduceLoop) {
  auto pg = init_process_group();
  std::vector<float> x(4 << 20, 1.0f);  // 16 MiB
  try {
    for (int i = 0; i < 100000; ++i) {
      pg->all_reduce(view(x))->wait();
      if (i == 0) pg->config().store->set("test/ready/" + std::to_string(pg->rank()), "1");
    }
    say("LOOP FINISHED");
  } catch (const std::exception& e) {
    report(e);
  }
}

// ---- the tests ----

TEST(HierProcesses, AutoRunsHierarchicallyAcrossTwoSimulatedHosts) {
  SimulatedHosts hosts(kHosts);
  Job job("RoundTrip", kWorld, "HierChild");
  for (int r = 0; r < kWorld; ++r) {
    auto result = job.wait(r);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    EXPECT_TRUE(contains(result.output, "ROUND TRIP OK rank " + std::to_string(r)))
        << result.output;
  }
}

// Kills rank `victim` once every rank loops over 16 MiB all_reduces; every survivor, on both
// hosts, must fail with a NetworkError naming the victim (rank, host and pid) within 2 s, and
// no shm segment of the hosts' groups may be left behind.
void kill_and_expect_survivors_name(int victim) {
  SimulatedHosts hosts(kHosts);
  Job job("AllReduceLoop", kWorld, "HierChild");
  TcpStore store = job.store();
  store.wait({"test/ready/0", "test/ready/1", "test/ready/2", "test/ready/3"},
             std::chrono::seconds(60));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // well inside an all_reduce
  const std::string named = detail::concat("rank ", victim, " (host ", net::hostname(), ", pid ",
                                           job.child(victim).pid(), ")");
  const int64_t killed_at = now_ns();
  job.child(victim).kill(SIGKILL);
  for (int r = 0; r < kWorld; ++r) {
    if (r == victim) continue;
    auto result = job.wait(r);
    SCOPED_TRACE("rank " + std::to_string(r) + " output:\n" + result.output);
    EXPECT_TRUE(contains(result.output, "CAUGHT NetworkError"));
    EXPECT_TRUE(contains(result.output, named));
    const int64_t at = caught_at(result.output);
    ASSERT_GT(at, 0);
    const double seconds = static_cast<double>(at - killed_at) / 1e9;
    std::printf("rank %d failed %.3f s after rank %d was killed\n", r, seconds, victim);
    EXPECT_LT(seconds, 2.0);
  }
  job.wait(victim);
  expect_no_segments(job);
}

TEST(HierProcesses, SigkilledNonLeaderIsNamedOnBothHostsWithinTwoSeconds) {
  kill_and_expect_survivors_name(3);
}

TEST(HierProcesses, SigkilledLeaderIsNamedOnBothHostsWithinTwoSeconds) {
  kill_and_expect_survivors_name(2);
}

}  // namespace
}  // namespace lockstep::testing
