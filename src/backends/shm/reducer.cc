#include "backends/shm/reducer.h"

#include <algorithm>
#include <cstring>

#include "core/reduce.h"

namespace lockstep::shm {

namespace {

// Elements per f32 block: two blocks of scratch stay in L1.
constexpr size_t kWideBlock = 2048;

bool needs_f32(DType dtype, ReduceOp op, int n) {
  if (dtype != DType::f16 && dtype != DType::bf16) return false;
  if (op == ReduceOp::avg) return true;
  return (op == ReduceOp::sum || op == ReduceOp::prod) && n > 2;
}

}  // namespace

void Reducer::reduce(void* dst, const void* const* srcs, int n, size_t count, DType dtype,
                     ReduceOp op) {
  if (count == 0) return;
  if (needs_f32(dtype, op, n)) return reduce_wide(dst, srcs, n, count, dtype, op);
  const ReduceOp combine = op == ReduceOp::avg ? ReduceOp::sum : op;
  if (n == 1) {
    if (dst != srcs[0]) std::memcpy(dst, srcs[0], count * element_size(dtype));
  } else {
    reduce_pair(dst, srcs[0], srcs[1], count, dtype, combine);
    for (int q = 2; q < n; ++q) reduce_into(dst, srcs[q], count, dtype, combine);
  }
  if (op == ReduceOp::avg && n > 1) finish_average(dst, count, dtype, n);
}

void Reducer::reduce_wide(void* dst, const void* const* srcs, int n, size_t count, DType dtype,
                          ReduceOp op) {
  acc_.resize(kWideBlock);
  tmp_.resize(kWideBlock);
  const size_t es = element_size(dtype);
  const ReduceOp combine = op == ReduceOp::avg ? ReduceOp::sum : op;
  for (size_t done = 0; done < count; done += kWideBlock) {
    const size_t len = std::min(kWideBlock, count - done);
    auto at = [&](const void* p) { return static_cast<const std::byte*>(p) + done * es; };
    widen_to_f32(acc_.data(), at(srcs[0]), len, dtype);
    for (int q = 1; q < n; ++q) {
      widen_to_f32(tmp_.data(), at(srcs[q]), len, dtype);
      reduce_into(acc_.data(), tmp_.data(), len, DType::f32, combine);
    }
    if (op == ReduceOp::avg) finish_average(acc_.data(), len, DType::f32, n);
    narrow_from_f32(static_cast<std::byte*>(dst) + done * es, acc_.data(), len, dtype);
  }
}

}  // namespace lockstep::shm
