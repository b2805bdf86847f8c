#include "backends/shm/copy.h"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace lockstep::shm {

namespace {

constexpr size_t kBlock = 128;  // bytes per loop iteration: four 32-byte stores

__attribute__((target("avx2"))) void stream_avx2(std::byte* d, const std::byte* s, size_t n) {
  for (size_t i = 0; i < n; i += kBlock) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 64));
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 96), e);
  }
  _mm_sfence();
}

bool has_avx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
}

}  // namespace

void stream_copy(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  const size_t head = (32 - reinterpret_cast<uintptr_t>(d) % 32) % 32;
  if (!has_avx2() || bytes < head + 4 * kBlock) {
    std::memcpy(d, s, bytes);
    return;
  }
  std::memcpy(d, s, head);
  const size_t body = (bytes - head) / kBlock * kBlock;
  stream_avx2(d + head, s + head, body);
  std::memcpy(d + head + body, s + head + body, bytes - head - body);
}

}  // namespace lockstep::shm
