// The shared-memory segment of one group: what lives where, as every rank maps it.
//
//   SegmentHeader                     identity, attach counter, abort record
//   RankControl x N                   per rank: step counter (futex word), state, pid, descriptors
//   counts x N                        per rank, per op parity: N uint64 (all_to_all send counts)
//   small slots x N                   per rank, per op parity: kSmallSlotBytes (one-sync path)
//   chunk buffers x N                 per rank: kChunkDepth buffers of chunk_bytes (pipelined path)
//
// Every field another rank writes sits on its own cache line. All ranks compute the same layout
// from the group size, and check the header's size and version when they attach.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "algorithms/message_header.h"

namespace lockstep::shm {

inline constexpr uint64_t kSegmentMagic = 0x4c4b53504d485321;  // "!SHMPSKL"
inline constexpr uint32_t kLayoutVersion = 4;                  // 4: no mailboxes
inline constexpr size_t kCacheLine = 64;
inline constexpr size_t kAbortReasonBytes = 2048;

// Sizes (docs/shm.md has the measurements behind them).
inline constexpr size_t kSmallSlotBytes = 64 * 1024;  // per rank and op parity
inline constexpr size_t kChunkDepth = 2;              // chunk buffers per rank (double buffering)

// Chunk buffer bytes for a group of n ranks: large enough to amortise a sync, small enough that
// a rank's buffers stay in cache while the peers read them.
size_t chunk_bytes_for(int n);

// One rank's view of an op, published at its start so that peers compare before touching data.
struct alignas(kCacheLine) Descriptor {
  MessageHeader header;        // the op's identity (payload_bytes: unused, 0)
  uint64_t payload_bytes = 0;  // what this rank contributes (all_to_all: its send total)
};
static_assert(sizeof(Descriptor) == kCacheLine);

// Where one rank's buffers of an op live when they are in ProcessGroup::allocate memory
// (shared_alloc.h): the allocation's id (0: private memory) and the byte offset in the rank's
// region of it. Peers then read and write them directly (shared_collectives.h).
struct BufferRefs {
  uint64_t in_id = 0, in_offset = 0;
  uint64_t out_id = 0, out_offset = 0;
};

enum class RankState : uint32_t { absent = 0, attached = 1, departed = 2 };

struct RankControl {
  // The rank's progress: bumped once per phase of every collective. Peers wait on it.
  alignas(kCacheLine) std::atomic<uint32_t> step{0};
  std::atomic<uint32_t> step_waiters{0};  // peers asleep on step (wake only when non-zero)
  // By op parity, on the step's cache line so that the peer that sees a step gets them with it:
  // a hash of the descriptor (equal hashes: nothing to compare) and whether the payload is inline.
  uint64_t fingerprint[2] = {};
  uint8_t inline_data[2] = {};
  // Whether refs[parity] names an allocation (then the op may take a shared path), and this rank's
  // vote that it can take it (every ref resolves here; shared_collectives.h).
  uint8_t has_refs[2] = {};
  uint8_t shared_ok[2] = {};
  alignas(kCacheLine) std::atomic<uint32_t> state{0};  // RankState
  std::atomic<int32_t> pid{0};
  Descriptor desc[2];  // by op parity
  // [Enclosing ops] (sync.h) The op of the enclosing group this rank runs now: 0, or
  // enclosing_stamp() of it. Written by this rank only.
  alignas(kCacheLine) std::atomic<uint64_t> enclosing{0};
  alignas(kCacheLine) BufferRefs refs[2];  // by op parity
};

struct SegmentHeader {
  uint64_t magic = 0;
  uint32_t version = 0;
  int32_t nranks = 0;
  uint64_t total_bytes = 0;
  char group[200] = {};
  alignas(kCacheLine) std::atomic<uint32_t> attached{0};  // ranks that have mapped the segment
  std::atomic<uint32_t> attached_waiters{0};
  // The first abort wins: 0 none, 1 being written, 2 published (fields below are valid).
  alignas(kCacheLine) std::atomic<uint32_t> aborted{0};
  int32_t abort_rank = -1;
  ErrorClass abort_class = ErrorClass::network;
  char abort_reason[kAbortReasonBytes] = {};
};

// Byte offsets of every region, for a group of n ranks.
struct Layout {
  int n = 0;
  size_t chunk_bytes = 0;
  size_t control = 0, counts = 0, counts_stride = 0, small = 0, chunks = 0, total = 0;
};
Layout layout_for(int n);

// Typed access to a mapped segment. Does not own the mapping.
class SegmentView {
 public:
  SegmentView() = default;
  SegmentView(std::byte* base, const Layout& layout) : base_(base), layout_(layout) {}

  SegmentHeader& header() const { return *reinterpret_cast<SegmentHeader*>(base_); }
  RankControl& control(int r) const {
    return reinterpret_cast<RankControl*>(base_ + layout_.control)[r];
  }
  // Rank r's counts area for op parity p: n uint64.
  uint64_t* counts(int r, int p) const {
    return reinterpret_cast<uint64_t*>(base_ + layout_.counts +
                                       layout_.counts_stride * (2 * r + p));
  }
  std::byte* small_slot(int r, int p) const {
    return base_ + layout_.small + kSmallSlotBytes * (2 * static_cast<size_t>(r) + p);
  }
  std::byte* chunk(int r, size_t i) const {
    return base_ + layout_.chunks + layout_.chunk_bytes * (kChunkDepth * r + i % kChunkDepth);
  }
  const Layout& layout() const { return layout_; }
  int size() const { return layout_.n; }

 private:
  std::byte* base_ = nullptr;
  Layout layout_;
};

}  // namespace lockstep::shm
