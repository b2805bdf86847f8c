// ClientConnection: a TcpStore client's one connection to the server: connect (with retries),
// handshake, and request/reply calls. After any transport failure the connection is closed and
// every later call throws NetworkError repeating the first failure, since the stream can no
// longer be trusted to be in step.
//
// Thread-safety: none; TcpStore serialises calls with its mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lockstep/core/deadline.h"
#include "net/auth.h"
#include "net/socket.h"
#include "store/protocol.h"

namespace lockstep::store_detail {

class ClientConnection {
 public:
  // Connects to host:port, retrying with backoff until deadline (TimeoutError naming host:port
  // and the last socket error), then exchanges handshakes (NetworkError if the peer is not a
  // lockstep store server).
  // With a secret ("" for none), both sides then prove they know it (AuthError when the server's
  // secret differs, or only one side has one).
  ClientConnection(const std::string& host, uint16_t port, Deadline deadline,
                   const std::string& secret);

  // Sends request and returns its reply. `op` names the call in errors. TimeoutError when no
  // reply arrives by deadline; NetworkError when the connection fails or is closed.
  store_proto::Message call(const char* op, const store_proto::Message& request, Deadline deadline);

  // "lockstep store server at host:port", for messages.
  const std::string& where() const { return where_; }
  const std::string& local_address() const { return local_address_; }

 private:
  void handshake(Deadline deadline, const std::string& secret);
  void send_all(const char* op, const char* data, size_t n, Deadline deadline);
  // Reads what has arrived into scratch_ (waiting up to deadline); returns the byte count.
  // Throws on close or at the deadline.
  size_t receive_some(const char* op, Deadline deadline);
  // Feeds [*p, end) to the parser; true when a reply is complete.
  bool parse(const char* op, const char** p, const char* end);
  [[noreturn]] void fail_timeout(const char* op, const std::string& what);
  // err: the errno behind it, if any (an unreachable host is worded as such).
  [[noreturn]] void fail_network(const char* op, const std::string& what, int err = 0);

  std::string where_;
  std::string local_address_;
  net::Fd fd_;
  std::string broken_;  // why the connection is unusable; empty while healthy
  std::string out_;
  std::string in_;  // received bytes not yet parsed: in_[in_pos_, in_.size())
  size_t in_pos_ = 0;
  std::unique_ptr<char[]> scratch_;
  store_proto::MessageParser parser_{store_proto::Direction::reply};
};

}  // namespace lockstep::store_detail
