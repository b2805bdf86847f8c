// The failure catalogue (shared design notes; docs/diagnostics.md lists every entry's tests): the
// entries that no other folder reproduces in real processes with the message content and a time
// bound. Each test starts a job of real processes (this binary in child mode) and checks what
// every rank reports:
//   #1  sizes differ: DETAIL lists every rank's count; without DETAIL the header names the op,
//       both sizes and the _v fix
//   #2  a skipped collective and a swapped order: DETAIL names the rank out of step; without
//       DETAIL the header error comes at once
//   #3  a rank SIGKILLed while DETAIL checks run: survivors still fail within 2 s naming it
//   #4  RANK >= WORLD_SIZE, #5 a master that starts late, #6 a port in use
//   #8  a parameter without gradient on one rank: no hang, the right average, one warning
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <thread>

#include "catalogue_harness.h"
#include "comm/group_config.h"
#include "ddp/harness.h"
#include "lockstep/group/init.h"
#include "net/socket.h"

namespace lockstep::testing::catalogue {
namespace {

std::shared_ptr<ProcessGroup> join() {
  const char* backend = std::getenv("CATALOGUE_BACKEND");
  return init_process_group({.backend = backend ? backend : "auto"});
}

// Runs body(pg), reporting a lockstep error it throws (timed from the start of body).
void run_reporting(const std::function<void(ProcessGroup&)>& body) {
  auto pg = join();
  auto start = Clock::now();
  try {
    body(*pg);
    say("NO ERROR");
  } catch (const Error& e) {
    report(e, start);
  }
}

// ---- child entry points ----

TEST(CatalogueChild, DISABLED_CountMismatch) {  // #1: rank 1 passes 999 elements, the others 1000
  run_reporting([](ProcessGroup& pg) {
    std::vector<float> x(pg.rank() == 1 ? 999 : 1000, 1.0f);
    pg.all_reduce(view(x))->wait();
  });
}

TEST(CatalogueChild, DISABLED_AllGatherCountMismatch) {  // #1: 4 elements per rank, rank 1 has 3
  run_reporting([](ProcessGroup& pg) {
    size_t mine = pg.rank() == 1 ? 3 : 4;
    std::vector<int32_t> in(mine, pg.rank()), out(mine * static_cast<size_t>(pg.size()));
    pg.all_gather(view(in), view(out))->wait();
  });
}

TEST(CatalogueChild, DISABLED_SkippedCollective) {  // #2: rank 1 skips all_reduce #1
  run_reporting([](ProcessGroup& pg) {
    std::vector<float> x(10, 1.0f);
    pg.all_reduce(view(x))->wait();
    if (pg.rank() != 1) pg.all_reduce(view(x))->wait();
    pg.barrier()->wait();
  });
}

TEST(CatalogueChild, DISABLED_SwappedOrder) {  // #2: rank 0 broadcasts first, the others reduce
  run_reporting([](ProcessGroup& pg) {
    std::vector<float> x(256, 1.0f);
    if (pg.rank() == 0) {
      pg.broadcast(view(x))->wait();
      pg.all_reduce(view(x))->wait();
    } else {
      pg.all_reduce(view(x))->wait();
      pg.broadcast(view(x))->wait();
    }
  });
}

TEST(CatalogueChild, DISABLED_AllReduceLoop) {  // #3: small all_reduces until a peer dies
  auto pg = join();
  std::vector<float> x(1000, 1.0f);
  Clock::time_point start = Clock::now();
  try {
    for (int i = 0; i < 1'000'000; ++i) {
      start = Clock::now();
      pg->all_reduce(view(x))->wait();
      if (i == 0) pg->config().store->set("test/ready/" + std::to_string(pg->rank()), "1");
    }
    say("LOOP FINISHED");
  } catch (const Error& e) {
    report(e, start);
  }
}

TEST(CatalogueChild, DISABLED_Join) {  // #4, #5, #6: join and all_reduce once
  auto start = Clock::now();
  try {
    auto pg = init_process_group();
    std::vector<float> x(4, static_cast<float>(pg->rank() + 1));
    pg->all_reduce(view(x))->wait();
    say(detail::concat("JOINED rank ", pg->rank(), " sum ", x[0]));
  } catch (const Error& e) {
    report(e, start);
  }
}

// #8: parameters p0 and p1; rank 1 never produces p1's gradient. Three iterations, each printing
// the averaged gradients this rank got.
TEST(CatalogueChild, DISABLED_UnusedParameter) {
  run_reporting([](ProcessGroup& pg) {
    auto params = ddp::testing::float_params({4, 4});
    ddp::testing::VectorGrads grads(params);
    ddp::Reducer reducer(params, pg, grads, {.timeout = std::chrono::seconds(30)});
    for (int it = 0; it < 3; ++it) {
      grads.grads.assign(2, {});  // zero_grad
      reducer.begin_backward();
      grads.grads[0].assign(4, static_cast<float>(pg.rank() + 1));
      reducer.mark_ready(0);
      if (pg.rank() == 0) {
        grads.grads[1].assign(4, 10.0f);
        reducer.mark_ready(1);
      }
      reducer.finalize();
      say(detail::concat("GRADS it ", it, " p0 ", grads.grads[0][0], " p1 ", grads.grads[1][0]));
    }
  });
}

// ---- the tests ----

class CatalogueBackends : public ::testing::TestWithParam<std::string> {
 protected:
  Env env(const std::string& debug) {
    return {{"CATALOGUE_BACKEND", GetParam()}, {"LOCKSTEP_DEBUG", debug}};
  }
};

// Every rank's output holds `part` in a CAUGHT line of `type`, within `max_ms` of its call.
void expect_every_rank_caught(const std::vector<ProcessResult>& results, const std::string& type,
                              const std::vector<std::string>& parts, long max_ms) {
  for (size_t r = 0; r < results.size(); ++r) {
    const std::string& out = results[r].output;
    SCOPED_TRACE("rank " + std::to_string(r) + " output:\n" + out);
    EXPECT_TRUE(contains(out, "CAUGHT " + type));
    for (const auto& part : parts) EXPECT_TRUE(contains(out, part)) << "missing: " << part;
    long ms = caught_after_ms(out);
    EXPECT_GE(ms, 0);
    EXPECT_LT(ms, max_ms);
  }
}

TEST_P(CatalogueBackends, Entry1_DetailListsEveryRanksCountOnEveryRank) {
  ChildJob job("CatalogueChild.DISABLED_CountMismatch", 3, env("DETAIL"));
  expect_every_rank_caught(
      job.wait_all(), "MismatchError",
      {"all_reduce #0: ranks disagree on count: ranks 0, 2: all_reduce(f32, count 1000, sum); "
       "rank 1: all_reduce(f32, count 999, sum). Fix: make every rank pass the same count"},
      10'000);
}

TEST_P(CatalogueBackends, Entry1_AllGatherSizesDifferNamesOpSizesAndTheVariant) {
  ChildJob job("CatalogueChild.DISABLED_AllGatherCountMismatch", 2, env("OFF"));
  auto results = job.wait_all();
  expect_every_rank_caught(results, "MismatchError", {"all_gather #0", "use all_gather_v"}, 10'000);
  for (const auto& r : results)
    EXPECT_TRUE(contains(r.output, "(3 vs 4 i32 elements)") ||
                contains(r.output, "(4 vs 3 i32 elements)"))
        << r.output;
}

TEST_P(CatalogueBackends, Entry1_DetailAllGatherNamesEachRanksCountAndTheVariant) {
  ChildJob job("CatalogueChild.DISABLED_AllGatherCountMismatch", 2, env("DETAIL"));
  expect_every_rank_caught(
      job.wait_all(), "MismatchError",
      {"all_gather #0: ranks disagree on count: rank 0: all_gather(i32, count 4 per rank); "
       "rank 1: all_gather(i32, count 3 per rank). Fix: make every rank pass the same count, or "
       "use all_gather_v for uneven data"},
      10'000);
}

TEST_P(CatalogueBackends, Entry2_DetailNamesTheRankThatSkippedACollective) {
  ChildJob job("CatalogueChild.DISABLED_SkippedCollective", 3, env("DETAIL"));
  expect_every_rank_caught(
      job.wait_all(), "MismatchError",
      {"collective #1: ranks called different collectives: ranks 0, 2: all_reduce(f32, count "
       "10, sum); rank 1: barrier(). rank 1 is out of step with the others",
       "Fix: every rank must issue the same collectives in the same order"},
      10'000);
}

TEST_P(CatalogueBackends, Entry2_DetailShowsBothCallsOfASwappedOrder) {
  ChildJob job("CatalogueChild.DISABLED_SwappedOrder", 2, env("DETAIL"));
  expect_every_rank_caught(job.wait_all(), "MismatchError",
                           {"collective #0: ranks called different collectives: rank 0: "
                            "broadcast(f32, count 256, root 0); rank 1: all_reduce(f32, count "
                            "256, sum)"},
                           10'000);
}

TEST_P(CatalogueBackends, Entry2_SkippedCollectiveFailsAtOnceWithoutDetail) {
  ChildJob job("CatalogueChild.DISABLED_SkippedCollective", 2, env("OFF"));
  // LOCKSTEP_TIMEOUT is 60 s: "at once" is far below it.
  expect_every_rank_caught(job.wait_all(), "MismatchError", {"barrier #1", "all_reduce #1"},
                           10'000);
}

TEST_P(CatalogueBackends, Entry3_SigkilledRankIsNamedWithinTwoSecondsUnderDetail) {
  ChildJob job("CatalogueChild.DISABLED_AllReduceLoop", 3, env("DETAIL"));
  TcpStore store = job.store();
  store.wait({"test/ready/0", "test/ready/1", "test/ready/2"}, std::chrono::seconds(60));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto killed_at = Clock::now();
  job.child(2).kill(SIGKILL);
  for (int r = 0; r < 2; ++r) {
    auto result = job.wait(r);
    SCOPED_TRACE("rank " + std::to_string(r) + " output:\n" + result.output);
    EXPECT_TRUE(contains(result.output, "CAUGHT NetworkError"));
    EXPECT_TRUE(contains(result.output, "rank 2 (host " + net::hostname()));
    // The CAUGHT line's time counts from the failing call, which started after the kill or at
    // most one small all_reduce before it; the wait below bounds the whole.
    EXPECT_LT(caught_after_ms(result.output), 2'000);
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - killed_at).count(), 10.0)
      << "survivors exit soon after the kill";
}

INSTANTIATE_TEST_SUITE_P(Backends, CatalogueBackends, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return info.param; });

Env rank_env(int rank, int world, int port) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)},
          {"LOCKSTEP_TIMEOUT", "30"},
          {"LOCKSTEP_USE_AGENT_STORE", std::nullopt},
          {"LOCKSTEP_RESTART_COUNT", std::nullopt},
          {"LOCKSTEP_DEBUG", std::nullopt}};
}

TEST(Catalogue, Entry4_RankNotBelowWorldSizeIsNamedWithTheLauncherCommand) {
  auto started = Clock::now();
  auto result = run_process(child_argv("CatalogueChild.DISABLED_Join"), rank_env(2, 2, free_port()),
                            std::chrono::seconds(30));
  EXPECT_TRUE(contains(result.output, "CAUGHT ConfigError")) << result.output;
  EXPECT_TRUE(contains(result.output, "RANK=2 is not below WORLD_SIZE=2")) << result.output;
  EXPECT_TRUE(contains(result.output, "lockstep run --nproc-per-node N")) << result.output;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - started).count(), 10.0);
}

TEST(Catalogue, Entry5_MasterThatStartsLateIsRetriedWithProgressLogged) {
  int port = free_port();
  Child late_client(child_argv("CatalogueChild.DISABLED_Join"), rank_env(1, 2, port));
  std::this_thread::sleep_for(std::chrono::milliseconds(6500));  // past the first progress line
  Child master(child_argv("CatalogueChild.DISABLED_Join"), rank_env(0, 2, port));
  auto r1 = late_client.wait(std::chrono::seconds(60));
  auto r0 = master.wait(std::chrono::seconds(60));
  EXPECT_TRUE(contains(r1.output, "JOINED rank 1 sum 3")) << r1.output;
  EXPECT_TRUE(contains(r0.output, "JOINED rank 0 sum 3")) << r0.output;
  EXPECT_TRUE(contains(r1.output, "still trying to reach 127.0.0.1:" + std::to_string(port) +
                                      " after 5 s (last error: Connection refused"))
      << r1.output;
}

TEST(Catalogue, Entry6_PortInUseNamesThePortAndBothWaysOut) {
  auto taken = net::listen_tcp("0.0.0.0", 0);
  int port = net::local_port(taken.get());
  auto started = Clock::now();
  auto result = run_process(child_argv("CatalogueChild.DISABLED_Join"), rank_env(0, 2, port),
                            std::chrono::seconds(30));
  EXPECT_TRUE(contains(result.output, "CAUGHT NetworkError")) << result.output;
  EXPECT_TRUE(contains(result.output,
                       "port " + std::to_string(port) + " is already in use on " + net::hostname()))
      << result.output;
  EXPECT_TRUE(contains(result.output, "--master-port")) << result.output;
  EXPECT_TRUE(contains(result.output, "port 0 to pick a free one")) << result.output;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - started).count(), 10.0);
}

TEST(Catalogue, Entry8_ParameterWithoutGradientOnOneRankIsAveragedWithoutHangOrRepeat) {
  auto started = Clock::now();
  ChildJob job("CatalogueChild.DISABLED_UnusedParameter", 2);
  auto results = job.wait_all();
  for (int r = 0; r < 2; ++r) {
    const std::string& out = results[static_cast<size_t>(r)].output;
    SCOPED_TRACE("rank " + std::to_string(r) + " output:\n" + out);
    EXPECT_TRUE(contains(out, "NO ERROR"));
    for (int it = 0; it < 3; ++it)  // p0: (1 + 2) / 2; p1: (10 + 0) / 2
      EXPECT_TRUE(contains(out, detail::concat("GRADS it ", it, " p0 1.5 p1 5")));
    EXPECT_EQ(count_of(out, "'p1'"), r == 1 ? 1u : 0u) << "named once, by the rank that skipped";
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - started).count(), 30.0);
}

}  // namespace
}  // namespace lockstep::testing::catalogue
