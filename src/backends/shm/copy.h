// Copies for the pipelined paths: plain memcpy into the chunk buffers (peers read them from cache
// soon), and a streaming copy for large outputs.
#pragma once

#include <cstddef>

namespace lockstep::shm {

// Outputs of ops that write at least this many bytes per rank go through stream_copy: they are
// far larger than the caches, so nobody reads them back from cache soon.
inline constexpr size_t kStreamOutputBytes = 8 * 1024 * 1024;

// memcpy with non-temporal stores (AVX2, where the CPU has it): the destination bypasses the
// caches, so each output byte costs one write to memory instead of a read for ownership and a
// write, and the chunk buffers that peers are about to read stay in cache. Ends with a store
// fence. Any sizes and alignments; small copies and unaligned edges use memcpy.
void stream_copy(void* dst, const void* src, size_t bytes);

// stream_copy when `streaming`, else memcpy.
inline void copy_out(bool streaming, void* dst, const void* src, size_t bytes) {
  if (streaming)
    stream_copy(dst, src, bytes);
  else if (bytes > 0)
    __builtin_memcpy(dst, src, bytes);
}

}  // namespace lockstep::shm
