// Sync: how a rank waits for its peers in shared memory, and how it tells them to stop.
//
// [Waiting] Every wait is "until a 32-bit counter another rank bumps reaches a target" (counters
// wrap; comparisons are wrap-safe). A wait spins with pause instructions (4 us when every rank
// can have a core, 250 ns when the host runs more of the job's ranks than it has cores), then
// yields the core for up to 60 us (so that ranks sharing a core progress), then sleeps on the
// counter with FUTEX_WAIT. Sleepers count themselves in a waiters word next to the counter,
// and a bump issues FUTEX_WAKE only when that word is non-zero, so the fast path makes no system
// call.
//
// [Failing fast] A sleeping wait wakes at least every kHealthSlice to check, in this order: an
// abort recorded by any rank (rethrown with that rank's cause and error class), a peer process
// that died (NetworkError naming it), the awaited peer having left the group, and the op's
// deadline (TimeoutError naming the peer and the last op it entered).
//
// [Enclosing ops] A group that runs only some of its ops on an shm group of its ranks (hier: the
// intra-host stages of all_reduce; everything else on a tcp mesh) stamps each op it starts into
// this rank's control (set_enclosing). A rank whose shm stage waits for a peer that sits in
// another op of the enclosing group, with the same sequence number, would wait for nothing: the
// peer's op never comes here. Every wake of a wait compares the stamps, and a difference is a
// MismatchError naming both ops at once, as tcp's headers and shm's descriptors do.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "backends/shm/layout.h"
#include "backends/shm/peers.h"
#include "comm/op.h"

namespace lockstep::shm {

inline constexpr std::chrono::milliseconds kHealthSlice{100};

// Whether counter value v has reached target (wrap-safe).
inline bool reached(uint32_t v, uint32_t target) {
  return static_cast<int32_t>(v - target) >= 0;
}

class Sync {
 public:
  // oversubscribed: some rank of this host has no core of its own (then waits spin only briefly).
  Sync(const SegmentView& segment, const Peers& peers, bool oversubscribed);

  // This rank's step counter (bumped once per phase of each collective).
  uint32_t step() const { return mine_.step.load(std::memory_order_relaxed); }
  // Publishes everything written so far and advances this rank's step by one.
  void bump();
  // Waits until rank peer's step reaches target.
  void wait_step(int peer, uint32_t target, const Op& op) const;
  // Waits until every other rank's step reaches target.
  void wait_all(uint32_t target, const Op& op) const;
  // Waits until word reaches target; peer is the rank that advances it.
  void wait_word(const std::atomic<uint32_t>& word, std::atomic<uint32_t>& waiters, uint32_t target,
                 int peer, const Op& op) const;
  // Advances a counter that peer(s) wait on, waking them if any sleeps.
  static void advance(std::atomic<uint32_t>& word, const std::atomic<uint32_t>& waiters);

  // [Enclosing ops] Stamps op as this rank's op of the enclosing group.
  void set_enclosing(const Op& op);
  // Throws MismatchError when peer's enclosing op has the same sequence number as this rank's
  // but is another op. The text names the two ops only: the enclosing group's stage that catches
  // it adds where.
  void check_enclosing(int peer) const;

  // Throws the recorded abort, if any rank has aborted the group.
  void check_abort(const Op& op) const;
  // Throws if the group is broken for a wait on peer: aborted, a dead process (only looked for
  // when poll_pids: a system call), peer departed (unless it advanced `word` to `target` first),
  // or the deadline passed. Called between sleeps.
  void check_health(int peer, const Op& op, Clock::time_point deadline, bool poll_pids,
                    const std::atomic<uint32_t>* word = nullptr, uint32_t target = 0) const;
  // Records this rank's abort unless another rank was first, and wakes every waiter.
  void publish_abort(ErrorClass error_class, const std::string& reason) const;
  // Wakes every sleeper of this group (abort, shutdown).
  void wake_everyone() const;

  const Peers& peers() const { return peers_; }

 private:
  [[noreturn]] void throw_abort(const Op* op) const;

  SegmentView segment_;
  const Peers& peers_;
  RankControl& mine_;
  bool oversubscribed_ = false;
};

}  // namespace lockstep::shm
