// The element-wise operators and loops behind reduce_into/reduce_pair/finish_average.
//
// [Reduce kernels] Each (element type, op) pair is its own instantiation of a plain loop over
// __restrict pointers, so the compiler vectorises it and there is no branch on the op per element;
// reduce.cc switches on (dtype, op) once per call. Integer arithmetic runs in the unsigned type of
// the same width, so overflow wraps (two's complement) instead of being undefined.
//
// The loops are noinline: each is compiled on its own, where its __restrict parameters are plainly
// visible to the vectoriser (inlined into the dispatch code, GCC 12 vectorised only some of them).
//
// Each loop runs a body whose trip count is a multiple of kVectorBlock, then a scalar tail. GCC at
// -O2 (its "very cheap" vectoriser cost model) only vectorises loops that need no epilogue, and
// this shape is what lets it; at -O3 and with Clang it changes nothing.
//
// Floating min/max propagate NaN: if either operand is NaN the result is NaN, whatever the order
// (unlike std::min, which returns its first argument when the comparison is unordered). Between
// equal values (+0 and -0) the first operand wins: dst for reduce_into, a for reduce_pair.
#pragma once

#include <cstddef>
#include <type_traits>

namespace lockstep::detail {

// Elements per vectorised block: a multiple of the lane count of any SIMD width up to 512 bits.
inline constexpr size_t kVectorBlock = 64;
constexpr size_t vector_body(size_t count) {
  return count & ~(kVectorBlock - 1);
}

template <class T>
constexpr T wrap(std::make_unsigned_t<T> bits) {
  return static_cast<T>(bits);  // modular since C++20
}

struct SumOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return wrap<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else {
      return a + b;
    }
  }
};

struct ProdOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return wrap<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    } else {
      return a * b;
    }
  }
};

struct MinOp {
  template <class T>
  static T apply(T a, T b) {
    const T m = b < a ? b : a;
    if constexpr (std::is_floating_point_v<T>) return b != b ? b : m;  // NaN in b wins too
    return m;
  }
};

struct MaxOp {
  template <class T>
  static T apply(T a, T b) {
    const T m = a < b ? b : a;
    if constexpr (std::is_floating_point_v<T>) return b != b ? b : m;
    return m;
  }
};

struct AndOp {
  template <class T>
  static T apply(T a, T b) {
    return static_cast<T>(a & b);
  }
};

struct OrOp {
  template <class T>
  static T apply(T a, T b) {
    return static_cast<T>(a | b);
  }
};

struct XorOp {
  template <class T>
  static T apply(T a, T b) {
    return static_cast<T>(a ^ b);
  }
};

// dst[i] = dst[i] op src[i].
template <class T, class Op>
[[gnu::noinline]] void into_loop(T* __restrict dst, const T* __restrict src, size_t count) {
  const size_t body = vector_body(count);
  for (size_t i = 0; i < body; ++i) dst[i] = Op::apply(dst[i], src[i]);
  for (size_t i = body; i < count; ++i) dst[i] = Op::apply(dst[i], src[i]);
}

// dst[i] = a[i] op b[i]; no overlap at all (reduce.cc routes dst == a / dst == b to into_loop).
// (into_loop: dst and src do not overlap either; reduce.cc routes src == dst to self_loop.)
template <class T, class Op>
[[gnu::noinline]] void pair_loop(T* __restrict dst, const T* __restrict a, const T* __restrict b,
                                 size_t count) {
  const size_t body = vector_body(count);
  for (size_t i = 0; i < body; ++i) dst[i] = Op::apply(a[i], b[i]);
  for (size_t i = body; i < count; ++i) dst[i] = Op::apply(a[i], b[i]);
}

#if defined(__x86_64__) || defined(__i386__)
#define LOCKSTEP_KERNELS_AVX2 1
// The two hot loops again, compiled for AVX2 (twice the lanes of the x86-64 baseline, SSE2);
// reduce.cc picks them at run time when cpu_has_avx2_f16c(). Same results: the element operators
// are the same inline functions.
template <class T, class Op>
[[gnu::noinline]] __attribute__((target("avx2"))) void into_loop_avx2(T* __restrict dst,
                                                                      const T* __restrict src,
                                                                      size_t count) {
  const size_t body = vector_body(count);
  for (size_t i = 0; i < body; ++i) dst[i] = Op::apply(dst[i], src[i]);
  for (size_t i = body; i < count; ++i) dst[i] = Op::apply(dst[i], src[i]);
}

template <class T, class Op>
[[gnu::noinline]] __attribute__((target("avx2"))) void pair_loop_avx2(T* __restrict dst,
                                                                      const T* __restrict a,
                                                                      const T* __restrict b,
                                                                      size_t count) {
  const size_t body = vector_body(count);
  for (size_t i = 0; i < body; ++i) dst[i] = Op::apply(a[i], b[i]);
  for (size_t i = body; i < count; ++i) dst[i] = Op::apply(a[i], b[i]);
}
#else
#define LOCKSTEP_KERNELS_AVX2 0
#endif

// data[i] = data[i] op data[i]: reduce_into with src == dst, which into_loop's __restrict forbids.
template <class T, class Op>
[[gnu::noinline]] void self_loop(T* __restrict data, size_t count) {
  const size_t body = vector_body(count);
  for (size_t i = 0; i < body; ++i) data[i] = Op::apply(data[i], data[i]);
  for (size_t i = body; i < count; ++i) data[i] = Op::apply(data[i], data[i]);
}

// data[i] /= divisor: true division for floats, truncation toward zero for integers. D is T for
// floats and T promoted with int for integers, so a divisor beyond T's range still divides right.
template <class T, class D>
[[gnu::noinline]] void divide_loop(T* __restrict data, size_t count, D divisor) {
  const size_t body = vector_body(count);
  for (size_t i = 0; i < body; ++i) data[i] = static_cast<T>(data[i] / divisor);
  for (size_t i = body; i < count; ++i) data[i] = static_cast<T>(data[i] / divisor);
}

}  // namespace lockstep::detail
