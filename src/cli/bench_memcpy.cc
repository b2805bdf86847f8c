#include "cli/bench_memcpy.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>

namespace lockstep::cli::bench {

MemcpyBandwidth measure_memcpy(const MemcpyOptions& options) {
  const size_t bytes = std::max<size_t>(options.bytes, 1);
  // Distinct, fully written buffers: page faults happen here, not in the timed copies.
  auto src = std::make_unique<unsigned char[]>(bytes);
  auto dst = std::make_unique<unsigned char[]>(bytes);
  std::memset(src.get(), 0x5a, bytes);
  std::memset(dst.get(), 0, bytes);
  std::memcpy(dst.get(), src.get(), bytes);  // warm up
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < options.repetitions; ++i) {
    src[static_cast<size_t>(i) % bytes] = static_cast<unsigned char>(i);
    auto start = std::chrono::steady_clock::now();
    std::memcpy(dst.get(), src.get(), bytes);
    auto stop = std::chrono::steady_clock::now();
    // Keep the copy observable so that it cannot be elided.
    asm volatile("" : : "r"(dst.get()) : "memory");
    best = std::min(best, std::chrono::duration<double>(stop - start).count());
  }
  MemcpyBandwidth out{.bytes = bytes, .repetitions = options.repetitions};
  if (options.repetitions > 0 && best > 0) out.gbps = static_cast<double>(bytes) / best / 1e9;
  return out;
}

}  // namespace lockstep::cli::bench
