#include "backends/tcp/connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace lockstep {

namespace {

constexpr size_t kHeaderBytes = sizeof(MessageHeader);
constexpr int kMaxIov = 64;
constexpr size_t kMaxControlBytes = 64 * 1024;  // an abort reason longer than this is corrupt

bool would_block(int e) { return e == EAGAIN || e == EWOULDBLOCK; }

}  // namespace

Connection::Connection(net::Fd fd, PeerInfo peer) : fd_(std::move(fd)), peer_(std::move(peer)) {}

void Connection::queue_send(const MessageHeader& header, const void* payload, Request id) {
  sends_.push_back({header, static_cast<const char*>(payload), 0, id});
}

void Connection::queue_recv(void* data, size_t bytes, Request id) {
  recvs_.push_back({static_cast<char*>(data), bytes, id});
}

ssize_t Connection::read_some(void* buf, size_t n) {
  if (stash_pos_ < stash_.size()) {
    size_t take = std::min(n, stash_.size() - stash_pos_);
    std::memcpy(buf, stash_.data() + stash_pos_, take);
    stash_pos_ += take;
    return static_cast<ssize_t>(take);
  }
  if (!fd_.valid()) return 0;  // the peer closed after its goodbye: the stash was all there was
  for (;;) {
    ssize_t r = ::recv(fd_.get(), buf, n, MSG_DONTWAIT);
    if (r >= 0 || errno != EINTR) return r;
  }
}

void Connection::throw_read_failure(ssize_t rc, bool mid_message) {
  PeerEvent e;
  e.peer = peer_.rank;
  e.mid_message = mid_message;
  if (rc < 0) {
    e.kind = PeerEvent::reset;
    e.error = errno;
  }
  throw e;
}

// Reads the rest of the header; false when the socket has no more bytes for now.
bool Connection::read_header() {
  while (header_got_ < kHeaderBytes) {
    ssize_t r = read_some(reinterpret_cast<char*>(&in_header_) + header_got_,
                          kHeaderBytes - header_got_);
    if (r > 0) {
      header_got_ += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && would_block(errno)) return false;
    throw_read_failure(r, header_got_ > 0);
  }
  if (!header_is_valid(in_header_)) {
    char text[64];
    std::snprintf(text, sizeof(text), "magic 0x%08x, frame type %u", in_header_.magic,
                  static_cast<unsigned>(in_header_.frame));
    throw PeerEvent{.kind = PeerEvent::garbage, .peer = peer_.rank, .text = text};
  }
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

void Connection::pump_recv(std::vector<Request>& done, const HeaderChecker& check) {
  while (!recvs_.empty()) {
    RecvItem& item = recvs_.front();
    if (!in_payload_) {
      if (!read_header()) return;
      if (in_header_.frame == FrameType::abort) read_control_payload();
      if (in_header_.frame == FrameType::bye)
        throw PeerEvent{.kind = PeerEvent::goodbye, .peer = peer_.rank};
      check(in_header_, item.bytes);
      in_payload_ = true;
      payload_got_ = 0;
    }
    while (payload_got_ < item.bytes) {
      ssize_t r = read_some(item.data + payload_got_, item.bytes - payload_got_);
      if (r > 0) {
        payload_got_ += static_cast<size_t>(r);
        continue;
      }
      if (r < 0 && would_block(errno)) return;
      throw_read_failure(r, true);
    }
    done.push_back(item.id);
    recvs_.pop_front();
    in_payload_ = false;
    header_got_ = 0;
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
  bool ended = !fd_.valid();
  int error = 0;
  char buf[64 * 1024];
  while (!ended) {
    ssize_t r = ::recv(fd_.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (r > 0) {
      stash_.append(buf, static_cast<size_t>(r));
    } else if (r == 0) {
      ended = true;
    } else if (errno != EINTR) {
      if (would_block(errno)) return std::nullopt;  // still open: a spurious wake-up
      error = errno;
      ended = true;
    }
  }
  fd_.reset();
  PeerEvent e = scan_stash();
  if (e.kind == PeerEvent::closed && error != 0 && !e.mid_message) {
    e.kind = PeerEvent::reset;
    e.error = error;
  }
  return e;
}

// What the bytes the peer left behind say, without consuming them.
PeerEvent Connection::scan_stash() {
  PeerEvent e{.kind = PeerEvent::closed, .peer = peer_.rank};
  size_t p = stash_pos_;
  while (stash_.size() - p >= kHeaderBytes) {
    MessageHeader h;
    std::memcpy(&h, stash_.data() + p, kHeaderBytes);
    if (!header_is_valid(h)) return PeerEvent{.kind = PeerEvent::garbage, .peer = peer_.rank};
    size_t frame_end = p + kHeaderBytes + h.payload_bytes;
    if (h.frame == FrameType::abort) {
      e.kind = PeerEvent::aborted;
      size_t end = std::min(frame_end, stash_.size());
      std::string payload = stash_.substr(p + kHeaderBytes, end - p - kHeaderBytes);
      if (!payload.empty()) {
        e.error_class = static_cast<ErrorClass>(payload[0]);
        e.text = payload.substr(1);
      }
      return e;
    }
    if (h.frame == FrameType::bye) {
      said_goodbye_ = true;
      e.kind = PeerEvent::goodbye;
      return e;
    }
    if (frame_end > stash_.size()) break;
    p = frame_end;
  }
  e.mid_message = p != stash_.size();
  return e;
}

bool Connection::try_send_control(FrameType frame, ErrorClass error_class, const std::string& text) {
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
        if (!read_header()) return false;
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
        if (r < 0 && would_block(errno)) return false;
        return true;
      }
      in_payload_ = false;
      header_got_ = 0;
    }
  } catch (const PeerEvent&) {
    return true;  // closed, reset or garbage: nothing more will come
  }
}

}  // namespace lockstep
