// TypedBuffer: an owned element buffer of any DType, read and written as doubles, so tests can
// state expected values once for every dtype.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "lockstep/core/buffer.h"

namespace lockstep::testing {

class TypedBuffer {
 public:
  TypedBuffer(DType dtype, size_t count)
      : dtype_(dtype), count_(count), bytes_(count * element_size(dtype) + 1) {}

  void set(size_t i, double v) {
    void* p = bytes_.data() + i * element_size(dtype_);
    switch (dtype_) {
      case DType::f32:
        store(p, static_cast<float>(v));
        break;
      case DType::f64:
        store(p, v);
        break;
      case DType::f16:
        store(p, half(static_cast<float>(v)));
        break;
      case DType::bf16:
        store(p, bfloat16(static_cast<float>(v)));
        break;
      case DType::i8:
        store(p, static_cast<int8_t>(v));
        break;
      case DType::u8:
        store(p, static_cast<uint8_t>(v));
        break;
      case DType::i32:
        store(p, static_cast<int32_t>(v));
        break;
      case DType::i64:
        store(p, static_cast<int64_t>(v));
        break;
      case DType::boolean:
        store(p, static_cast<uint8_t>(v != 0));
        break;
    }
  }
  double get(size_t i) const {
    const void* p = bytes_.data() + i * element_size(dtype_);
    switch (dtype_) {
      case DType::f32:
        return load<float>(p);
      case DType::f64:
        return load<double>(p);
      case DType::f16:
        return static_cast<float>(load<half>(p));
      case DType::bf16:
        return static_cast<float>(load<bfloat16>(p));
      case DType::i8:
        return load<int8_t>(p);
      case DType::u8:
        return load<uint8_t>(p);
      case DType::i32:
        return load<int32_t>(p);
      case DType::i64:
        return static_cast<double>(load<int64_t>(p));
      case DType::boolean:
        return load<uint8_t>(p);
    }
    return 0;
  }
  template <class F>
  void fill(F f) {
    for (size_t i = 0; i < count_; ++i) set(i, f(i));
  }
  BufferView view() { return BufferView{bytes_.data(), count_, dtype_}; }
  // A view of elements [offset, offset + n).
  BufferView slice(size_t offset, size_t n) {
    return BufferView{bytes_.data() + offset * element_size(dtype_), n, dtype_};
  }
  size_t count() const { return count_; }
  DType dtype() const { return dtype_; }

 private:
  template <class T>
  static void store(void* p, T v) {
    std::memcpy(p, &v, sizeof(T));
  }
  template <class T>
  static T load(const void* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  }
  DType dtype_;
  size_t count_;
  std::vector<uint8_t> bytes_;  // +1 so that data() is never null, even for count 0
};

}  // namespace lockstep::testing
