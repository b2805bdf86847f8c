#include "core/convert16.h"

#include <bit>
#include <cstring>

#include "core/cpu_features.h"
#include "core/half_bits.h"
#include "core/reduce.h"
#include "core/reduce_kernels.h"
#include "lockstep/core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LOCKSTEP_X86 1
#else
#define LOCKSTEP_X86 0
#endif

namespace lockstep::detail {

namespace {

inline float bf16_to_f32(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

// Same rounding as bfloat16::from_float, written without branches so loops over it vectorise.
// The NaN test uses a signed compare (the magnitude fits in 31 bits), which SSE2 has.
inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  const bool is_nan = static_cast<int32_t>(u & 0x7fffffffu) > 0x7f800000;
  return static_cast<uint16_t>(is_nan ? quiet_nan : rounded);
}

}  // namespace

// Loops split as in reduce_kernels.h (vectorisable body, scalar tail).
void widen_bf16(float* __restrict dst, const uint16_t* __restrict src, size_t count) {
  const size_t body = vector_body(count);
  for (size_t i = 0; i < body; ++i) dst[i] = bf16_to_f32(src[i]);
  for (size_t i = body; i < count; ++i) dst[i] = bf16_to_f32(src[i]);
}

void narrow_bf16_baseline(uint16_t* __restrict dst, const float* __restrict src, size_t count) {
  const size_t body = vector_body(count);
  for (size_t i = 0; i < body; ++i) dst[i] = f32_to_bf16(src[i]);
  for (size_t i = body; i < count; ++i) dst[i] = f32_to_bf16(src[i]);
}

#if LOCKSTEP_X86

namespace {

// Eight floats rounded as f32_to_bf16 does, each result in the low half of its 32-bit lane.
__attribute__((target("avx2"))) inline __m256i bf16_lanes_avx2(const float* src) {
  const __m256 f = _mm256_loadu_ps(src);
  const __m256i u = _mm256_castps_si256(f);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
  const __m256i quiet_nan = _mm256_or_si256(u, _mm256_set1_epi32(0x00400000));
  const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
  return _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quiet_nan, is_nan), 16);
}

}  // namespace

__attribute__((target("avx2"))) void narrow_bf16_avx2(uint16_t* dst, const float* src,
                                                      size_t count) {
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    // packus interleaves per 128-bit half; the permute puts the four quarters back in order.
    const __m256i packed =
        _mm256_packus_epi32(bf16_lanes_avx2(src + i), bf16_lanes_avx2(src + i + 8));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm256_permute4x64_epi64(packed, 0xd8));
  }
  for (; i < count; ++i) dst[i] = f32_to_bf16(src[i]);
}

#else

void narrow_bf16_avx2(uint16_t* dst, const float* src, size_t count) {
  narrow_bf16_baseline(dst, src, count);
}

#endif

void narrow_bf16(uint16_t* dst, const float* src, size_t count) {
#if LOCKSTEP_X86
  if (cpu_has_avx2_f16c()) return narrow_bf16_avx2(dst, src, count);
#endif
  narrow_bf16_baseline(dst, src, count);
}

void widen_f16_portable(float* __restrict dst, const uint16_t* __restrict src, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = half_bits_to_float(src[i]);
}

void narrow_f16_portable(uint16_t* __restrict dst, const float* __restrict src, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = float_to_half_bits(src[i]);
}

#if LOCKSTEP_X86

bool cpu_has_f16c() {
  return cpu_has_avx2_f16c();
}

__attribute__((target("avx,f16c"))) void widen_f16_f16c(float* dst, const uint16_t* src,
                                                        size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  if (i == count) return;
  alignas(16) uint16_t in[8] = {};
  alignas(32) float out[8];
  std::memcpy(in, src + i, (count - i) * sizeof(uint16_t));
  _mm256_store_ps(out, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(in))));
  std::memcpy(dst + i, out, (count - i) * sizeof(float));
}

__attribute__((target("avx,f16c"))) void narrow_f16_f16c(uint16_t* dst, const float* src,
                                                         size_t count) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), kRound);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  if (i == count) return;
  alignas(32) float in[8] = {};
  alignas(16) uint16_t out[8];
  std::memcpy(in, src + i, (count - i) * sizeof(float));
  _mm_store_si128(reinterpret_cast<__m128i*>(out), _mm256_cvtps_ph(_mm256_load_ps(in), kRound));
  std::memcpy(dst + i, out, (count - i) * sizeof(uint16_t));
}

#else

bool cpu_has_f16c() {
  return false;
}
void widen_f16_f16c(float* dst, const uint16_t* src, size_t count) {
  widen_f16_portable(dst, src, count);
}
void narrow_f16_f16c(uint16_t* dst, const float* src, size_t count) {
  narrow_f16_portable(dst, src, count);
}

#endif

void widen_f16(float* dst, const uint16_t* src, size_t count) {
  static const WidenFn impl = cpu_has_f16c() ? widen_f16_f16c : widen_f16_portable;
  impl(dst, src, count);
}

void narrow_f16(uint16_t* dst, const float* src, size_t count) {
  static const NarrowFn impl = cpu_has_f16c() ? narrow_f16_f16c : narrow_f16_portable;
  impl(dst, src, count);
}

}  // namespace lockstep::detail

namespace lockstep {

void widen_to_f32(float* dst, const void* src, size_t count, DType dtype) {
  const auto* in = static_cast<const uint16_t*>(src);
  if (dtype == DType::f16) return detail::widen_f16(dst, in, count);
  if (dtype == DType::bf16) return detail::widen_bf16(dst, in, count);
  throw InvalidArgument(detail::concat("widen_to_f32: dtype ", dtype_name(dtype),
                                       " is not a 16-bit float; pass f16 or bf16"));
}

void narrow_from_f32(void* dst, const float* src, size_t count, DType dtype) {
  auto* out = static_cast<uint16_t*>(dst);
  if (dtype == DType::f16) return detail::narrow_f16(out, src, count);
  if (dtype == DType::bf16) return detail::narrow_bf16(out, src, count);
  throw InvalidArgument(detail::concat("narrow_from_f32: dtype ", dtype_name(dtype),
                                       " is not a 16-bit float; pass f16 or bf16"));
}

}  // namespace lockstep
