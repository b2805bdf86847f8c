#include "backends/tcp/connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace lockstep::tcp {

namespace {

constexpr size_t kHeaderBytes = sizeof(MessageHeader);
constexpr int kMaxIov = 64;
constexpr size_t kMaxControlBytes = 64 * 1024;  // an abort reason longer than this is corrupt
// Payloads up to this size are read through the inbox together with the next header (one
// system call per small message); larger ones go straight into the caller's buffer.
constexpr size_t kSmallPayloadBytes = 16 * 1024;
constexpr size_t kInboxBytes = 64 * 1024;

bool would_block(int e) {
  return e == EAGAIN || e == EWOULDBLOCK;
}

}  // namespace

Connection::Connection(net::Fd fd, PeerInfo peer)
    : fd_(std::move(fd)), peer_(std::move(peer)), inbox_(kInboxBytes) {}

void Connection::queue_send(const MessageHeader& header, const void* payload, Request id) {
  sends_.push_back({header, static_cast<const char*>(payload), 0, id});
}

void Connection::queue_recv(void* data, size_t bytes, Request id) {
  recvs_.push_back({static_cast<char*>(data), bytes, id});
}

// Reads up to max_bytes from the socket onto the end of the inbox. Returns what recv returns
// (0: the peer closed; after our close: 0 as well).
ssize_t Connection::fill_inbox(size_t max_bytes) {
  if (!fd_.valid()) return 0;
  if (inbox_begin_ == inbox_end_) inbox_begin_ = inbox_end_ = 0;
  if (inbox_end_ + max_bytes > inbox_.size()) {
    std::memmove(inbox_.data(), inbox_.data() + inbox_begin_, inbox_size());
    inbox_end_ -= inbox_begin_;
    inbox_begin_ = 0;
    if (inbox_end_ + max_bytes > inbox_.size())
      inbox_.resize(std::max(kInboxBytes, inbox_end_ + max_bytes));
  }
  for (;;) {
    ssize_t r = ::recv(fd_.get(), inbox_.data() + inbox_end_, max_bytes, MSG_DONTWAIT);
    if (r > 0) inbox_end_ += static_cast<size_t>(r);
    if (r >= 0 || errno != EINTR) return r;
  }
}

// Whether the inbox holds `bytes`, reading up to `read_up_to` more at a time (bytes read ahead
// save a system call for the next header or small payload). False: nothing more for now.
bool Connection::ensure_inbox(size_t bytes, size_t read_up_to) {
  while (inbox_size() < bytes) {
    ssize_t r = fill_inbox(std::max(read_up_to, bytes) - inbox_size());
    if (r > 0) continue;
    if (r < 0 && would_block(errno)) return false;
    throw_read_failure(r);
  }
  return true;
}

// Bytes from the inbox first, then from the socket.
ssize_t Connection::read_some(void* buf, size_t n) {
  if (inbox_size() > 0) {
    size_t take = std::min(n, inbox_size());
    std::memcpy(buf, inbox_.data() + inbox_begin_, take);
    inbox_begin_ += take;
    return static_cast<ssize_t>(take);
  }
  if (!fd_.valid()) return 0;
  for (;;) {
    ssize_t r = ::recv(fd_.get(), buf, n, MSG_DONTWAIT);
    if (r >= 0 || errno != EINTR) return r;
  }
}

void Connection::throw_read_failure(ssize_t rc) {
  PeerEvent e;
  e.peer = peer_.rank;
  e.mid_message = in_payload_ || inbox_size() > 0;
  if (rc < 0) {
    e.kind = PeerEvent::reset;
    e.error = errno;
  }
  throw e;
}

// Takes the next header out of the inbox; false when it has not fully arrived.
bool Connection::take_header(size_t read_up_to) {
  if (!ensure_inbox(kHeaderBytes, read_up_to)) return false;
  std::memcpy(&in_header_, inbox_.data() + inbox_begin_, kHeaderBytes);
  if (!header_is_valid(in_header_)) {
    char text[64];
    std::snprintf(text, sizeof(text), "magic 0x%08x, frame type %u", in_header_.magic,
                  static_cast<unsigned>(in_header_.frame));
    throw PeerEvent{.kind = PeerEvent::garbage, .peer = peer_.rank, .text = text};
  }
  inbox_begin_ += kHeaderBytes;
  return true;
}

// The peer's abort frame: its payload is small and was written just before the peer closed, so
// wait for it briefly, then report what arrived.
void Connection::read_control_payload() {
  PeerEvent e{.kind = PeerEvent::aborted, .peer = peer_.rank};
  size_t n = std::min<uint64_t>(in_header_.payload_bytes, kMaxControlBytes);
  std::string payload(n, '\0');
  size_t got = 0;
  Deadline deadline = Deadline::after(milliseconds(1000));
  while (got < n && !deadline.expired()) {
    ssize_t r = read_some(payload.data() + got, n - got);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r < 0 && would_block(errno) && fd_.valid()) {
      pollfd p{fd_.get(), POLLIN, 0};
      ::poll(&p, 1, deadline.poll_ms(100));
    } else {
      break;
    }
  }
  payload.resize(got);
  if (!payload.empty()) {
    e.error_class = static_cast<ErrorClass>(payload[0]);
    e.text = payload.substr(1);
  }
  throw e;
}

// Reads the payload of in_header_ into item: small payloads through the inbox, large ones
// straight into the caller's buffer (with the next header read ahead into the inbox). False when
// the rest has not arrived yet.
bool Connection::read_payload(RecvItem& item) {
  size_t take = std::min(inbox_size(), item.bytes - payload_got_);
  // A zero-byte message (a barrier's) may have no buffer: memcpy must not see its null pointer.
  if (take > 0) std::memcpy(item.data + payload_got_, inbox_.data() + inbox_begin_, take);
  inbox_begin_ += take;
  payload_got_ += take;
  while (payload_got_ < item.bytes) {
    const size_t left = item.bytes - payload_got_;
    if (left <= kSmallPayloadBytes) {
      if (!ensure_inbox(left, left + kHeaderBytes)) return false;
      std::memcpy(item.data + payload_got_, inbox_.data() + inbox_begin_, left);
      inbox_begin_ += left;
      payload_got_ += left;
      break;
    }
    if (inbox_.size() < kHeaderBytes) inbox_.resize(kInboxBytes);
    inbox_begin_ = inbox_end_ = 0;  // empty: drained above
    iovec iov[2] = {{item.data + payload_got_, left}, {inbox_.data(), kHeaderBytes}};
    ssize_t r = fd_.valid() ? ::readv(fd_.get(), iov, 2) : 0;
    if (r > 0) {
      size_t into_payload = std::min(static_cast<size_t>(r), left);
      payload_got_ += into_payload;
      inbox_end_ = static_cast<size_t>(r) - into_payload;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && would_block(errno)) return false;
    throw_read_failure(r);
  }
  return true;
}

std::optional<MessageHeader> Connection::peek_header() {
  if (in_payload_ || !recvs_.empty()) return std::nullopt;
  if (inbox_size() < kHeaderBytes) {
    const ssize_t r = fill_inbox(kHeaderBytes - inbox_size());
    // An error is reported once by the socket: raise it now rather than lose it. A close is
    // sticky, and left to inspect_close.
    if (r < 0 && !would_block(errno)) throw_read_failure(r);
    if (r <= 0) return std::nullopt;
  }
  if (inbox_size() < kHeaderBytes) return std::nullopt;
  MessageHeader h;
  std::memcpy(&h, inbox_.data() + inbox_begin_, kHeaderBytes);
  if (!header_is_valid(h) || h.frame != FrameType::data) return std::nullopt;
  return h;
}

void Connection::pump_recv(std::vector<Request>& done, const HeaderChecker& check) {
  while (!recvs_.empty()) {
    RecvItem& item = recvs_.front();
    if (!in_payload_) {
      if (!take_header(kHeaderBytes + (item.bytes <= kSmallPayloadBytes ? item.bytes : 0))) return;
      if (in_header_.frame == FrameType::abort) read_control_payload();
      if (in_header_.frame == FrameType::bye)
        throw PeerEvent{.kind = PeerEvent::goodbye, .peer = peer_.rank};
      check(in_header_, item.bytes);
      in_payload_ = true;
      payload_got_ = 0;
    }
    if (!read_payload(item)) return;
    done.push_back(item.id);
    recvs_.pop_front();
    in_payload_ = false;
  }
}

void Connection::pump_send(std::vector<Request>& done) {
  if (!sends_.empty() && !fd_.valid())
    throw PeerEvent{.kind = PeerEvent::goodbye, .peer = peer_.rank};
  while (!sends_.empty()) {
    iovec iov[kMaxIov];
    int n = 0;
    for (const SendItem& s : sends_) {
      if (n + 2 > kMaxIov) break;
      if (s.sent < kHeaderBytes)
        iov[n++] = {reinterpret_cast<char*>(const_cast<MessageHeader*>(&s.header)) + s.sent,
                    kHeaderBytes - s.sent};
      size_t payload_done = s.sent > kHeaderBytes ? s.sent - kHeaderBytes : 0;
      if (payload_done < s.header.payload_bytes)
        iov[n++] = {const_cast<char*>(s.payload) + payload_done,
                    s.header.payload_bytes - payload_done};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    ssize_t w = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (would_block(errno)) return;
      throw PeerEvent{.kind = PeerEvent::reset, .peer = peer_.rank, .error = errno};
    }
    size_t left = static_cast<size_t>(w);
    while (left > 0) {
      SendItem& s = sends_.front();
      size_t total = kHeaderBytes + s.header.payload_bytes;
      size_t take = std::min(left, total - s.sent);
      s.sent += take;
      left -= take;
      if (s.sent == total) {
        done.push_back(s.id);
        sends_.pop_front();
      }
    }
  }
}

bool Connection::clear_queues() {
  bool at_boundary = sends_.empty() || sends_.front().sent == 0;
  sends_.clear();
  recvs_.clear();
  return at_boundary;
}

std::optional<PeerEvent> Connection::inspect_close() {
  int error = 0;
  while (fd_.valid()) {
    ssize_t r = fill_inbox(kInboxBytes);
    if (r > 0) continue;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && would_block(errno)) return std::nullopt;  // still open: a spurious wake-up
    if (r < 0) error = errno;
    break;
  }
  fd_.reset();
  PeerEvent e = scan_inbox();
  if (e.kind == PeerEvent::closed && error != 0 && !e.mid_message) {
    e.kind = PeerEvent::reset;
    e.error = error;
  }
  return e;
}

// What the bytes the peer left behind say, without consuming them. REQUIRES at_frame_boundary().
PeerEvent Connection::scan_inbox() {
  PeerEvent e{.kind = PeerEvent::closed, .peer = peer_.rank};
  size_t p = inbox_begin_;
  while (inbox_end_ - p >= kHeaderBytes) {
    MessageHeader h;
    std::memcpy(&h, inbox_.data() + p, kHeaderBytes);
    if (!header_is_valid(h)) return PeerEvent{.kind = PeerEvent::garbage, .peer = peer_.rank};
    size_t frame_end = p + kHeaderBytes + h.payload_bytes;
    if (h.frame == FrameType::abort) {
      e.kind = PeerEvent::aborted;
      size_t end = std::min(frame_end, inbox_end_);
      std::string payload(inbox_.data() + p + kHeaderBytes, end - p - kHeaderBytes);
      if (!payload.empty()) {
        e.error_class = static_cast<ErrorClass>(payload[0]);
        e.text = payload.substr(1);
      }
      return e;
    }
    if (h.frame == FrameType::bye) {
      e.kind = PeerEvent::goodbye;
      return e;
    }
    if (frame_end > inbox_end_) break;
    p = frame_end;
  }
  e.mid_message = p != inbox_end_;
  return e;
}

bool Connection::try_send_control(FrameType frame, ErrorClass error_class,
                                  const std::string& text) {
  if (!fd_.valid() || (!sends_.empty() && sends_.front().sent != 0)) return false;
  std::string payload;
  if (frame == FrameType::abort) {
    payload.push_back(static_cast<char>(error_class));
    payload += text.substr(0, kMaxControlBytes - 1);
  }
  MessageHeader h = control_header(frame, payload.size());
  iovec iov[2] = {{&h, kHeaderBytes}, {payload.data(), payload.size()}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = payload.empty() ? 1 : 2;
  ssize_t w = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  return w == static_cast<ssize_t>(kHeaderBytes + payload.size());
}

void Connection::shutdown_write() {
  if (fd_.valid()) ::shutdown(fd_.get(), SHUT_WR);
}

bool Connection::discard_until_goodbye() {
  char buf[64 * 1024];
  try {
    for (;;) {
      if (!in_payload_) {
        if (!take_header(kHeaderBytes)) return false;
        if (in_header_.frame != FrameType::data) return true;
        in_payload_ = true;
        payload_got_ = 0;
      }
      while (payload_got_ < in_header_.payload_bytes) {
        size_t want = std::min<uint64_t>(sizeof(buf), in_header_.payload_bytes - payload_got_);
        ssize_t r = read_some(buf, want);
        if (r > 0) {
          payload_got_ += static_cast<size_t>(r);
          continue;
        }
        if (r < 0 && errno == EINTR) continue;
        return r < 0 && would_block(errno) ? false : true;
      }
      in_payload_ = false;
    }
  } catch (const PeerEvent&) {
    return true;  // closed, reset or garbage: nothing more will come
  }
}

}  // namespace lockstep::tcp
