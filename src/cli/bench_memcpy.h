// Single-core memcpy bandwidth, measured in the same run as the collectives so that every busbw
// figure can be read as a fraction of what one core can move through memory.
#pragma once

#include <cstddef>

namespace lockstep::cli::bench {

struct MemcpyBandwidth {
  double gbps = 0;   // bytes / seconds / 1e9, of the fastest repetition
  size_t bytes = 0;  // bytes per copy
  int repetitions = 0;
};

struct MemcpyOptions {
  size_t bytes = size_t{64} << 20;  // large enough to defeat every cache level
  int repetitions = 5;              // timed copies; the fastest counts (after one untimed copy)
};

// Copies options.bytes between two freshly touched buffers on the calling thread. Blocks for
// roughly (repetitions + 1) copies: about 50 ms for 64 MiB on a typical machine.
MemcpyBandwidth measure_memcpy(const MemcpyOptions& options = {});

}  // namespace lockstep::cli::bench
