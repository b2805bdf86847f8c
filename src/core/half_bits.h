// Scalar IEEE binary16 <-> binary32 conversion on bit patterns. Pure integer arithmetic, so the
// result does not depend on the floating-point environment (flush-to-zero, rounding mode).
// Used by half::from_float/to_float and by the portable (non-F16C) conversion loops.
#pragma once

#include <bit>
#include <cstdint>

namespace lockstep::detail {

// binary16 layout: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits.
inline constexpr uint32_t kHalfExpMask = 0x7c00u;
inline constexpr uint32_t kHalfMantMask = 0x03ffu;
// Exponent bias difference between binary32 (127) and binary16 (15).
inline constexpr uint32_t kHalfRebias = 127u - 15u;

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h & kHalfExpMask) >> 10;
  const uint32_t mant = h & kHalfMantMask;
  uint32_t out;
  if (exp == 0x1f) {
    out = 0x7f800000u | (mant << 13);  // inf, or NaN with its payload (quiet bit lands on bit 22)
  } else if (exp != 0) {
    out = ((exp + kHalfRebias) << 23) | (mant << 13);
  } else if (mant == 0) {
    out = 0;
  } else {
    // Subnormal: mant * 2^-24. Its top set bit p becomes the implicit bit of a normal float.
    const uint32_t p = static_cast<uint32_t>(std::bit_width(mant)) - 1;
    out = ((p + 103u) << 23) | ((mant << (23 - p)) & 0x7fffffu);
  }
  return std::bit_cast<float>(out | sign);
}

// Rounds x >> shift to nearest, ties to even. REQUIRES 1 <= shift <= 31.
inline uint32_t shift_right_round_even(uint32_t x, uint32_t shift) {
  const uint32_t quotient = x >> shift;
  const uint32_t rest = x & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  const bool up = rest > halfway || (rest == halfway && (quotient & 1u) != 0);
  return quotient + (up ? 1u : 0u);
}

inline uint16_t float_to_half_bits(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t mag = u & 0x7fffffffu;
  uint32_t out;
  if (mag > 0x7f800000u) {
    out = 0x7e00u | ((mag >> 13) & kHalfMantMask);  // NaN: top payload bits, forced quiet
  } else if (mag >= 0x477ff000u) {
    out = kHalfExpMask;  // >= 65520 (halfway past 65504, the largest half) rounds to inf
  } else if (mag >= 0x38800000u) {
    // Normal half (>= 2^-14): rebias, then round 13 mantissa bits away; a carry bumps the exponent.
    out = shift_right_round_even(mag - (kHalfRebias << 23), 13);
  } else {
    // Subnormal half or zero: the result is round(|f| / 2^-24) = round(m * 2^(e - 126)).
    const uint32_t e = mag >> 23;
    const uint32_t shift = 126u - e;  // >= 14 here
    const uint32_t m = (mag & 0x7fffffu) | 0x800000u;
    out = shift > 24 ? 0u : shift_right_round_even(m, shift);
  }
  return static_cast<uint16_t>(out | sign);
}

}  // namespace lockstep::detail
