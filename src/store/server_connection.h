// ServerConnection: one client of the TcpStore server, as the server thread sees it: a
// non-blocking socket, the handshake check, the incremental request parser and the queue of
// reply bytes not yet taken by the socket.
//
// A connection goes dead (and the server drops it) when the peer closes it, sends a wrong
// handshake or a malformed or oversized message, or does not finish the handshake in time;
// reason() says which. Thread-safety: none; the server thread owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "lockstep/core/deadline.h"
#include "net/socket.h"
#include "store/protocol.h"

namespace lockstep::store_detail {

class ServerConnection {
 public:
  // Takes a request; returns false to reject it (the connection is then dropped).
  using RequestFn = std::function<bool(store_proto::Message&&)>;

  ServerConnection(uint64_t id, net::Fd fd, Deadline handshake_deadline);

  // Reads what the socket holds (into scratch) and passes each complete request on.
  void on_readable(std::span<char> scratch, const RequestFn& on_request);
  // Queues reply and sends as much as the socket takes now.
  void queue(const store_proto::Message& reply);
  // Sends queued bytes until the socket would block.
  void flush();

  bool wants_write() const { return sent_ < out_.size(); }
  bool handshaken() const { return handshake_have_ == store_proto::kHandshakeBytes; }
  const Deadline& handshake_deadline() const { return handshake_deadline_; }
  bool dead() const { return !reason_.empty(); }
  void mark_dead(std::string reason);
  const std::string& reason() const { return reason_; }
  int fd() const { return fd_.get(); }
  uint64_t id() const { return id_; }
  const std::string& peer() const { return peer_; }

 private:
  // Consumes handshake bytes from [*p, end); marks the connection dead on a mismatch.
  void check_handshake(const char** p, const char* end);
  void consume(const char* p, const char* end, const RequestFn& on_request);

  uint64_t id_;
  net::Fd fd_;
  std::string peer_;
  Deadline handshake_deadline_;
  size_t handshake_have_ = 0;
  store_proto::MessageParser parser_{store_proto::Direction::request};
  std::string out_;
  size_t sent_ = 0;
  std::string reason_;
};

}  // namespace lockstep::store_detail
