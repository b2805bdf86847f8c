// Connection's p2p side (connection.h [The p2p stream]): what MeshChannel calls to write the p2p
// stream as p2p frames between the collectives' frames, and to read it back out of the sorted
// incoming stream.
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "backends/tcp/connection.h"
#include "backends/tcp/connection_limits.h"

namespace lockstep::tcp {

using namespace connection_limits;

void Connection::attach_p2p(int transport_wake_fd, std::function<void()> wake) {
  std::lock_guard lock(mu_);
  p2p_attached_ = true;
  transport_wake_fd_ = transport_wake_fd;
  p2p_wake_ = std::move(wake);
}

void Connection::detach_p2p() {
  std::lock_guard lock(mu_);
  p2p_attached_ = false;
  p2p_wake_ = nullptr;
  p2p_in_.clear();
  p2p_in_begin_ = 0;
}

size_t Connection::p2p_write(const std::byte* data, size_t bytes) {
  std::lock_guard lock(mu_);
  if (!live() || shut_here_)
    throw PeerEvent{.kind = PeerEvent::reset, .peer = peer_.rank, .error = error_ ? error_ : EPIPE};
  if (!flush_tail_locked()) return 0;
  if (collective_mid_frame()) {
    p2p_wants_out_ = true;
    return 0;
  }
  const size_t take = std::min(bytes, kP2PFrameBytes);
  MessageHeader h = control_header(FrameType::p2p, take);
  iovec iov[2] = {{&h, kHeaderBytes}, {const_cast<std::byte*>(data), take}};
  const size_t w = static_cast<size_t>(send_msg(iov, 2));
  if (w == 0) return 0;
  if (w < kHeaderBytes + take) {  // the rest goes before any other frame
    tail_.clear();
    tail_begin_ = 0;
    if (w < kHeaderBytes)
      tail_.insert(tail_.end(), reinterpret_cast<const char*>(&h) + w,
                   reinterpret_cast<const char*>(&h) + kHeaderBytes);
    const size_t data_sent = w > kHeaderBytes ? w - kHeaderBytes : 0;
    tail_.insert(tail_.end(), reinterpret_cast<const char*>(data) + data_sent,
                 reinterpret_cast<const char*>(data) + take);
  }
  return take;
}

bool Connection::p2p_write_end() {
  std::lock_guard lock(mu_);
  if (!live() || shut_here_) return true;  // nothing more goes out anyway
  try {
    if (!flush_tail_locked() || collective_mid_frame()) return false;
    MessageHeader h = control_header(FrameType::p2p, 0);
    h.tag = kP2PStreamEnd;
    iovec iov{&h, kHeaderBytes};
    const size_t w = static_cast<size_t>(send_msg(&iov, 1));
    if (w == 0) return false;
    tail_.assign(reinterpret_cast<const char*>(&h) + w,
                 reinterpret_cast<const char*>(&h) + kHeaderBytes);
    tail_begin_ = 0;
    return flush_tail_locked();
  } catch (const PeerEvent&) {
    return true;
  }
}

bool Connection::flush_tail() {
  std::lock_guard lock(mu_);
  return flush_tail_locked();
}

bool Connection::tail_pending() const {
  std::lock_guard lock(mu_);
  return tail_begin_ < tail_.size();
}

bool Connection::p2p_write_blocked() const {
  std::lock_guard lock(mu_);
  return collective_mid_frame() && tail_begin_ == tail_.size();
}

bool Connection::collective_next() {
  if (coll_left_ > 0 || garbage_) return true;
  if (p2p_left_ > 0) return false;
  MessageHeader h;
  const size_t have = inbox_end_ - scan_;  // the start of the header, if any, is in the inbox
  if (have >= kHeaderBytes) return true;
  std::memcpy(&h, inbox_.data() + scan_, have);
  ssize_t r = ::recv(fd_.get(), reinterpret_cast<char*>(&h) + have, kHeaderBytes - have,
                     MSG_DONTWAIT | MSG_PEEK);
  if (r < 0 && errno != EINTR && !would_block(errno)) {
    error_ = read_error_ = errno;  // a peek takes the socket's error too: keep it for both sides
    return true;
  }
  if (r < static_cast<ssize_t>(kHeaderBytes - have)) return false;  // not in sight yet: read on
  return header_is_valid(h) && h.frame != FrameType::p2p;
}

size_t Connection::p2p_read(std::byte* data, size_t bytes, bool from_socket, bool past_collectives,
                            bool& drained) {
  std::lock_guard lock(mu_);
  p2p_reading_ = true;
  struct Done {
    bool& flag;
    ~Done() { flag = false; }
  } done{p2p_reading_};
  for (;;) {
    if (p2p_in_begin_ < p2p_in_.size()) {
      const size_t take = std::min(bytes, p2p_in_.size() - p2p_in_begin_);
      std::memcpy(data, p2p_in_.data() + p2p_in_begin_, take);
      p2p_in_begin_ += take;
      return take;
    }
    if (!from_socket || !live() || bytes == 0) return 0;
    if (scan_ == inbox_end_ && p2p_left_ > 0) {  // inside a p2p frame: straight in
      const size_t want = std::min<uint64_t>(bytes, p2p_left_);
      ssize_t r = ::recv(fd_.get(), data, want, MSG_DONTWAIT);
      if (r < 0 && errno == EINTR) continue;
      if (r > 0) p2p_left_ -= static_cast<size_t>(r);
      if (r == 0) eof_ = true;
      if (r < 0 && !would_block(errno)) error_ = read_error_ = errno;
      if (r < static_cast<ssize_t>(want)) drained = true;
      return r > 0 ? static_cast<size_t>(r) : 0;
    }
    // The collectives read their payload now (or keep a full backlog): leave the socket to
    // them; they sort out the p2p frames behind it, and after_consume wakes this side.
    if ((in_payload_ && !recvs_.empty()) || inbox_size() >= kCollectiveBacklog) {
      p2p_blocked_ = true;
      drained = true;
      return 0;
    }
    if (!past_collectives && collective_next()) {
      coll_at_head_ = true;
      drained = true;
      return 0;
    }
    // At a frame's start a small read: an eager message's frames come in one, and a large
    // payload is left in the socket to go straight into the caller's buffer.
    const size_t want = p2p_left_ == 0 && coll_left_ == 0 ? 4096 : kInboxBytes;
    const size_t before = inbox_size();
    ssize_t r = fill_inbox(want);
    if (inbox_size() > before) wake_transport();  // its poll cannot see these any more
    if (r < 0 && errno == EINTR) continue;
    if (r < static_cast<ssize_t>(want)) drained = true;
    if (r <= 0) return 0;
    if (!drained) continue;
    // Short: take what it sorted out, if anything, and stop.
    const size_t take = std::min(bytes, p2p_in_.size() - p2p_in_begin_);
    if (take > 0) std::memcpy(data, p2p_in_.data() + p2p_in_begin_, take);
    p2p_in_begin_ += take;
    return take;
  }
}

bool Connection::p2p_collective_at_head() const {
  std::lock_guard lock(mu_);
  return coll_at_head_ && live();
}

bool Connection::p2p_read_blocked() const {
  std::lock_guard lock(mu_);
  return p2p_blocked_ && live() && !shut_here_;
}

P2PStreamState Connection::p2p_state() const {
  std::lock_guard lock(mu_);
  return {.unread = p2p_in_begin_ < p2p_in_.size(),
          .ended = p2p_ended_,
          .closed = eof_ || closed_,
          .error = error_,
          .aborted = peer_aborted_,
          .garbage = garbage_,
          .shut_here = shut_here_};
}

}  // namespace lockstep::tcp
