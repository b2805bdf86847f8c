// Element types that collectives move and reduce, and the 16-bit float types that C++20 lacks.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

namespace lockstep {

enum class DType : uint8_t { f32, f64, f16, bf16, i8, u8, i32, i64, boolean };

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,   DType::i8,
                                       DType::u8,  DType::i32, DType::i64, DType::boolean};

// Bytes per element.
constexpr size_t element_size(DType t) {
  switch (t) {
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::i8:
    case DType::u8:
    case DType::boolean:
      return 1;
  }
  return 0;
}

// "f32", "bf16", "bool", ...
std::string_view dtype_name(DType t);
// Parses the names dtype_name prints (and "float32", "float", "int64", ...); throws
// InvalidArgument naming the accepted values on anything else.
DType parse_dtype(std::string_view name);

constexpr bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}
constexpr bool is_integer(DType t) {
  return t == DType::i8 || t == DType::u8 || t == DType::i32 || t == DType::i64;
}

// IEEE 754 binary16, stored as its bits. Converts through float (round to nearest even).
struct half {
  uint16_t bits = 0;
  half() = default;
  half(float f) : bits(from_float(f)) {}             // NOLINT: implicit by design, like float
  operator float() const { return to_float(bits); }  // NOLINT
  static uint16_t from_float(float f);
  static float to_float(uint16_t h);
};

// bfloat16: the top half of a float32. Converts with round to nearest even; NaN stays NaN.
struct bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  bfloat16(float f) : bits(from_float(f)) {}         // NOLINT
  operator float() const { return to_float(bits); }  // NOLINT
  static uint16_t from_float(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
  static float to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }
};

// The DType of a C++ element type: dtype_of<float> == DType::f32.
template <class T>
constexpr DType dtype_of() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>)
    return DType::f32;
  else if constexpr (std::is_same_v<U, double>)
    return DType::f64;
  else if constexpr (std::is_same_v<U, half>)
    return DType::f16;
  else if constexpr (std::is_same_v<U, bfloat16>)
    return DType::bf16;
  else if constexpr (std::is_same_v<U, int8_t>)
    return DType::i8;
  else if constexpr (std::is_same_v<U, uint8_t>)
    return DType::u8;
  else if constexpr (std::is_same_v<U, int32_t>)
    return DType::i32;
  else if constexpr (std::is_same_v<U, int64_t>)
    return DType::i64;
  else if constexpr (std::is_same_v<U, bool>)
    return DType::boolean;
  else
    static_assert(sizeof(T) == 0, "lockstep: unsupported element type");
}

}  // namespace lockstep
