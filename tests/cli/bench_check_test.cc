// The correctness check of `lockstep bench` (src/cli/bench_check.h), called directly. Results that
// a real backend computes check ok; results that differ from them anywhere (one perturbed element,
// another reduce op or root, an output the op never wrote, one rank's contribution missing) check
// WRONG, and a row with a wrong element prints WRONG. The closed form also holds at world sizes
// far above what a test can launch (a product of 2s used to overflow i8 from 31 ranks on).
#include "cli/bench_check.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/bench_ops.h"
#include "cli/bench_table.h"
#include "core/reduce.h"
#include "support/spawn.h"
#include "support/typed_buffer.h"

namespace lockstep::cli::bench {
namespace {

using lockstep::testing::spawn_groups;
using lockstep::testing::TypedBuffer;

constexpr int kWorld = 3;
constexpr int kRoot = 2;  // not 0: a check that confused the root with rank 0 would show

std::string describe(const OpParams& p) {
  std::string text = std::string(bench_op_name(p.op)) + " " + std::string(dtype_name(p.dtype));
  if (bench_op_reduces(p.op)) text += " " + std::string(reduce_op_name(p.reduce_op));
  return text + " root " + std::to_string(p.root);
}

// Every (op, dtype, reduce op) the real-run tests cover: every op, in a float, a 16-bit, a signed
// and an unsigned integer dtype; reductions with sum, avg, prod, max and (integers) bxor.
std::vector<OpParams> cases() {
  std::vector<OpParams> out;
  for (BenchOp op : kAllBenchOps) {
    for (DType t : {DType::f32, DType::bf16, DType::i8, DType::u8}) {
      if (!bench_op_reduces(op)) {
        out.push_back({.op = op, .dtype = t, .root = kRoot});
        continue;
      }
      for (ReduceOp r :
           {ReduceOp::sum, ReduceOp::avg, ReduceOp::prod, ReduceOp::max, ReduceOp::bxor})
        if (reduce_op_supports(r, t))
          out.push_back({.op = op, .dtype = t, .reduce_op = r, .root = kRoot});
    }
  }
  return out;
}

// One rank's buffers for a row of about 100 elements of params.op, filled for the check.
struct RankBuffers {
  RankBuffers(const OpParams& p, int rank, int size)
      : layout(layout_for(p.op, 100 * element_size(p.dtype), p.dtype, size)),
        input(p.dtype, layout.input_count),
        output(p.dtype, layout.output_count) {
    fill_for_check(p, rank, input.view(), output.view());
  }
  ConstBufferView result() { return output.view(); }
  Layout layout;
  TypedBuffer input, output;
};

// Whether the op must change this rank's output (the sentinel left in place is then wrong).
bool writes_output(const OpParams& p, int rank) {
  if (rank == p.root && p.op == BenchOp::broadcast) return false;  // its output is the source
  if (rank != p.root && (p.op == BenchOp::reduce || p.op == BenchOp::gather)) return false;
  return true;
}

// Real collectives on 3 ranks (threads over tcp): the check accepts what the backend computed, and
// counts exactly one wrong element once any single element of it is changed, on any rank and at
// the start, middle or end of the output, including an output the op must leave untouched (the
// sentinel of a non-root reduce or gather). An output the op never wrote is wrong throughout.
TEST(BenchCheck, RealResultsAreOkAndEveryPerturbedElementIsWrong) {
  const std::vector<OpParams> all = cases();
  spawn_groups(kWorld, [&](ProcessGroup& pg) {
    for (const OpParams& p : all) {
      SCOPED_TRACE(describe(p) + ", rank " + std::to_string(pg.rank()));
      RankBuffers b(p, pg.rank(), pg.size());
      ASSERT_GT(b.output.count(), 2u);
      if (writes_output(p, pg.rank())) {
        EXPECT_EQ(count_wrong(p, pg.rank(), pg.size(), b.result()), b.output.count())
            << "the sentinel is not a result";
      }
      run_op(pg, p, b.input.view(), b.output.view());
      ASSERT_EQ(count_wrong(p, pg.rank(), pg.size(), b.result()), 0u) << "the backend's result";
      const size_t n = b.output.count();
      for (size_t k : {size_t{0}, n / 2, n - 1}) {
        const double good = b.output.get(k);
        b.output.set(k, good + 1);
        EXPECT_EQ(count_wrong(p, pg.rank(), pg.size(), b.result()), 1u) << "element " << k;
        b.output.set(k, good >= 1 ? good - 1 : good + 2);  // no negative value in a u8
        EXPECT_EQ(count_wrong(p, pg.rank(), pg.size(), b.result()), 1u) << "element " << k;
        b.output.set(k, good);
      }
      EXPECT_EQ(count_wrong(p, pg.rank(), pg.size(), b.result()), 0u);
    }
  });
}

// A backend that ran another collective than the one checked: every rank reports WRONG.
TEST(BenchCheck, ResultsOfAnotherReduceOpOrRootAreWrongOnEveryRank) {
  struct Swap {
    OpParams ran, checked;
  };
  const Swap swaps[] = {
      {{.op = BenchOp::all_reduce, .dtype = DType::f32, .reduce_op = ReduceOp::max},
       {.op = BenchOp::all_reduce, .dtype = DType::f32, .reduce_op = ReduceOp::sum}},
      {{.op = BenchOp::reduce_scatter, .dtype = DType::i32, .reduce_op = ReduceOp::sum},
       {.op = BenchOp::reduce_scatter, .dtype = DType::i32, .reduce_op = ReduceOp::bor}},
      {{.op = BenchOp::all_reduce, .dtype = DType::i64, .reduce_op = ReduceOp::sum},
       {.op = BenchOp::all_reduce, .dtype = DType::i64, .reduce_op = ReduceOp::prod}},
      {{.op = BenchOp::broadcast, .dtype = DType::bf16, .root = 1},
       {.op = BenchOp::broadcast, .dtype = DType::bf16, .root = 2}},
      {{.op = BenchOp::scatter, .dtype = DType::u8, .root = 0},
       {.op = BenchOp::scatter, .dtype = DType::u8, .root = 1}},
  };
  spawn_groups(kWorld, [&](ProcessGroup& pg) {
    for (const Swap& s : swaps) {
      SCOPED_TRACE("ran " + describe(s.ran) + ", checked as " + describe(s.checked));
      RankBuffers b(s.ran, pg.rank(), pg.size());
      run_op(pg, s.ran, b.input.view(), b.output.view());
      ASSERT_EQ(count_wrong(s.ran, pg.rank(), pg.size(), b.result()), 0u);
      EXPECT_GT(count_wrong(s.checked, pg.rank(), pg.size(), b.result()), 0u)
          << "rank " << pg.rank();
    }
  });
}

// What the table and its summary print for a row with wrong elements (the text the CTest entry
// mpi_bench_compare and the BenchCli tests look for).
TEST(BenchCheck, ARowWithWrongElementsPrintsWrong) {
  const TableInfo info{.params = {.op = BenchOp::all_reduce}, .backend = "tcp", .world_size = 2};
  const Row good{.bytes = 64, .count = 16, .iters = 3, .median_us = 10, .wrong = 0};
  Row bad = good;
  bad.wrong = 1;
  EXPECT_EQ(format_row(good, info, 10).substr(format_row(good, info, 10).size() - 4), " ok\n");
  EXPECT_EQ(format_row(bad, info, 10).substr(format_row(bad, info, 10).size() - 7), " WRONG\n");
  EXPECT_NE(format_table_summary({good, bad}, info, 10).find(" 1 of 2 rows WRONG"),
            std::string::npos)
      << format_table_summary({good, bad}, info, 10);
  EXPECT_NE(format_table_summary({good, good}, info, 10).find("all 2 rows ok"), std::string::npos);
}

// The all_reduce result of `size` ranks, computed as a correct backend does (the library's
// reduction kernels, in the dtype itself, so an overflow wraps as it would there).
TypedBuffer reduced_over(const OpParams& p, int size, size_t count) {
  TypedBuffer acc(p.dtype, count), other(p.dtype, count), unused(p.dtype, count);
  fill_for_check(p, 0, acc.view(), unused.view());
  for (int r = 1; r < size; ++r) {
    fill_for_check(p, r, other.view(), unused.view());
    reduce_into(acc.view().data, other.view().data, count, p.dtype, p.reduce_op);
  }
  if (p.reduce_op == ReduceOp::avg) finish_average(acc.view().data, count, p.dtype, size);
  return acc;
}

// At world sizes a test cannot launch, the closed form still matches what a correct reduction
// gives in every dtype (before, a product of a 2 on every fifth rank overflowed i8 from 31 ranks
// on, and sums of 0..2 from 128, and the check said WRONG about correct results). The output has
// more elements than ranks, so that every rank's marker element is in it.
TEST(BenchCheck, ReductionsAreExactAtAnyWorldSize) {
  for (int size : {31, 32, 40, 64, 127, 128, 300, 1000}) {
    const size_t count = static_cast<size_t>(size) + 57;
    for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8, DType::u8,
                    DType::i32, DType::i64}) {
      for (ReduceOp r : {ReduceOp::sum, ReduceOp::avg, ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                         ReduceOp::band, ReduceOp::bor, ReduceOp::bxor}) {
        if (!reduce_op_supports(r, t)) continue;
        const OpParams p{.op = BenchOp::all_reduce, .dtype = t, .reduce_op = r};
        SCOPED_TRACE(describe(p) + ", " + std::to_string(size) + " ranks");
        TypedBuffer result = reduced_over(p, size, count);
        for (int rank : {0, size - 1}) ASSERT_EQ(count_wrong(p, rank, size, result.view()), 0u);
        // reduce_scatter: slot `rank` of the same reduction.
        const OpParams scatter{.op = BenchOp::reduce_scatter, .dtype = t, .reduce_op = r};
        const size_t slot = count / static_cast<size_t>(size);
        const size_t last = static_cast<size_t>(size - 1);
        TypedBuffer mine(t, slot);
        mine.fill([&](size_t k) { return result.get(last * slot + k); });
        ASSERT_EQ(count_wrong(scatter, size - 1, size, mine.view()), 0u);
      }
    }
  }
}

// Every rank's input shows in the result, also beyond the ranks that fill the dense patterns: a
// reduction that left out any one rank is wrong. (Not for avg of an integer dtype: sums that stay
// small at any world size average to 0 over 40 ranks, with or without one of them.)
TEST(BenchCheck, AReductionMissingAnyOneRankIsWrong) {
  constexpr int kSize = 40;
  constexpr size_t kCount = 64;
  for (DType t : {DType::f32, DType::bf16, DType::i8, DType::u8}) {
    for (ReduceOp r : {ReduceOp::sum, ReduceOp::avg, ReduceOp::prod}) {
      if (r == ReduceOp::avg && is_integer(t)) continue;
      const OpParams p{.op = BenchOp::all_reduce, .dtype = t, .reduce_op = r};
      for (int missing = 0; missing < kSize; ++missing) {
        SCOPED_TRACE(describe(p) + " without rank " + std::to_string(missing));
        TypedBuffer acc(t, kCount), other(t, kCount), unused(t, kCount);
        fill_for_check(p, missing == 0 ? 1 : 0, acc.view(), unused.view());
        for (int rank = missing == 0 ? 2 : 1; rank < kSize; ++rank) {
          if (rank == missing) continue;
          fill_for_check(p, rank, other.view(), unused.view());
          reduce_into(acc.view().data, other.view().data, kCount, t, r);
        }
        // avg divides by the whole group, as a backend that dropped a rank's data would.
        if (r == ReduceOp::avg) finish_average(acc.view().data, kCount, t, kSize);
        EXPECT_GT(count_wrong(p, 0, kSize, acc.view()), 0u);
      }
    }
  }
}

}  // namespace
}  // namespace lockstep::cli::bench
