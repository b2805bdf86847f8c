// ReductionPlan: how every backend reduces an op's data, decided once per op: the one rule for
// 16-bit floats and for avg, so that a reduction gives the same bits on every backend.
//
// - avg reduces as sum and divides once, at the end, by the number of contributions.
// - f16 and bf16 sums, products and averages accumulate in f32 and round once, at the end, when
//   an element combines more than two contributions, or is averaged (the division would round a
//   second time). With two contributions a 16-bit sum or product already rounds once: the 16-bit
//   kernels widen, combine in f32 and round (src/core/reduce16.h), so they run directly.
// - min and max are exact in any width and run directly.
#pragma once

#include "lockstep/core/dtype.h"
#include "lockstep/core/reduce_op.h"

namespace lockstep {

struct ReductionPlan {
  ReduceOp combine = ReduceOp::sum;  // what the contributions are combined with (avg: sum)
  bool widen = false;                // accumulate in f32 (widen_to_f32), round once at the end
  int divisor = 0;                   // avg: divide the combined result by this, once; 0: never

  // The dtype the contributions are combined in.
  DType work_dtype(DType dtype) const { return widen ? DType::f32 : dtype; }
};

// The plan for data of `dtype` reduced with `op`, `contributions` of them per element (the group's
// size for a collective, the ranks a stage combines for a partial one).
ReductionPlan plan_reduction(DType dtype, ReduceOp op, int contributions);

}  // namespace lockstep
