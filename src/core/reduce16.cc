#include "core/reduce16.h"

#include <cstring>
#include <type_traits>

#include "core/cpu_features.h"
#include "core/half_bits.h"
#include "core/reduce_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LOCKSTEP_X86 1
#else
#define LOCKSTEP_X86 0
#endif

// GCC/Clang vector extensions: element-wise operators, compiled to whatever SIMD the enclosing
// function's target has. Everything taking or returning one is always_inline and shares its
// caller's target, so no vector crosses a real call boundary and the compilers' note that such a
// call's ABI depends on AVX is moot.
#if defined(__clang__)
#if __has_warning("-Wpsabi")
#pragma clang diagnostic ignored "-Wpsabi"
#endif
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace lockstep::detail {
namespace {

using f32x8 = float __attribute__((vector_size(32)));
using i32x8 = int32_t __attribute__((vector_size(32)));
using u32x8 = uint32_t __attribute__((vector_size(32)));
constexpr size_t kMaxBlock = 16;  // elements per loop step, the most any codec takes

// [bf16 NaN] The loops round only f32 values computed from bf16 inputs by +, * or selection. A NaN
// among them is an input NaN (quieted) or the default NaN, so its low 16 bits are zero: adding the
// rounding bias (at most 0x8000) cannot carry into the top half, and the NaN survives. Hence no
// NaN test here, unlike bfloat16::from_float, which must take any float.
constexpr uint32_t kBf16Bias = 0x7fffu;

// The last count % block elements, zero-padded to a full block so that the codec reduces them
// exactly like the body; copy_out writes back only the valid ones.
struct PaddedTail {
  uint16_t a[kMaxBlock] = {}, b[kMaxBlock] = {}, dst[kMaxBlock] = {};
  size_t n;
  PaddedTail(const uint16_t* from_a, const uint16_t* from_b, size_t count) : n(count) {
    std::memcpy(a, from_a, n * sizeof(uint16_t));
    std::memcpy(b, from_b, n * sizeof(uint16_t));
  }
  void copy_out(uint16_t* to) const { std::memcpy(to, dst, n * sizeof(uint16_t)); }
};

namespace baseline {
#define LOCKSTEP_TARGET
#include "core/reduce16_loops.inc"
#undef LOCKSTEP_TARGET

// Portable f16: exact integer conversion lane by lane. Correct everywhere, not fast.
struct F16PortableCodec {
  static constexpr size_t kBlock = 8;
  template <class Op>
  static void block(uint16_t* dst, const uint16_t* a, const uint16_t* b) {
    f32x8 fa, fb;
    for (size_t i = 0; i < kBlock; ++i) {
      fa[i] = half_bits_to_float(a[i]);
      fb[i] = half_bits_to_float(b[i]);
    }
    const f32x8 r = apply8<Op>(fa, fb);
    for (size_t i = 0; i < kBlock; ++i) dst[i] = float_to_half_bits(r[i]);
  }
};
}  // namespace baseline

#if LOCKSTEP_X86
namespace avx2 {
#define LOCKSTEP_TARGET __attribute__((target("avx2,f16c")))
#include "core/reduce16_loops.inc"

struct F16cCodec {
  static constexpr size_t kBlock = 8;
  template <class Op>
  [[gnu::always_inline]] inline LOCKSTEP_TARGET static void block(uint16_t* dst, const uint16_t* a,
                                                                  const uint16_t* b) {
    const f32x8 fa = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a)));
    const f32x8 fb = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
    const __m128i h =
        _mm256_cvtps_ph(apply8<Op>(fa, fb), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), h);
  }
};
#undef LOCKSTEP_TARGET
}  // namespace avx2
#endif

}  // namespace

bool reduce_16bit_uses_avx2() {
  return cpu_has_avx2_f16c();
}

void reduce_16bit_baseline(uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t count,
                           DType dtype, ReduceOp op) {
  using namespace baseline;
  if (dtype == DType::bf16) return reduce_with<Bf16Codec>(dst, a, b, count, op);
  if (dtype == DType::f16) return reduce_with<F16PortableCodec>(dst, a, b, count, op);
}

void reduce_16bit(uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t count, DType dtype,
                  ReduceOp op) {
#if LOCKSTEP_X86
  if (reduce_16bit_uses_avx2()) {
    if (dtype == DType::bf16) return avx2::reduce_with<avx2::Bf16Codec>(dst, a, b, count, op);
    if (dtype == DType::f16) return avx2::reduce_with<avx2::F16cCodec>(dst, a, b, count, op);
  }
#endif
  reduce_16bit_baseline(dst, a, b, count, dtype, op);
}

}  // namespace lockstep::detail
