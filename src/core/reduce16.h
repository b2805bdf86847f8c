// Fused reduction loops for the 16-bit float types: each block of 8 elements is widened to f32,
// reduced, and rounded once (nearest even) back to 16 bits, without a pass through memory in f32.
//
// Two flavours, picked once per process: an AVX2 + F16C one on x86 CPUs that have them, and a
// baseline one (SSE2 on x86-64, plain code elsewhere; f16 conversion there is the portable integer
// code, slow but exact). Both round identically; only NaN payloads may differ.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lockstep/core/dtype.h"
#include "lockstep/core/reduce_op.h"

namespace lockstep::detail {

// dst[i] = a[i] op b[i] for dtype f16 or bf16 (avg reduces like sum). dst may equal a or b;
// no other overlap. REQUIRES reduce_op_supports(op, dtype).
void reduce_16bit(uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t count, DType dtype,
                  ReduceOp op);

// Whether reduce_16bit uses the AVX2 + F16C flavour on this machine.
bool reduce_16bit_uses_avx2();

// The baseline flavour, always available; for tests that compare the two.
void reduce_16bit_baseline(uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t count,
                           DType dtype, ReduceOp op);

}  // namespace lockstep::detail
