#include "backends/shm/sync.h"

#include <immintrin.h>
#include <sched.h>

#include <cstdio>

#include "lockstep/core/error.h"
#include "shmem/futex.h"

namespace lockstep::shm {

namespace {

// [Waiting] policies, measured in docs/shm.md. With a core per rank, a late peer is usually a
// few microseconds behind: spin through that. Then yield: the peer may share this core after all
// (other processes take cores too), and a yield hands it over at once, where sleeping would cost
// the peer a FUTEX_WAKE and us a wake-up. With more ranks than cores the peer needs this core:
// spin only briefly. Either way, sleep when the wait outlasts the yield phase.
struct WaitPolicy {
  std::chrono::nanoseconds spin;
  std::chrono::nanoseconds yield;
};
constexpr WaitPolicy kDedicatedCores{.spin = std::chrono::microseconds(4),
                                     .yield = std::chrono::microseconds(60)};
constexpr WaitPolicy kSharedCores{.spin = std::chrono::nanoseconds(250),
                                  .yield = std::chrono::microseconds(60)};

// Returns whether done() became true before the policy's spin and yield time ran out.
template <class Reached>
bool spin_then_yield(Reached done, const WaitPolicy& policy) {
  const auto start = Clock::now();
  for (int i = 1;; ++i) {
    if (done()) return true;
    _mm_pause();
    if (i % 8 == 0 && Clock::now() - start > policy.spin) break;
  }
  const auto yield_start = Clock::now();
  for (int i = 1;; ++i) {
    if (done()) return true;
    ::sched_yield();
    if (i % 4 == 0 && Clock::now() - yield_start > policy.yield) return false;
  }
}

}  // namespace

Sync::Sync(const SegmentView& segment, const Peers& peers, bool oversubscribed)
    : segment_(segment),
      peers_(peers),
      mine_(segment.control(peers.rank())),
      oversubscribed_(oversubscribed) {}

void Sync::advance(std::atomic<uint32_t>& word, const std::atomic<uint32_t>& waiters) {
  word.fetch_add(1);  // a full barrier: the data before it, and the waiters load after it
  if (waiters.load() != 0) shmem::futex_wake_all(word);
}

void Sync::bump() {
  advance(mine_.step, mine_.step_waiters);
}

void Sync::wait_step(int peer, uint32_t target, const Op& op) const {
  RankControl& c = segment_.control(peer);
  wait_word(c.step, c.step_waiters, target, peer, op);
}

void Sync::wait_all(uint32_t target, const Op& op) const {
  for (int p = 0; p < segment_.size(); ++p)
    if (p != peers_.rank()) wait_step(p, target, op);
}

void Sync::wait_word(const std::atomic<uint32_t>& word, std::atomic<uint32_t>& waiters,
                     uint32_t target, int peer, const Op& op) const {
  auto done = [&] { return reached(word.load(std::memory_order_acquire), target); };
  if (done() || spin_then_yield(done, oversubscribed_ ? kSharedCores : kDedicatedCores)) return;
  auto& futex_word = const_cast<std::atomic<uint32_t>&>(word);
  auto next_poll = Clock::now() + kHealthSlice;
  for (;;) {
    // Cheap checks on every wake; the pidfd poll (a system call) once per slice.
    const bool poll_pids = Clock::now() >= next_poll;
    if (poll_pids) next_poll = Clock::now() + kHealthSlice;
    check_health(peer, op, op.deadline.at(), poll_pids, &word, target);
    if (done()) return;
    waiters.fetch_add(1);
    const uint32_t seen = word.load();
    if (!reached(seen, target)) {
      auto left = op.deadline.at() - Clock::now();
      shmem::futex_wait(futex_word, seen, std::min<std::chrono::nanoseconds>(left, kHealthSlice));
    }
    waiters.fetch_sub(1);
    if (done()) return;
  }
}

namespace {

// [Enclosing ops] bit 63: set; bits 56-62: the kind; bit 55: the _v form; bits 0-54: the seq.
constexpr uint64_t kStampSet = uint64_t{1} << 63;
constexpr uint64_t kStampVariable = uint64_t{1} << 55;
constexpr uint64_t kStampSeqMask = kStampVariable - 1;

uint64_t stamp_of(const Op& op) {
  return kStampSet | (uint64_t{static_cast<uint8_t>(op.kind)} << 56) |
         (op.variable ? kStampVariable : 0) | (op.seq & kStampSeqMask);
}

std::string stamp_name(uint64_t stamp) {
  std::string n(op_kind_name(static_cast<OpKind>((stamp >> 56) & 0x7f)));
  if (stamp & kStampVariable) n += "_v";
  return detail::concat(n, " #", stamp & kStampSeqMask);
}

}  // namespace

void Sync::set_enclosing(const Op& op) {
  mine_.enclosing.store(stamp_of(op), std::memory_order_release);
}

void Sync::check_enclosing(int peer) const {
  const uint64_t mine = mine_.enclosing.load(std::memory_order_relaxed);
  if (mine == 0) return;
  const uint64_t theirs = segment_.control(peer).enclosing.load(std::memory_order_acquire);
  if (theirs == 0 || theirs == mine || ((theirs ^ mine) & kStampSeqMask) != 0) return;
  // The root cause only: the enclosing group says which of its stages found it.
  throw MismatchError(
      order_mismatch_text(peer, stamp_name(theirs), peers_.rank(), stamp_name(mine)));
}

void Sync::check_abort(const Op& op) const {
  if (segment_.header().aborted.load(std::memory_order_acquire) != 0) throw_abort(&op);
}

void Sync::check_health(int peer, const Op& op, Clock::time_point deadline, bool poll_pids,
                        const std::atomic<uint32_t>* word, uint32_t target) const {
  // A peer that advanced the awaited word did its part, even if it left, died or aborted the group
  // (in a later op) just after: the wait is over, and the caller's loop sees it.
  auto arrived = [&] { return word && reached(word->load(std::memory_order_acquire), target); };
  if (arrived()) return;
  check_abort(op);
  check_enclosing(peer);
  const int me = peers_.rank();
  // A collective needs every rank, so any dead one breaks it.
  std::optional<int> dead = poll_pids ? peers_.first_dead() : std::nullopt;
  if (dead && !arrived())
    throw NetworkError(detail::concat(
        op.name(), ": ", peers_.describe(*dead), " died while rank ", me,
        " waited in this op: its process ended without leaving the group (it crashed, exited or "
        "was killed; a SIGKILL is often the out-of-memory killer). Check rank ",
        *dead, "'s output for its error"));
  if (peers_.departed(peer) && !arrived())
    throw NetworkError(
        detail::concat(peers_.describe(peer), " shut down its process group while rank ", me,
                       " waits in ", op.name(),
                       " (ranks called different numbers of collectives?). Fix: every rank must "
                       "issue the same collectives before destroying the group"));
  if (Clock::now() >= deadline)
    throw TimeoutError(detail::concat(op.name(), ": the op's deadline passed while rank ", me,
                                      " waited for ", peers_.describe(peer),
                                      " to do its part of the collective; ",
                                      peers_.last_op_of(peer), ". Fix: find what rank ", peer,
                                      " is doing (stuck, slow, or skipping this op), or raise "
                                      "the timeout (LOCKSTEP_TIMEOUT or the op's timeout option)"));
}

void Sync::publish_abort(ErrorClass error_class, const std::string& reason) const {
  SegmentHeader& h = segment_.header();
  uint32_t expected = 0;
  if (h.aborted.compare_exchange_strong(expected, 1)) {
    h.abort_rank = peers_.rank();
    h.abort_class = error_class;
    std::snprintf(h.abort_reason, sizeof h.abort_reason, "%s", reason.c_str());
    h.aborted.store(2, std::memory_order_release);
  }
  wake_everyone();
}

void Sync::wake_everyone() const {
  const int n = segment_.size();
  for (int r = 0; r < n; ++r) {
    RankControl& c = segment_.control(r);
    shmem::futex_wake_all(c.step);
  }
}

void Sync::throw_abort(const Op* op) const {
  SegmentHeader& h = segment_.header();
  // The aborting rank fills the record between its 1 and 2: wait the few instructions it takes.
  while (h.aborted.load(std::memory_order_acquire) != 2) _mm_pause();
  const std::string op_name = op ? op->name() : std::string("the group");
  throw_as(peer_class(h.abort_class),
           relayed(h.abort_reason, peers_.describe(h.abort_rank), peers_.rank(), op_name));
}

}  // namespace lockstep::shm
