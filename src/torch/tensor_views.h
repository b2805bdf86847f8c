// Between LibTorch tensors and lockstep buffers: dtype mapping and non-owning views. Internal to
// lockstep_torch (ddp.cc, comm_hooks.cc, tensor_memory.h) and src/c10d.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <optional>
#include <string_view>

#include "lockstep/core/buffer.h"
#include "lockstep/core/error.h"

namespace lockstep::torch::detail {

inline std::optional<DType> to_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return DType::f32;
    case at::kDouble:
      return DType::f64;
    case at::kHalf:
      return DType::f16;
    case at::kBFloat16:
      return DType::bf16;
    case at::kChar:
      return DType::i8;
    case at::kByte:
      return DType::u8;
    case at::kInt:
      return DType::i32;
    case at::kLong:
      return DType::i64;
    case at::kBool:
      return DType::boolean;
    default:
      return std::nullopt;
  }
}

inline at::ScalarType to_scalar_type(DType t) {
  switch (t) {
    case DType::f32:
      return at::kFloat;
    case DType::f64:
      return at::kDouble;
    case DType::f16:
      return at::kHalf;
    case DType::bf16:
      return at::kBFloat16;
    case DType::i8:
      return at::kChar;
    case DType::u8:
      return at::kByte;
    case DType::i32:
      return at::kInt;
    case DType::i64:
      return at::kLong;
    case DType::boolean:
      return at::kBool;
  }
  return at::kFloat;
}

// The device of a tensor as lockstep tags buffers: host, or cuda:N. InvalidArgument, prefixed
// with `what`, otherwise.
inline Device device_tag(const at::Tensor& t, std::string_view what = "lockstep") {
  if (t.device().is_cpu()) return Device{};
  LOCKSTEP_ENFORCE(t.device().is_cuda(), InvalidArgument, what, ": tensors on ", t.device(),
                   " are not supported (CPU, or CUDA with the nccl backend)");
  return Device::cuda(t.device().index());
}

inline at::Device torch_device(Device d) {
  if (!d.is_cuda()) return at::Device(at::kCPU);
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(d.index));
}

// The elements of a contiguous CPU or CUDA tensor, tagged with its device. REQUIRES
// t.is_contiguous(), a mapped dtype.
inline BufferView buffer_of(const at::Tensor& t) {
  auto dtype = to_dtype(t.scalar_type());
  LOCKSTEP_ENFORCE(dtype && t.is_contiguous(), InvalidArgument, "lockstep: tensor of dtype ",
                   t.scalar_type(), " on ", t.device(),
                   " cannot be communicated (need a contiguous tensor of a numeric dtype)");
  return BufferView{t.data_ptr(), static_cast<size_t>(t.numel()), *dtype, device_tag(t)};
}

// A tensor of shape `sizes` over the memory of `slot` (on slot.device), not owning it. With
// `owner`, the tensor keeps that memory alive for as long as it (or any view of it) lives.
inline at::Tensor tensor_of(const BufferView& slot, at::IntArrayRef sizes,
                            std::shared_ptr<void> owner = nullptr) {
  auto options =
      at::TensorOptions().dtype(to_scalar_type(slot.dtype)).device(torch_device(slot.device));
  if (!owner) return at::from_blob(slot.data, sizes, options);
  return at::from_blob(
      slot.data, sizes, [owner](void*) mutable { owner.reset(); }, options);
}

}  // namespace lockstep::torch::detail
