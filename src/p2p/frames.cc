#include "p2p/frames.h"

#include "lockstep/core/error.h"

namespace lockstep::p2p {

bool carries_payload(FrameKind kind) {
  return kind == FrameKind::eager || kind == FrameKind::data || kind == FrameKind::nack ||
         kind == FrameKind::cancel || kind == FrameKind::reply || kind == FrameKind::bye;
}

const char* frame_kind_name(FrameKind kind) {
  switch (kind) {
    case FrameKind::eager:
      return "eager";
    case FrameKind::rts:
      return "rts";
    case FrameKind::cts:
      return "cts";
    case FrameKind::data:
      return "data";
    case FrameKind::nack:
      return "nack";
    case FrameKind::cancel:
      return "cancel";
    case FrameKind::query:
      return "query";
    case FrameKind::reply:
      return "reply";
    case FrameKind::bye:
      return "bye";
  }
  return "unknown";
}

void check_frame(const FrameHeader& h, int peer) {
  const auto kind = static_cast<uint8_t>(h.kind);
  const bool known = kind >= static_cast<uint8_t>(FrameKind::eager) &&
                     kind <= static_cast<uint8_t>(FrameKind::bye);
  LOCKSTEP_ENFORCE(h.magic == FrameHeader::kMagic && known, NetworkError, "rank ", peer,
                   " sent bytes that are not a lockstep p2p frame (magic ", h.magic, ", kind ",
                   int(kind), "): the stream is corrupt. Restart the job");
  const bool text = h.kind == FrameKind::nack || h.kind == FrameKind::cancel ||
                    h.kind == FrameKind::reply || h.kind == FrameKind::bye;
  LOCKSTEP_ENFORCE(!text || h.bytes <= kMaxTextBytes, NetworkError, "rank ", peer, " sent a ",
                   frame_kind_name(h.kind), " frame of ", h.bytes,
                   " bytes of text: the stream is corrupt. Restart the job");
  LOCKSTEP_ENFORCE(h.kind != FrameKind::eager || h.bytes <= kEagerBytes, NetworkError, "rank ",
                   peer, " sent an eager frame of ", h.bytes, " bytes (eager messages are at most ",
                   kEagerBytes, "): the stream is corrupt. Restart the job");
  LOCKSTEP_ENFORCE(h.dtype <= static_cast<uint8_t>(DType::boolean), NetworkError, "rank ", peer,
                   " sent a frame with an unknown dtype (", int(h.dtype),
                   "): the stream is corrupt. Restart the job");
}

}  // namespace lockstep::p2p
