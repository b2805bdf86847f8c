// widen_to_f32 / narrow_from_f32 and both flavours of the internal conversion loops, against
// half/bfloat16's scalar conversions (themselves checked exhaustively in dtype_test.cc) and the
// independent rounding reference.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "core/convert16.h"
#include "core/float16_reference.h"
#include "core/reduce.h"
#include "lockstep/core/error.h"
#include "support/messages.h"

namespace lockstep {
namespace {

using testing::is_nan_bf16;
using testing::is_nan_half;

std::vector<uint16_t> every_pattern() {
  std::vector<uint16_t> out(65536);
  for (uint32_t b = 0; b <= 0xffff; ++b) out[b] = static_cast<uint16_t>(b);
  return out;
}

// Floats that probe rounding: exact 16-bit values, midpoints and their neighbours for a spread
// of patterns, specials, and random bits.
std::vector<float> probe_floats(double (*decode)(uint16_t), uint16_t max_finite) {
  std::vector<float> out = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, 3.4e38f, -3.4e38f};
  for (uint32_t b = 0; b < max_finite; b += 7) {
    const double lo = decode(static_cast<uint16_t>(b));
    const auto mid = static_cast<float>((lo + decode(static_cast<uint16_t>(b + 1))) / 2);
    for (float f :
         {static_cast<float>(lo), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      out.push_back(f);
      out.push_back(-f);
    }
  }
  std::mt19937 rng(5);
  for (int i = 0; i < 100000; ++i)
    out.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  return out;
}

void expect_same_float(float expected, float actual, uint16_t input) {
  if (std::isnan(expected)) {
    ASSERT_TRUE(std::isnan(actual)) << std::hex << input;
  } else {
    ASSERT_EQ(std::bit_cast<uint32_t>(actual), std::bit_cast<uint32_t>(expected))
        << std::hex << input;
  }
}

using WidenFn = void (*)(float*, const uint16_t*, size_t);
using NarrowFn = void (*)(uint16_t*, const float*, size_t);

// Every f16 pattern through a widening loop, starting one element in (unaligned) with an odd
// length so the tail path runs too.
void check_widen_f16(WidenFn widen) {
  const std::vector<uint16_t> in = every_pattern();
  std::vector<float> out(in.size());
  widen(out.data() + 1, in.data() + 1, in.size() - 2);
  for (size_t i = 1; i + 1 < in.size(); ++i)
    expect_same_float(half::to_float(in[i]), out[i], in[i]);
}

void check_narrow(NarrowFn narrow, uint16_t (*scalar)(float), bool (*is_nan)(uint16_t),
                  const std::vector<float>& in) {
  std::vector<uint16_t> out(in.size() + 1);
  narrow(out.data() + 1, in.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_TRUE(!std::isnan(in[i]) || is_nan(out[i + 1])) << i;
    ASSERT_EQ(out[i + 1], scalar(in[i])) << std::hexfloat << in[i];  // NaN payloads too
  }
}

TEST(Convert16Test, WidenF16PortableMatchesScalarForEveryPattern) {
  check_widen_f16(detail::widen_f16_portable);
}

TEST(Convert16Test, WidenF16F16cMatchesScalarForEveryPattern) {
  if (!detail::cpu_has_f16c()) GTEST_SKIP() << "this CPU has no F16C";
  check_widen_f16(detail::widen_f16_f16c);
}

TEST(Convert16Test, NarrowF16BothFlavoursMatchReference) {
  const std::vector<float> in = probe_floats(testing::decode_half, 0x7bff);
  for (float f : in) {  // the scalar conversion agrees with the independent table
    if (std::isnan(f)) continue;
    ASSERT_EQ(half::from_float(f), testing::half_table().encode(f, 0));
  }
  check_narrow(detail::narrow_f16_portable, half::from_float, is_nan_half, in);
  if (detail::cpu_has_f16c()) {
    check_narrow(detail::narrow_f16_f16c, half::from_float, is_nan_half, in);
  }
}

TEST(Convert16Test, WidenBf16MatchesScalarForEveryPattern) {
  const std::vector<uint16_t> in = every_pattern();
  std::vector<float> out(in.size());
  detail::widen_bf16(out.data() + 1, in.data() + 1, in.size() - 2);
  for (size_t i = 1; i + 1 < in.size(); ++i)
    expect_same_float(bfloat16::to_float(in[i]), out[i], in[i]);
}

TEST(Convert16Test, NarrowBf16BothFlavoursMatchReference) {
  const std::vector<float> in = probe_floats(testing::decode_bf16, 0x7f7f);
  for (float f : in) {
    if (std::isnan(f)) continue;
    ASSERT_EQ(bfloat16::from_float(f), testing::bf16_table().encode(f, 0));
  }
  check_narrow(detail::narrow_bf16_baseline, bfloat16::from_float, is_nan_bf16, in);
  if (detail::cpu_has_f16c()) {
    check_narrow(detail::narrow_bf16_avx2, bfloat16::from_float, is_nan_bf16, in);
  }
}

TEST(Convert16Test, PublicEntryPointsRoundTripAndRejectOtherDtypes) {
  const uint16_t in[] = {0x3c00, 0xc000, 0x7c00, 0x0001, 0x7bff};  // 1, -2, inf, 2^-24, 65504
  float wide[5];
  widen_to_f32(wide, in, 5, DType::f16);
  EXPECT_EQ(wide[0], 1.0f);
  EXPECT_EQ(wide[1], -2.0f);
  EXPECT_EQ(wide[2], INFINITY);
  EXPECT_EQ(wide[3], 0x1p-24f);
  EXPECT_EQ(wide[4], 65504.0f);
  uint16_t back[5];
  narrow_from_f32(back, wide, 5, DType::f16);
  EXPECT_EQ(std::vector<uint16_t>(back, back + 5), std::vector<uint16_t>(in, in + 5));
  widen_to_f32(wide, in, 5, DType::bf16);
  EXPECT_EQ(wide[0], 0x1p-7f);  // bf16 0x3c00 = 2^-7
  narrow_from_f32(back, wide, 5, DType::bf16);
  EXPECT_EQ(std::vector<uint16_t>(back, back + 5), std::vector<uint16_t>(in, in + 5));
  try {
    widen_to_f32(wide, in, 1, DType::i32);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("i32"), std::string::npos) << e.what();
  }
  testing::expect_error_naming<InvalidArgument>(
      [&] { narrow_from_f32(back, wide, 1, DType::f32); },
      {"narrow_from_f32: dtype f32 is not a 16-bit float; pass f16 or bf16"});
}

}  // namespace
}  // namespace lockstep
