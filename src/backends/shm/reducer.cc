#include "backends/shm/reducer.h"

#include <algorithm>
#include <cstring>

#include "core/reduce.h"

namespace lockstep::shm {

namespace {

// Elements per f32 block: two blocks of scratch stay in L1.
constexpr size_t kWideBlock = 2048;

}  // namespace

void Reducer::reduce(void* dst, const void* const* srcs, int n, size_t count, DType dtype,
                     ReduceOp op) {
  if (count == 0) return;
  const ReductionPlan plan = plan_reduction(dtype, op, n);
  if (plan.widen) return reduce_wide(dst, srcs, n, count, dtype, plan);
  if (n == 1) {
    if (dst != srcs[0]) std::memcpy(dst, srcs[0], count * element_size(dtype));
  } else {
    reduce_pair(dst, srcs[0], srcs[1], count, dtype, plan.combine);
    for (int q = 2; q < n; ++q) reduce_into(dst, srcs[q], count, dtype, plan.combine);
  }
  if (plan.divisor > 0) finish_average(dst, count, dtype, plan.divisor);
}

void Reducer::reduce_wide(void* dst, const void* const* srcs, int n, size_t count, DType dtype,
                          const ReductionPlan& plan) {
  acc_.resize(kWideBlock);
  tmp_.resize(kWideBlock);
  const size_t es = element_size(dtype);
  const ReduceOp combine = plan.combine;
  for (size_t done = 0; done < count; done += kWideBlock) {
    const size_t len = std::min(kWideBlock, count - done);
    auto at = [&](const void* p) { return static_cast<const std::byte*>(p) + done * es; };
    widen_to_f32(acc_.data(), at(srcs[0]), len, dtype);
    for (int q = 1; q < n; ++q) {
      widen_to_f32(tmp_.data(), at(srcs[q]), len, dtype);
      reduce_into(acc_.data(), tmp_.data(), len, DType::f32, combine);
    }
    if (plan.divisor > 0) finish_average(acc_.data(), len, DType::f32, plan.divisor);
    narrow_from_f32(static_cast<std::byte*>(dst) + done * es, acc_.data(), len, dtype);
  }
}

}  // namespace lockstep::shm
