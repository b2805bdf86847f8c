// The shared-memory inbox under ShmChannel (src/p2p/shm_channel.h): its layout, and the system
// calls on it (shm_open, mmap; futexes and liveness through src/shmem), so that the channel keeps
// to its protocol.
//
// Layout of the inbox of rank `owner` in a group of `size`, rings of `capacity` bytes:
//   [0, 256)                     Header
//   [256, +128 * (size - 1))     RingControl per sender, in rank order skipping the owner
//   [data_offset, +capacity * (size - 1))   each sender's ring data; data_offset is page-aligned
//
// A ring's data is a sequence of chunks, each at a 64-byte-aligned position and never wrapping
// around the ring's end: a ChunkHeader (its stamp and its payload's length), the payload, then
// padding to the next multiple of 64. The stamp, written last, is chunk_stamp(position, key):
// a reader finds the next chunk by watching the one cache line where it will start, and a stale
// line from an earlier lap (a stamp of another position, or payload bytes) never passes for it
// except by a 2^-64 chance (the key is the inbox's random Header::stamp_key).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace lockstep::p2p::inbox {

struct Header {
  uint64_t magic = 0;
  uint32_t version = 0;
  int32_t rank = 0;
  int32_t size = 0;
  int32_t pid = 0;
  uint64_t pid_ns = 0;       // pid_namespace() of the owner
  uint64_t capacity = 0;     // of each ring; a power of two, a multiple of the page size
  uint64_t data_offset = 0;  // of ring 0's data; page-aligned
  uint64_t total_bytes = 0;
  uint64_t stamp_key = 0;                     // random, never zero: see chunk_stamp
  alignas(64) std::atomic<uint32_t> bell{0};  // futex word, rung by writers, readers and wake()
  std::atomic<uint32_t> sleeping{0};          // sleep() calls in progress
  alignas(64) std::atomic<uint32_t> closed{0};
  std::atomic<uint32_t> attached{0};  // peers that have mapped this inbox
};

struct RingControl {
  // The sender's position (bytes of chunks written): only the sender stores; readers of the ring
  // go by the chunks' stamps, and head serves sleep()'s look for room.
  alignas(64) std::atomic<uint64_t> head{0};
  alignas(64) std::atomic<uint64_t> tail{0};  // bytes read: only the owner stores
  // The sender sleeps until there is room. Beside tail, which the owner writes anyway: the owner
  // looks at it after every read, and the line with head would cost it a miss per message.
  std::atomic<uint32_t> wants_room{0};
};

// The start of each chunk in a ring's data.
struct ChunkHeader {
  uint64_t stamp;  // chunk_stamp(its position, the inbox's key), stored last (release)
  uint64_t bytes;  // of payload after this header
};
constexpr size_t kChunkAlign = 64;
static_assert(sizeof(ChunkHeader) == 16 && kChunkAlign % alignof(ChunkHeader) == 0);
inline uint64_t chunk_stamp(uint64_t position, uint64_t key) {
  return ~position ^ key;
}
// The bytes a chunk of `payload` bytes takes in the ring, padding included.
inline uint64_t chunk_span(uint64_t payload) {
  return (sizeof(ChunkHeader) + payload + kChunkAlign - 1) / kChunkAlign * kChunkAlign;
}

constexpr size_t kControlOffset = 256;
static_assert(sizeof(Header) <= kControlOffset);
static_assert(sizeof(RingControl) == 128);
static_assert(std::atomic<uint32_t>::is_always_lock_free && sizeof(std::atomic<uint32_t>) == 4);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

// The index of `sender`'s ring in the inbox of `owner`.
inline size_t slot(int sender, int owner) {
  return static_cast<size_t>(sender < owner ? sender : sender - 1);
}
inline RingControl& ring_control(void* base, size_t slot) {
  return *reinterpret_cast<RingControl*>(static_cast<std::byte*>(base) + kControlOffset +
                                         slot * sizeof(RingControl));
}
size_t page_size();

// A fresh name, "/lockstep-p2p-<pid>-<random>" (src/shmem/shared_file.h).
std::string make_name();

// Creates inbox `name` for `rank` of a group of `size` (rings of `capacity` bytes), maps it
// whole and initialises it. Sets `bytes` to its size. ConfigError on failure (nothing is left).
std::byte* create(const std::string& name, int rank, int size, int pid, uint64_t capacity,
                  size_t& bytes, const std::string& where);
// Maps the header and ring controls of the inbox open as fd, when it is rank's inbox in a group
// of size; null otherwise. Sets control_bytes to the mapping's length.
Header* map_control(int fd, int rank, int size, size_t& control_bytes);
// Reserves the memory of ring `slot` in the inbox open as fd (so that a full /dev/shm shows here
// and not as SIGBUS later) and maps it. Null with `error` set on failure.
std::byte* map_ring(int fd, const Header& header, size_t slot, int& error);

// Increments the header's bell and wakes whoever sleeps on it (src/shmem/futex.h: sleepers wait
// on it with shmem::futex_wait).
void ring_bell(Header& header);

// Touches every page of a ring once, reading (its reader) or writing (its writer, before the first
// write: the bytes stay as they are). Some VMs fill their shadow page tables on a page's first
// touch by each process, at tens of microseconds a page even when the page is mapped already
// (MAP_POPULATE): untouched, a 1 MiB ring's first lap took ~30 us per 4 KiB message.
void touch_pages(std::byte* data, size_t bytes, bool for_write);

}  // namespace lockstep::p2p::inbox
