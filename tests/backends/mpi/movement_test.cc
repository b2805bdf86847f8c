// Data movement over the mpi backend: broadcast, all_gather(_v), gather(_v), scatter(_v),
// all_to_all(_v) (each in the API's in-place forms too), barrier, send/recv with tags (a ring of
// large messages whose recvs are posted after the sends), recv_any and batch_isend_irecv through
// the p2p engine over MPI, and subgroups as MPI communicators. Every element is checked against
// tagged(rank, index).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "comm/group_config.h"
#include "group/closed_forms.h"
#include "lockstep/core/error.h"
#include "world.h"

namespace lockstep::testing {
namespace {

constexpr size_t kCounts[] = {0, 1, 7, 1000};

std::string ctx(const char* op, DType t, size_t count) {
  return detail::concat(op, " ", dtype_name(t), " ", where(world()), " count ", count);
}

size_t prefix(const std::vector<size_t>& counts, int r) {
  return std::accumulate(counts.begin(), counts.begin() + r, size_t{0});
}

// Rank r holds (r * 3 + 1) % 5 * scale elements: uneven, and empty for some ranks.
std::vector<size_t> uneven(int n, size_t scale) {
  std::vector<size_t> c(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    c[static_cast<size_t>(r)] = static_cast<size_t>((r * 3 + 1) % 5) * scale;
  return c;
}

// Checks that out holds, for each rank r, tagged(source(r), i) in slot r of counts.
template <class Source>
void check_slots(const TypedBuffer& out, const std::vector<size_t>& counts, Source source,
                 const std::string& c) {
  for (int r = 0; r < static_cast<int>(counts.size()); ++r) {
    const size_t first = prefix(counts, r);
    check_elements(
        out, [&](size_t i) { return tagged(out.dtype(), source(r), i - first); }, c, first,
        counts[static_cast<size_t>(r)]);
  }
}

TEST(MpiMovement, BroadcastEveryDtypeAndRoot) {
  ProcessGroup& pg = world();
  for (DType t : kAllDTypes)
    for (int root = 0; root < pg.size(); ++root)
      for (size_t count : {size_t{0}, size_t{3}, size_t{1000}, size_t{300'001}}) {
        TypedBuffer buf(t, count);
        buf.fill([&](size_t i) { return tagged(t, pg.rank(), i); });
        pg.broadcast(buf.view(), {.root = root})->wait();
        check_elements(
            buf, [&](size_t i) { return tagged(t, root, i); }, ctx("broadcast", t, count));
      }
}

TEST(MpiMovement, AllGatherUniformInPlaceAndV) {
  ProcessGroup& pg = world();
  const int n = pg.size();
  for (DType t : kAllDTypes)
    for (size_t count : kCounts) {
      const std::vector<size_t> slots(static_cast<size_t>(n), count);
      TypedBuffer in(t, count), out(t, count * n);
      in.fill([&](size_t i) { return tagged(t, pg.rank(), i); });
      pg.all_gather(in.view(), out.view())->wait();
      check_slots(
          out, slots, [](int r) { return r; }, ctx("all_gather", t, count));
      TypedBuffer io(t, count * n);
      io.fill([&](size_t i) {
        return i / count == static_cast<size_t>(pg.rank()) ? tagged(t, pg.rank(), i % count) : 0;
      });
      pg.all_gather(io.slice(count * static_cast<size_t>(pg.rank()), count), io.view())->wait();
      check_slots(
          io, slots, [](int r) { return r; }, ctx("all_gather in place", t, count));
    }
  for (size_t scale : {size_t{1}, size_t{20'011}}) {
    auto counts = uneven(n, scale);
    TypedBuffer in(DType::f64, counts[static_cast<size_t>(pg.rank())]),
        out(DType::f64, prefix(counts, n));
    in.fill([&](size_t i) { return tagged(DType::f64, pg.rank(), i); });
    pg.all_gather_v(in.view(), out.view(), counts)->wait();
    check_slots(
        out, counts, [](int r) { return r; }, ctx("all_gather_v", DType::f64, scale));
  }
}

TEST(MpiMovement, GatherAndScatterEveryRoot) {
  ProcessGroup& pg = world();
  const int n = pg.size();
  const size_t me = static_cast<size_t>(pg.rank());
  for (DType t : {DType::f16, DType::i32, DType::boolean, DType::f64})
    for (int root = 0; root < n; ++root)
      for (size_t count : kCounts) {
        const std::vector<size_t> slots(static_cast<size_t>(n), count);
        TypedBuffer in(t, count), out(t, count * n);
        in.fill([&](size_t i) { return tagged(t, pg.rank(), i); });
        pg.gather(in.view(), out.view(), {.root = root})->wait();
        if (pg.rank() == root)
          check_slots(
              out, slots, [](int r) { return r; }, ctx("gather", t, count));
        // Scatter: slot r of the root's buffer holds tagged(r + 10, i); rank r gets it.
        TypedBuffer all(t, count * n), mine(t, count);
        all.fill([&](size_t i) {
          return tagged(t, static_cast<int>(i / std::max<size_t>(count, 1)) + 10,
                        i % std::max<size_t>(count, 1));
        });
        pg.scatter(all.view(), mine.view(), {.root = root})->wait();
        check_elements(
            mine, [&](size_t i) { return tagged(t, pg.rank() + 10, i); }, ctx("scatter", t, count));
        // In place on the root: its input already sits in its slot of the output, and its
        // scatter output is its own slot of the input.
        if (pg.rank() == root)
          out.fill([&](size_t i) { return i / count == me ? tagged(t, pg.rank(), i % count) : 0; });
        pg.gather(pg.rank() == root ? out.slice(count * me, count) : in.view(), out.view(),
                  {.root = root})
            ->wait();
        if (pg.rank() == root)
          check_slots(
              out, slots, [](int r) { return r; }, ctx("gather in place", t, count));
        pg.scatter(all.view(), pg.rank() == root ? all.slice(count * me, count) : mine.view(),
                   {.root = root})
            ->wait();
        const size_t first = pg.rank() == root ? count * me : 0;
        check_elements(
            pg.rank() == root ? all : mine,
            [&](size_t i) { return tagged(t, pg.rank() + 10, i - first); },
            ctx("scatter in place", t, count), first, count);
      }
  const int root = n - 1;
  auto counts = uneven(n, 3001);
  TypedBuffer in(DType::u8, counts[me]), out(DType::u8, prefix(counts, n));
  in.fill([&](size_t i) { return tagged(DType::u8, pg.rank(), i); });
  pg.gather_v(in.view(), out.view(), counts, {.root = root})->wait();
  if (pg.rank() == root)
    check_slots(
        out, counts, [](int r) { return r; }, ctx("gather_v", DType::u8, out.count()));
  TypedBuffer src(DType::u8, prefix(counts, n)), dst(DType::u8, counts[me]);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < counts[static_cast<size_t>(r)]; ++i)
      src.set(prefix(counts, r) + i, tagged(DType::u8, r + 3, i));
  pg.scatter_v(src.view(), dst.view(), counts, {.root = root})->wait();
  check_elements(
      dst, [&](size_t i) { return tagged(DType::u8, pg.rank() + 3, i); },
      ctx("scatter_v", DType::u8, dst.count()));
}

TEST(MpiMovement, AllToAllUniformAndV) {
  ProcessGroup& pg = world();
  const int n = pg.size();
  const size_t me = static_cast<size_t>(pg.rank());
  for (DType t : kAllDTypes)
    for (size_t k : kCounts) {
      // Slot j of rank i's input is tagged(i * n + j, e); it lands in slot i of rank j's output.
      TypedBuffer in(t, k * n), out(t, k * n);
      in.fill([&](size_t i) { return tagged(t, pg.rank() * n + static_cast<int>(i / k), i % k); });
      pg.all_to_all(in.view(), out.view())->wait();
      check_slots(
          out, std::vector<size_t>(static_cast<size_t>(n), k),
          [&](int i) { return i * n + pg.rank(); }, ctx("all_to_all", t, k));
    }
  // Rank i sends (2i + j) % 3 * 5000 + j elements to rank j.
  auto amount = [](size_t i, size_t j) { return (2 * i + j) % 3 * 5000 + j; };
  std::vector<size_t> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  for (size_t j = 0; j < static_cast<size_t>(n); ++j) {
    send[j] = amount(me, j);
    recv[j] = amount(j, me);
  }
  TypedBuffer in(DType::bf16, prefix(send, n)), out(DType::bf16, prefix(recv, n));
  for (int j = 0; j < n; ++j)
    for (size_t e = 0; e < send[static_cast<size_t>(j)]; ++e)
      in.set(prefix(send, j) + e, tagged(DType::bf16, pg.rank() * n + j, e));
  pg.all_to_all_v(in.view(), send, out.view(), recv)->wait();
  check_slots(
      out, recv, [&](int i) { return i * n + pg.rank(); },
      ctx("all_to_all_v", DType::bf16, out.count()));
}

TEST(MpiMovement, SendRecvRingWithTags) {
  ProcessGroup& pg = world();
  const int n = pg.size();
  const int next = (pg.rank() + 1) % n, prev = (pg.rank() + n - 1) % n;
  // Every rank posts its recvs after its sends, then waits: sends and recvs progress
  // independently (the p2p engine over MPI), tags select, and large messages stream.
  for (size_t count : {size_t{0}, size_t{9}, size_t{2'000'003}}) {
    TypedBuffer out(DType::i64, count), in5(DType::i64, count), in6(DType::i64, count);
    out.fill([&](size_t i) { return tagged(DType::i64, pg.rank(), i); });
    auto s5 = pg.isend(out.view(), next, {.tag = 5});
    auto s6 = pg.isend(out.view(), next, {.tag = 6});
    auto r6 = pg.irecv(in6.view(), prev, {.tag = 6});  // the later tag first
    auto r5 = pg.irecv(in5.view(), prev, {.tag = 5});
    for (auto* w : {&r6, &r5, &s5, &s6}) (*w)->wait();
    check_elements(
        in5, [&](size_t i) { return tagged(DType::i64, prev, i); },
        ctx("recv tag 5", DType::i64, count));
    check_elements(
        in6, [&](size_t i) { return tagged(DType::i64, prev, i); },
        ctx("recv tag 6", DType::i64, count));
  }
  pg.barrier()->wait();
}

TEST(MpiMovement, RecvAnyAndBatchIsendIrecv) {
  ProcessGroup& pg = world();
  const int n = pg.size();
  std::vector<int32_t> mine(100, pg.rank());
  if (pg.rank() == 0) {
    std::vector<int> seen;
    for (int i = 1; i < n; ++i) {
      std::vector<int32_t> got(100, -1);
      auto w = pg.recv_any(view(got), {.tag = 3});
      w->wait();
      EXPECT_EQ(got[99], w->source_rank());
      seen.push_back(w->source_rank());
    }
    std::sort(seen.begin(), seen.end());
    std::vector<int> want(static_cast<size_t>(n - 1));
    std::iota(want.begin(), want.end(), 1);
    EXPECT_EQ(seen, want);
  } else {
    pg.send(view(mine), 0, {.tag = 3})->wait();
  }
  const int next = (pg.rank() + 1) % n, prev = (pg.rank() + n - 1) % n;
  std::vector<float> out(300'000, static_cast<float>(pg.rank())), in(300'000, -1.0f);
  std::vector<P2POp> ops{P2POp::recv(view(in), prev), P2POp::send(view(out), next)};
  pg.batch_isend_irecv(ops)->wait();
  EXPECT_EQ(in.front(), static_cast<float>(prev));
  EXPECT_EQ(in.back(), static_cast<float>(prev));
  pg.barrier()->wait();
}

TEST(MpiMovement, BarrierAndSubgroups) {
  ProcessGroup& pg = world();
  const int n = pg.size();
  for (int i = 0; i < 50; ++i) pg.barrier()->wait();
  std::vector<int> low, high;  // the lower and upper half of the ranks
  for (int r = 0; r < n; ++r) (r < (n + 1) / 2 ? low : high).push_back(r);
  auto low_group = pg.new_group(low);
  auto high_group = pg.new_group(high);
  const bool in_low = pg.rank() < (n + 1) / 2;
  auto& mine = in_low ? low_group : high_group;
  ASSERT_TRUE(mine);
  EXPECT_FALSE(in_low ? high_group : low_group) << "non-members get no group";
  EXPECT_EQ(mine->backend_name(), "mpi");
  const auto& members = in_low ? low : high;
  EXPECT_EQ(mine->config().global_ranks, members);
  TypedBuffer buf(DType::i64, 100'000);
  buf.fill([&](size_t i) { return pg.rank() * 1000 + static_cast<double>(i % 1000); });
  // The subgroup and the world group run at once, from different progress threads.
  auto sub = mine->all_reduce(buf.view());
  pg.barrier()->wait();
  sub->wait();
  const double rank_sum = std::accumulate(members.begin(), members.end(), 0.0);
  check_elements(
      buf,
      [&](size_t i) { return rank_sum * 1000 + members.size() * static_cast<double>(i % 1000); },
      ctx("subgroup all_reduce", DType::i64, 100'000));
  // A subgroup of a subgroup: its first member alone.
  auto single = mine->new_group({0});
  if (mine->rank() == 0) {
    ASSERT_TRUE(single);
    EXPECT_EQ(single->size(), 1);
    TypedBuffer one(DType::f32, 3);
    one.fill([](size_t i) { return static_cast<double>(i); });
    single->all_reduce(one.view())->wait();
    check_elements(
        one, [](size_t i) { return static_cast<double>(i); }, "single-rank all_reduce");
  }
  pg.barrier()->wait();
}

}  // namespace
}  // namespace lockstep::testing
