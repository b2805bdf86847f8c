// The core counts behind every wait policy: a rank bound to one core (mpirun's default) is no
// sign of an oversubscribed host, and a cpuset list counts its cores.
#include "core/host_cores.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <thread>

namespace lockstep::detail {
namespace {

TEST(CountCpuList, CountsRangesAndSingles) {
  EXPECT_EQ(count_cpu_list("0"), 1);
  EXPECT_EQ(count_cpu_list("0-1"), 2);
  EXPECT_EQ(count_cpu_list("0-1\n"), 2);
  EXPECT_EQ(count_cpu_list("0-3,8,10-11"), 7);
  EXPECT_EQ(count_cpu_list("4-4,6"), 2);
}

TEST(CountCpuList, AnythingElseIsZero) {
  for (const char* bad : {"", "x", "0-", "-3", "3-1", "0-1,a", "1.5", "0:3"})
    EXPECT_EQ(count_cpu_list(bad), 0) << "'" << bad << "'";
}

TEST(HostCores, WithinTheCoresOnline) {
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  EXPECT_GE(host_cores(), 1);
  EXPECT_LE(host_cores(), online);
  EXPECT_GE(host_cores(), process_cores());  // this process is not bound to fewer cores
}

// mpirun binds each rank to a core of its own: the rank then sees one core in its affinity mask,
// but the host still has all of them, and two such ranks do not oversubscribe it.
TEST(HostCores, ARankBoundToOneCoreStillSeesTheHost) {
  const int host = host_cores();
  int bound_process_cores = 0, bound_host_cores = 0;
  std::thread bound([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(static_cast<int>(::sched_getcpu()), &one);
    ASSERT_EQ(::sched_setaffinity(0, sizeof one, &one), 0);
    bound_process_cores = process_cores();
    bound_host_cores = host_cores();
  });
  bound.join();
  EXPECT_EQ(bound_process_cores, 1);
  EXPECT_EQ(bound_host_cores, host);
  EXPECT_FALSE(oversubscribed(host));
}

TEST(HostCores, MoreRanksThanCoresOrUnknownIsOversubscribed) {
  EXPECT_FALSE(oversubscribed(1));
  EXPECT_TRUE(oversubscribed(host_cores() + 1));
  EXPECT_TRUE(oversubscribed(-1));
  EXPECT_TRUE(oversubscribed(0));
}

}  // namespace
}  // namespace lockstep::detail
