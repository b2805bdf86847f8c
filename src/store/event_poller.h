// EventPoller: epoll(7), level-triggered, over descriptors each named by a 64-bit key. A wait
// costs in proportion to the descriptors that are ready, not to all that are open. The server
// used poll(2), which scans every descriptor on every wake-up: with a few thousand idle
// connections held, a small request took ~0.3-0.8 ms instead of ~25 us, and 10,000 connections
// took 18-28 s to be accepted instead of 0.5 s (tests/store/tcp_store_abuse_figures_test.cc).
//
// Thread-safety: none; the server thread owns it.
#pragma once

#include <sys/epoll.h>

#include <cstdint>
#include <span>
#include <vector>

#include "net/socket.h"

namespace lockstep::store_detail {

class EventPoller {
 public:
  // max_events: the most events one wait returns. NetworkError when epoll cannot be created.
  explicit EventPoller(int max_events);

  // Watches fd for reading and/or writing (neither: only for errors and hang-ups, which epoll
  // always reports). NetworkError on failure.
  void add(int fd, uint64_t key, bool read, bool write);
  void modify(int fd, uint64_t key, bool read, bool write);
  // Stops watching fd (before it is closed).
  void remove(int fd);
  // Waits up to timeout_ms (-1: without limit) and returns what is ready; empty on a timeout or
  // a signal. Valid until the next wait.
  std::span<const epoll_event> wait(int timeout_ms);

 private:
  net::Fd epoll_;
  std::vector<epoll_event> events_;
};

}  // namespace lockstep::store_detail
