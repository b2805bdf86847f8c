// LibTorch tensors in lockstep::rpc calls (include/lockstep/rpc/value.h): at::Tensor to
// rpc::Tensor and back, without copying the elements.
//
//   rpc::Value args = rpc::List{to_rpc(weight), to_rpc(bias)};   // sent from weight's own bytes
//   at::Tensor w = from_rpc(reply.as_list().at(0).as_tensor());  // over the received bytes
//
// Element types map one to one, by torch's names (docs/rpc.md's table):
//   f32 Float, f64 Double, f16 Half, bf16 BFloat16, i8 Char, u8 Byte, i16 Short, i32 Int,
//   i64 Long, boolean Bool, c64 ComplexFloat, c128 ComplexDouble.
// Only dense CPU tensors travel, as in Python (lockstep.rpc); there is no autograd across calls.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include "lockstep/rpc/value.h"

namespace lockstep::torch {

// The rpc::Tensor of `tensor`'s data: its shape and element type, and its bytes, which it shares
// (owner holds a detached alias of the at::Tensor, so the storage lives as long as the rpc::Tensor
// or a message that carries it). No copy when the tensor is contiguous with no pending conj or neg
// bit (the usual case); otherwise its values are made so first (a copy). The bytes are read when
// a call sends them, later than to_rpc returns: don't write the tensor in place until the call
// is answered (or make to_rpc(t.clone())).
// Errors (InvalidArgument, naming what is wrong): an undefined tensor; one not on the CPU; one not
// strided (sparse, mkldnn, ...); a dtype with no element type above (named, e.g. UInt16).
rpc::Tensor to_rpc(const at::Tensor& tensor);

// An at::Tensor over `tensor`'s bytes (at::from_blob; no copy), of its shape and dtype; its
// storage holds tensor.owner until the last at::Tensor sharing it is gone. It aliases the bytes:
// over a tensor this process received, or made with rpc::Tensor::zeros, it may be written; over
// one made by to_rpc, writes reach the original at::Tensor. A tensor without an owner must have
// its bytes outlive the result.
// Errors (InvalidArgument): an element type outside the table (its number shown), a negative
// dimension, nbytes other than the shape's product times the element's size (both shown), or no
// data for a non-empty tensor.
at::Tensor from_rpc(const rpc::Tensor& tensor);

// The torch dtype of an element type, and back (InvalidArgument as above).
c10::ScalarType scalar_type_of(rpc::ElementType type);
rpc::ElementType element_type_of(c10::ScalarType type);

}  // namespace lockstep::torch
