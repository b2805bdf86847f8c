#include "backends/tcp/connection.h"
#include "backends/tcp/connection_limits.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace lockstep::tcp {

using namespace connection_limits;

Connection::Connection(net::Fd fd, PeerInfo peer)
    : fd_(std::move(fd)), peer_(std::move(peer)), inbox_(kInboxBytes) {}

bool Connection::open() const {
  std::lock_guard lock(mu_);
  return live();
}

bool Connection::has_buffered_input() const {
  std::lock_guard lock(mu_);
  return inbox_size() > 0;
}

bool Connection::header_buffered() const {
  std::lock_guard lock(mu_);
  return !in_payload_ && inbox_size() >= kHeaderBytes;
}

void Connection::queue_send(const MessageHeader& header, const void* payload, Request id) {
  std::lock_guard lock(mu_);
  sends_.push_back({header, static_cast<const char*>(payload), 0, id});
}

void Connection::queue_recv(void* data, size_t bytes, Request id) {
  std::lock_guard lock(mu_);
  recvs_.push_back({static_cast<char*>(data), bytes, id});
}

// ---- sorting the incoming stream ----

// Reads up to max_bytes from the socket onto the end of the inbox and sorts them. Returns what
// recv returns (0: the peer closed; after our close: 0 as well).
ssize_t Connection::fill_inbox(size_t max_bytes) {
  if (!live()) return 0;
  if (inbox_begin_ == inbox_end_) {
    inbox_begin_ = scan_ = inbox_end_ = 0;
    if (inbox_.size() > 4 * kInboxBytes) {  // a backlog the p2p side kept is gone
      inbox_.resize(kInboxBytes);
      inbox_.shrink_to_fit();
    }
  }
  if (inbox_end_ + max_bytes > inbox_.size()) {
    std::memmove(inbox_.data(), inbox_.data() + inbox_begin_, inbox_end_ - inbox_begin_);
    scan_ -= inbox_begin_;
    inbox_end_ -= inbox_begin_;
    inbox_begin_ = 0;
    if (inbox_end_ + max_bytes > inbox_.size())
      inbox_.resize(std::max(kInboxBytes, inbox_end_ + max_bytes));
  }
  for (;;) {
    ssize_t r = ::recv(fd_.get(), inbox_.data() + inbox_end_, max_bytes, MSG_DONTWAIT);
    if (r > 0) {
      inbox_end_ += static_cast<size_t>(r);
      demux();
      return r;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) eof_ = true;
    if (r < 0 && !would_block(errno)) error_ = read_error_ = errno;
    return r;
  }
}

void Connection::take_p2p(size_t at, size_t bytes, bool keep) {
  if (keep && p2p_attached_) {
    if (p2p_in_begin_ == p2p_in_.size()) p2p_in_.clear(), p2p_in_begin_ = 0;
    const auto* from = reinterpret_cast<const std::byte*>(inbox_.data() + at);
    p2p_in_.insert(p2p_in_.end(), from, from + bytes);
  }
  std::memmove(inbox_.data() + at, inbox_.data() + at + bytes, inbox_end_ - at - bytes);
  inbox_end_ -= bytes;
}

// Sorts [scan_, inbox_end_): p2p frames out to the p2p inbox, the rest left for the collectives.
void Connection::demux() {
  bool p2p_arrived = false;
  while (scan_ < inbox_end_) {
    if (garbage_) {
      scan_ = inbox_end_;
      break;
    }
    const size_t there = inbox_end_ - scan_;
    if (p2p_left_ > 0) {
      const size_t n = std::min<uint64_t>(p2p_left_, there);
      take_p2p(scan_, n, true);
      p2p_left_ -= n;
      p2p_arrived = true;
      continue;
    }
    if (coll_left_ > 0) {
      const size_t n = std::min<uint64_t>(coll_left_, there);
      scan_ += n;
      coll_left_ -= n;
      continue;
    }
    if (there < kHeaderBytes) break;
    MessageHeader h;
    std::memcpy(&h, inbox_.data() + scan_, kHeaderBytes);
    if (!header_is_valid(h)) {
      garbage_ = true;  // take_header reports it when the collectives get there
      continue;
    }
    if (h.frame == FrameType::p2p) {
      take_p2p(scan_, kHeaderBytes, false);
      if (h.tag == kP2PStreamEnd)
        p2p_ended_ = true;
      else
        p2p_left_ = h.payload_bytes;
      p2p_arrived = true;
      continue;
    }
    if (h.frame == FrameType::abort) peer_aborted_ = true;
    scan_ += kHeaderBytes;
    coll_left_ = h.payload_bytes;
  }
  if (p2p_arrived && !p2p_reading_) wake_p2p();
}

void Connection::wake_transport() {
  if (transport_wake_fd_ < 0) return;
  uint64_t one = 1;
  ssize_t r = ::write(transport_wake_fd_, &one, sizeof(one));
  (void)r;  // EAGAIN only when the counter is full: a wake is pending anyway
}

// The collectives consumed: a p2p read that waited for them may go on. (One that only left a
// collective frame at the head is not woken: its next round looks again.)
void Connection::after_consume() {
  coll_at_head_ = false;
  if (p2p_blocked_ && !in_payload_ && inbox_size() < kCollectiveBacklog) {
    p2p_blocked_ = false;
    wake_p2p();
  }
}

// ---- the collective side's reads ----

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

// Bytes of the current collective frame: from the inbox first, then from the socket.
ssize_t Connection::read_some(void* buf, size_t n) {
  for (;;) {
    if (inbox_size() > 0) {
      size_t take = std::min(n, inbox_size());
      std::memcpy(buf, inbox_.data() + inbox_begin_, take);
      inbox_begin_ += take;
      return static_cast<ssize_t>(take);
    }
    if (!live()) return 0;
    if (scan_ == inbox_end_ && coll_left_ > 0) {  // nothing sorted waits: straight in
      ssize_t r = ::recv(fd_.get(), buf, std::min<uint64_t>(n, coll_left_), MSG_DONTWAIT);
      if (r > 0) coll_left_ -= static_cast<size_t>(r);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) eof_ = true;
      if (r < 0 && !would_block(errno)) error_ = read_error_ = errno;
      return r;
    }
    ssize_t r = fill_inbox(kInboxBytes);
    if (r <= 0) return r;
  }
}

void Connection::throw_read_failure(ssize_t rc) {
  PeerEvent e;
  e.peer = peer_.rank;
  e.mid_message = in_payload_ || inbox_end_ > inbox_begin_;
  if (rc < 0) {
    e.kind = PeerEvent::reset;
    e.error = errno;
  } else if (read_error_ != 0) {  // the socket said why once, to the other side's read
    e.kind = PeerEvent::reset;
    e.error = read_error_;
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
  e.failed_seq = failed_seq_of(in_header_);
  size_t n = std::min<uint64_t>(in_header_.payload_bytes, kMaxControlBytes);
  std::string payload(n, '\0');
  size_t got = 0;
  Deadline deadline = Deadline::after(milliseconds(1000));
  while (got < n && !deadline.expired()) {
    ssize_t r = read_some(payload.data() + got, n - got);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r < 0 && would_block(errno) && live()) {
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
    if (left <= kSmallPayloadBytes || coll_left_ == 0) {
      if (!ensure_inbox(left, left + kHeaderBytes)) return false;
      std::memcpy(item.data + payload_got_, inbox_.data() + inbox_begin_, left);
      inbox_begin_ += left;
      payload_got_ += left;
      break;
    }
    // Sorted bytes are drained (above), so the socket's next bytes are this payload's.
    if (inbox_.size() < kHeaderBytes) inbox_.resize(kInboxBytes);
    inbox_begin_ = scan_ = inbox_end_ = 0;
    const size_t direct = std::min<uint64_t>(left, coll_left_);
    iovec iov[2] = {{item.data + payload_got_, direct}, {inbox_.data(), kHeaderBytes}};
    ssize_t r = live() ? ::readv(fd_.get(), iov, 2) : 0;
    if (r > 0) {
      size_t into_payload = std::min(static_cast<size_t>(r), direct);
      payload_got_ += into_payload;
      coll_left_ -= into_payload;
      inbox_end_ = static_cast<size_t>(r) - into_payload;
      demux();
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && would_block(errno)) return false;
    if (r == 0) eof_ = true;
    if (r < 0) error_ = read_error_ = errno;
    throw_read_failure(r);
  }
  return true;
}

std::optional<MessageHeader> Connection::peek_header() {
  std::lock_guard lock(mu_);
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
  std::lock_guard lock(mu_);
  struct Consumed {
    Connection& c;
    ~Consumed() { c.after_consume(); }
  } consumed{*this};
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

// ---- the collective side's writes ----

// One sendmsg of what iov holds; throws PeerEvent (reset) on a failure other than no room.
ssize_t Connection::send_msg(const iovec* iov, size_t n) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = n;
  for (;;) {
    ssize_t w = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w >= 0) return w;
    if (errno == EINTR) continue;
    if (would_block(errno)) return 0;
    error_ = errno;
    throw PeerEvent{.kind = PeerEvent::reset, .peer = peer_.rank, .error = errno};
  }
}

bool Connection::flush_tail_locked() {
  while (tail_begin_ < tail_.size()) {
    iovec iov{tail_.data() + tail_begin_, tail_.size() - tail_begin_};
    ssize_t w = send_msg(&iov, 1);
    if (w == 0) return false;
    tail_begin_ += static_cast<size_t>(w);
  }
  tail_.clear();
  tail_begin_ = 0;
  return true;
}

void Connection::pump_send(std::vector<Request>& done) {
  std::lock_guard lock(mu_);
  // Closed: by the peer (it says how in what it left), or by this rank after the goodbye.
  if (!sends_.empty() && !live())
    throw eof_ || read_error_ != 0 ? end_event(read_error_)
                                   : PeerEvent{.kind = PeerEvent::goodbye, .peer = peer_.rank};
  if (!flush_tail_locked()) return;  // a p2p frame in part goes first
  while (!sends_.empty()) {
    iovec iov[kMaxIov];
    size_t n = 0;
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
    size_t left = static_cast<size_t>(send_msg(iov, n));
    if (left == 0) return;
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
    if (p2p_wants_out_ && !collective_mid_frame()) {
      p2p_wants_out_ = false;
      wake_p2p();
    }
  }
}

bool Connection::clear_queues() {
  std::lock_guard lock(mu_);
  bool at_boundary = sends_.empty() || sends_.front().sent == 0;
  sends_.clear();
  recvs_.clear();
  if (p2p_wants_out_) {
    p2p_wants_out_ = false;
    wake_p2p();
  }
  return at_boundary;
}

std::optional<PeerEvent> Connection::inspect_close() {
  std::lock_guard lock(mu_);
  int error = 0;
  while (live()) {
    ssize_t r = fill_inbox(kInboxBytes);
    if (r > 0) continue;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && would_block(errno)) return std::nullopt;  // still open: a spurious wake-up
    if (r < 0) error = errno;
    break;
  }
  if (error == 0) error = read_error_;  // said once, maybe to the p2p side's read
  closed_ = true;
  wake_p2p();
  return end_event(error);
}

PeerEvent Connection::end_event(int error) {
  if (in_payload_)
    return PeerEvent{.kind = PeerEvent::closed, .peer = peer_.rank, .mid_message = true};
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
  while (scan_ - p >= kHeaderBytes) {
    MessageHeader h;
    std::memcpy(&h, inbox_.data() + p, kHeaderBytes);
    if (!header_is_valid(h)) return PeerEvent{.kind = PeerEvent::garbage, .peer = peer_.rank};
    size_t frame_end = p + kHeaderBytes + h.payload_bytes;
    if (h.frame == FrameType::abort) {
      e.kind = PeerEvent::aborted;
      e.failed_seq = failed_seq_of(h);
      size_t end = std::min(frame_end, scan_);
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
    if (frame_end > scan_) break;
    p = frame_end;
  }
  e.mid_message = p != scan_ || scan_ != inbox_end_;
  return e;
}

bool Connection::try_send_control(FrameType frame, ErrorClass error_class, const std::string& text,
                                  std::optional<uint64_t> failed_seq) {
  std::lock_guard lock(mu_);
  if (!live() || collective_mid_frame()) return false;
  std::string payload;
  if (frame == FrameType::abort) {
    payload.push_back(static_cast<char>(error_class));
    payload += text.substr(0, kMaxControlBytes - 1);
  }
  MessageHeader h = frame == FrameType::abort ? abort_header(payload.size(), failed_seq)
                                              : control_header(frame, payload.size());
  iovec iov[2] = {{&h, kHeaderBytes}, {payload.data(), payload.size()}};
  try {
    if (!flush_tail_locked()) return false;
    return send_msg(iov, payload.empty() ? 1 : 2) ==
           static_cast<ssize_t>(kHeaderBytes + payload.size());
  } catch (const PeerEvent&) {
    return false;
  }
}

void Connection::shutdown_write() {
  std::lock_guard lock(mu_);
  if (live()) ::shutdown(fd_.get(), SHUT_WR);
  shut_here_ = true;
  wake_p2p();
}

bool Connection::discard_until_goodbye() {
  std::lock_guard lock(mu_);
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

void Connection::close() {
  std::lock_guard lock(mu_);
  if (live()) ::shutdown(fd_.get(), SHUT_RDWR);
  closed_ = true;
  wake_p2p();
}

}  // namespace lockstep::tcp
