#include "lockstep/comm/shared_buffer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "lockstep/core/error.h"

namespace lockstep {

namespace {

constexpr size_t kPage = 4096;

}  // namespace

SharedBuffer SharedBuffer::local(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + kPage - 1) / kPage * kPage;
  void* p = std::aligned_alloc(kPage, rounded);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return SharedBuffer(std::shared_ptr<void>(p, [](void* q) { std::free(q); }), bytes, false);
}

BufferView SharedBuffer::view(DType dtype, size_t count, size_t offset_bytes) const {
  const size_t bytes = count * element_size(dtype);
  LOCKSTEP_ENFORCE(offset_bytes <= bytes_ && bytes <= bytes_ - offset_bytes, InvalidArgument,
                   "SharedBuffer::view: ", count, " ", dtype_name(dtype), " elements (", bytes,
                   " bytes) at offset ", offset_bytes, " do not fit the buffer's ", bytes_,
                   " bytes");
  return BufferView{static_cast<std::byte*>(data()) + offset_bytes, count, dtype};
}

}  // namespace lockstep
