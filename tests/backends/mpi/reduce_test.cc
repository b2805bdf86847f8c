// all_reduce, reduce and reduce_scatter(_v) over the mpi backend: every dtype and reduce op
// (f16/bf16 through the user-defined MPI_Ops, avg as a sum and a division), in place and out of
// place, small and large counts; every result against its closed form.
#include <gtest/gtest.h>

#include <numeric>

#include "group/closed_forms.h"
#include "lockstep/core/error.h"
#include "world.h"

namespace lockstep::testing {
namespace {

std::string ctx(const char* op, DType t, ReduceOp r, size_t count) {
  return detail::concat(op, " ", dtype_name(t), " ", reduce_op_name(r), " ", where(world()),
                        " count ", count);
}

// One all_reduce of count elements, checked; out of place also checks the input is untouched.
void all_reduce_checked(DType t, ReduceOp op, size_t count, bool in_place) {
  ProcessGroup& pg = world();
  auto input = [&](size_t i) { return reduce_input(op, pg.rank(), i); };
  TypedBuffer a(t, count), b(t, count);
  a.fill(input);
  if (in_place)
    pg.all_reduce(a.view(), {.op = op})->wait();
  else
    pg.all_reduce(a.view(), b.view(), {.op = op})->wait();
  if (!in_place) check_elements(a, input, ctx("all_reduce input", t, op, count));
  check_elements(
      in_place ? a : b, [&](size_t i) { return reduce_expected(op, t, pg.size(), i); },
      ctx("all_reduce", t, op, count));
}

TEST(MpiReduce, AllReduceEveryDtypeOpAndCount) {
  for (DType t : kAllDTypes)
    for (ReduceOp op : kAllReduceOps)
      if (reduce_op_supports(op, t))
        for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}})
          all_reduce_checked(t, op, count, count % 2 == 1);
}

TEST(MpiReduce, AllReduceLarge) {
  constexpr size_t kLarge = 1'000'003;
  for (DType t : kAllDTypes) {
    if (t == DType::boolean) continue;
    all_reduce_checked(t, ReduceOp::sum, kLarge, false);
    all_reduce_checked(t, is_integer(t) ? ReduceOp::bor : ReduceOp::min, kLarge, true);
  }
  all_reduce_checked(DType::f16, ReduceOp::avg, kLarge, true);
  all_reduce_checked(DType::i32, ReduceOp::avg, kLarge, false);
}

TEST(MpiReduce, ReduceToEveryRoot) {
  ProcessGroup& pg = world();
  for (int root = 0; root < pg.size(); ++root)
    for (DType t : {DType::f64, DType::i32, DType::f16, DType::i8})
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::min, ReduceOp::avg})
        for (size_t count : {size_t{0}, size_t{5}, size_t{4099}}) {
          auto input = [&](size_t i) { return reduce_input(op, pg.rank(), i); };
          const std::string c = ctx("reduce", t, op, count) + " root " + std::to_string(root);
          TypedBuffer in(t, count), out(t, count);
          in.fill(input);
          out.fill([](size_t) { return 9; });
          pg.reduce(in.view(), out.view(), {.root = root, .op = op})->wait();
          check_elements(in, input, c + " input");
          if (pg.rank() == root)
            check_elements(
                out, [&](size_t i) { return reduce_expected(op, t, pg.size(), i); }, c);
          else
            check_elements(
                out, [](size_t) { return 9; }, c + " (non-root output untouched)");
          // In place on the root: input and output are one buffer.
          TypedBuffer io(t, count);
          io.fill(input);
          pg.reduce(io.view(), io.view(), {.root = root, .op = op})->wait();
          if (pg.rank() == root)
            check_elements(
                io, [&](size_t i) { return reduce_expected(op, t, pg.size(), i); },
                c + " in place");
        }
}

TEST(MpiReduce, ReduceScatterUniformAndV) {
  ProcessGroup& pg = world();
  const int n = pg.size();
  for (DType t : {DType::f32, DType::bf16, DType::i64, DType::u8})
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::avg})
      for (size_t slot : {size_t{0}, size_t{3}, size_t{2000}}) {
        TypedBuffer in(t, slot * n), out(t, slot);
        in.fill([&](size_t i) { return reduce_input(op, pg.rank(), i); });
        pg.reduce_scatter(in.view(), out.view(), {.op = op})->wait();
        const size_t first = slot * static_cast<size_t>(pg.rank());
        check_elements(
            out, [&](size_t i) { return reduce_expected(op, t, n, first + i); },
            ctx("reduce_scatter", t, op, slot));
      }
  // Uneven slots with an empty one: rank r gets (r * 7) % 4 * 1000 elements, rank 0 none.
  std::vector<size_t> counts(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    counts[static_cast<size_t>(r)] = static_cast<size_t>(r * 7 % 4) * 1000;
  const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
  const size_t first = std::accumulate(counts.begin(), counts.begin() + pg.rank(), size_t{0});
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::bxor, ReduceOp::prod}) {
    TypedBuffer in(DType::i32, total), out(DType::i32, counts[static_cast<size_t>(pg.rank())]);
    in.fill([&](size_t i) { return reduce_input(op, pg.rank(), i); });
    pg.reduce_scatter_v(in.view(), out.view(), counts, {.op = op})->wait();
    check_elements(
        out, [&](size_t i) { return reduce_expected(op, DType::i32, n, first + i); },
        ctx("reduce_scatter_v", DType::i32, op, total));
  }
}

// Small reductions travel in the agreement blocks and are combined on every rank (piggyback.h):
// values whose sums round differently in different orders must still give every rank the same
// bits, and the sum of the ranks' values in rank order, on both sides of the piggyback limit.
TEST(MpiReduce, EveryRankGetsTheSameBitsInRankOrder) {
  ProcessGroup& pg = world();
  const int n = pg.size();
  auto value = [](int rank, size_t i) {
    return static_cast<float>(1.0 + 1e-7 * static_cast<double>(i % 97)) *
           (rank % 2 == 0 ? 3.0e7f : 0.3f) / static_cast<float>(rank + 1);
  };
  for (size_t count : {size_t{1000}, size_t{1024}, size_t{1025}, size_t{100'000}}) {
    TypedBuffer a(DType::f32, count);
    a.fill([&](size_t i) { return value(pg.rank(), i); });
    pg.all_reduce(a.view())->wait();
    TypedBuffer all(DType::f32, count * static_cast<size_t>(n));
    pg.all_gather(a.view(), all.view())->wait();
    for (size_t i = 0; i < count; ++i) {
      for (int r = 1; r < n; ++r)
        ASSERT_EQ(all.get(i), all.get(static_cast<size_t>(r) * count + i))
            << "rank " << r << " differs from rank 0 at element " << i << " of " << count;
      if (count <= 1024) {  // in the blocks: rank order, as a left fold in f32
        float expected = value(0, i);
        for (int r = 1; r < n; ++r) expected += value(r, i);
        ASSERT_EQ(a.get(i), expected) << "element " << i << " of " << count;
      }
    }
  }
}

// The algorithm choices of the other backends are accepted (MPI picks its own).
TEST(MpiReduce, AlgorithmOptionsAccepted) {
  ProcessGroup& pg = world();
  for (Algorithm a : {Algorithm::ring, Algorithm::recursive_doubling, Algorithm::automatic}) {
    TypedBuffer buf(DType::f32, 100'003);
    buf.fill([&](size_t i) { return reduce_input(ReduceOp::sum, pg.rank(), i); });
    pg.all_reduce(buf.view(), {.algorithm = a})->wait();
    check_elements(
        buf, [&](size_t i) { return reduce_expected(ReduceOp::sum, DType::f32, pg.size(), i); },
        detail::concat("all_reduce ", algorithm_name(a)));
  }
}

}  // namespace
}  // namespace lockstep::testing
