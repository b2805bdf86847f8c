// The sizes and bounds a Connection works with (connection.h), shared by the sources of its
// two sides: connection.cc (sorting, the collectives) and connection_p2p.cc (the p2p stream).
#pragma once

#include <cerrno>
#include <cstddef>

#include "algorithms/message_header.h"

namespace lockstep::tcp::connection_limits {

inline constexpr size_t kHeaderBytes = sizeof(MessageHeader);
inline constexpr int kMaxIov = 64;
inline constexpr size_t kMaxControlBytes =
    64 * 1024;  // an abort reason longer than this is corrupt
// Payloads up to this size are read through the inbox together with the next header (one
// system call per small message); larger ones go straight into the caller's buffer.
inline constexpr size_t kSmallPayloadBytes = 16 * 1024;
inline constexpr size_t kInboxBytes = 64 * 1024;
// The most collective bytes the p2p side keeps for the collectives while it reads past them.
inline constexpr size_t kCollectiveBacklog = 8 << 20;
// The largest p2p frame: a longer write is taken in pieces (the collectives' frames may go
// between them).
inline constexpr size_t kP2PFrameBytes = 256 * 1024;

inline bool would_block(int e) {
  return e == EAGAIN || e == EWOULDBLOCK;
}

}  // namespace lockstep::tcp::connection_limits
