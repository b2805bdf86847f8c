// The process's limit on open file descriptors (RLIMIT_NOFILE): a server holds one per client, so
// the limit bounds how many clients it can hold at once. Many systems start processes with a soft
// limit of 1024 under a far higher hard limit, which any process may raise itself to.
#pragma once

#include <cstdint>

namespace lockstep::net {

struct FdLimit {
  uint64_t soft = 0;  // UINT64_MAX: unlimited
  uint64_t hard = 0;
};

// The limits now in force (zeros if they cannot be read).
FdLimit fd_limit();
// Raises the soft limit to `want`, or to the hard limit when that is lower; never lowers it.
// Returns the limits now in force (unchanged when setrlimit refuses).
FdLimit raise_fd_limit(uint64_t want);

}  // namespace lockstep::net
