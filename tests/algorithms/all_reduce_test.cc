// all_reduce: ring and recursive doubling (forced both ways, and the automatic choice) over world
// sizes 1..5 and 8 (non-powers of two exercise the recursive-doubling fold), checked against
// closed forms for every count, dtype and reduce op.
#include <gtest/gtest.h>

#include <cmath>

#include "mesh_harness.h"
#include "support/messages.h"

namespace lockstep::testing {
namespace {

constexpr size_t kCounts[] = {0, 1, 7, 1000, 1000003};
constexpr Algorithm kAlgorithms[] = {Algorithm::automatic, Algorithm::ring,
                                     Algorithm::recursive_doubling};

struct Case {
  Algorithm algorithm;
  DType dtype;
  size_t count;
  ReduceOp op = ReduceOp::sum;
  bool in_place = false;
};

std::string describe(const Case& c, int n) {
  std::ostringstream s;
  s << "all_reduce " << algorithm_name(c.algorithm) << " " << dtype_name(c.dtype) << " x "
    << c.count << " " << reduce_op_name(c.op) << (c.in_place ? " in place" : "") << " n=" << n;
  return s.str();
}

double input_value(ReduceOp op, int r, size_t i) {
  return op == ReduceOp::prod ? 1 + (static_cast<size_t>(r) + i) % 2 : rank_value(r, i);
}

double expected(const Case& c, int n, size_t i) {
  const double k = static_cast<double>(i % 7);
  switch (c.op) {
    case ReduceOp::avg: {
      double avg = rank_value_sum(n, i) / n;
      return is_integer(c.dtype) ? std::trunc(avg) : avg;
    }
    case ReduceOp::max:
      return n * k;
    case ReduceOp::min:
      return k;
    case ReduceOp::prod: {
      int twos = 0;
      for (int r = 0; r < n; ++r) twos += (static_cast<size_t>(r) + i) % 2;
      return std::ldexp(1.0, twos);
    }
    default:
      return rank_value_sum(n, i);
  }
}

void check(MeshRank& me, const Case& c) {
  TypedBuffer in(c.dtype, c.count), out(c.dtype, c.count);
  in.fill([&](size_t i) { return input_value(c.op, me.rank, i); });
  out.fill([](size_t) { return 99; });
  Op op = me.op(OpKind::all_reduce);
  op.dtype = c.dtype;
  op.reduce_op = c.op;
  op.algorithm = c.algorithm;
  op.count = c.count;
  op.input = in.view().data;
  op.output = c.in_place ? in.view().data : out.view().data;
  me.run(op);
  const TypedBuffer& result = c.in_place ? in : out;
  expect_elements(
      result, [&](size_t i) { return expected(c, me.size, i); }, describe(c, me.size));
  if (!c.in_place)  // the input is untouched
    expect_elements(
        in, [&](size_t i) { return input_value(c.op, me.rank, i); },
        describe(c, me.size) + " (input)");
}

class AllReduce : public ::testing::TestWithParam<int> {};

TEST_P(AllReduce, SumMatchesClosedFormForEveryAlgorithmCountAndDtype) {
  with_mesh(GetParam(), [](MeshRank& me) {
    for (Algorithm a : kAlgorithms)
      for (DType t : {DType::f32, DType::i64})
        for (size_t count : kCounts)
          check(me, {.algorithm = a, .dtype = t, .count = count, .in_place = count % 2 == 1});
  });
}

TEST_P(AllReduce, OtherReduceOpsMatchClosedForm) {
  with_mesh(GetParam(), [](MeshRank& me) {
    for (Algorithm a : {Algorithm::ring, Algorithm::recursive_doubling})
      for (ReduceOp op : {ReduceOp::avg, ReduceOp::max, ReduceOp::min, ReduceOp::prod})
        for (DType t : {DType::f32, DType::i64})
          for (size_t count : {size_t{7}, size_t{1000}, size_t{70001}})
            check(me, {.algorithm = a,
                       .dtype = t,
                       .count = count,
                       .op = op,
                       .in_place = op == ReduceOp::max});
  });
}

TEST_P(AllReduce, SixteenBitFloatsAccumulateInF32) {
  with_mesh(GetParam(), [](MeshRank& me) {
    for (Algorithm a : {Algorithm::ring, Algorithm::recursive_doubling})
      for (DType t : {DType::f16, DType::bf16})
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
          check(me, {.algorithm = a, .dtype = t, .count = 1000, .op = op, .in_place = true});
  });
}

// 2048 + 1 + 1 in f16: summed pairwise in f16, 2048 + 1 rounds back to 2048 (the spacing there
// is 2) twice, giving 2048; accumulated in f32 the exact 2050 is rounded once, and 2050 is an
// f16 value. Recursive doubling over 3 ranks adds 2048 + 1 first, so only f32 accumulation passes.
TEST(AllReduceF16, SumsRoundOnceFromF32) {
  with_mesh(3, [](MeshRank& me) {
    for (DType t : {DType::f16, DType::bf16}) {
      TypedBuffer buf(t, 1);
      buf.set(0, me.rank == 0 ? 2048 : 1);
      Op op = me.op(OpKind::all_reduce);
      op.dtype = t;
      op.count = 1;
      op.algorithm = Algorithm::recursive_doubling;
      op.input = op.output = buf.view().data;
      me.run(op);
      EXPECT_EQ(buf.get(0), t == DType::f16 ? 2050 : 2048) << dtype_name(t);  // bf16: spacing 16
    }
  });
}

TEST(AllReduceChoice, AutomaticPicksRecursiveDoublingSmallAndRingLarge) {
  Op op;
  op.kind = OpKind::all_reduce;
  op.dtype = DType::f32;
  op.count = kRingThresholdBytes / 4 - 1;
  EXPECT_EQ(choose_all_reduce(op, 2), Algorithm::recursive_doubling);
  EXPECT_EQ(choose_all_reduce(op, kWideGroup), Algorithm::ring);  // wide groups switch earlier
  EXPECT_EQ(choose_all_reduce(op, 3), Algorithm::ring);
  EXPECT_EQ(choose_all_reduce(op, 4), Algorithm::ring);
  op.count = kRingThresholdBytes / 4;
  EXPECT_EQ(choose_all_reduce(op, 2), Algorithm::ring);
  op.count = kWideRingThresholdBytes / 4 - 1;
  EXPECT_EQ(choose_all_reduce(op, kWideGroup), Algorithm::recursive_doubling);
  op.algorithm = Algorithm::recursive_doubling;
  op.count = kRingThresholdBytes;
  EXPECT_EQ(choose_all_reduce(op, 2), Algorithm::recursive_doubling);
  op.algorithm = Algorithm::chain;
  expect_error_naming<InvalidArgument>(
      [&] { choose_all_reduce(op, 2); },
      {"all_reduce #0: all_reduce runs ring, recursive_doubling or automatic, not chain"});
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, AllReduce, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

}  // namespace
}  // namespace lockstep::testing
