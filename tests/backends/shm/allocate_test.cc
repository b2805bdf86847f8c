// ProcessGroup::allocate: buffers that every rank of an shm group maps, and the collectives that
// read and write them directly (src/backends/shm/shared_collectives.h). Closed-form results for
// several dtypes, ops and sizes (not divisible by the ranks), in place and out of place; buffers
// of mixed kinds fall back and stay correct; mismatched sizes fail on every rank; no segment is
// left in /dev/shm, also when a rank is killed; on tcp allocate returns ordinary memory.
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>

#include "backends/shm/shared_collectives.h"
#include "comm/group_config.h"
#include "group/closed_forms.h"
#include "lockstep/group/init.h"
#include "shm_test_util.h"
#include "support/messages.h"
#include "support/spawn.h"

namespace lockstep::testing {
namespace {

// Copies t into b at byte offset `at`, and back.
void put(TypedBuffer& t, const SharedBuffer& b, size_t at = 0) {
  std::memcpy(static_cast<std::byte*>(b.data()) + at, t.view().data, t.view().bytes());
}
void get(TypedBuffer& t, const SharedBuffer& b, size_t at = 0) {
  std::memcpy(t.view().data, static_cast<const std::byte*>(b.data()) + at, t.view().bytes());
}

std::string ctx(const char* what, const ProcessGroup& pg, DType t, size_t count) {
  return detail::concat(what, " rank ", pg.rank(), " of ", pg.size(), " ", dtype_name(t), " x ",
                        count);
}

// Runs fn on n shm ranks (threads); returns how many ops took a shared path, per rank.
uint64_t shared_ops_in(int n, const std::function<void(ProcessGroup&)>& fn) {
  const uint64_t before = shm::shared_path_ops();
  spawn_groups(n, fn, "shm");
  return (shm::shared_path_ops() - before) / static_cast<uint64_t>(n);
}

class ShmAllocate : public ::testing::Test {
 protected:
  void TearDown() override {
    EXPECT_EQ(segments_of_this_process(), std::vector<std::string>{}) << "left in /dev/shm";
  }
};

constexpr size_t kLarge = 1'000'003;  // above the streaming threshold for 8-byte types

TEST_F(ShmAllocate, BuffersAreSharedZeroedAlignedAndUnlinkedOnceMapped) {
  spawn_groups(
      3,
      [](ProcessGroup& pg) {
        SharedBuffer b = pg.allocate(10'000);
        EXPECT_TRUE(b.shared());
        EXPECT_EQ(b.size(), 10'000u);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 4096, 0u);
        for (uint8_t v : b.span<uint8_t>()) ASSERT_EQ(v, 0);
        EXPECT_EQ(segments_of_this_process(), std::vector<std::string>{});
        pg.barrier()->wait();
      },
      "shm");
}

TEST_F(ShmAllocate, AllReduceOnSharedBuffersMatchesClosedForms) {
  const int n = 3;
  struct Case {
    DType t;
    ReduceOp op;
    size_t count;
  };
  // Large f32 and f64 sums take the fused streaming kernel; the others the Reducer.
  const std::vector<Case> cases = {
      {DType::f32, ReduceOp::sum, 10'007},    {DType::f32, ReduceOp::sum, kLarge * 3},
      {DType::f64, ReduceOp::sum, kLarge},    {DType::bf16, ReduceOp::avg, kLarge * 3},
      {DType::i64, ReduceOp::bxor, 10'007},   {DType::f16, ReduceOp::prod, 20'011},
      {DType::i32, ReduceOp::max, kLarge * 2}};
  const uint64_t shared = shared_ops_in(n, [&](ProcessGroup& pg) {
    const size_t most = kLarge * 12;
    SharedBuffer in = pg.allocate(most), out = pg.allocate(most + 4096);
    for (auto [t, op, count] : cases) {
      TypedBuffer x(t, count), y(t, count);
      x.fill([&](size_t i) { return reduce_input(op, pg.rank(), i); });
      auto expect = [&](size_t i) { return reduce_expected(op, t, n, i); };
      put(x, in);  // out of place, the output at an offset
      pg.all_reduce(in.view(t, count), out.view(t, count, 4096), {.op = op})->wait();
      get(y, out, 4096);
      check_elements(y, expect, ctx("all_reduce out of place", pg, t, count));
      pg.all_reduce(in.view(t, count), {.op = op})->wait();  // in place
      get(y, in);
      check_elements(y, expect, ctx("all_reduce in place", pg, t, count));
    }
  });
  EXPECT_EQ(shared, cases.size() * 2) << "every op on a shared path";
}

TEST_F(ShmAllocate, ReduceScatterReadsEverySharedInput) {
  const int n = 3;
  const uint64_t shared = shared_ops_in(n, [&](ProcessGroup& pg) {
    const size_t me = static_cast<size_t>(pg.rank());
    for (DType t : {DType::f32, DType::i32, DType::bf16}) {
      const size_t per = 100'001;
      SharedBuffer in = pg.allocate(per * 3 * element_size(t));
      TypedBuffer x(t, per * 3), y(t, per);
      x.fill([&](size_t i) { return reduce_input(ReduceOp::sum, pg.rank(), i); });
      auto expect = [&](size_t i) { return reduce_expected(ReduceOp::sum, t, n, me * per + i); };
      put(x, in);
      pg.reduce_scatter(in.view(t, per * 3), y.view())->wait();  // a private output
      check_elements(y, expect, ctx("reduce_scatter", pg, t, per));
      // In place: the output is this rank's own part of its input.
      BufferView own = in.view(t, per, me * per * element_size(t));
      pg.reduce_scatter(in.view(t, per * 3), own)->wait();
      get(x, in);
      check_elements(
          x, [&](size_t i) { return reduce_expected(ReduceOp::sum, t, n, i); },
          ctx("reduce_scatter in place", pg, t, per), me * per, per);
    }
    const std::vector<size_t> counts = {5, 70'001, 33'333};
    SharedBuffer in = pg.allocate(103'339 * 4);
    TypedBuffer x(DType::f32, 103'339), y(DType::f32, counts[me]);
    x.fill([&](size_t i) { return reduce_input(ReduceOp::sum, pg.rank(), i); });
    put(x, in);
    pg.reduce_scatter_v(in.view<float>(), y.view(), counts)->wait();
    const size_t at = me == 0 ? 0 : me == 1 ? 5 : 70'006;
    check_elements(
        y, [&](size_t i) { return reduce_expected(ReduceOp::sum, DType::f32, n, at + i); },
        ctx("reduce_scatter_v", pg, DType::f32, counts[me]));
  });
  EXPECT_EQ(shared, 7u);
}

TEST_F(ShmAllocate, AllGatherPushesIntoSharedOutputsOrPullsFromSharedInputs) {
  const int n = 3;
  const size_t per = 300'007;
  const uint64_t shared = shared_ops_in(n, [&](ProcessGroup& pg) {
    const size_t me = static_cast<size_t>(pg.rank());
    for (DType t : {DType::u8, DType::f64}) {
      const size_t es = element_size(t);
      SharedBuffer in = pg.allocate(per * es), out = pg.allocate(per * n * es);
      TypedBuffer mine(t, per), all(t, per * n);
      mine.fill([&](size_t i) { return tagged(t, pg.rank(), i); });
      auto expect = [&](size_t i) { return tagged(t, static_cast<int>(i / per), i % per); };
      put(mine, in);
      pg.all_gather(mine.view(), out.view(t))->wait();  // push: shared outputs
      get(all, out);
      check_elements(all, expect, ctx("all_gather push", pg, t, per));
      pg.all_gather(in.view(t), all.view())->wait();  // pull: shared inputs
      check_elements(all, expect, ctx("all_gather pull", pg, t, per));
      std::memset(out.data(), 0, out.size());  // in place: the input is this rank's own slot
      put(mine, out, me * per * es);
      pg.all_gather(out.view(t, per, me * per * es), out.view(t))->wait();
      get(all, out);
      check_elements(all, expect, ctx("all_gather in place", pg, t, per));
    }
    const std::vector<size_t> counts = {70'000, 0, 123'457};
    SharedBuffer out = pg.allocate(193'457 * 4);
    TypedBuffer mine(DType::i32, counts[me]), all(DType::i32, 193'457);
    mine.fill([&](size_t i) { return tagged(DType::i32, pg.rank(), i); });
    pg.all_gather_v(mine.view(), out.view<int32_t>(), counts)->wait();
    get(all, out);
    check_elements(
        all,
        [&](size_t i) {
          return i < 70'000 ? tagged(DType::i32, 0, i) : tagged(DType::i32, 2, i - 70'000);
        },
        ctx("all_gather_v", pg, DType::i32, 193'457));
  });
  EXPECT_EQ(shared, 7u);
}

TEST_F(ShmAllocate, BroadcastSplitsTheRootsBufferAcrossRanks) {
  const uint64_t shared = shared_ops_in(3, [&](ProcessGroup& pg) {
    for (size_t count : {size_t{20'000}, kLarge * 3}) {
      SharedBuffer b = pg.allocate(count * 4);
      TypedBuffer x(DType::f32, count);
      x.fill([&](size_t i) { return tagged(DType::f32, pg.rank(), i); });
      put(x, b);
      pg.broadcast(b.view<float>(), {.root = 1})->wait();
      get(x, b);
      check_elements(
          x, [&](size_t i) { return tagged(DType::f32, 1, i); },
          ctx("broadcast", pg, DType::f32, count));
    }
    // Rank 2's buffer is private: the usual path.
    SharedBuffer b = pg.allocate(kLarge * 4);
    if (pg.rank() == 2) b = SharedBuffer::local(kLarge * 4);
    TypedBuffer x(DType::f32, kLarge);
    x.fill([&](size_t i) { return tagged(DType::f32, pg.rank(), i); });
    put(x, b);
    pg.broadcast(b.view<float>(), {.root = 0})->wait();
    get(x, b);
    check_elements(
        x, [&](size_t i) { return tagged(DType::f32, 0, i); },
        ctx("broadcast mixed", pg, DType::f32, kLarge));
  });
  EXPECT_EQ(shared, 2u);
}

TEST_F(ShmAllocate, MixedBuffersFallBackAndStayCorrect) {
  const int n = 2;
  const uint64_t shared = shared_ops_in(n, [&](ProcessGroup& pg) {
    const bool allocated = pg.rank() == 0;
    SharedBuffer mem = allocated ? pg.allocate(kLarge * 4)
                                 : (pg.allocate(kLarge * 4), SharedBuffer::local(kLarge * 4));
    TypedBuffer x(DType::f32, kLarge);
    x.fill([&](size_t i) { return reduce_input(ReduceOp::sum, pg.rank(), i); });
    put(x, mem);
    pg.all_reduce(mem.view<float>())->wait();
    get(x, mem);
    check_elements(
        x, [&](size_t i) { return reduce_expected(ReduceOp::sum, DType::f32, n, i); },
        ctx("all_reduce mixed", pg, DType::f32, kLarge));
  });
  EXPECT_EQ(shared, 0u);
}

TEST_F(ShmAllocate, AllocationFreedOnOneRankMakesEveryRankFallBack) {
  const int n = 2;
  const uint64_t shared = shared_ops_in(n, [&](ProcessGroup& pg) {
    SharedBuffer a = pg.allocate(kLarge * 4), b = pg.allocate(kLarge * 4);
    if (pg.rank() == 1) a.reset();  // rank 1 can no longer reach rank 0's buffer in a
    SharedBuffer& mine = pg.rank() == 0 ? a : b;
    TypedBuffer x(DType::f32, kLarge);
    x.fill([&](size_t i) { return reduce_input(ReduceOp::sum, pg.rank(), i); });
    put(x, mine);
    pg.all_reduce(mine.view<float>())->wait();
    get(x, mine);
    check_elements(
        x, [&](size_t i) { return reduce_expected(ReduceOp::sum, DType::f32, n, i); },
        ctx("all_reduce after a free", pg, DType::f32, kLarge));
  });
  EXPECT_EQ(shared, 0u) << "the vote must send every rank to the copying path";
}

// Runs fn on n ranks of `backend`; returns each rank's error message ("" when none).
std::vector<std::string> errors_of(int n, const std::string& backend,
                                   const std::function<void(ProcessGroup&)>& fn) {
  std::vector<std::string> what(static_cast<size_t>(n));
  spawn_groups(
      n,
      [&](ProcessGroup& pg) {
        try {
          fn(pg);
        } catch (const Error& e) {
          what[static_cast<size_t>(pg.rank())] = detail::concat(error_type(e), ": ", e.what());
        }
      },
      backend);
  return what;
}

TEST_F(ShmAllocate, MismatchedSizesFailOnEveryRankNamingEachSize) {
  for (const std::string backend : {"shm", "tcp"}) {
    auto errors = errors_of(3, backend, [](ProcessGroup& pg) {
      try {
        pg.allocate(pg.rank() == 2 ? 8192 : 4096);
      } catch (const MismatchError&) {
        SharedBuffer next = pg.allocate(4096);  // the group is still usable
        EXPECT_TRUE(next);
        throw;
      }
    });
    for (const std::string& e : errors) {
      EXPECT_TRUE(contains(e, "MismatchError: allocate #0 of group")) << e;
      EXPECT_TRUE(contains(e, "ranks 0-1: 4096 bytes, rank 2: 8192 bytes")) << e;
      EXPECT_TRUE(contains(e, "the same size")) << e;
    }
  }
}

TEST_F(ShmAllocate, RankThatNeverAllocatesIsNamedWithinTheTimeout) {
  const auto start = Clock::now();
  auto errors = errors_of(2, "shm", [](ProcessGroup& pg) {
    if (pg.rank() == 0) pg.allocate(4096, std::chrono::milliseconds(300));
  });
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  EXPECT_TRUE(contains(errors[0], "TimeoutError: allocate #0")) << errors[0];
  EXPECT_TRUE(contains(errors[0], "ranks [1] did not call allocate")) << errors[0];
  EXPECT_EQ(errors[1], "");
}

TEST_F(ShmAllocate, ZeroBytesIsAnErrorOnEveryRank) {
  for (const std::string& e : errors_of(2, "shm", [](ProcessGroup& pg) { pg.allocate(0); }))
    EXPECT_TRUE(contains(e, "InvalidArgument: allocate #0")) << e;
}

TEST_F(ShmAllocate, MemoryOutlivesItsGroupAndViewsAreChecked) {
  std::vector<SharedBuffer> kept(2);
  spawn_groups(
      2, [&](ProcessGroup& pg) { kept[static_cast<size_t>(pg.rank())] = pg.allocate(1000); },
      "shm");
  for (auto& b : kept) {
    b.span<uint8_t>()[999] = 7;  // still mapped after the group is gone
    EXPECT_EQ(b.span<uint8_t>()[999], 7);
    expect_error_naming<InvalidArgument>(
        [&] { b.view(DType::f32, 251); },
        {"SharedBuffer::view: 251 f32 elements (1004 bytes) at offset 0 do not fit the "
         "buffer's 1000 bytes"});
    expect_error_naming<InvalidArgument>(
        [&] { b.view(DType::u8, 10, 995); },
        {"SharedBuffer::view: 10 u8 elements (10 bytes) at offset 995 do not fit the buffer's "
         "1000 bytes"});
    EXPECT_EQ(b.view(DType::f32).count, 250u);
  }
}

TEST(TcpAllocate, ReturnsOrdinaryMemoryThatCollectivesUse) {
  spawn_groups(
      2,
      [](ProcessGroup& pg) {
        SharedBuffer b = pg.allocate(kLarge * 4);
        EXPECT_FALSE(b.shared());
        EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 4096, 0u);
        for (float v : b.span<float>()) ASSERT_EQ(v, 0.0f);
        for (float& v : b.span<float>()) v = static_cast<float>(pg.rank() + 1);
        pg.all_reduce(b.view<float>())->wait();
        for (float v : b.span<float>()) ASSERT_EQ(v, 3.0f);
      },
      "tcp");
}

// ---- processes: shared paths across address spaces, and a rank killed mid-op ----

TEST(ShmAllocateChild, DISABLED_Collectives) {
  auto pg = init_process_group({.backend = "shm"});
  const int n = pg->size();
  const uint64_t before = shm::shared_path_ops();
  SharedBuffer a = pg->allocate(kLarge * 4), b = pg->allocate(kLarge * 4 * n);
  TypedBuffer x(DType::f32, kLarge), all(DType::f32, kLarge * n);
  x.fill([&](size_t i) { return reduce_input(ReduceOp::sum, pg->rank(), i); });
  put(x, a);
  pg->all_reduce(a.view<float>())->wait();
  get(x, a);
  check_elements(
      x, [&](size_t i) { return reduce_expected(ReduceOp::sum, DType::f32, n, i); },
      ctx("all_reduce", *pg, DType::f32, kLarge));
  pg->all_gather(a.view<float>(), b.view<float>())->wait();
  get(all, b);
  check_elements(
      all, [&](size_t i) { return reduce_expected(ReduceOp::sum, DType::f32, n, i % kLarge); },
      ctx("all_gather", *pg, DType::f32, kLarge));
  say(detail::concat("SHARED OK rank ", pg->rank(), " shared paths ",
                     shm::shared_path_ops() - before));
}

TEST(ShmAllocateChild, DISABLED_SharedLoop) {
  auto pg = init_process_group({.backend = "shm"});
  SharedBuffer a = pg->allocate(64 << 20);
  try {
    for (int i = 0; i < 1000; ++i) {
      pg->all_reduce(a.view<float>())->wait();
      if (i == 0) pg->config().store->set("test/ready/" + std::to_string(pg->rank()), "1");
    }
    say("LOOP FINISHED");
  } catch (const std::exception& e) {
    report(e);
  }
}

TEST(ShmAllocateProcesses, SharedCollectivesAcrossTwoProcesses) {
  Job job("Collectives", 2, "ShmAllocateChild");
  for (int r = 0; r < 2; ++r) {
    auto result = job.wait(r);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    EXPECT_TRUE(contains(result.output, detail::concat("SHARED OK rank ", r, " shared paths 2")))
        << result.output;
  }
  expect_no_segments(job);
}

TEST(ShmAllocateProcesses, RankKilledInSharedAllReducesIsNamedAndLeavesNoSegment) {
  kill_and_check("SharedLoop", 3, 1, "ShmAllocateChild");
}

}  // namespace
}  // namespace lockstep::testing
