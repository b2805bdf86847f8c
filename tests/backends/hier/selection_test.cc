// Backend selection over simulated hosts, and the ops that the hierarchical backend runs flat
// (over its tcp mesh) or on subgroups: "auto" picks shm on one host, tcp when every rank has a
// host of its own, hier otherwise; every other collective and send/recv still gives closed-form
// results on a hier group.
#include <gtest/gtest.h>

#include <numeric>

#include "backends/hier/hosts.h"
#include "hier_test_util.h"

namespace lockstep::testing {
namespace {

std::vector<std::string> backends_of(const std::string& per_rank) {
  std::vector<std::string> names(static_cast<size_t>(ranks_in(per_rank)));
  auto outcomes = run_ranks(per_rank, [&](ProcessGroup& pg) {
    names[static_cast<size_t>(pg.rank())] = pg.backend_name();
  });
  for (const auto& o : outcomes) EXPECT_EQ(o.type, "none") << o.what;
  return names;
}

TEST(HierSelection, AutoPicksByHostLayout) {
  using V = std::vector<std::string>;
  EXPECT_EQ(backends_of("a,a,b,b"), V(4, "hier"));
  EXPECT_EQ(backends_of("a,a,a,b"), V(4, "hier"));
  EXPECT_EQ(backends_of("a,b,c"), V(3, "tcp"));
  EXPECT_EQ(backends_of("a,a,a"), V(3, "shm"));
}

TEST(HierSelection, OneValueAppliesToTheWholeProcess) {
  SimulatedHosts hosts("box");
  EXPECT_EQ(hier::host_identity(0), hier::host_identity(7));
  ::setenv("LOCKSTEP_HOST_ID", "x,y", 1);
  EXPECT_NE(hier::host_identity(0), hier::host_identity(1));
  try {
    hier::host_identity(2);
    FAIL() << "a list without an entry for rank 2 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "LOCKSTEP_HOST_ID='x,y' has no entry for rank 2")) << e.what();
  }
}

TEST(HierSelection, HostMapOrdersHostsByLowestRank) {
  hier::HostMap m = hier::map_hosts({"q", "p", "q", "r", "p"});
  EXPECT_EQ(m.hosts, (std::vector<std::vector<int>>{{0, 2}, {1, 4}, {3}}));
  EXPECT_EQ(m.leaders(), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(m.host_of, (std::vector<int>{0, 1, 0, 2, 1}));
  EXPECT_TRUE(m.is_multi_host_with_shared_hosts());
  EXPECT_FALSE(hier::map_hosts({"a", "b"}).is_multi_host_with_shared_hosts());
  EXPECT_FALSE(hier::map_hosts({"a", "a"}).is_multi_host_with_shared_hosts());
}

// Broadcast from a non-leader, all_gather_v, reduce_scatter, all_to_all, a send/recv ring and a
// barrier on a 3 + 2 layout.
TEST(HierSelection, FlatOpsGiveClosedForms) {
  auto outcomes = run_ranks("a,b,a,b,a", [](ProcessGroup& pg) {
    ASSERT_EQ(pg.backend_name(), "hier");
    const int me = pg.rank(), n = pg.size();
    std::vector<int64_t> b(5000, me == 3 ? 42 : -1);
    pg.broadcast(view(b), {.root = 3})->wait();
    for (int64_t v : b) ASSERT_EQ(v, 42);

    std::vector<size_t> counts(static_cast<size_t>(n));
    std::iota(counts.begin(), counts.end(), size_t{1});
    std::vector<int32_t> mine(counts[static_cast<size_t>(me)], me), all(15);
    pg.all_gather_v(view(mine), view(all), counts)->wait();
    for (size_t i = 0, r = 0; r < counts.size(); ++r)
      for (size_t k = 0; k < counts[r]; ++k, ++i) ASSERT_EQ(all[i], static_cast<int32_t>(r));

    std::vector<double> in(static_cast<size_t>(n) * 7, me + 1.0), out(7);
    pg.reduce_scatter(view(in), view(out))->wait();
    for (double v : out) ASSERT_EQ(v, n * (n + 1) / 2.0);

    std::vector<int32_t> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
    for (int j = 0; j < n; ++j) send[static_cast<size_t>(j)] = me * 10 + j;
    pg.all_to_all(view(send), view(recv))->wait();
    for (int i = 0; i < n; ++i) ASSERT_EQ(recv[static_cast<size_t>(i)], i * 10 + me);

    std::vector<float> token(100, static_cast<float>(me)), got(100);
    auto sent = pg.send(view(token), (me + 1) % n);
    pg.recv(view(got), (me + n - 1) % n)->wait();
    sent->wait();
    for (float v : got) ASSERT_EQ(v, static_cast<float>((me + n - 1) % n));
    pg.barrier()->wait();
  });
  for (size_t r = 0; r < outcomes.size(); ++r)
    EXPECT_EQ(outcomes[r].type, "none") << "rank " << r << ": " << outcomes[r].what;
}

// Subgroups choose again: ranks {0, 1} share host a (shm), {1, 2, 3} span both hosts with two
// ranks on b (hier).
TEST(HierSelection, SubgroupsChooseByTheirOwnHosts) {
  auto outcomes = run_ranks("a,a,b,b", [](ProcessGroup& pg) {
    auto local = pg.new_group({0, 1});
    auto wide = pg.new_group({1, 2, 3});
    if (local) {
      EXPECT_EQ(local->backend_name(), "shm");
    }
    if (wide) {
      EXPECT_EQ(wide->backend_name(), "hier");
      std::vector<float> x(1001, static_cast<float>(pg.rank()));
      wide->all_reduce(view(x))->wait();
      for (float v : x) ASSERT_EQ(v, 6.0f);
    }
  });
  for (size_t r = 0; r < outcomes.size(); ++r)
    EXPECT_EQ(outcomes[r].type, "none") << "rank " << r << ": " << outcomes[r].what;
}

}  // namespace
}  // namespace lockstep::testing
