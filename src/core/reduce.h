// Reduction kernels: vectorisable loops over contiguous memory, one instantiation per dtype and op
// (a switch per call, never a virtual call per element).
#pragma once

#include <cstddef>

#include "lockstep/core/dtype.h"
#include "lockstep/core/reduce_op.h"

namespace lockstep {

// dst[i] = dst[i] op src[i] for i < count. avg accumulates like sum (see finish_average).
// f16/bf16 compute each element in f32 and round once. REQUIRES reduce_op_supports(op, dtype).
void reduce_into(void* dst, const void* src, size_t count, DType dtype, ReduceOp op);
// dst[i] = a[i] op b[i]. dst may alias a or b.
void reduce_pair(void* dst, const void* a, const void* b, size_t count, DType dtype, ReduceOp op);
// For avg: dst[i] /= divisor (integers truncate toward zero).
void finish_average(void* data, size_t count, DType dtype, int divisor);
// Converts count f16/bf16 elements to f32 and back (for f32 accumulation of 16-bit types).
void widen_to_f32(float* dst, const void* src, size_t count, DType dtype);
void narrow_from_f32(void* dst, const float* src, size_t count, DType dtype);

}  // namespace lockstep
