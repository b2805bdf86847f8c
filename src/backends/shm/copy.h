// Copies for the data paths: plain memcpy into shared buffers (the peers read them from cache
// soon), and a streaming copy for large outputs that nobody reads again soon.
#pragma once

#include <cstddef>

namespace lockstep::shm {

// Copies with non-temporal stores: the destination bypasses the caches, so a large output costs
// one write per byte instead of a read for ownership plus a write, and does not evict the chunk
// buffers the peers are about to read. Then a store fence, so the data is visible before any
// later flag. Any alignment; small or unaligned edges use memcpy.
void stream_copy(void* dst, const void* src, size_t bytes);

// Outputs of an op that moves at least this many bytes are written with stream_copy.
inline constexpr size_t kStreamOutputBytes = 8 * 1024 * 1024;

}  // namespace lockstep::shm
