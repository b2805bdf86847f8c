#include "comm/reduction_plan.h"

namespace lockstep {

ReductionPlan plan_reduction(DType dtype, ReduceOp op, int contributions) {
  ReductionPlan plan;
  const bool average = op == ReduceOp::avg;
  plan.combine = average ? ReduceOp::sum : op;
  plan.divisor = average && contributions > 1 ? contributions : 0;
  const bool sixteen = dtype == DType::f16 || dtype == DType::bf16;
  const bool accumulates = op == ReduceOp::sum || op == ReduceOp::prod || average;
  plan.widen = sixteen && accumulates && (average || contributions > 2);
  return plan;
}

}  // namespace lockstep
