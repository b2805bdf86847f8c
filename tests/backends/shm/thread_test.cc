// The shm backend with ranks as threads: segment lifetime in /dev/shm, mismatch errors worded as
// on tcp, a rank that leaves early or runs late (named within a bound), 8 ranks on 2 cores, and
// send-then-destroy delivery. The collective matrix itself runs in tests/group over every backend.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <mutex>
#include <thread>

#include "lockstep/group/init.h"
#include "lockstep/store/hash_store.h"
#include "shm_test_util.h"
#include "support/spawn.h"

namespace lockstep::testing {
namespace {

using std::chrono::milliseconds;

struct Outcome {
  std::string type = "none";  // the lockstep error type, or "none"
  std::string what;
  double seconds = 0;  // from the start of fn to the error
};

// Runs fn on n ranks (threads) of a fresh shm group; returns what each rank threw.
std::vector<Outcome> run_ranks(int n, const std::function<void(ProcessGroup&)>& fn,
                               milliseconds timeout = milliseconds(20'000)) {
  auto store = std::make_shared<HashStore>();
  std::vector<Outcome> outcomes(static_cast<size_t>(n));
  spawn(n, [&](int rank) {
    auto pg = init_process_group(
        {.backend = "shm", .rank = rank, .world_size = n, .store = store, .timeout = timeout});
    const auto start = Clock::now();
    try {
      fn(*pg);
    } catch (const Error& e) {
      auto& o = outcomes[static_cast<size_t>(rank)];
      o = {error_type(e), e.what(), std::chrono::duration<double>(Clock::now() - start).count()};
    }
  });
  return outcomes;
}

class ShmThreads : public ::testing::Test {
 protected:
  void TearDown() override {
    EXPECT_EQ(segments_of_this_process(), std::vector<std::string>{})
        << "segments left in /dev/shm";
  }
};

TEST_F(ShmThreads, SegmentIsUnlinkedWhileTheGroupLives) {
  spawn_groups(
      3,
      [](ProcessGroup& pg) {
        std::vector<float> x(100, 1.0f);
        pg.all_reduce(view(x))->wait();
        EXPECT_EQ(x[0], 3.0f);
        // Every rank has mapped the segment, so its name is gone: a crash now leaves nothing
        // behind.
        EXPECT_EQ(segments_of_this_process(), std::vector<std::string>{});
        pg.barrier()->wait();
      },
      "shm");
}

TEST_F(ShmThreads, SegmentOfACreatorThatDiedDuringSetupIsRemoved) {
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  const std::string stale =
      "/dev/shm/lockstep-test_stale-" + std::to_string(dead) + "-00000000deadbeef";
  std::ofstream(stale) << "left behind";
  ASSERT_EQ(segments_created_by({dead}).size(), 1u);
  spawn_groups(
      2, [](ProcessGroup& pg) { pg.barrier()->wait(); }, "shm");
  EXPECT_EQ(segments_created_by({dead}), std::vector<std::string>{}) << stale << " was not removed";
  ::unlink(stale.c_str());
}

TEST_F(ShmThreads, CountMismatchNamesBothSizesOnBothRanks) {
  auto out = run_ranks(2, [](ProcessGroup& pg) {
    std::vector<float> x(pg.rank() == 0 ? 1024 : 1000, 1.0f);
    pg.all_reduce(view(x))->wait();
  });
  EXPECT_EQ(out[0].type, "MismatchError");
  EXPECT_TRUE(contains(out[0].what, "all_reduce #0: rank 1 sent 4000 bytes, rank 0 expected 4096"))
      << out[0].what;
  EXPECT_EQ(out[1].type, "MismatchError");
  EXPECT_TRUE(contains(out[1].what, "all_reduce #0: rank 0 sent 4096 bytes, rank 1 expected 4000"))
      << out[1].what;
  EXPECT_TRUE(contains(out[1].what, "Fix: ")) << out[1].what;
}

TEST_F(ShmThreads, OrderMismatchNamesBothOps) {
  auto out = run_ranks(2, [](ProcessGroup& pg) {
    std::vector<float> x(256, 1.0f);
    if (pg.rank() == 0)
      pg.broadcast(view(x))->wait();
    else
      pg.all_reduce(view(x))->wait();
  });
  // Each rank either finds the mismatch itself or first sees the other's abort note, which
  // carries the other's finding: either way the message names both ops.
  for (int r = 0; r < 2; ++r) {
    const auto& o = out[static_cast<size_t>(r)];
    EXPECT_EQ(o.type, "MismatchError") << "rank " << r;
    EXPECT_TRUE(contains(o.what, "rank 0 is in broadcast #0")) << o.what;
    EXPECT_TRUE(contains(o.what, "rank 1 is in all_reduce #0")) << o.what;
  }
}

TEST_F(ShmThreads, LargeGatherVCountsMismatchFailsBeforeData) {
  auto out = run_ranks(3, [](ProcessGroup& pg) {
    std::vector<size_t> counts{300'000, 200'000, 100'000};
    if (pg.rank() == 2) counts = {300'000, 100'000, 200'000};  // same total, different split
    std::vector<int32_t> in(counts[static_cast<size_t>(pg.rank())]), all(600'000);
    pg.all_gather_v(view(in), view(all), counts)->wait();
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(out[static_cast<size_t>(r)].type, "MismatchError") << "rank " << r;
    EXPECT_TRUE(contains(out[static_cast<size_t>(r)].what, "pass different counts arrays"))
        << out[static_cast<size_t>(r)].what;
  }
}

TEST_F(ShmThreads, AllToAllVPairMismatchNamesThePair) {
  auto out = run_ranks(2, [](ProcessGroup& pg) {
    // Rank 0 sends 3 elements to rank 1, which expects 2 from it.
    std::vector<size_t> send{1, pg.rank() == 0 ? 3u : 1u}, recv{1, 1};
    if (pg.rank() == 1) send = {1, 1}, recv = {2, 1};
    if (pg.rank() == 0) recv = {1, 1};
    std::vector<int32_t> in(send[0] + send[1]), o(recv[0] + recv[1]);
    pg.all_to_all_v(view(in), send, view(o), recv)->wait();
    pg.barrier()->wait();
  });
  EXPECT_EQ(out[1].type, "MismatchError");
  EXPECT_TRUE(contains(out[1].what, "rank 0 sends 12 bytes to rank 1, which expects 8"))
      << out[1].what;
  // Rank 0's own pair (what it receives) matches, so it learns from rank 1's abort.
  EXPECT_EQ(out[0].type, "MismatchError") << out[0].what;
  EXPECT_TRUE(contains(out[0].what, "rank 1 (host ")) << out[0].what;
}

TEST_F(ShmThreads, RankThatDestroysItsGroupEarlyIsNamedWithinOneSecond) {
  auto out = run_ranks(2, [](ProcessGroup& pg) {
    if (pg.rank() == 1) return;  // leaves: its group is destroyed with run_ranks' scope
    std::vector<float> x(1 << 20, 1.0f);
    pg.all_reduce(view(x))->wait();
  });
  EXPECT_EQ(out[0].type, "NetworkError");
  EXPECT_TRUE(contains(out[0].what, "rank 1 (host ")) << out[0].what;
  EXPECT_TRUE(
      contains(out[0].what, "shut down its process group while rank 0 waits in all_reduce #0"))
      << out[0].what;
  EXPECT_LT(out[0].seconds, 1.0);
}

TEST_F(ShmThreads, LateRankTimesOutItsPeerAndTheAbortReachesEveryone) {
  auto store = std::make_shared<HashStore>();
  std::vector<Outcome> out(3);
  spawn(3, [&](int rank) {
    auto pg = init_process_group({.backend = "shm",
                                  .rank = rank,
                                  .world_size = 3,
                                  .store = store,
                                  .timeout = milliseconds(20'000)});
    if (rank == 2) std::this_thread::sleep_for(milliseconds(1500));
    std::vector<float> x(1000, 1.0f);
    const auto start = Clock::now();
    try {
      pg->all_reduce(view(x), {.timeout = milliseconds(rank == 1 ? 300 : 20'000)})->wait();
    } catch (const Error& e) {
      out[static_cast<size_t>(rank)] = {
          error_type(e), e.what(), std::chrono::duration<double>(Clock::now() - start).count()};
    }
  });
  EXPECT_EQ(out[1].type, "TimeoutError");
  EXPECT_TRUE(contains(
      out[1].what, "all_reduce #0: the op's deadline passed while rank 1 waited for rank 2 (host "))
      << out[1].what;
  EXPECT_TRUE(contains(out[1].what, "it has not entered any collective of this group"))
      << out[1].what;
  EXPECT_GT(out[1].seconds, 0.25);
  EXPECT_LT(out[1].seconds, 1.0);
  // Rank 0 would wait 20 s; rank 1's abort stops it with rank 1's cause, and the same error type.
  EXPECT_EQ(out[0].type, "TimeoutError");
  EXPECT_TRUE(contains(out[0].what, "rank 1 (host ")) << out[0].what;
  EXPECT_TRUE(contains(out[0].what, "all_reduce #0: the op's deadline passed") &&
              contains(out[0].what, "(relayed by rank 1 (host ") &&
              contains(out[0].what, " to rank 0 in all_reduce #0)"))
      << out[0].what;
  EXPECT_LT(out[0].seconds, 1.0);
  EXPECT_EQ(out[2].type, "TimeoutError") << "rank 2 enters late and finds the group aborted";
}

TEST_F(ShmThreads, EightRanksOnTwoCoresFinishAThousandSmallAllReduces) {
  std::vector<double> seconds(8);
  spawn_groups(
      8,
      [&](ProcessGroup& pg) {
        const auto start = Clock::now();
        std::vector<int32_t> x(64);
        for (int i = 0; i < 1000; ++i) {
          for (size_t k = 0; k < x.size(); ++k)
            x[k] = pg.rank() * 1000 + i + static_cast<int32_t>(k);
          pg.all_reduce(view(x))->wait();
          // sum over r of (1000 r + i + k) = 1000 * 28 + 8 (i + k)
          for (size_t k = 0; k < x.size(); ++k)
            ASSERT_EQ(x[k], 28'000 + 8 * (i + static_cast<int32_t>(k))) << "iteration " << i;
        }
        seconds[static_cast<size_t>(pg.rank())] =
            std::chrono::duration<double>(Clock::now() - start).count();
      },
      "shm");
  std::printf("8 ranks, 1000 all_reduces of 256 B: %.3f s (%.1f us each)\n", seconds[0],
              seconds[0] * 1000);
  EXPECT_LT(seconds[0], 30.0);
}

// Outputs of 8 MiB and more are written with non-temporal stores (copy.h); odd sizes and
// outputs that start off a 32-byte boundary exercise the edges.
TEST_F(ShmThreads, LargeOutputsAtOddOffsetsAreExact) {
  const size_t count = (12 << 20) / 4 + 7;  // 12 MiB + 28 bytes of f32
  spawn_groups(
      3,
      [&](ProcessGroup& pg) {
        const int n = pg.size();
        std::vector<float> in(count), out(count + 1);
        for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>((pg.rank() + 1) * (i % 1000));
        pg.all_reduce(view(in), BufferView{out.data() + 1, count, DType::f32})->wait();
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(out[i + 1], static_cast<float>(6 * (i % 1000))) << "all_reduce element " << i;
        std::vector<int32_t> mine(count / 3 + 5), all(3 * mine.size() + 1);
        for (size_t i = 0; i < mine.size(); ++i)
          mine[i] = pg.rank() * 1'000'000 + static_cast<int32_t>(i);
        pg.all_gather(view(mine), BufferView{all.data() + 1, 3 * mine.size(), DType::i32})->wait();
        for (size_t i = 0; i < 3 * mine.size(); ++i)
          ASSERT_EQ(all[i + 1], static_cast<int32_t>(i / mine.size() * 1'000'000 + i % mine.size()))
              << "all_gather element " << i;
        std::vector<float> b(count + 1, static_cast<float>(pg.rank()));
        pg.broadcast(BufferView{b.data() + 1, count, DType::f32}, {.root = n - 1})->wait();
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(b[i + 1], static_cast<float>(n - 1)) << "broadcast " << i;
        ASSERT_EQ(b[0], static_cast<float>(pg.rank())) << "broadcast wrote before its buffer";
      },
      "shm");
}

// An eager send (up to 64 KiB) completes before its receiver posts the recv; the bytes are in the
// receiver's inbox, so they arrive even though the sender destroyed its group at once.
TEST_F(ShmThreads, SendsAreDeliveredAfterTheSenderDestroysItsGroup) {
  const size_t count = 16'000;  // 64,000 bytes: eager
  auto out = run_ranks(2, [&](ProcessGroup& pg) {
    std::vector<float> x(count);
    if (pg.rank() == 0) {
      for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>(i % 1000);
      pg.send(view(x), 1, {.tag = 3})->wait();  // returns before rank 1 receives
      return;                                   // then the group is destroyed
    }
    std::this_thread::sleep_for(milliseconds(300));
    pg.recv(view(x), 0, {.tag = 3})->wait();
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(x[i], static_cast<float>(i % 1000)) << i;
  });
  EXPECT_EQ(out[0].type, "none") << out[0].what;
  EXPECT_EQ(out[1].type, "none") << out[1].what;
}

}  // namespace
}  // namespace lockstep::testing
