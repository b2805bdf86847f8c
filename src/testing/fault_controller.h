// FaultController: the network between the in-memory endpoints of one test (MemoryTransport,
// MemoryChannel), which the test steers, deterministically, to provoke what real sockets only do
// by chance: messages held back and released in a chosen order, dropped, or a connection cut.
//
// [Links] Between each ordered pair of ranks (from, to) there is one link: a FIFO of packets. A
// packet is what one send of a MemoryTransport or one write of a MemoryChannel hands over; the
// controller never looks inside. A packet sent on a link is, by the link's state at that moment:
//   delivered  appended to the receiver's inbox (the default), visible to take() at once;
//   held       kept aside (hold()) until release_next / release_at / release delivers it;
//   dropped    discarded (drop_next(): that many of the next packets, whatever they carry);
//   refused    the link is cut: send() says so and the packet is gone.
// End packets (an endpoint's orderly close) are never dropped, but wait behind held packets.
//
// [Cut] cut(a, b) breaks the connection between a and b in both directions, as a TCP connection
// breaks: what each side already delivered stays readable, what was held (in flight) is lost,
// and every later send on it is refused. cut_reason() then names both ranks.
//
// [Waiting] Every change (a delivery, a release, a cut, a poke) advances epoch(). An endpoint
// that finds nothing to do reads epoch() first, looks, then wait_change(rank, seen, until): no
// change between its look and its sleep is lost. A rank in wait_change since the latest change,
// or finished(), counts as quiet; wait_quiet() returns once every rank is: the network then holds
// still until the test acts (nothing moves without a release or a cut).
//
// kAnyRank as `from` or `to` of hold, release and drop_next stands for every rank.
//
// Thread-safety: every member may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/core/deadline.h"

namespace lockstep::testing {

inline constexpr int kAnyRank = -1;

struct Packet {
  std::vector<std::byte> bytes;
  bool end = false;     // the sender closed its end of the link (no bytes)
  uint64_t number = 0;  // in the order packets were sent, over every link (set by send())
};

class FaultController {
 public:
  explicit FaultController(int size);
  int size() const { return size_; }

  // ---- the test's commands ----

  // Packets sent on from->to from now on are held until released.
  void hold(int from, int to);
  // Delivers the oldest held packet of from->to (which keeps holding). Throws std::logic_error
  // when none is held.
  void release_next(int from, int to);
  // Delivers the held packet at `index` (0: the oldest) of from->to, ahead of older ones: a
  // network that reorders one connection's packets, which no real transport does (the header
  // check must catch it). Throws std::logic_error when there is no such packet.
  void release_at(int from, int to, size_t index);
  // Delivers every held packet of the matching links, in the order they were sent, and stops
  // holding them.
  void release(int from, int to);
  // The next `n` packets sent on from->to vanish (end packets excepted).
  void drop_next(int from, int to, int n = 1);
  // Breaks the connection between a and b ([Cut]).
  void cut(int a, int b);

  size_t held(int from, int to) const;
  size_t dropped(int from, int to) const;
  // The links holding packets, ordered by the number of their oldest held packet.
  std::vector<std::pair<int, int>> held_links() const;
  // Blocks until from->to holds at least n packets. Throws std::runtime_error after 60 s (a test
  // that waits for what never comes fails instead of hanging; no test relies on the time).
  void wait_held(int from, int to, size_t n);
  // Blocks until every rank is quiet ([Waiting]). Throws std::runtime_error after 60 s.
  void wait_quiet();
  // Whether every rank has called finished().
  bool all_finished() const;

  // ---- the endpoints' side ----

  enum class Fate { delivered, held, dropped, refused };
  Fate send(int from, int to, std::vector<std::byte> bytes);
  // Appends an end packet to from->to (refused when cut).
  void send_end(int from, int to);
  // The next delivered packet of from->to, taken off the link, or nothing.
  std::optional<Packet> take(int from, int to);
  // Whether take(from, to) would return something, and whether that is an end packet.
  bool has_packet(int from, int to) const;
  bool next_is_end(int from, int to) const;
  // A copy of the first `bytes` bytes of the next delivered packet (fewer if it is shorter).
  std::optional<std::vector<std::byte>> peek(int from, int to, size_t bytes) const;
  // "the link between rank a and rank b was cut by the fault controller", or "" while it is whole.
  std::string cut_reason(int a, int b) const;

  uint64_t epoch() const;
  // Blocks while epoch() == seen, until `until` at the latest; the rank is quiet meanwhile.
  void wait_change(int rank, uint64_t seen, Clock::time_point until);
  // Advances epoch() (wakes every wait_change): an endpoint's wake().
  void poke();
  // The rank's thread is done with its endpoint: quiet from now on.
  void finished(int rank);

 private:
  struct Link {
    std::deque<Packet> inbox;  // delivered, not taken
    std::deque<Packet> held;
    bool holding = false;
    int drops = 0;
    size_t dropped = 0;
    bool cut = false;
  };
  struct Rank {
    bool waiting = false;
    uint64_t waiting_since = 0;  // the epoch it waits on
    bool finished = false;
  };

  Link& link(int from, int to) { return links_[index(from, to)]; }
  const Link& link(int from, int to) const { return links_[index(from, to)]; }
  size_t index(int from, int to) const;
  void check_rank(int rank, bool any_ok) const;
  template <class F>
  void for_links(int from, int to, F f);
  void changed();                                          // REQUIRES mu_
  bool quiet() const;                                      // REQUIRES mu_
  void deliver(Link& l, std::deque<Packet>::iterator it);  // REQUIRES mu_

  const int size_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Link> links_;
  std::vector<Rank> ranks_;
  uint64_t epoch_ = 0;
  uint64_t next_number_ = 0;
};

}  // namespace lockstep::testing
