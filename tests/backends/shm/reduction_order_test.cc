// What the shm backend's reductions compute, beyond the closed forms of tests/group: every rank
// gets bit-identical results (rank-order sums: ((x0 + x1) + x2) ...), on the one-sync path and on
// the pipelined one (with the fused kernels for large outputs), and f16/bf16 sums of more than two
// ranks accumulate in f32 and round once.
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

// Outputs of 8 MiB and more take the fused kernels (stream_reduce.h): the same sums, bit for bit,
// whatever the alignment of input and output (offset by one element: scalar heads and tails).
TEST(ShmReductionOrder, LargeOutputsGetTheRankOrderSumBitForBit) {
  constexpr size_t kStreaming = 2'500'003;  // 10 MB of f32 per rank and buffer
  for (int ranks : {2, 3})
    spawn_groups(
        ranks,
        [&](ProcessGroup& pg) {
          const int n = pg.size();
          auto want = [&](size_t i) {
            float acc = wild(0, i);
            for (int r = 1; r < n; ++r) acc = acc + wild(r, i);
            return acc;
          };
          std::vector<float> x(n * kStreaming + 1), out(n * kStreaming + 1);
          for (size_t i = 0; i < x.size() - 1; ++i) x[i + 1] = wild(pg.rank(), i);
          pg.all_reduce(BufferView{x.data() + 1, kStreaming, DType::f32},
                        BufferView{out.data() + 1, kStreaming, DType::f32})
              ->wait();
          for (size_t i = 0; i < kStreaming; ++i) {
            const float w = want(i);
            ASSERT_EQ(std::memcmp(&out[i + 1], &w, sizeof w), 0)
                << "all_reduce, " << n << " ranks, rank " << pg.rank() << " element " << i;
          }
          // f64, in place (the output is the rank's own source).
          std::vector<double> y(kStreaming);
          for (size_t i = 0; i < kStreaming; ++i) y[i] = wild(pg.rank(), i) / 3.0;
          pg.all_reduce(view(y))->wait();
          for (size_t i = 0; i < kStreaming; ++i) {
            double w = wild(0, i) / 3.0;
            for (int r = 1; r < n; ++r) w = w + wild(r, i) / 3.0;
            ASSERT_EQ(std::memcmp(&y[i], &w, sizeof w), 0)
                << "f64 all_reduce, " << n << " ranks, rank " << pg.rank() << " element " << i;
          }
          // reduce_scatter: rank r gets elements [r * kStreaming, (r + 1) * kStreaming).
          pg.reduce_scatter(BufferView{x.data() + 1, n * kStreaming, DType::f32},
                            BufferView{out.data(), kStreaming, DType::f32})
              ->wait();
          for (size_t i = 0; i < kStreaming; ++i) {
            const float w = want(static_cast<size_t>(pg.rank()) * kStreaming + i);
            ASSERT_EQ(std::memcmp(&out[i], &w, sizeof w), 0)
                << "reduce_scatter, " << n << " ranks, rank " << pg.rank() << " element " << i;
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
