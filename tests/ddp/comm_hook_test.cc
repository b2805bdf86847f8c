// The compression hooks: 16-bit on the wire, the average within 16-bit precision.
#include "ddp/comm_hook.h"

#include <gtest/gtest.h>

#include <cmath>

#include "harness.h"
#include "support/spawn.h"

namespace lockstep::ddp {
namespace {

using lockstep::testing::spawn_groups;
using testing::float_params;
using testing::VectorGrads;

// Rank r's gradient element i: spread over several orders of magnitude, up to `magnitude`.
double g_magnitude = 600.0 * 100;
float value(int r, size_t i) {
  return static_cast<float>(std::sin(0.37 * i + r) *
                            std::pow(10.0, static_cast<double>(i % 5) - 4) * g_magnitude);
}

// With values up to `magnitude`: near the top of f16's range (65504), a sum of three overflows
// unless each is divided by the group size first.
void check_compressed(DType wire, bool divide, double tolerance, double magnitude) {
  g_magnitude = magnitude;
  const int world = 3;
  auto params = float_params({300, 45});
  // One hook object for every rank (threads), as when ranks share one options struct.
  auto compress = compress_hook({.wire = wire, .divide_before_sum = divide});
  spawn_groups(world, [&](ProcessGroup& pg) {
    VectorGrads grads(params);
    int wire_ops = 0;
    ReducerOptions options;
    options.hook = [&](ProcessGroup& g, const BucketRef& b) {
      wire_ops += 1;
      return compress(g, b);
    };
    Reducer reducer(params, pg, grads, options);
    for (int it = 0; it < 2; ++it) {
      for (size_t p = 0; p < 2; ++p) {
        grads.grads[p].resize(params[p].count);
        for (size_t i = 0; i < params[p].count; ++i)
          grads.grads[p][i] = value(pg.rank() + it, i + p);
      }
      reducer.begin_backward();
      reducer.mark_ready(1);
      reducer.mark_ready(0);
      reducer.finalize();
      for (size_t p = 0; p < 2; ++p) {
        for (size_t i = 0; i < params[p].count; ++i) {
          double expected = 0;
          for (int r = 0; r < world; ++r) expected += value(r + it, i + p);
          expected /= world;
          double scale = 0;
          for (int r = 0; r < world; ++r)
            scale = std::max<double>(scale, std::fabs(value(r + it, i + p)));
          ASSERT_NEAR(grads.grads[p][i], expected, tolerance * scale + 1e-6)
              << dtype_name(wire) << " p" << p << "[" << i << "] rank " << pg.rank();
        }
      }
    }
    EXPECT_EQ(wire_ops, 2);  // one bucket, two iterations
  });
}

TEST(CompressHook, Fp16AveragesWithinHalfPrecisionEvenNearTheTopOfItsRange) {
  check_compressed(DType::f16, true, 2e-3, 60000);
}
TEST(CompressHook, Fp16AvgOpAveragesWithinHalfPrecision) {
  check_compressed(DType::f16, false, 2e-3, 6000);
}
TEST(CompressHook, Bf16AveragesWithinBfloat16Precision) {
  check_compressed(DType::bf16, true, 1.6e-2, 1e30);
}

TEST(CompressHook, IsNotExact) {
  // A value f16 cannot hold: the compressed average differs from the exact one (the hook really
  // narrows), by less than half precision.
  auto params = float_params({1});
  spawn_groups(2, [&](ProcessGroup& pg) {
    VectorGrads grads(params);
    ReducerOptions options;
    options.hook = compress_hook({.wire = DType::f16});
    Reducer reducer(params, pg, grads, options);
    grads.grads[0] = {1.0f + 1e-4f};
    reducer.begin_backward();
    reducer.mark_ready(0);
    reducer.finalize();
    EXPECT_NE(grads.grads[0][0], 1.0f + 1e-4f);
    EXPECT_NEAR(grads.grads[0][0], 1.0f + 1e-4f, 1e-3);
  });
}

// Gradients whose 16-bit roundings add up exactly, chosen so that the exact average differs from
// the average of the rounded values: the hook's result must be the latter, bit for bit, which only
// a hook that really sends 16-bit values gives (one that sent f32 would return the exact average).
//
// With 4 ranks (1/4 and the division of avg are exact), rank r's gradient element i is
// g = 4 * (y + delta), y = 1/4 + k / 64 with k in [0, 16): y and 4 y are exact in f16 and bf16 and
// so are all their partial sums (multiples of 1/64 below 2, multiples of 1/16 below 8). delta
// (2^-15 for f16, 2^-12 for bf16) is below half a unit in the last place of both y (divide before
// the sum) and 4 y (avg op), so the wire value is y (or 4 y) exactly, and the reduced result is
// the sum of the ys over ranks, while the exact average is that plus 4 delta.
void check_rounded_exactly(DType wire, bool divide) {
  constexpr int kWorld = 4;
  constexpr size_t kCount = 64;
  const double delta = wire == DType::f16 ? std::ldexp(1.0, -15) : std::ldexp(1.0, -12);
  auto y = [](int r, size_t i) { return 0.25 + static_cast<double>((i * 7 + r * 5) % 16) / 64; };
  auto params = float_params({kCount});
  spawn_groups(kWorld, [&](ProcessGroup& pg) {
    VectorGrads grads(params);
    ReducerOptions options;
    options.hook = compress_hook({.wire = wire, .divide_before_sum = divide});
    Reducer reducer(params, pg, grads, options);
    grads.grads[0].resize(kCount);
    for (size_t i = 0; i < kCount; ++i)
      grads.grads[0][i] = static_cast<float>(kWorld * (y(pg.rank(), i) + delta));
    reducer.begin_backward();
    reducer.mark_ready(0);
    reducer.finalize();
    for (size_t i = 0; i < kCount; ++i) {
      double rounded = 0;
      for (int r = 0; r < kWorld; ++r) rounded += y(r, i);
      const double exact = rounded + kWorld * delta;
      ASSERT_EQ(grads.grads[0][i], static_cast<float>(rounded))
          << dtype_name(wire) << (divide ? " divide" : " avg") << " [" << i << "] rank "
          << pg.rank() << "; the exact average is " << exact;
      ASSERT_NE(static_cast<float>(exact), static_cast<float>(rounded));
    }
  });
}

TEST(CompressHook, Fp16ResultIsTheSumOfTheHalfRoundedSharesExactly) {
  check_rounded_exactly(DType::f16, true);
}
TEST(CompressHook, Fp16AvgOpResultIsTheAverageOfTheHalfRoundedValuesExactly) {
  check_rounded_exactly(DType::f16, false);
}
TEST(CompressHook, Bf16ResultIsTheSumOfTheBfloat16RoundedSharesExactly) {
  check_rounded_exactly(DType::bf16, true);
}
TEST(CompressHook, Bf16AvgOpResultIsTheAverageOfTheBfloat16RoundedValuesExactly) {
  check_rounded_exactly(DType::bf16, false);
}

}  // namespace
}  // namespace lockstep::ddp
