// Reducer: combines the same run of elements from several ranks, in rank order, so that every
// rank that computes a given element computes it bit for bit the same way.
#pragma once

#include <cstddef>
#include <vector>

#include "comm/reduction_plan.h"
#include "lockstep/core/dtype.h"
#include "lockstep/core/reduce_op.h"

namespace lockstep::shm {

class Reducer {
 public:
  // dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[n-1][i], as plan_reduction(dtype, op, n)
  // says (src/comm/reduction_plan.h): avg divides the sum by n; where it widens, in f32.
  // dst must not overlap any source unless it is exactly srcs[0]. Not thread-safe (scratch).
  void reduce(void* dst, const void* const* srcs, int n, size_t count, DType dtype, ReduceOp op);
  // Scratch for n source pointers (valid until the next call), so that small ops allocate nothing.
  const void** sources(int n) {
    sources_.resize(static_cast<size_t>(n));
    return sources_.data();
  }

 private:
  void reduce_wide(void* dst, const void* const* srcs, int n, size_t count, DType dtype,
                   const ReductionPlan& plan);

  std::vector<float> acc_, tmp_;
  std::vector<const void*> sources_;
};

}  // namespace lockstep::shm
