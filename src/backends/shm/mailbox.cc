#include "backends/shm/mailbox.h"

#include <cstring>

#include "backends/shm/futex.h"
#include "core/log.h"
#include "lockstep/core/error.h"

namespace lockstep::shm {

Mailboxes::Mailboxes(const SegmentView& segment, const Sync& sync)
    : segment_(segment), sync_(sync), me_(sync.peers().rank()) {
  for (int r = 0; r < segment.size(); ++r) outboxes_.push_back(std::make_unique<Outbox>());
}

Mailboxes::~Mailboxes() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  futex_wake_all(segment_.control(me_).bell);
  if (sender_.joinable()) sender_.join();
}

bool Mailboxes::push(int to, const MessageHeader& h, const std::byte* data, uint64_t& offset,
                     bool& started) {
  MailboxControl& m = segment_.mailbox(me_, to);
  const size_t capacity = segment_.layout().mailbox_bytes;
  while (!started || offset < h.payload_bytes) {
    const uint32_t sent = m.sent.load(std::memory_order_relaxed);
    if (sent - m.taken.load(std::memory_order_acquire) >= kMailboxDepth) return false;
    ChunkHeader* buffer = segment_.mail_buffer(me_, to, sent);
    const uint64_t bytes = std::min<uint64_t>(capacity, h.payload_bytes - offset);
    buffer->header = h;
    buffer->offset = offset;
    buffer->bytes = bytes;
    if (bytes > 0) std::memcpy(buffer + 1, data, bytes);
    Sync::advance(m.sent, m.sent_waiters);
    data += bytes;
    offset += bytes;
    started = true;
  }
  return true;
}

void Mailboxes::send(const Op& op) {
  const int to = op.peer;
  const MessageHeader h = data_header(op, op.count * element_size(op.dtype));
  const auto* data = static_cast<const std::byte*>(op.input);
  Outbox& box = *outboxes_[static_cast<size_t>(to)];
  std::lock_guard<std::mutex> box_lock(box.mu);
  uint64_t offset = 0;
  bool started = false;
  if (box.queue.empty() && push(to, h, data, offset, started)) return;
  box.queue.push_back(Staged{.header = h,
                             .name = op.name(),
                             .rest = std::vector<std::byte>(data + offset, data + h.payload_bytes),
                             .rest_offset = offset,
                             .offset = offset,
                             .started = started,
                             .deadline = op.deadline.at()});
  std::lock_guard<std::mutex> lock(mu_);
  ++staged_;
  if (!sender_.joinable()) sender_ = std::thread([this] { sender_loop(); });
  changed_.notify_all();
}

void Mailboxes::recv(const Op& op) {
  const int from = op.peer;
  MailboxControl& m = segment_.mailbox(from, me_);
  const uint64_t expected = op.count * element_size(op.dtype);
  auto* out = static_cast<std::byte*>(op.output);
  uint64_t received = 0;
  for (bool first = true; first || received < expected; first = false) {
    const uint32_t taken = m.taken.load(std::memory_order_relaxed);
    sync_.wait_word(m.sent, m.sent_waiters, taken + 1, from, op, WaitFor::message);
    const ChunkHeader* chunk = segment_.mail_buffer(from, me_, taken);
    if (first)
      if (auto mismatch = header_mismatch(chunk->header, expected,
                                          HeaderCheck{.op = op, .rank = me_, .peer = from}))
        throw MismatchError(*mismatch);
    LOCKSTEP_ENFORCE(chunk->offset == received && received + chunk->bytes <= expected, NetworkError,
                     op.name(), ": the mailbox from rank ", from, " holds a chunk at offset ",
                     chunk->offset, " of ", chunk->bytes, " bytes where ", received,
                     " was next: the segment is corrupt");
    if (chunk->bytes > 0) std::memcpy(out + received, chunk + 1, chunk->bytes);
    received += chunk->bytes;
    Sync::advance(m.taken, m.taken_waiters);
    ring(from);
  }
}

void Mailboxes::ring(int sender) {
  RankControl& c = segment_.control(sender);
  if (c.bell_waiters.load() != 0) {
    c.bell.fetch_add(1);
    futex_wake_all(c.bell);
  }
}

bool Mailboxes::push_staged() {
  bool moved = false;
  for (size_t to = 0; to < outboxes_.size(); ++to) {
    Outbox& box = *outboxes_[to];
    std::lock_guard<std::mutex> box_lock(box.mu);
    while (!box.queue.empty()) {
      Staged& s = box.queue.front();
      const uint64_t before = s.offset;
      const bool was_started = s.started;
      const bool done = push(static_cast<int>(to), s.header,
                             s.rest.data() + (s.offset - s.rest_offset), s.offset, s.started);
      moved |= s.offset != before || s.started != was_started;
      if (!done) break;
      box.queue.pop_front();
      std::lock_guard<std::mutex> lock(mu_);
      --staged_;
      changed_.notify_all();
    }
  }
  return moved;
}

void Mailboxes::fail(const Staged& s, int to, ErrorClass error_class, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_.empty()) {
    failure_ = detail::concat(s.name, ": ", s.offset, " of ", s.header.payload_bytes,
                              " bytes were delivered to rank ", to, " before ", why);
    failure_class_ = error_class;
  }
}

void Mailboxes::check_staged() {
  const Peers& peers = sync_.peers();
  const std::optional<int> dead = peers.first_dead();
  const bool aborted = segment_.header().aborted.load() != 0;
  for (size_t to = 0; to < outboxes_.size(); ++to) {
    Outbox& box = *outboxes_[to];
    std::lock_guard<std::mutex> box_lock(box.mu);
    if (box.queue.empty()) continue;
    const int r = static_cast<int>(to);
    const Staged& s = box.queue.front();
    if (aborted)
      fail(s, r, ErrorClass::network, "the group was aborted");
    else if (dead == r)
      fail(s, r, ErrorClass::network, peers.describe(r) + " died");
    else if (peers.departed(r))
      fail(s, r, ErrorClass::network,
           peers.describe(r) + " shut down its group without receiving it");
    else if (Clock::now() >= s.deadline)
      fail(s, r, ErrorClass::timeout,
           "the send's deadline passed: rank " + std::to_string(r) +
               " did not post the matching recv in time");
    else
      continue;
    std::lock_guard<std::mutex> lock(mu_);
    staged_ -= box.queue.size();
    box.queue.clear();
    changed_.notify_all();
  }
}

void Mailboxes::sender_loop() {
  RankControl& mine = segment_.control(me_);
  auto next_check = Clock::now() + kHealthSlice;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      changed_.wait(lock, [&] { return stop_ || staged_ > 0; });
      if (stop_) return;
    }
    const uint32_t bell = mine.bell.load();
    if (push_staged()) continue;
    // Nothing moved: sleep until a receiver takes a buffer (see Mailboxes::ring for the order).
    mine.bell_waiters.fetch_add(1);
    if (!push_staged() && mine.bell.load() == bell) futex_wait(mine.bell, bell, kHealthSlice);
    mine.bell_waiters.fetch_sub(1);
    if (Clock::now() >= next_check) {
      next_check = Clock::now() + kHealthSlice;
      check_staged();
    }
  }
}

void Mailboxes::drain(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait_until(lock, deadline.at(), [&] { return staged_ == 0; });
}

void Mailboxes::abandon() {
  for (auto& box : outboxes_) {
    std::lock_guard<std::mutex> box_lock(box->mu);
    std::lock_guard<std::mutex> lock(mu_);
    staged_ -= box->queue.size();
    box->queue.clear();
  }
  changed_.notify_all();
}

void Mailboxes::rethrow_failure(const Op& op) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_.empty()) return;
  std::string text = std::move(failure_);
  failure_.clear();
  throw_as(failure_class_, detail::concat(op.name(), ": an earlier send failed: ", text));
}

}  // namespace lockstep::shm
