// MessageHeader: the fixed 48-byte prefix of every message on a data connection.
//
// A data frame carries the identity of the op its sender is running (kind, sequence number,
// dtype, reduce op, root, tag, algorithm, the bytes every rank must agree on and a checksum of a
// _v counts array) and the size of the payload that follows. A receiver builds the header it
// expects from its own op and compares the two before it touches a payload byte, so that ranks
// that disagree about a collective fail with a MismatchError naming both ranks and both values
// instead of reading each other's bytes as data.
//
// Abort and bye frames end a connection: abort carries the sender's error (class and text) as its
// payload and, when it failed inside an op, that op's seq (abort_header); bye says the sender's
// group was destroyed in an orderly way.
//
// A p2p frame carries bytes of the group's point-to-point stream (src/p2p/channel.h) on the same
// connection (src/backends/tcp/connection.h): its payload is the next payload_bytes of that
// stream; one with tag kP2PStreamEnd and no payload ends it in an orderly way.
//
// Byte order: host order; every rank of a job runs on little-endian machines.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "comm/failure.h"
#include "comm/op.h"

namespace lockstep {

inline constexpr uint32_t kMessageMagic = 0x4C4B5350;  // "LKSP"

enum class FrameType : uint8_t { data = 1, abort = 2, bye = 3, p2p = 4 };

inline constexpr uint32_t kP2PStreamEnd = 1;  // a p2p frame's tag: the stream ends

struct MessageHeader {
  uint32_t magic = kMessageMagic;
  FrameType frame = FrameType::data;
  OpKind kind = OpKind::barrier;
  DType dtype = DType::f32;
  ReduceOp reduce_op = ReduceOp::sum;
  uint8_t variable = 0;
  Algorithm algorithm = Algorithm::automatic;
  uint16_t reserved = 0;
  int32_t root = 0;
  uint32_t tag = 0;
  uint32_t counts_checksum = 0;
  uint64_t seq = 0;
  uint64_t agreed_bytes = 0;
  uint64_t payload_bytes = 0;
};
static_assert(sizeof(MessageHeader) == 48, "MessageHeader is a wire format");

// The header of a data message of `op` carrying payload_bytes. Fields that do not apply to the
// op's kind (the root of an all_reduce, the reduce op of a broadcast) are zero, so they never
// cause a mismatch. A send's header names kind send; the matching recv expects kind send too.
MessageHeader data_header(const Op& op, uint64_t payload_bytes);
// A control or p2p frame's header (frame type and payload size only).
MessageHeader control_header(FrameType frame, uint64_t payload_bytes);
// An abort frame's header (payload: one ErrorClass byte, comm/failure.h, then the reason text),
// naming failed_seq, the op the sender failed in, when there is one. (Without one the
// sender failed between ops, e.g. its group was destroyed by an exception.)
MessageHeader abort_header(uint64_t payload_bytes, std::optional<uint64_t> failed_seq);
// The op an abort frame's sender failed in, if the frame names one.
std::optional<uint64_t> failed_seq_of(const MessageHeader& abort);

struct HeaderCheck {
  const Op& op;  // this rank's op
  int rank;      // this rank
  int peer;      // the sender
};

// Compares a received data header with the one `check.op` expects for a payload of
// expected_bytes. Returns the MismatchError text (naming both ranks, the op, both values and a
// fix) or nothing when they agree. Never throws.
std::optional<std::string> header_mismatch(const MessageHeader& got, uint64_t expected_bytes,
                                           const HeaderCheck& check);

// Whether the header starts a frame at all (magic and a known frame type): anything else means
// the stream is corrupt.
bool header_is_valid(const MessageHeader& h);

}  // namespace lockstep
