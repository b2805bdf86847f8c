// DType names and parsing, ReduceOp and Algorithm names, and the 16-bit float conversions of
// half and bfloat16, checked exhaustively or against the independent reference in
// float16_reference.h.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <set>
#include <string>

#include "core/float16_reference.h"
#include "lockstep/comm/options.h"
#include "lockstep/core/dtype.h"
#include "lockstep/core/error.h"
#include "lockstep/core/reduce_op.h"

namespace lockstep {
namespace {

using testing::bf16_table;
using testing::decode_bf16;
using testing::decode_half;
using testing::half_table;
using testing::is_nan_bf16;
using testing::is_nan_half;

std::string message_of(auto&& fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no InvalidArgument thrown)";
}

TEST(DTypeTest, NamesRoundTripThroughParse) {
  std::set<std::string_view> names;
  for (DType t : kAllDTypes) {
    EXPECT_EQ(parse_dtype(dtype_name(t)), t) << dtype_name(t);
    names.insert(dtype_name(t));
  }
  EXPECT_EQ(names.size(), std::size(kAllDTypes));
  EXPECT_EQ(dtype_name(DType::bf16), "bf16");
  EXPECT_EQ(dtype_name(DType::boolean), "bool");
}

TEST(DTypeTest, ParsesCommonAliasesInAnyCase) {
  const std::pair<const char*, DType> cases[] = {
      {"float32", DType::f32},   {"float", DType::f32},    {"float64", DType::f64},
      {"double", DType::f64},    {"float16", DType::f16},  {"half", DType::f16},
      {"bfloat16", DType::bf16}, {"int8", DType::i8},      {"uint8", DType::u8},
      {"int32", DType::i32},     {"int", DType::i32},      {"int64", DType::i64},
      {"long", DType::i64},      {"bool", DType::boolean}, {"Float32", DType::f32},
      {"BF16", DType::bf16}};
  for (const auto& [name, dtype] : cases) EXPECT_EQ(parse_dtype(name), dtype) << name;
}

TEST(DTypeTest, ParseErrorNamesInputAndAcceptedValues) {
  for (const char* bad : {"float128", "", "f 32", "i16"}) {
    const std::string msg = message_of([&] { parse_dtype(bad); });
    EXPECT_NE(msg.find(std::string("\"") + bad + "\""), std::string::npos) << msg;
    for (const char* accepted : {"f32", "float32", "bf16", "int64", "bool"})
      EXPECT_NE(msg.find(accepted), std::string::npos) << accepted << " missing from: " << msg;
  }
}

TEST(DTypeTest, ElementSizeMatchesCppTypes) {
  EXPECT_EQ(element_size(dtype_of<float>()), sizeof(float));
  EXPECT_EQ(element_size(dtype_of<double>()), sizeof(double));
  EXPECT_EQ(element_size(dtype_of<half>()), sizeof(half));
  EXPECT_EQ(element_size(dtype_of<bfloat16>()), sizeof(bfloat16));
  EXPECT_EQ(element_size(dtype_of<int8_t>()), sizeof(int8_t));
  EXPECT_EQ(element_size(dtype_of<uint8_t>()), sizeof(uint8_t));
  EXPECT_EQ(element_size(dtype_of<int32_t>()), sizeof(int32_t));
  EXPECT_EQ(element_size(dtype_of<int64_t>()), sizeof(int64_t));
  EXPECT_EQ(element_size(dtype_of<bool>()), sizeof(bool));
}

TEST(ReduceOpTest, NamesRoundTripAndAliasesParse) {
  std::set<std::string_view> names;
  for (ReduceOp op : kAllReduceOps) {
    EXPECT_EQ(parse_reduce_op(reduce_op_name(op)), op) << reduce_op_name(op);
    names.insert(reduce_op_name(op));
  }
  EXPECT_EQ(names.size(), std::size(kAllReduceOps));
  EXPECT_EQ(parse_reduce_op("mean"), ReduceOp::avg);
  EXPECT_EQ(parse_reduce_op("product"), ReduceOp::prod);
  EXPECT_EQ(parse_reduce_op("SUM"), ReduceOp::sum);
  EXPECT_EQ(parse_reduce_op("bitwise_xor"), ReduceOp::bxor);
}

TEST(ReduceOpTest, ParseErrorNamesInputAndAcceptedValues) {
  const std::string msg = message_of([] { parse_reduce_op("median"); });
  EXPECT_NE(msg.find("\"median\""), std::string::npos) << msg;
  for (ReduceOp op : kAllReduceOps)
    EXPECT_NE(msg.find(reduce_op_name(op)), std::string::npos) << msg;
}

TEST(ReduceOpTest, SupportsMatchesTheDocumentedRules) {
  for (DType t : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      const bool bitwise = op == ReduceOp::band || op == ReduceOp::bor || op == ReduceOp::bxor;
      const bool expected = t != DType::boolean && (!bitwise || is_integer(t));
      EXPECT_EQ(reduce_op_supports(op, t), expected) << dtype_name(t) << " " << reduce_op_name(op);
    }
  }
}

TEST(AlgorithmTest, NamesAreDistinctAndReadable) {
  EXPECT_EQ(algorithm_name(Algorithm::automatic), "automatic");
  EXPECT_EQ(algorithm_name(Algorithm::ring), "ring");
  EXPECT_EQ(algorithm_name(Algorithm::recursive_doubling), "recursive_doubling");
  EXPECT_EQ(algorithm_name(Algorithm::tree), "tree");
  EXPECT_EQ(algorithm_name(Algorithm::chain), "chain");
  EXPECT_EQ(algorithm_name(Algorithm::direct), "direct");
}

// ---- half (IEEE binary16) ----

TEST(HalfTest, EveryBitPatternDecodesExactlyAndRoundTrips) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const float f = half::to_float(h);
    if (is_nan_half(h)) {  // sign and payload survive; a signalling NaN comes back quiet
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << b;
      ASSERT_EQ(half::from_float(f), h | 0x0200) << std::hex << b;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), decode_half(h)) << std::hex << b;
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << b;
    ASSERT_EQ(half::from_float(f), h) << std::hex << b;
  }
}

TEST(HalfTest, QuietNanPayloadSurvivesRoundTrip) {
  for (uint16_t h : {uint16_t{0x7e00}, uint16_t{0x7e01}, uint16_t{0xffff}, uint16_t{0x7fc0}})
    EXPECT_EQ(half::from_float(half::to_float(h)), h) << std::hex << h;
  EXPECT_TRUE(is_nan_half(half::from_float(std::bit_cast<float>(0x7f800001u))));  // low payload
}

TEST(HalfTest, RoundsHandPickedTiesToEven) {
  struct Case {
    float in;
    uint16_t out;
  };
  const Case cases[] = {
      {1.0f, 0x3c00},
      {1.0f + 0x1p-11f, 0x3c00},             // tie between 1 and 1+2^-10: even is 1
      {1.0f + 3 * 0x1p-11f, 0x3c02},         // tie between odd 0x3c01 and even 0x3c02
      {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01},  // just above the tie
      {-(1.0f + 0x1p-11f), 0xbc00},
      {65504.0f, 0x7bff},  // largest half
      {65519.0f, 0x7bff},  // below the overflow tie
      {65520.0f, 0x7c00},  // tie with 65536: rounds to even, i.e. inf
      {-65520.0f, 0xfc00},
      {0x1p-24f, 0x0001},  // smallest subnormal
      {0x1p-25f, 0x0000},  // tie between 0 and 2^-24: even is 0
      {std::nextafter(0x1p-25f, 1.0f), 0x0001},
      {3 * 0x1p-25f, 0x0002},        // tie between 1 and 2 subnormal steps
      {1023.5f * 0x1p-24f, 0x0400},  // tie between largest subnormal and smallest normal
      {0x1p-14f, 0x0400},            // smallest normal
      {-0.0f, 0x8000},
      {1e-45f, 0x0000},  // float subnormal
      {-1e-45f, 0x8000},
      {INFINITY, 0x7c00},
      {-INFINITY, 0xfc00},
      {1e30f, 0x7c00},
  };
  for (const auto& c : cases) EXPECT_EQ(half::from_float(c.in), c.out) << std::hexfloat << c.in;
}

// Every rounding boundary: for each finite half, its value, the midpoint to the next one, and
// the floats on either side of that midpoint; plus random float bit patterns.
TEST(HalfTest, FromFloatMatchesDoubleReference) {
  std::vector<float> inputs;
  for (uint32_t b = 0; b < 0x7bff; ++b) {
    const double lo = decode_half(static_cast<uint16_t>(b));
    const auto mid = static_cast<float>((lo + decode_half(static_cast<uint16_t>(b + 1))) / 2);
    for (float f :
         {static_cast<float>(lo), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      inputs.push_back(f);
      inputs.push_back(-f);
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 1'000'000; ++i)
    inputs.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  for (float f : inputs) {
    const uint16_t expected = half_table().encode(f, 0x7e00);
    const uint16_t actual = half::from_float(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(is_nan_half(actual)) << std::hex << std::bit_cast<uint32_t>(f);
    } else {
      ASSERT_EQ(actual, expected) << std::hexfloat << f;
    }
  }
}

// ---- bfloat16 (the header's inline conversions) ----

TEST(Bfloat16Test, EveryBitPatternDecodesExactlyAndRoundTrips) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const float f = bfloat16::to_float(h);
    if (is_nan_bf16(h)) {  // sign and payload survive; a signalling NaN comes back quiet
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
      ASSERT_EQ(bfloat16::from_float(f), h | 0x0040) << std::hex << b;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), decode_bf16(h)) << std::hex << b;
    ASSERT_EQ(bfloat16::from_float(f), h) << std::hex << b;
  }
}

TEST(Bfloat16Test, FromFloatMatchesDoubleReference) {
  std::mt19937 rng(11);
  for (int i = 0; i < 1'000'000; ++i) {
    // Half the inputs sit exactly on or next to a rounding midpoint.
    auto bits = static_cast<uint32_t>(rng());
    if (i % 2 == 0) bits = (bits & 0xffff0000u) | 0x8000u | ((bits & 3u) == 0 ? 1u : 0u);
    const float f = std::bit_cast<float>(bits);
    const uint16_t actual = bfloat16::from_float(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(is_nan_bf16(actual)) << std::hex << bits;
    } else {
      ASSERT_EQ(actual, bf16_table().encode(f, 0x7fc0)) << std::hex << bits;
    }
  }
}

}  // namespace
}  // namespace lockstep
