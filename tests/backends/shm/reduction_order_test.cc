// What the shm backend's reductions compute, beyond the closed forms of tests/group: every rank
// gets bit-identical results (rank-order sums: ((x0 + x1) + x2) ...), on the one-sync path and on
// the pipelined one, and f16/bf16 sums of more than two ranks accumulate in f32 and round once.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "support/spawn.h"
#include "support/typed_buffer.h"

namespace lockstep::testing {
namespace {

constexpr size_t kSmall = 1000, kLarge = 1'000'003;

// Values of very different magnitudes, so that the order of additions shows in the last bits.
float wild(int rank, size_t i) {
  uint32_t h = static_cast<uint32_t>(i * 2654435761u) ^ static_cast<uint32_t>(rank * 40503u);
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  const float mantissa = static_cast<float>(h % 100000) / 7.0f;
  const int exponent = static_cast<int>((h >> 20) % 24) - 12;
  return (h & 1 ? -1.0f : 1.0f) * std::ldexp(mantissa, exponent);
}

TEST(ShmReductionOrder, EveryRankGetsTheRankOrderSumBitForBit) {
  for (size_t count : {kSmall, kLarge})
    spawn_groups(
        3,
        [&](ProcessGroup& pg) {
          std::vector<float> x(count), sum(count);
          for (size_t i = 0; i < count; ++i) x[i] = wild(pg.rank(), i);
          pg.all_reduce(view(x), view(sum))->wait();
          for (size_t i = 0; i < count; ++i) {
            const float want = (wild(0, i) + wild(1, i)) + wild(2, i);
            ASSERT_EQ(std::memcmp(&sum[i], &want, sizeof want), 0)
                << "count " << count << " rank " << pg.rank() << " element " << i << ": " << sum[i]
                << " != " << want;
          }
        },
        "shm");
}

// 2048 + 1 + 1 in f16 (spacing 2 at 2048): adding in f16 gives 2048 twice over (each 2049 rounds
// to even); adding in f32 gives 2050, which f16 holds exactly. bf16 (spacing 2 at 256): 256 + 1
// + 1.
TEST(ShmReductionOrder, HalfPrecisionSumsOfThreeRanksAccumulateInF32) {
  for (auto [dtype, big, want] :
       {std::tuple{DType::f16, 2048.0, 2050.0}, {DType::bf16, 256.0, 258.0}})
    for (size_t count : {kSmall, kLarge})
      spawn_groups(
          3,
          [&](ProcessGroup& pg) {
            TypedBuffer x(dtype, count);
            x.fill([&](size_t) { return pg.rank() == 0 ? big : 1.0; });
            pg.all_reduce(x.view())->wait();
            for (size_t i = 0; i < count; ++i)
              ASSERT_EQ(x.get(i), want)
                  << dtype_name(dtype) << " count " << count << " element " << i;
            // avg as well: (2048 + 2) / 3 in f32, rounded once.
            x.fill([&](size_t) { return pg.rank() == 0 ? big : 1.0; });
            pg.all_reduce(x.view(), {.op = ReduceOp::avg})->wait();
            TypedBuffer once(dtype, 1);
            once.set(0, static_cast<float>(want) / 3.0f);
            for (size_t i = 0; i < count; ++i)
              ASSERT_EQ(x.get(i), once.get(0)) << "avg element " << i;
          },
          "shm");
}

}  // namespace
}  // namespace lockstep::testing
