// Data-movement collectives (broadcast, gathers, scatters, all_to_all), barrier, send/recv and
// subgroups, over every dtype, world sizes 1-5 and 8, ranks as threads over a HashStore.
#include <gtest/gtest.h>

#include <numeric>

#include "group/backend_registry.h"
#include "group/closed_forms.h"
#include "lockstep/core/error.h"
#include "support/messages.h"
#include "support/spawn.h"

namespace lockstep::testing {
namespace {

constexpr size_t kCounts[] = {0, 1, 7, 1000};

std::string ctx(const char* op, DType t, const ProcessGroup& pg, size_t count) {
  return detail::concat(op, " ", dtype_name(t), " world ", pg.size(), " rank ", pg.rank(),
                        " count ", count);
}

// Uneven per-rank counts with zeros: rank r contributes (r * 5 + 3) % 7 elements.
std::vector<size_t> uneven_counts(int n, size_t scale) {
  std::vector<size_t> c(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    c[static_cast<size_t>(r)] = static_cast<size_t>((r * 5 + 3) % 7) * scale;
  return c;
}

size_t offset_of(const std::vector<size_t>& counts, int r) {
  return std::accumulate(counts.begin(), counts.begin() + r, size_t{0});
}

class MovementCollectives : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  // Runs fn on every rank of a fresh group of the parameterised backend and world size.
  void run(const std::function<void(ProcessGroup&)>& fn) {
    spawn_groups(std::get<1>(GetParam()), fn, std::get<0>(GetParam()));
  }
};

TEST_P(MovementCollectives, BroadcastFromEveryRoot) {
  run([](ProcessGroup& pg) {
    for (DType t : kAllDTypes)
      for (int root = 0; root < pg.size(); ++root)
        for (size_t count : kCounts) {
          TypedBuffer buf(t, count);
          buf.fill([&](size_t i) { return tagged(t, pg.rank(), i); });
          pg.broadcast(buf.view(), {.root = root})->wait();
          check_elements(
              buf, [&](size_t i) { return tagged(t, root, i); }, ctx("broadcast", t, pg, count));
        }
    for (Algorithm a : {Algorithm::tree, Algorithm::chain}) {
      TypedBuffer big(DType::f32, 1'000'003);
      big.fill([&](size_t i) { return tagged(DType::f32, pg.rank(), i); });
      pg.broadcast(big.view(), {.root = pg.size() - 1, .algorithm = a})->wait();
      check_elements(
          big, [&](size_t i) { return tagged(DType::f32, pg.size() - 1, i); },
          ctx("broadcast large", DType::f32, pg, big.count()));
    }
  });
}

TEST_P(MovementCollectives, AllGatherAndV) {
  run([](ProcessGroup& pg) {
    const int n = pg.size();
    for (DType t : kAllDTypes)
      for (size_t count : kCounts) {
        TypedBuffer in(t, count), out(t, count * n);
        in.fill([&](size_t i) { return tagged(t, pg.rank(), i); });
        pg.all_gather(in.view(), out.view())->wait();
        check_elements(
            out, [&](size_t i) { return tagged(t, static_cast<int>(i / count), i % count); },
            ctx("all_gather", t, pg, count));
        // In place: this rank's input already sits in its slot of the output.
        TypedBuffer io(t, count * n);
        io.fill([&](size_t i) {
          return i / count == static_cast<size_t>(pg.rank()) ? tagged(t, pg.rank(), i % count) : 0;
        });
        pg.all_gather(io.slice(count * static_cast<size_t>(pg.rank()), count), io.view())->wait();
        check_elements(
            io, [&](size_t i) { return tagged(t, static_cast<int>(i / count), i % count); },
            ctx("all_gather in place", t, pg, count));
      }
    for (size_t scale : {size_t{1}, size_t{30'001}}) {
      auto counts = uneven_counts(n, scale);
      size_t total = offset_of(counts, n);
      TypedBuffer in(DType::i32, counts[static_cast<size_t>(pg.rank())]), out(DType::i32, total);
      in.fill([&](size_t i) { return tagged(DType::i32, pg.rank(), i); });
      pg.all_gather_v(in.view(), out.view(), counts)->wait();
      for (int r = 0; r < n; ++r)
        check_elements(
            out, [&](size_t i) { return tagged(DType::i32, r, i - offset_of(counts, r)); },
            ctx("all_gather_v", DType::i32, pg, total), offset_of(counts, r),
            counts[static_cast<size_t>(r)]);
    }
  });
}

TEST_P(MovementCollectives, GatherAndScatterEveryRoot) {
  run([](ProcessGroup& pg) {
    const int n = pg.size();
    for (DType t : {DType::f32, DType::bf16, DType::i64, DType::boolean})
      for (int root = 0; root < n; ++root)
        for (size_t count : kCounts) {
          TypedBuffer in(t, count), out(t, count * n);
          in.fill([&](size_t i) { return tagged(t, pg.rank(), i); });
          pg.gather(in.view(), out.view(), {.root = root})->wait();
          if (pg.rank() == root)
            check_elements(
                out, [&](size_t i) { return tagged(t, static_cast<int>(i / count), i % count); },
                ctx("gather", t, pg, count));
          TypedBuffer all(t, count * n), mine(t, count);
          all.fill([&](size_t i) { return tagged(t, static_cast<int>(i / count) + pg.rank(), i); });
          pg.scatter(all.view(), mine.view(), {.root = root})->wait();
          check_elements(
              mine, [&](size_t i) { return tagged(t, pg.rank() + root, pg.rank() * count + i); },
              ctx("scatter", t, pg, count));
        }
    auto counts = uneven_counts(n, 1001);
    size_t total = offset_of(counts, n);
    size_t mine_count = counts[static_cast<size_t>(pg.rank())];
    int root = n / 2;
    TypedBuffer in(DType::f64, mine_count), out(DType::f64, total);
    in.fill([&](size_t i) { return tagged(DType::f64, pg.rank(), i); });
    pg.gather_v(in.view(), out.view(), counts, {.root = root})->wait();
    if (pg.rank() == root)
      for (int r = 0; r < n; ++r)
        check_elements(
            out, [&](size_t i) { return tagged(DType::f64, r, i - offset_of(counts, r)); },
            ctx("gather_v", DType::f64, pg, total), offset_of(counts, r),
            counts[static_cast<size_t>(r)]);
    TypedBuffer src(DType::f64, total), dst(DType::f64, mine_count);
    src.fill([&](size_t i) { return tagged(DType::f64, 7, i); });
    pg.scatter_v(src.view(), dst.view(), counts, {.root = root})->wait();
    size_t base = offset_of(counts, pg.rank());
    check_elements(
        dst, [&](size_t i) { return tagged(DType::f64, 7, base + i); },
        ctx("scatter_v", DType::f64, pg, mine_count));
  });
}

TEST_P(MovementCollectives, AllToAllAndV) {
  run([](ProcessGroup& pg) {
    const int n = pg.size();
    const size_t me = static_cast<size_t>(pg.rank());
    for (DType t : kAllDTypes)
      for (size_t k : kCounts) {
        // Slot j of rank i's input holds tagged(i * n + j, element).
        TypedBuffer in(t, k * n), out(t, k * n);
        in.fill(
            [&](size_t i) { return tagged(t, pg.rank() * n + static_cast<int>(i / k), i % k); });
        pg.all_to_all(in.view(), out.view())->wait();
        check_elements(
            out,
            [&](size_t i) { return tagged(t, static_cast<int>(i / k) * n + pg.rank(), i % k); },
            ctx("all_to_all", t, pg, k));
      }
    // Rank i sends (i + j) % 4 * 1000 + j elements to rank j.
    auto amount = [](size_t i, size_t j) { return (i + j) % 4 * 1000 + j; };
    std::vector<size_t> send(n), recv(n);
    for (size_t j = 0; j < static_cast<size_t>(n); ++j) {
      send[j] = amount(me, j);
      recv[j] = amount(j, me);
    }
    TypedBuffer in(DType::u8, offset_of(send, n)), out(DType::u8, offset_of(recv, n));
    for (int j = 0; j < n; ++j)
      for (size_t e = 0; e < send[static_cast<size_t>(j)]; ++e)
        in.set(offset_of(send, j) + e, tagged(DType::u8, pg.rank() * n + j, e));
    pg.all_to_all_v(in.view(), send, out.view(), recv)->wait();
    for (int i = 0; i < n; ++i)
      check_elements(
          out,
          [&](size_t e) { return tagged(DType::u8, i * n + pg.rank(), e - offset_of(recv, i)); },
          ctx("all_to_all_v", DType::u8, pg, out.count()), offset_of(recv, i),
          recv[static_cast<size_t>(i)]);
  });
}

TEST_P(MovementCollectives, SendRecvRingWithTags) {
  run([](ProcessGroup& pg) {
    const int n = pg.size();
    if (n == 1) {
      // A ring of one: the next and the previous rank are this rank itself, which send and recv
      // refuse before any communication, naming the rank, and the group stays usable.
      TypedBuffer buf(DType::f32, 5);
      expect_error_naming<InvalidArgument>([&] { (void)pg.send(buf.view(), 0, {.tag = 7}); },
                                           {"send: rank 0 cannot send to itself"});
      expect_error_naming<InvalidArgument>([&] { (void)pg.recv(buf.view(), 0, {.tag = 7}); },
                                           {"recv: rank 0 cannot receive from itself"});
      buf.fill([](size_t i) { return static_cast<double>(i); });
      pg.broadcast(buf.view())->wait();
      check_elements(
          buf, [](size_t i) { return static_cast<double>(i); },
          ctx("broadcast after the refused send", DType::f32, pg, 5));
      return;
    }
    int next = (pg.rank() + 1) % n, prev = (pg.rank() + n - 1) % n;
    for (size_t count : {size_t{0}, size_t{5}, size_t{1'000'003}}) {
      TypedBuffer out(DType::f32, count), in(DType::f32, count);
      out.fill([&](size_t i) { return tagged(DType::f32, pg.rank(), i); });
      auto s = pg.send(out.view(), next, {.tag = 7});
      auto r = pg.recv(in.view(), prev, {.tag = 7});
      s->wait();
      r->wait();
      check_elements(
          in, [&](size_t i) { return tagged(DType::f32, prev, i); },
          ctx("recv", DType::f32, pg, count));
    }
  });
}

TEST_P(MovementCollectives, BarrierAndSubgroups) {
  run([](ProcessGroup& pg) {
    const int n = pg.size();
    for (int i = 0; i < 20; ++i) pg.barrier()->wait();
    // Even ranks and odd ranks each form a subgroup; all_reduce inside each.
    std::vector<int> evens, odds;
    for (int r = 0; r < n; ++r) (r % 2 ? odds : evens).push_back(r);
    auto even_group = pg.new_group(evens);
    auto odd_group = odds.empty() ? nullptr : pg.new_group(odds);
    auto& mine = pg.rank() % 2 ? odd_group : even_group;
    ASSERT_TRUE(mine);
    EXPECT_FALSE(pg.rank() % 2 ? even_group : odd_group) << "non-members get no group";
    const auto& members = pg.rank() % 2 ? odds : evens;
    EXPECT_EQ(mine->size(), static_cast<int>(members.size()));
    EXPECT_EQ(mine->config().global_ranks, members);
    TypedBuffer buf(DType::i64, 100);
    buf.fill([&](size_t i) { return pg.rank() * 1000 + static_cast<double>(i); });
    mine->all_reduce(buf.view())->wait();
    double rank_sum = std::accumulate(members.begin(), members.end(), 0.0);
    check_elements(
        buf, [&](size_t i) { return rank_sum * 1000 + members.size() * static_cast<double>(i); },
        ctx("subgroup all_reduce", DType::i64, pg, 100));
    pg.barrier()->wait();
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, MovementCollectives,
                         ::testing::Combine(::testing::ValuesIn(backend_names()),
                                            ::testing::Values(1, 2, 3, 4, 5, 8)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_world" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace lockstep::testing
