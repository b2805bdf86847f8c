// The RPC wire: each message is one frame.
//
//   FrameHeader (32 bytes) | blob sizes (blobs × u64) | body (body_bytes) | blob bytes, in order
//
// A request's body is its target (str), the served object (str or None), the positional
// arguments (tuple) and the keyword arguments (dict); a reply's is one value; an error's is
// error_body.h's. Frames are bounded (kMaxBody, kMaxBlobs, kMaxBlobBytes): anything else, or a
// wrong magic, is a CodecError and the connection is closed. FrameReader parses what arrives, in
// any pieces, and reads large blobs straight into their own memory (no copy through a buffer).
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/core/deadline.h"
#include "rpc/message.h"

namespace lockstep::rpc {

enum class FrameKind : uint8_t { request = 1, reply = 2, error = 3, goodbye = 4 };

struct FrameHeader {
  static constexpr uint32_t kMagic = 0x4350524C;  // "LRPC"
  uint32_t magic = kMagic;
  FrameKind kind = FrameKind::request;
  uint8_t flags = 0;
  uint16_t blobs = 0;
  uint32_t body_bytes = 0;
  // Requests: the calling thread's lane. Calls of one lane run on the callee one after another,
  // in the order sent; other lanes run beside them.
  uint32_t lane = 0;
  uint64_t call_id = 0;
  uint64_t blob_bytes = 0;  // the sum of the blob sizes
};
static_assert(sizeof(FrameHeader) == 32, "FrameHeader is a wire format");

inline constexpr uint32_t kMaxBody = 64u << 20;         // a body's bytes
inline constexpr uint16_t kMaxBlobs = 4096;             // tensors in one message
inline constexpr uint64_t kMaxBlobBytes = 16ull << 30;  // their bytes

struct Frame {
  FrameHeader header;
  Message message;
};

// "request", "reply", ...
const char* frame_kind_name(FrameKind kind);

// The bytes that go before the body: the header and the blob sizes. CodecError when the message
// is past the bounds.
std::string frame_prefix(FrameKind kind, uint64_t call_id, uint32_t lane, const Message& message);

// Writes a whole frame to a socket (blocking or not), waiting up to `deadline` when the kernel's
// buffer is full. Returns 0, or the errno that ended it (ETIMEDOUT at the deadline), after which
// the stream is unusable (part of a frame may have gone).
int write_frame(int fd, const std::string& prefix, const Message& message, Deadline deadline);

class FrameReader {
 public:
  enum class Status { more, closed, failed };
  // Reads all the socket has now (non-blocking fd), appending finished frames to `out`. more: it
  // would block; closed: the peer ended the stream (error() is 0 at a frame boundary, else
  // EPIPE: mid-frame); failed: a read error (error() is its errno). CodecError for a malformed
  // frame.
  Status read_from(int fd, std::vector<Frame>& out);
  // The same parsing over bytes in memory (tests, fuzzing).
  void feed(const char* data, size_t n, std::vector<Frame>& out);
  int error() const { return error_; }
  // Whether a frame is partly read.
  bool mid_frame() const { return state_ != State::header || have_ > 0; }

 private:
  enum class State { header, sizes, body, blobs };
  // Where the next bytes go and how many the current part still needs.
  void begin_part();
  void finish_part(std::vector<Frame>& out);
  void check_header();
  State state_ = State::header;
  Frame frame_;
  std::vector<uint64_t> sizes_;
  size_t blob_ = 0;  // the blob being read
  char* dest_ = nullptr;
  size_t want_ = 0;  // bytes of the current part
  size_t have_ = 0;  // of which read
  int error_ = 0;
  std::vector<char> scratch_;
};

}  // namespace lockstep::rpc
