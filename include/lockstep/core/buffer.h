// Non-owning views of contiguous element buffers, the unit every collective takes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lockstep/core/dtype.h"

namespace lockstep {

// Where a buffer's elements live: host memory (the default) or one CUDA device, numbered as this
// process sees devices (after CUDA_VISIBLE_DEVICES). Only the nccl backend moves device buffers;
// the others refuse them with InvalidArgument (docs/nccl.md).
struct Device {
  enum class Kind : uint8_t { host, cuda };
  Kind kind = Kind::host;
  int index = 0;  // the CUDA device index; 0 for host
  static constexpr Device cuda(int index) { return Device{Kind::cuda, index}; }
  constexpr bool is_cuda() const { return kind == Kind::cuda; }
  friend constexpr bool operator==(const Device&, const Device&) = default;
};
// "cpu" or "cuda:1".
inline std::string device_name(Device d) {
  return d.is_cuda() ? "cuda:" + std::to_string(d.index) : std::string("cpu");
}

// A writable run of `count` elements of `dtype` at `data`. Does not own the memory: the caller
// keeps it alive (and does not touch it) until the Work that uses it has completed.
struct BufferView {
  void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::f32;
  Device device{};  // host unless set: BufferView{p, n, DType::f32, Device::cuda(local_rank)}
  size_t bytes() const { return count * element_size(dtype); }
};

// A read-only run of elements. Every BufferView converts to one.
struct ConstBufferView {
  const void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::f32;
  Device device{};
  ConstBufferView() = default;
  ConstBufferView(const void* d, size_t n, DType t, Device dev = {})
      : data(d), count(n), dtype(t), device(dev) {}
  ConstBufferView(const BufferView& v)  // NOLINT
      : data(v.data), count(v.count), dtype(v.dtype), device(v.device) {}
  size_t bytes() const { return count * element_size(dtype); }
};

// view(vec) / view(span): the dtype follows the element type.
template <class T>
BufferView view(std::span<T> s) {
  return BufferView{const_cast<std::remove_cv_t<T>*>(s.data()), s.size(), dtype_of<T>()};
}
template <class T>
BufferView view(std::vector<T>& v) {
  return view(std::span<T>(v));
}
template <class T>
ConstBufferView view(const std::vector<T>& v) {
  return ConstBufferView(v.data(), v.size(), dtype_of<T>());
}
// std::vector<bool> is not contiguous: use std::vector<uint8_t> with DType::boolean instead.
BufferView view(std::vector<bool>&) = delete;

}  // namespace lockstep
