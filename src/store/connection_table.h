// ConnectionTable: the TcpStore server's connections, with what its event loop must find quickly
// among thousands of them: each connection's registration with the EventPoller (kept in step with
// whether it waits to read or to write), its next deadline (one ordered set for all), the
// connections still in their handshake, oldest first (the first to go when the server is out of
// file descriptors), and the dead ones, to drop. Every operation costs O(log n) in the number of
// connections, or O(1), never a scan of them all.
//
// Thread-safety: none; the server thread owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lockstep/core/deadline.h"
#include "store/event_poller.h"
#include "store/server_connection.h"

namespace lockstep::store_detail {

class ConnectionTable {
 public:
  explicit ConnectionTable(EventPoller& poller) : poller_(poller) {}

  // Takes a newly accepted connection (ids must grow with the order of acceptance) and starts
  // watching it.
  void add(std::unique_ptr<ServerConnection> c);
  // The connection with this id; null when it is gone.
  ServerConnection* find(uint64_t id);
  // Brings the bookkeeping in step after c may have changed (read or sent bytes, finished its
  // handshake, died): what it is watched for, its deadline, whether it is dead.
  void update(ServerConnection& c);
  // Marks each connection whose deadline is at or before now dead, saying why.
  void expire(Clock::time_point now);
  std::optional<Clock::time_point> next_deadline() const;
  // The connection accepted first among those still in their handshake; null when none.
  ServerConnection* oldest_in_handshake();
  // Passes each dead connection to on_drop, then forgets and closes it.
  void drop_dead(const std::function<void(ServerConnection&)>& on_drop);
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::unique_ptr<ServerConnection> conn;
    bool writing = false;                    // watched for writing (else for reading)
    std::optional<Clock::time_point> armed;  // its entry in deadlines_
    bool listed_dead = false;                // in dead_
  };

  EventPoller& poller_;
  std::unordered_map<uint64_t, Entry> entries_;
  std::set<std::pair<Clock::time_point, uint64_t>> deadlines_;
  std::set<uint64_t> in_handshake_;
  std::vector<uint64_t> dead_;
};

}  // namespace lockstep::store_detail
