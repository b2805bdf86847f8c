// Throughput of the reduction kernels against memcpy of the same number of bytes.
// bytes_per_second counts destination bytes. Beyond the caches, reduce_into moves three streams
// (read dst, read src, write dst), like memcpy with its read-for-ownership of dst, so it can match
// memcpy; reduce_pair moves four. Compare ratios from one run: timings on shared cores are noisy.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "core/reduce.h"

namespace lockstep {
namespace {

std::vector<char> filled(size_t bytes, char seed) {
  std::vector<char> out(bytes);
  // Small positive values in every dtype, so no NaN/inf/denormal slow paths.
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<char>(i % 2 == 1 ? 0x3c : seed);
  return out;
}

void bm_memcpy(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  std::vector<char> dst = filled(bytes, 1);
  const std::vector<char> src = filled(bytes, 2);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

void bm_reduce_into(benchmark::State& state, DType dtype, ReduceOp op) {
  const auto bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / element_size(dtype);
  std::vector<char> dst = filled(bytes, 1);
  const std::vector<char> src = filled(bytes, 2);
  for (auto _ : state) {
    reduce_into(dst.data(), src.data(), count, dtype, op);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

void bm_reduce_pair(benchmark::State& state, DType dtype, ReduceOp op) {
  const auto bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / element_size(dtype);
  std::vector<char> dst(bytes);
  const std::vector<char> a = filled(bytes, 1);
  const std::vector<char> b = filled(bytes, 2);
  for (auto _ : state) {
    reduce_pair(dst.data(), a.data(), b.data(), count, dtype, op);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

constexpr int64_t kSmall = 64 << 10;  // fits in L2
constexpr int64_t kLarge = 16 << 20;  // beyond the caches

BENCHMARK(bm_memcpy)->Arg(kSmall)->Arg(kLarge);
BENCHMARK_CAPTURE(bm_reduce_into, f32_sum, DType::f32, ReduceOp::sum)->Arg(kSmall)->Arg(kLarge);
BENCHMARK_CAPTURE(bm_reduce_into, f32_max, DType::f32, ReduceOp::max)->Arg(kSmall)->Arg(kLarge);
BENCHMARK_CAPTURE(bm_reduce_into, f64_sum, DType::f64, ReduceOp::sum)->Arg(kSmall)->Arg(kLarge);
BENCHMARK_CAPTURE(bm_reduce_into, i32_sum, DType::i32, ReduceOp::sum)->Arg(kSmall)->Arg(kLarge);
BENCHMARK_CAPTURE(bm_reduce_into, bf16_sum, DType::bf16, ReduceOp::sum)->Arg(kSmall)->Arg(kLarge);
BENCHMARK_CAPTURE(bm_reduce_into, f16_sum, DType::f16, ReduceOp::sum)->Arg(kSmall)->Arg(kLarge);
BENCHMARK_CAPTURE(bm_reduce_pair, f32_sum, DType::f32, ReduceOp::sum)->Arg(kSmall)->Arg(kLarge);
BENCHMARK_CAPTURE(bm_reduce_pair, bf16_sum, DType::bf16, ReduceOp::sum)->Arg(kSmall)->Arg(kLarge);

}  // namespace
}  // namespace lockstep

BENCHMARK_MAIN();
