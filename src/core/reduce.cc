#include "core/reduce.h"

#include <algorithm>
#include <cstdint>

#include "core/convert16.h"
#include "core/cpu_features.h"
#include "core/reduce16.h"
#include "core/reduce_kernels.h"
#include "lockstep/core/error.h"

namespace lockstep {
namespace {

using detail::NarrowFn;
using detail::WidenFn;

// finish_average on f16/bf16 runs a chunk at a time: widen into a stack buffer, divide in f32,
// round once on the way back. A chunk stays in L1. (Reductions use the fused loops of reduce16.h.)
constexpr size_t kChunk = 1024;

// Calls fn.template operator()<Op>() with the kernel operator for op. Bitwise ops exist only for
// integer T (callers have checked reduce_op_supports).
template <class T, class Fn>
void visit_op(ReduceOp op, Fn&& fn) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return fn.template operator()<detail::SumOp>();
    case ReduceOp::prod:
      return fn.template operator()<detail::ProdOp>();
    case ReduceOp::min:
      return fn.template operator()<detail::MinOp>();
    case ReduceOp::max:
      return fn.template operator()<detail::MaxOp>();
    case ReduceOp::band:
    case ReduceOp::bor:
    case ReduceOp::bxor:
      break;
  }
  if constexpr (std::is_integral_v<T>) {
    if (op == ReduceOp::band) return fn.template operator()<detail::AndOp>();
    if (op == ReduceOp::bor) return fn.template operator()<detail::OrOp>();
    if (op == ReduceOp::bxor) return fn.template operator()<detail::XorOp>();
  }
}

// Calls fn.template operator()<T>() with the C++ type of dtype; f16/bf16 go to on_16bit(widen,
// narrow) instead. bool never gets here (no op supports it).
template <class Fn, class Fn16>
void visit_dtype(DType dtype, Fn&& fn, Fn16&& on_16bit) {
  switch (dtype) {
    case DType::f32:
      return fn.template operator()<float>();
    case DType::f64:
      return fn.template operator()<double>();
    case DType::i8:
      return fn.template operator()<int8_t>();
    case DType::u8:
      return fn.template operator()<uint8_t>();
    case DType::i32:
      return fn.template operator()<int32_t>();
    case DType::i64:
      return fn.template operator()<int64_t>();
    case DType::f16:
      return on_16bit(&detail::widen_f16, &detail::narrow_f16);
    case DType::bf16:
      return on_16bit(&detail::widen_bf16, &detail::narrow_bf16);
    case DType::boolean:
      return;
  }
}

void check_supported(const char* fn, DType dtype, ReduceOp op) {
  LOCKSTEP_ENFORCE(reduce_op_supports(op, dtype), InvalidArgument, fn, ": reduce op ",
                   reduce_op_name(op), " does not apply to dtype ", dtype_name(dtype),
                   "; sum, avg, prod, min and max take any numeric dtype, band, bor and bxor "
                   "need an integer dtype (i8, u8, i32, i64), and bool cannot be reduced");
}

void divide_16bit(uint16_t* data, size_t count, int divisor, WidenFn widen, NarrowFn narrow) {
  alignas(64) float buf[kChunk];
  for (size_t done = 0; done < count; done += kChunk) {
    const size_t n = std::min(kChunk, count - done);
    widen(buf, data + done, n);
    detail::divide_loop(buf, n, static_cast<float>(divisor));
    narrow(data + done, buf, n);
  }
}

}  // namespace

void reduce_into(void* dst, const void* src, size_t count, DType dtype, ReduceOp op) {
  check_supported("reduce_into", dtype, op);
  visit_dtype(
      dtype,
      [&]<class T>() {
        visit_op<T>(op, [&]<class Op>() {
          auto* out = static_cast<T*>(dst);
          const auto* in = static_cast<const T*>(src);
          if (out == in) return detail::self_loop<T, Op>(out, count);
#if LOCKSTEP_KERNELS_AVX2
          if (detail::cpu_has_avx2_f16c()) return detail::into_loop_avx2<T, Op>(out, in, count);
#endif
          detail::into_loop<T, Op>(out, in, count);
        });
      },
      [&](WidenFn, NarrowFn) {
        detail::reduce_16bit(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(dst),
                             static_cast<const uint16_t*>(src), count, dtype, op);
      });
}

void reduce_pair(void* dst, const void* a, const void* b, size_t count, DType dtype, ReduceOp op) {
  check_supported("reduce_pair", dtype, op);
  // Every op is commutative, so an aliased output is an in-place reduction of the other input.
  if (dst == a) return reduce_into(dst, b, count, dtype, op);
  if (dst == b) return reduce_into(dst, a, count, dtype, op);
  visit_dtype(
      dtype,
      [&]<class T>() {
        visit_op<T>(op, [&]<class Op>() {
          auto* out = static_cast<T*>(dst);
          const auto* in_a = static_cast<const T*>(a);
          const auto* in_b = static_cast<const T*>(b);
#if LOCKSTEP_KERNELS_AVX2
          if (detail::cpu_has_avx2_f16c())
            return detail::pair_loop_avx2<T, Op>(out, in_a, in_b, count);
#endif
          detail::pair_loop<T, Op>(out, in_a, in_b, count);
        });
      },
      [&](WidenFn, NarrowFn) {
        detail::reduce_16bit(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a),
                             static_cast<const uint16_t*>(b), count, dtype, op);
      });
}

void finish_average(void* data, size_t count, DType dtype, int divisor) {
  check_supported("finish_average", dtype, ReduceOp::avg);
  LOCKSTEP_ENFORCE(divisor >= 1, InvalidArgument, "finish_average: divisor ", divisor,
                   " must be at least 1 (it is the number of ranks averaged)");
  visit_dtype(
      dtype,
      [&]<class T>() {
        using D = std::conditional_t<std::is_integral_v<T>, decltype(T{} + int{}), T>;
        detail::divide_loop(static_cast<T*>(data), count, static_cast<D>(divisor));
      },
      [&](WidenFn widen, NarrowFn narrow) {
        divide_16bit(static_cast<uint16_t*>(data), count, divisor, widen, narrow);
      });
}

}  // namespace lockstep
