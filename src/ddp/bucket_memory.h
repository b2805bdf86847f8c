// [Bucket memory] Where the reducer's buckets live: host memory by default, or the memory of the
// parameters' device, which the framework adapter provides (LibTorch's CUDA allocator). Every
// buffer the reducer hands a collective (bucket, slot, received shard) is tagged with device(),
// so that the group routes it: CUDA buffers to nccl, host ones to shm or tcp (docs/nccl.md).
// The reducer's own bookkeeping (the used-parameter bitmap, the rebuild's order) stays on the
// host.
#pragma once

#include <cstddef>
#include <memory>

#include "lockstep/core/buffer.h"

namespace lockstep::ddp {

inline constexpr size_t kBucketAlignment = 64;

class BucketMemory {
 public:
  virtual ~BucketMemory() = default;
  virtual Device device() const = 0;
  // At least max(bytes, kBucketAlignment) zero-filled bytes, aligned to kBucketAlignment, on
  // device(). Freed when the last copy of the pointer goes.
  virtual std::shared_ptr<std::byte> allocate(size_t bytes) = 0;
  // Zero-fills `slot` (memory from allocate).
  virtual void zero(BufferView slot) = 0;
  // Copies src into dst (same size; both from allocate).
  virtual void copy(BufferView dst, ConstBufferView src) = 0;
};

// Host memory: aligned operator new, memset, memcpy. One object for the whole process.
BucketMemory& host_memory();

}  // namespace lockstep::ddp
