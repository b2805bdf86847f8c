// Test-only element types and reference results for the reduction kernels, computed element by
// element in an obviously different way from src/core: integers in 128-bit arithmetic with an
// explicit modular wrap, f32 in double, f64 in long double, f16/bf16 in double through the
// rounding table of float16_reference.h.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <type_traits>

#include "core/float16_reference.h"
#include "lockstep/core/dtype.h"
#include "lockstep/core/reduce_op.h"

namespace lockstep::testing {

__extension__ typedef __int128 Int128;

// Storage type of each dtype; f16 and bf16 are raw bit patterns.
template <DType D>
struct Storage;
template <>
struct Storage<DType::f32> {
  using type = float;
};
template <>
struct Storage<DType::f64> {
  using type = double;
};
template <>
struct Storage<DType::f16> {
  using type = uint16_t;
};
template <>
struct Storage<DType::bf16> {
  using type = uint16_t;
};
template <>
struct Storage<DType::i8> {
  using type = int8_t;
};
template <>
struct Storage<DType::u8> {
  using type = uint8_t;
};
template <>
struct Storage<DType::i32> {
  using type = int32_t;
};
template <>
struct Storage<DType::i64> {
  using type = int64_t;
};
template <DType D>
using StorageT = typename Storage<D>::type;

constexpr bool is_16bit(DType d) {
  return d == DType::f16 || d == DType::bf16;
}

// Exact integer v reduced modulo 2^bits into T's range.
template <class T>
T wrap_exact(Int128 v) {
  constexpr int kBits = 8 * sizeof(T);
  const Int128 modulus = Int128{1} << kBits;
  Int128 m = v % modulus;
  if (m < 0) m += modulus;
  if (std::is_signed_v<T> && m >= modulus / 2) m -= modulus;
  return static_cast<T>(static_cast<int64_t>(m));
}

template <class T>
T reference_integer(ReduceOp op, T a, T b) {
  const Int128 x = a, y = b;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return wrap_exact<T>(x + y);
    case ReduceOp::prod:
      return wrap_exact<T>(x * y);
    case ReduceOp::min:
      return x <= y ? a : b;
    case ReduceOp::max:
      return x >= y ? a : b;
    case ReduceOp::band:
      return static_cast<T>(a & b);
    case ReduceOp::bor:
      return static_cast<T>(a | b);
    case ReduceOp::bxor:
      return static_cast<T>(a ^ b);
  }
  return 0;
}

// Floating reference in type W (wider than the element): NaN in either operand gives NaN for
// min/max; otherwise the smaller/larger value.
template <class W>
W reference_float(ReduceOp op, W x, W y) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return x + y;
    case ReduceOp::prod:
      return x * y;
    case ReduceOp::min:
      if (std::isnan(x) || std::isnan(y)) return NAN;
      return y < x ? y : x;
    case ReduceOp::max:
      if (std::isnan(x) || std::isnan(y)) return NAN;
      return y > x ? y : x;
    default:
      return NAN;
  }
}

template <DType D>
StorageT<D> reference_op(ReduceOp op, StorageT<D> a, StorageT<D> b) {
  if constexpr (D == DType::f32) {
    return static_cast<float>(reference_float<double>(op, a, b));
  } else if constexpr (D == DType::f64) {
    return static_cast<double>(reference_float<long double>(op, a, b));
  } else if constexpr (D == DType::f16) {
    return half_table().encode(reference_float<double>(op, decode_half(a), decode_half(b)), 0x7e00);
  } else if constexpr (D == DType::bf16) {
    return bf16_table().encode(reference_float<double>(op, decode_bf16(a), decode_bf16(b)), 0x7fc0);
  } else {
    return reference_integer(op, a, b);
  }
}

// x / divisor: integers truncate toward zero (computed on magnitudes), floats divide.
template <DType D>
StorageT<D> reference_divide(StorageT<D> x, int divisor) {
  if constexpr (D == DType::f32) {
    return static_cast<float>(static_cast<double>(x) / divisor);
  } else if constexpr (D == DType::f64) {
    // Exact enough: the test's f64 data are integers and divisor <= 8, so the 64-bit quotient
    // never sits on a 53-bit rounding midpoint unless it is exact.
    return static_cast<double>(static_cast<long double>(x) / divisor);
  } else if constexpr (D == DType::f16) {
    return half_table().encode(decode_half(x) / divisor, 0x7e00);
  } else if constexpr (D == DType::bf16) {
    return bf16_table().encode(decode_bf16(x) / divisor, 0x7fc0);
  } else {
    const Int128 v = x;
    const Int128 magnitude = (v < 0 ? -v : v) / divisor;
    return static_cast<StorageT<D>>(v < 0 ? -magnitude : magnitude);
  }
}

template <DType D>
bool is_nan_value(StorageT<D> v) {
  if constexpr (D == DType::f16)
    return is_nan_half(v);
  else if constexpr (D == DType::bf16)
    return is_nan_bf16(v);
  else if constexpr (std::is_floating_point_v<StorageT<D>>)
    return std::isnan(v);
  else
    return false;
}

template <DType D>
double as_double(StorageT<D> v) {
  if constexpr (D == DType::f16)
    return decode_half(v);
  else if constexpr (D == DType::bf16)
    return decode_bf16(v);
  else
    return static_cast<double>(v);
}

// Whether actual is the reference result: any NaN for NaN; for min/max the same value (+0 and
// -0 are equal there, and either operand may be returned); otherwise the same bits.
template <DType D>
bool matches(ReduceOp op, StorageT<D> expected, StorageT<D> actual) {
  if (is_nan_value<D>(expected)) return is_nan_value<D>(actual);
  if (is_nan_value<D>(actual)) return false;
  if (op == ReduceOp::min || op == ReduceOp::max)
    return as_double<D>(expected) == as_double<D>(actual);
  return std::memcmp(&expected, &actual, sizeof(expected)) == 0;
}

// Test data. Floats: three quarters ordinary values near 1 (so sums and products mostly stay
// finite and exercise rounding), one quarter arbitrary bit patterns (NaN, inf, subnormals,
// extremes). f64: integers up to 2^20 with a sprinkle of specials. Integers: any bits.
template <DType D>
StorageT<D> random_value(std::mt19937_64& rng) {
  const uint64_t r = rng();
  const bool arbitrary = (r & 3) == 0;
  if constexpr (D == DType::f32) {
    if (arbitrary) return std::bit_cast<float>(static_cast<uint32_t>(r >> 32));
    const uint32_t exp = 120 + static_cast<uint32_t>((r >> 8) % 16);
    return std::bit_cast<float>(
        static_cast<uint32_t>((r >> 63) << 31 | exp << 23 | ((r >> 12) & 0x7fffff)));
  } else if constexpr (D == DType::f64) {
    const double specials[] = {NAN, INFINITY, -INFINITY, -0.0};
    if ((r & 63) == 0) return specials[(r >> 6) & 3];
    return static_cast<double>(static_cast<int64_t>((r >> 8) % (1 << 21)) - (1 << 20));
  } else if constexpr (D == DType::f16) {
    if (arbitrary) return static_cast<uint16_t>(r >> 16);
    const uint32_t exp = 11 + static_cast<uint32_t>((r >> 8) % 8);
    return static_cast<uint16_t>((r >> 63) << 15 | exp << 10 | ((r >> 20) & 0x3ff));
  } else if constexpr (D == DType::bf16) {
    if (arbitrary) return static_cast<uint16_t>(r >> 16);
    const uint32_t exp = 123 + static_cast<uint32_t>((r >> 8) % 8);
    return static_cast<uint16_t>((r >> 63) << 15 | exp << 7 | ((r >> 20) & 0x7f));
  } else {
    return static_cast<StorageT<D>>(r >> 13);
  }
}

// Calls fn.template operator()<D>() for the runtime dtype d (not bool).
template <class Fn>
void with_dtype(DType d, Fn&& fn) {
  switch (d) {
    case DType::f32:
      return fn.template operator()<DType::f32>();
    case DType::f64:
      return fn.template operator()<DType::f64>();
    case DType::f16:
      return fn.template operator()<DType::f16>();
    case DType::bf16:
      return fn.template operator()<DType::bf16>();
    case DType::i8:
      return fn.template operator()<DType::i8>();
    case DType::u8:
      return fn.template operator()<DType::u8>();
    case DType::i32:
      return fn.template operator()<DType::i32>();
    case DType::i64:
      return fn.template operator()<DType::i64>();
    case DType::boolean:
      return;
  }
}

}  // namespace lockstep::testing
