// [Tensors] How torch tensors become lockstep buffers. Each op takes CPU tensors (any dtype
// lockstep has: f32, f64, f16, bf16, i8, u8, i32, i64; bool where lockstep allows it) or, in
// builds with the nccl backend, CUDA tensors. A contiguous tensor is communicated in place, with
// no copy. A non-contiguous one goes through a contiguous copy, written back when the op
// completes. Ops on lists of tensors (allgather, gather, scatter, reduce_scatter, alltoall, the
// coalesced forms) go through one flat buffer; the _base forms take the flat buffers directly.
// Every check throws lockstep's InvalidArgument, naming the op, before anything is sent.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <chrono>

#include <vector>

#include "lockstep/core/buffer.h"
#include "lockstep/core/reduce_op.h"

namespace lockstep::c10d_backend {

using Tensors = std::vector<at::Tensor>;

// The tensor as a lockstep buffer (it must be contiguous: see stage()).
BufferView view_of(const at::Tensor& contiguous, const char* op);

// A tensor as one contiguous buffer: itself, or a copy written back by write_back().
struct Staged {
  at::Tensor original, buffer;
  void write_back() const {
    if (!buffer.is_same(original)) original.copy_(buffer);
  }
};
Staged stage(const at::Tensor& t);

// The one tensor of a list that torch passes per device.
const at::Tensor& single(const Tensors& tensors, const char* op);
// One flat tensor holding the given tensors one after another.
at::Tensor flat_copy(const Tensors& tensors);
// Copies consecutive slices of flat into each tensor.
void unflatten_into(const at::Tensor& flat, const Tensors& tensors);

// Each of `tensors` has like's element count and dtype.
void require_same(const Tensors& tensors, const at::Tensor& like, const char* op, const char* what);
// `tensors` has `count` elements (one per rank).
void require_count(const Tensors& tensors, size_t count, const char* op, const char* what);
// Each large[i] has `factor` times small[i]'s elements, of its dtype (the per-rank forms).
void require_scaled(const Tensors& large, const Tensors& small, int64_t factor, const char* op,
                    const char* what);
// Every tensor has the first one's dtype and device.
void require_one_kind(const Tensors& tensors, const char* op);

// torch's reduce op as lockstep's (PREMUL_SUM has none: InvalidArgument naming `op`).
ReduceOp reduce_op(const ::c10d::ReduceOp& op, const char* name);
// torch's unset timeout (-1) is the group's.
std::chrono::milliseconds timeout_of(std::chrono::milliseconds t);

}  // namespace lockstep::c10d_backend
