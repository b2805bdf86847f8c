#include "ddp/bucket_memory.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace lockstep::ddp {

namespace {

class HostMemory final : public BucketMemory {
 public:
  Device device() const override { return {}; }
  std::shared_ptr<std::byte> allocate(size_t bytes) override {
    bytes = std::max(bytes, kBucketAlignment);
    auto* memory =
        static_cast<std::byte*>(::operator new[](bytes, std::align_val_t{kBucketAlignment}));
    std::memset(memory, 0, bytes);
    return std::shared_ptr<std::byte>(
        memory, [](std::byte* m) { ::operator delete[](m, std::align_val_t{kBucketAlignment}); });
  }
  void zero(BufferView slot) override { std::memset(slot.data, 0, slot.bytes()); }
  void copy(BufferView dst, ConstBufferView src) override {
    std::memcpy(dst.data, src.data, src.bytes());
  }
};

}  // namespace

BucketMemory& host_memory() {
  static HostMemory memory;
  return memory;
}

}  // namespace lockstep::ddp
