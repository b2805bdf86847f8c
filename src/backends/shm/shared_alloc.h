// SharedAllocations: the buffers ProcessGroup::allocate hands out on the shm backend, and how this
// rank finds its peers' buffers in them.
//
// [Allocation files] Each allocate call makes one file in /dev/shm through the [Shared files]
// protocol of segment.h (rank 0 creates it and publishes the name through the store, every rank
// maps all of it, the last one to map unlinks the name, so a crash leaves nothing behind). After
// a header page, the file holds one region per rank, each the requested size rounded up to whole
// pages: rank r's buffer is region r. Every rank maps the whole file, so it reaches every peer's
// buffer at a known place. An allocation's id (its call number + 1) is the same on every rank.
//
// Freeing is local: when the last SharedBuffer of an allocation goes (and no op still pins it),
// this rank unmaps the file; the kernel keeps the pages while any peer maps them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "lockstep/comm/shared_buffer.h"
#include "lockstep/core/deadline.h"
#include "lockstep/store/store.h"

namespace lockstep::shm {

// This rank's mapping of one allocation file.
class AllocationMapping {
 public:
  AllocationMapping(std::byte* base, size_t file_bytes, size_t header_bytes, size_t stride,
                    uint64_t id)
      : base_(base),
        file_bytes_(file_bytes),
        header_bytes_(header_bytes),
        stride_(stride),
        id_(id) {}
  ~AllocationMapping();
  AllocationMapping(const AllocationMapping&) = delete;
  AllocationMapping& operator=(const AllocationMapping&) = delete;

  uint64_t id() const { return id_; }
  // Rank r's buffer, as this rank maps it.
  std::byte* region(int r) const {
    return base_ + header_bytes_ + stride_ * static_cast<size_t>(r);
  }

 private:
  std::byte* base_;
  size_t file_bytes_, header_bytes_, stride_;
  uint64_t id_;
};

// Where a run of bytes lies in this rank's allocations.
struct AllocationRef {
  uint64_t id = 0;  // 0: not in any allocation this rank holds
  uint64_t offset = 0;
};

class SharedAllocations {
 public:
  SharedAllocations(std::string group, int rank, int size, Store* store)
      : group_(std::move(group)), rank_(rank), size_(size), store_(store) {}

  // Collective over the group (allocate call `index`): maps a new allocation file with a region
  // of `bytes` per rank. The result spans this rank's region and keeps the mapping alive. Throws
  // ConfigError when /dev/shm lacks the space (naming the size needed and the free space),
  // TimeoutError naming the ranks that never mapped the file.
  SharedBuffer allocate(size_t bytes, uint64_t index, Deadline deadline);
  // The allocation whose region of this rank holds all of [p, p + bytes), or id 0.
  AllocationRef find(const void* p, size_t bytes) const;
  // Allocation id's mapping while this rank still holds it, else null. Holding the result keeps
  // the mapping alive (for the length of an op, while the user may free the buffer).
  std::shared_ptr<const AllocationMapping> pin(uint64_t id) const;
  // Whether this rank has ever allocated (a cheap test before find).
  bool any() const { return any_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    uintptr_t begin = 0, end = 0;  // this rank's region: [begin, begin + requested bytes)
    std::weak_ptr<AllocationMapping> mapping;
  };

  std::string group_;
  int rank_, size_;
  Store* store_;
  mutable std::mutex mu_;
  std::map<uint64_t, Entry> by_id_;  // expired entries are dropped at the next allocate
  std::atomic<bool> any_{false};
};

}  // namespace lockstep::shm
