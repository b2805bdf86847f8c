// The one reduction rule every backend follows (src/comm/reduction_plan.h): avg as a sum divided
// once by the contributions, and 16-bit accumulation in f32 wherever a 16-bit result would
// otherwise round more than once.
#include "comm/reduction_plan.h"

#include <gtest/gtest.h>

namespace lockstep::testing {
namespace {

TEST(ReductionPlan, AverageIsASumDividedOnceByTheContributions) {
  for (DType t : {DType::f32, DType::f64, DType::i32, DType::f16, DType::bf16})
    for (int n : {2, 3, 8}) {
      const ReductionPlan p = plan_reduction(t, ReduceOp::avg, n);
      EXPECT_EQ(p.combine, ReduceOp::sum) << dtype_name(t) << " n " << n;
      EXPECT_EQ(p.divisor, n) << dtype_name(t) << " n " << n;
    }
  // One contribution: nothing to divide.
  EXPECT_EQ(plan_reduction(DType::f32, ReduceOp::avg, 1).divisor, 0);
  EXPECT_EQ(plan_reduction(DType::f32, ReduceOp::sum, 4).divisor, 0);
}

TEST(ReductionPlan, SixteenBitWidensWhereItWouldRoundMoreThanOnce) {
  for (DType t : {DType::f16, DType::bf16}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod}) {
      // Two contributions: the 16-bit kernel combines in f32 and rounds once already.
      EXPECT_FALSE(plan_reduction(t, op, 2).widen) << dtype_name(t) << " " << reduce_op_name(op);
      EXPECT_TRUE(plan_reduction(t, op, 3).widen) << dtype_name(t) << " " << reduce_op_name(op);
      EXPECT_EQ(plan_reduction(t, op, 3).work_dtype(t), DType::f32);
    }
    // The division would round a second time.
    EXPECT_TRUE(plan_reduction(t, ReduceOp::avg, 2).widen) << dtype_name(t);
    // min and max are exact in any width.
    EXPECT_FALSE(plan_reduction(t, ReduceOp::max, 8).widen) << dtype_name(t);
    EXPECT_FALSE(plan_reduction(t, ReduceOp::min, 8).widen) << dtype_name(t);
  }
  for (DType t : {DType::f32, DType::f64, DType::i8, DType::i64})
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::avg}) {
      EXPECT_FALSE(plan_reduction(t, op, 8).widen) << dtype_name(t) << " " << reduce_op_name(op);
      EXPECT_EQ(plan_reduction(t, op, 8).work_dtype(t), t);
    }
}

}  // namespace
}  // namespace lockstep::testing
