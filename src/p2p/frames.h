// Frames: what the p2p engine writes on a Channel's byte streams. Every frame is a fixed 40-byte
// header, followed by `bytes` bytes of payload for the kinds that carry one.
//
//   eager  a whole small message: tag, dtype, count, then its bytes
//   rts    "ready to send" a large message (id, tag, dtype, count, bytes); no payload. The
//          receiver answers with cts once a recv matches it, so the payload only ever goes
//          straight into the recv's buffer (no staging copy, whatever the size)
//   cts    "clear to send" message `id` (receiver to sender)
//   data   the payload of message `id`, after its cts
//   nack   the receiver refuses message `id` (its recv disagrees on size or dtype, or the recv
//          ended); payload: the reason, which the send fails with
//   cancel the sender abandons message `id` after the cts (its send ended first); payload: why
//   query  "what are you doing with me?" (a timed-out op asks its peer); reply: the answer
//   bye    this rank leaves the group; payload: why (an orderly close, an abort, an exception)
//
// Ids count the messages of one sender to one receiver, so a cts, data or nack names exactly one
// send. Frames of one stream arrive in the order they were written.
#pragma once

#include <cstdint>
#include <string>

#include "lockstep/core/dtype.h"

namespace lockstep::p2p {

enum class FrameKind : uint8_t { eager = 1, rts, cts, data, nack, cancel, query, reply, bye };

struct FrameHeader {
  uint32_t magic = kMagic;
  FrameKind kind = FrameKind::eager;
  uint8_t dtype = 0;
  uint16_t reserved = 0;
  uint32_t tag = 0;
  uint32_t reserved2 = 0;
  uint64_t id = 0;
  uint64_t count = 0;  // eager/rts: elements of the message
  uint64_t bytes = 0;  // eager/rts: the message's bytes; data/nack/reply/bye: the payload's

  static constexpr uint32_t kMagic = 0x4C4B5032;  // "LKP2"
};
static_assert(sizeof(FrameHeader) == 40, "the frame header has a fixed size");

// Whether this kind of frame is followed by `bytes` bytes of payload on the stream.
bool carries_payload(FrameKind kind);
// Throws NetworkError when h is not a frame a lockstep engine writes (corrupt stream: an unknown
// magic, kind or dtype, an eager frame over kEagerBytes, a text over kMaxTextBytes), naming `peer`
// ("rank 1").
void check_frame(const FrameHeader& h, int peer);
// "eager", "rts", ...
const char* frame_kind_name(FrameKind kind);

// Payload texts longer than this are cut (they are messages for people).
inline constexpr uint64_t kMaxTextBytes = 64 * 1024;
// Messages up to this size go as one eager frame, larger ones as rts (engine.h, [Protocols]). A
// receiver sets aside room for an eager message no recv has claimed yet, so check_frame refuses
// a larger eager frame rather than let a corrupt stream ask for any amount of memory.
inline constexpr uint64_t kEagerBytes = 64 * 1024;

}  // namespace lockstep::p2p
