// Test-only reference for the 16-bit float formats, written independently of the code under test:
// values are decoded from their fields with ldexp, and rounding picks the nearest entry of a
// sorted table of every finite value (ties to the even bit pattern), in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace lockstep::testing {

// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 fraction bits.
inline double decode_half(uint16_t h) {
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  const int exp = (h >> 10) & 0x1f;
  const int frac = h & 0x3ff;
  if (exp == 0x1f) return frac ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(frac, -24);
  return sign * std::ldexp(1024 + frac, exp - 25);
}

// bfloat16: 1 sign, 8 exponent (bias 127), 7 fraction bits.
inline double decode_bf16(uint16_t b) {
  const double sign = (b & 0x8000) ? -1.0 : 1.0;
  const int exp = (b >> 7) & 0xff;
  const int frac = b & 0x7f;
  if (exp == 0xff) return frac ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(frac, -133);
  return sign * std::ldexp(128 + frac, exp - 134);
}

inline bool is_nan_half(uint16_t h) {
  return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
}
inline bool is_nan_bf16(uint16_t b) {
  return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0;
}

// Round-to-nearest-even encoder for one 16-bit format, from any double.
class Float16Table {
 public:
  // decode: bits -> value; max_finite: the bit pattern of the largest finite positive value;
  // inf_bits: positive infinity.
  Float16Table(double (*decode)(uint16_t), uint16_t max_finite, uint16_t inf_bits)
      : max_finite_(max_finite), inf_bits_(inf_bits) {
    for (uint32_t b = 0; b <= max_finite; ++b) values_.push_back(decode(static_cast<uint16_t>(b)));
    const double max = values_[max_finite];
    overflow_at_ = max + (max - values_[max_finite - 1]) / 2;  // halfway to the next power
  }

  // Returns the bit pattern nearest to v; NaN input gives nan_bits (any NaN will do for tests).
  uint16_t encode(double v, uint16_t nan_bits) const {
    if (std::isnan(v)) return nan_bits;
    const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
    const double a = std::fabs(v);
    if (a >= overflow_at_) return sign | inf_bits_;  // ties at the threshold go to inf (even)
    auto it = std::upper_bound(values_.begin(), values_.end(), a);
    const size_t hi = static_cast<size_t>(it - values_.begin());
    if (hi > max_finite_) return sign | max_finite_;
    const size_t lo = hi - 1;  // values_[lo] <= a < values_[hi]; both differences are exact
    const double below = a - values_[lo], above = values_[hi] - a;
    size_t pick = below < above ? lo : hi;
    if (below == above) pick = (lo % 2 == 0) ? lo : hi;
    return static_cast<uint16_t>(sign | pick);
  }

 private:
  std::vector<double> values_;
  uint16_t max_finite_;
  uint16_t inf_bits_;
  double overflow_at_;
};

inline const Float16Table& half_table() {
  static const Float16Table table(decode_half, 0x7bff, 0x7c00);
  return table;
}
inline const Float16Table& bf16_table() {
  static const Float16Table table(decode_bf16, 0x7f7f, 0x7f80);
  return table;
}

}  // namespace lockstep::testing
