#include "rpc/frame.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "lockstep/core/error.h"
#include "lockstep/rpc/errors.h"

namespace lockstep::rpc {

namespace {
constexpr size_t kScratch = 64 << 10;
}

const char* frame_kind_name(FrameKind kind) {
  switch (kind) {
    case FrameKind::request:
      return "request";
    case FrameKind::reply:
      return "reply";
    case FrameKind::error:
      return "error";
    case FrameKind::goodbye:
      return "goodbye";
  }
  return "unknown";
}

std::string frame_prefix(FrameKind kind, uint64_t call_id, uint32_t lane, const Message& message) {
  if (message.body.size() > kMaxBody)
    throw CodecError(detail::concat("rpc: a message body of ", message.body.size(),
                                    " bytes is more than one frame carries (", kMaxBody,
                                    "); send large data as tensors"));
  if (message.blobs.size() > kMaxBlobs)
    throw CodecError(detail::concat("rpc: a message of ", message.blobs.size(),
                                    " tensors is more than one frame carries (", kMaxBlobs, ")"));
  FrameHeader h;
  h.kind = kind;
  h.blobs = static_cast<uint16_t>(message.blobs.size());
  h.body_bytes = static_cast<uint32_t>(message.body.size());
  h.lane = lane;
  h.call_id = call_id;
  for (const Blob& b : message.blobs)  // saturating: sizes that wrap 2^64 are past the bound too
    if (__builtin_add_overflow(h.blob_bytes, b.nbytes, &h.blob_bytes)) h.blob_bytes = UINT64_MAX;
  if (h.blob_bytes > kMaxBlobBytes)
    throw CodecError(detail::concat("rpc: a message of ", h.blob_bytes,
                                    " tensor bytes is more than one frame carries (", kMaxBlobBytes,
                                    ")"));
  std::string prefix(sizeof h + 8 * message.blobs.size(), '\0');
  std::memcpy(prefix.data(), &h, sizeof h);
  for (size_t i = 0; i < message.blobs.size(); ++i) {
    uint64_t n = message.blobs[i].nbytes;
    std::memcpy(prefix.data() + sizeof h + 8 * i, &n, 8);
  }
  return prefix;
}

int write_frame(int fd, const std::string& prefix, const Message& message, Deadline deadline) {
  std::vector<iovec> iov;
  iov.reserve(2 + message.blobs.size());
  auto add = [&](const void* p, size_t n) {
    if (n > 0) iov.push_back({const_cast<void*>(p), n});
  };
  add(prefix.data(), prefix.size());
  add(message.body.data(), message.body.size());
  for (const Blob& b : message.blobs) add(b.data, b.nbytes);
  size_t first = 0;
  while (first < iov.size()) {
    msghdr msg{};
    msg.msg_iov = iov.data() + first;
    msg.msg_iovlen = std::min<size_t>(iov.size() - first, IOV_MAX);
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return errno;
      pollfd p{fd, POLLOUT, 0};
      int r = ::poll(&p, 1, deadline.poll_ms());
      if (r == 0) return ETIMEDOUT;
      if (r < 0 && errno != EINTR) return errno;
      continue;
    }
    auto left = static_cast<size_t>(n);
    while (left > 0 && first < iov.size()) {
      if (left >= iov[first].iov_len) {
        left -= iov[first].iov_len;
        ++first;
      } else {
        iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
        iov[first].iov_len -= left;
        left = 0;
      }
    }
  }
  return 0;
}

void FrameReader::check_header() {
  const FrameHeader& h = frame_.header;
  auto bad = [](const std::string& what) {
    throw CodecError(detail::concat("rpc: malformed frame: ", what));
  };
  if (h.magic != FrameHeader::kMagic) bad("it does not start with lockstep rpc's magic");
  auto kind = static_cast<uint8_t>(h.kind);
  if (kind < 1 || kind > 4) bad(detail::concat("unknown frame kind ", int(kind)));
  if (h.body_bytes > kMaxBody)
    bad(detail::concat("a body of ", h.body_bytes, " bytes (at most ", kMaxBody, ")"));
  if (h.blobs > kMaxBlobs) bad(detail::concat(h.blobs, " tensors (at most ", kMaxBlobs, ")"));
  if (h.blob_bytes > kMaxBlobBytes)
    bad(detail::concat(h.blob_bytes, " tensor bytes (at most ", kMaxBlobBytes, ")"));
  if (h.kind == FrameKind::goodbye && (h.body_bytes != 0 || h.blobs != 0))
    bad("a goodbye that carries data");
}

void FrameReader::begin_part() {
  have_ = 0;
  switch (state_) {
    case State::header:
      frame_ = Frame{};
      dest_ = reinterpret_cast<char*>(&frame_.header);
      want_ = sizeof(FrameHeader);
      break;
    case State::sizes:
      sizes_.assign(frame_.header.blobs, 0);
      dest_ = reinterpret_cast<char*>(sizes_.data());
      want_ = 8 * sizes_.size();
      break;
    case State::body:
      frame_.message.body.resize(frame_.header.body_bytes);
      dest_ = frame_.message.body.data();
      want_ = frame_.message.body.size();
      break;
    case State::blobs: {
      Blob b = allocate_blob(sizes_[blob_]);
      dest_ = reinterpret_cast<char*>(const_cast<std::byte*>(b.data));
      want_ = b.nbytes;
      frame_.message.blobs.push_back(std::move(b));
      break;
    }
  }
}

// The current part is complete: on to the next one that needs bytes (a frame's empty parts are
// passed over at once).
void FrameReader::finish_part(std::vector<Frame>& out) {
  for (;;) {
    switch (state_) {
      case State::header:
        check_header();
        state_ = State::sizes;
        break;
      case State::sizes: {
        uint64_t sum = 0;
        for (uint64_t s : sizes_) {
          if (s > kMaxBlobBytes) sum = kMaxBlobBytes + 1;
          if (sum <= kMaxBlobBytes) sum += s;
        }
        if (sum != frame_.header.blob_bytes)
          throw CodecError(detail::concat("rpc: malformed frame: its tensor sizes add up to ", sum,
                                          " bytes, its header says ", frame_.header.blob_bytes));
        state_ = State::body;
        break;
      }
      case State::body:
        state_ = State::blobs;
        blob_ = 0;
        break;
      case State::blobs:
        ++blob_;
        break;
    }
    if (state_ == State::blobs && blob_ >= sizes_.size()) {
      out.push_back(std::move(frame_));
      state_ = State::header;
    }
    begin_part();
    if (want_ > 0) return;
  }
}

void FrameReader::feed(const char* data, size_t n, std::vector<Frame>& out) {
  if (want_ == 0 && state_ == State::header) begin_part();
  while (n > 0) {
    size_t k = std::min(n, want_ - have_);
    std::memcpy(dest_ + have_, data, k);
    have_ += k;
    data += k;
    n -= k;
    if (have_ == want_) finish_part(out);
  }
}

FrameReader::Status FrameReader::read_from(int fd, std::vector<Frame>& out) {
  if (want_ == 0 && state_ == State::header) begin_part();
  if (scratch_.empty()) scratch_.resize(kScratch);
  for (;;) {
    ssize_t n;
    size_t asked;
    if (state_ == State::blobs && want_ - have_ >= kScratch) {
      asked = want_ - have_;  // a large tensor: straight into its memory
      n = ::read(fd, dest_ + have_, asked);
      if (n > 0) {
        have_ += static_cast<size_t>(n);
        if (have_ == want_) finish_part(out);
      }
    } else {
      asked = scratch_.size();
      n = ::read(fd, scratch_.data(), asked);
      if (n > 0) feed(scratch_.data(), static_cast<size_t>(n), out);
    }
    if (n > 0) {
      // A short read drained the socket: the caller's poller says when more arrives.
      if (static_cast<size_t>(n) < asked) return Status::more;
      continue;
    }
    if (n == 0) {
      error_ = mid_frame() ? EPIPE : 0;
      return Status::closed;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::more;
    error_ = errno;
    return Status::failed;
  }
}

}  // namespace lockstep::rpc
