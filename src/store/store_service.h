// StoreService: what the TcpStore server does with a request, apart from sockets. It owns the
// key-value table, answers each request, and parks blocking requests (get, wait, multi_get) whose
// keys are missing: each parked request sits in the waiter list of its first missing key and in a
// deadline queue, and is answered when its keys all exist or, at its deadline, with "timed out"
// and the keys still missing. So a blocking call never blocks the server, and every request gets
// exactly one reply, which keeps the stream in step.
//
// Connections are named by an id chosen by the caller. Replies go out through the callback given
// at construction, possibly for another connection than the one whose request caused them.
// Thread-safety: none; the server thread owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "lockstep/core/deadline.h"
#include "store/protocol.h"

namespace lockstep::store_detail {

class StoreService {
 public:
  using ReplyFn = std::function<void(uint64_t conn, const store_proto::Message& reply)>;

  explicit StoreService(ReplyFn reply) : reply_(std::move(reply)) {}
  // Handles one well-formed request from conn (a connection with no parked request).
  void handle(uint64_t conn, store_proto::Message request);
  // Answers "timed out" to every parked request whose deadline is at or before now.
  void expire(Clock::time_point now);
  // The earliest deadline of a parked request.
  std::optional<Clock::time_point> next_deadline() const;
  // Whether conn has a parked request.
  bool parked(uint64_t conn) const { return parked_.contains(conn); }
  // Drops conn's parked request, if any (its connection went away).
  void forget(uint64_t conn);

 private:
  struct Parked {
    store_proto::Command command;
    std::vector<std::string> keys;
    std::chrono::milliseconds timeout;
    std::string waiting_on;  // the key whose waiter list holds it
    std::multimap<Clock::time_point, uint64_t>::iterator deadline;
  };

  void handle_blocking(uint64_t conn, store_proto::Message& request);
  void reply_values(uint64_t conn, store_proto::Command command,
                    const std::vector<std::string>& keys);
  void reply(uint64_t conn, store_proto::Status status, int64_t number = 0,
             std::vector<std::string> strings = {});
  // Re-checks the requests waiting on key, after it was written.
  void written(const std::string& key);
  // Answers conn's parked request if its keys all exist, else moves it to its next missing key.
  void recheck(uint64_t conn);
  void unpark(uint64_t conn);
  void remove_waiter(const std::string& key, uint64_t conn);

  ReplyFn reply_;
  std::unordered_map<std::string, std::string> data_;
  std::unordered_map<uint64_t, Parked> parked_;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters_;
  std::multimap<Clock::time_point, uint64_t> deadlines_;
};

}  // namespace lockstep::store_detail
