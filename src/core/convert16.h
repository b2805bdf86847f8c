// Conversion loops between the 16-bit float types (f16, bf16) and f32, the building blocks of
// widen_to_f32/narrow_from_f32 and of the f16/bf16 reduction kernels. All round to nearest even;
// NaN stays NaN (quieted), infinities and subnormals are preserved.
//
// f16 has two implementations: F16C instructions (x86, chosen at run time when the CPU has them)
// and a portable integer one. Both give bit-identical results, NaN payloads included. The
// dispatching entry points pick once per process. Pointers need element alignment only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::detail {

using WidenFn = void (*)(float* dst, const uint16_t* src, size_t count);
using NarrowFn = void (*)(uint16_t* dst, const float* src, size_t count);

// bf16 <-> f32: a shift, and round-to-nearest-even on the way down. Vectorised loops; narrowing
// has an AVX2 flavour, chosen at run time.
void widen_bf16(float* dst, const uint16_t* src, size_t count);
void narrow_bf16(uint16_t* dst, const float* src, size_t count);
// The two narrowing flavours, for tests. REQUIRES cpu_has_f16c() for the AVX2 one.
void narrow_bf16_baseline(uint16_t* dst, const float* src, size_t count);
void narrow_bf16_avx2(uint16_t* dst, const float* src, size_t count);

// f16 <-> f32, whichever implementation this CPU supports best.
void widen_f16(float* dst, const uint16_t* src, size_t count);
void narrow_f16(uint16_t* dst, const float* src, size_t count);

// The two f16 implementations, exposed so tests can check them against each other.
void widen_f16_portable(float* dst, const uint16_t* src, size_t count);
void narrow_f16_portable(uint16_t* dst, const float* src, size_t count);
// Whether this CPU (and build) can run the F16C versions below (checked as AVX2 + F16C, the
// same test as the fused reduction loops).
bool cpu_has_f16c();
// REQUIRES cpu_has_f16c().
void widen_f16_f16c(float* dst, const uint16_t* src, size_t count);
void narrow_f16_f16c(uint16_t* dst, const float* src, size_t count);

}  // namespace lockstep::detail
