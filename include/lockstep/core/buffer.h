// Non-owning views of contiguous element buffers, the unit every collective takes.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "lockstep/core/dtype.h"

namespace lockstep {

// A writable run of `count` elements of `dtype` at `data`. Does not own the memory: the caller
// keeps it alive (and does not touch it) until the Work that uses it has completed.
struct BufferView {
  void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::f32;
  size_t bytes() const { return count * element_size(dtype); }
};

// A read-only run of elements. Every BufferView converts to one.
struct ConstBufferView {
  const void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::f32;
  ConstBufferView() = default;
  ConstBufferView(const void* d, size_t n, DType t) : data(d), count(n), dtype(t) {}
  ConstBufferView(const BufferView& v) : data(v.data), count(v.count), dtype(v.dtype) {}  // NOLINT
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
