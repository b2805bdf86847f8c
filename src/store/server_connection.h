// ServerConnection: one client of the TcpStore server, as the server thread sees it: a
// non-blocking socket, the handshake (with its authentication; see store/protocol.h), the
// incremental request parser and the queue of reply bytes not yet taken by the socket.
//
// A connection goes dead (and the server drops it) when the peer closes it, sends a wrong
// handshake, a wrong proof of the secret, or a malformed or oversized message, or is too slow:
// it does not finish the handshake in time, or sends a request or takes a reply too slowly
// (store/server_limits.h). reason() says which; deadline() says when it will be too slow, for
// the server to check then. Thread-safety: none; the server thread owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "lockstep/core/deadline.h"
#include "net/auth.h"
#include "net/socket.h"
#include "store/handshake.h"
#include "store/protocol.h"

namespace lockstep::store_detail {

class ServerConnection {
 public:
  // Takes a request; returns false to reject it (the connection is then dropped).
  using RequestFn = std::function<bool(store_proto::Message&&)>;

  // secret: the job's ("" when the server has none); it outlives the connection.
  ServerConnection(uint64_t id, net::Fd fd, Deadline handshake_deadline, std::string_view secret);

  // Reads what the socket holds (into scratch) and passes each complete request on.
  void on_readable(std::span<char> scratch, const RequestFn& on_request);
  // Queues reply and sends as much as the socket takes now.
  void queue(const store_proto::Message& reply);
  // Sends queued bytes until the socket would block.
  void flush();

  bool wants_write() const { return sent_ < out_.size(); }
  // Hellos exchanged and the client's proof accepted: requests may follow.
  bool handshaken() const { return proof_accepted_; }
  // When the connection will be too slow, if it stays as it is: the end of its handshake time,
  // or the time by which the request it is sending (or the reply it is taking) must have moved
  // on; nullopt when it owes nothing (idle between requests, or parked). Moves as bytes pass.
  std::optional<Clock::time_point> deadline() const;
  // Marks the connection dead, saying why it was too slow; call when deadline() has passed.
  void mark_overdue();
  bool dead() const { return !reason_.empty(); }
  void mark_dead(std::string reason);
  const std::string& reason() const { return reason_; }
  // Dropped for something a client of the job should never do (a malformed or oversized
  // request after a good handshake): worth a warning, where a port scanner's drop is not.
  bool refused() const { return refused_; }
  // Turned away at the handshake (src/store/refusals.h): its proof failed (another secret), it
  // left after the server's hello (it has no secret where the server has one, or the other way
  // round: the client refused the server), or its hello is not a lockstep store client's.
  bool turned_away() const { return turned_away_; }
  int fd() const { return fd_.get(); }
  uint64_t id() const { return id_; }
  const std::string& peer() const { return peer_; }

 private:
  // Consumes handshake bytes from [*p, end): the client's hello (answered with the server's),
  // then its proof. Marks the connection dead on a wrong prefix or a wrong proof.
  void check_handshake(const char** p, const char* end);
  void consume(const char* p, const char* end, const RequestFn& on_request);
  void refuse(std::string reason);

  // A request (or a reply) under way, and the progress it must keep making: kMinTransferRate x
  // kTransferGrace bytes in each window of kTransferGrace (store/server_limits.h).
  struct Transfer {
    explicit Transfer(Clock::time_point now) : started(now), window_start(now) {}
    void moved(uint64_t n, Clock::time_point now);
    Clock::time_point due() const;
    Clock::time_point started;
    Clock::time_point window_start;
    uint64_t window_bytes = 0;
    uint64_t bytes = 0;  // in all
  };

  uint64_t id_;
  net::Fd fd_;
  std::string peer_;
  Deadline handshake_deadline_;
  std::string_view secret_;
  store_proto::ClientHandshakeReader handshake_;
  bool proof_accepted_ = false;  // the proof was read, and checked when there is a secret
  auth::Nonce server_nonce_{};
  store_proto::MessageParser parser_{store_proto::Direction::request};
  std::optional<Transfer> receiving_;  // a request has begun to arrive
  std::optional<Transfer> sending_;    // a reply is waiting for the client to take it
  std::string out_;
  size_t sent_ = 0;
  std::string reason_;
  bool refused_ = false;
  bool turned_away_ = false;
};

}  // namespace lockstep::store_detail
