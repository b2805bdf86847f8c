// SharedBuffer: memory from ProcessGroup::allocate. On the shm backend it lives in a shared-memory
// segment that every rank of the group maps, so that large collectives whose buffers are all in
// such memory skip the copy through the group's segment (docs/shm.md, "Buffers from allocate").
// On other backends it is ordinary memory, so code that allocates its buffers this way runs
// everywhere.
//
// Owning, and cheap to copy (copies share the memory). The memory goes away on this rank when the
// last copy does; peers keep their own mappings. Page-aligned and zero-filled.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "lockstep/core/buffer.h"
#include "lockstep/core/dtype.h"

namespace lockstep {

class SharedBuffer {
 public:
  SharedBuffer() = default;
  // memory must hold `bytes`; shared: whether the group's peers map it.
  SharedBuffer(std::shared_ptr<void> memory, size_t bytes, bool shared)
      : memory_(std::move(memory)), bytes_(bytes), shared_(shared) {}
  // Ordinary page-aligned, zero-filled memory of `bytes` (not shared with anyone).
  static SharedBuffer local(size_t bytes);

  void* data() const { return memory_.get(); }
  size_t size() const { return bytes_; }
  // Whether the group's peers map this memory (the shm backend): collectives whose buffers are
  // all such memory run without copies through the group's segment.
  bool shared() const { return shared_; }
  explicit operator bool() const { return memory_ != nullptr; }

  template <class T>
  T* as() const {
    return static_cast<T*>(data());
  }
  // The whole buffer as elements of T (size() / sizeof(T) of them).
  template <class T>
  std::span<T> span() const {
    return {as<T>(), bytes_ / sizeof(T)};
  }
  // `count` elements of dtype starting `offset_bytes` into the buffer. Throws InvalidArgument
  // when they do not fit.
  BufferView view(DType dtype, size_t count, size_t offset_bytes = 0) const;
  // The whole buffer as elements of dtype.
  BufferView view(DType dtype) const { return view(dtype, bytes_ / element_size(dtype)); }
  template <class T>
  BufferView view() const {
    return view(dtype_of<T>());
  }

  // Drops this handle's share of the memory.
  void reset() { *this = SharedBuffer(); }

 private:
  std::shared_ptr<void> memory_;
  size_t bytes_ = 0;
  bool shared_ = false;
};

}  // namespace lockstep
