#include "backends/shm/shared_alloc.h"

#include <sys/mman.h>

#include <algorithm>

#include "backends/shm/layout.h"
#include "backends/shm/segment.h"
#include "lockstep/core/error.h"

namespace lockstep::shm {

namespace {

constexpr uint64_t kAllocationMagic = 0x434f4c4c4148534c;  // "LSHALLOC"
constexpr size_t kPage = 4096;

size_t round_up(size_t v, size_t to) {
  return (v + to - 1) / to * to;
}

// After the SegmentHeader: one presence word per rank (set when it has mapped the file).
std::atomic<uint32_t>* presence(std::byte* base) {
  return reinterpret_cast<std::atomic<uint32_t>*>(base +
                                                  round_up(sizeof(SegmentHeader), kCacheLine));
}

}  // namespace

AllocationMapping::~AllocationMapping() {
  ::munmap(base_, file_bytes_);
}

SharedBuffer SharedAllocations::allocate(size_t bytes, uint64_t index, Deadline deadline) {
  const size_t header = round_up(round_up(sizeof(SegmentHeader), kCacheLine) +
                                     sizeof(std::atomic<uint32_t>) * static_cast<size_t>(size_),
                                 kPage);
  const size_t stride = round_up(bytes, kPage);
  const size_t total = header + stride * static_cast<size_t>(size_);
  const std::string name = detail::concat("allocate #", index);
  const int n = size_;
  const SharedFile file{
      .key = detail::concat(group_, "/shm/allocate/", index),
      .tag = detail::concat(group_, "/allocate", index),
      .bytes = total,
      .magic = kAllocationMagic,
      .needs = detail::concat(name, " (", bytes, " bytes per rank) needs a shared-memory segment"),
      .subject = "the shared-memory segment of " + name,
      .fix = "every rank must call ProcessGroup::allocate",
      .mark_present = [&](std::byte* base) { presence(base)[rank_].store(1); },
      .absent =
          [&](std::byte* base) {
            std::string list;
            for (int r = 0; r < n; ++r)
              if (presence(base)[r].load() == 0)
                list += (list.empty() ? "" : ", ") + std::to_string(r);
            return "[" + list + "]";
          }};
  SharedMapping mapped = attach_shared_file(
      {.group = group_, .rank = rank_, .size = size_, .store = store_, .deadline = deadline}, file);
  auto mapping = std::make_shared<AllocationMapping>(mapped.base, total, header, stride, index + 1);
  std::byte* mine = mapping->region(rank_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(by_id_, [](const auto& e) { return e.second.mapping.expired(); });
    const auto begin = reinterpret_cast<uintptr_t>(mine);
    by_id_[mapping->id()] = Entry{.begin = begin, .end = begin + bytes, .mapping = mapping};
  }
  any_.store(true, std::memory_order_relaxed);
  return SharedBuffer(std::shared_ptr<void>(mapping, mine), bytes, true);
}

AllocationRef SharedAllocations::find(const void* p, size_t bytes) const {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, e] : by_id_)
    if (at >= e.begin && at <= e.end && bytes <= e.end - at && !e.mapping.expired())
      return {.id = id, .offset = at - e.begin};
  return {};
}

std::shared_ptr<const AllocationMapping> SharedAllocations::pin(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second.mapping.lock();
}

}  // namespace lockstep::shm
