// TcpTransport: the Transport of the tcp backend, over one non-blocking socket per peer.
//
// Progress: wait() runs a poll(2) loop over the sockets with queued work, writing header+payload
// with sendmsg and reading payloads straight into the caller's buffers. Every round also watches
// EVERY other peer's socket for a close (POLLRDHUP/POLLHUP/POLLERR), so a peer that dies while
// this rank waits on someone else still fails the op at once, naming the dead rank and its host.
//
// Errors: a data header that differs from what this rank's op expects is a MismatchError; a peer
// that closes without a goodbye is a NetworkError (with the reason another rank left in the store
// key "<group>/abort", if any); a peer's abort frame rethrows the peer's error class and text; a
// peer's goodbye while we still need it is a NetworkError; the op's deadline is a TimeoutError
// naming the peers still owed data.
//
// The connections carry the group's p2p stream too (connection.h); links() hands them to the p2p
// channel (MeshChannel), whose reads may take this transport's bytes off a socket into a
// connection's inbox: it then signals links()->transport_wake, which every poll here watches.
//
// Thread-safety: none; used by one thread (the group's progress thread) at a time, except
// unreachable_ranks(), which any thread may call.
#pragma once

#include <poll.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/transport.h"
#include "backends/tcp/connection.h"
#include "backends/tcp/mesh_links.h"
#include "lockstep/store/store.h"

namespace lockstep::tcp {

struct TransportIdentity {
  std::string group;
  int rank = 0;
  int size = 1;
  std::string hostname;
  std::shared_ptr<Store> store;  // for the "<group>/abort" note
};

class TcpTransport final : public Transport {
 public:
  // conns: one per rank, null at this rank's index (see connect_mesh).
  TcpTransport(std::vector<std::unique_ptr<Connection>> conns, TransportIdentity identity);

  int rank() const override { return id_.rank; }
  int size() const override { return id_.size; }

  // Makes op the current op: its identity goes into every header and error until end_op. Request
  // ids are only valid within one op. op must outlive end_op.
  void begin_op(const Op& op);
  void end_op();
  // end_op for an op whose every message went through: when all it received had arrived before
  // it began (read ahead), no poll saw the peers' sockets during it, so it looks once at their
  // close events first. A peer that aborted the group in this op (its abort frame names the op)
  // fails it here, as it would have had the op waited for anything; a peer that closed after its
  // part leaves the op done. (An op that only sends completes on its own, as eager sends do.)
  void finish_op();

  Request post_send(int peer, const void* data, size_t bytes) override;
  Request post_recv(int peer, void* data, size_t bytes) override;
  void wait(Request r) override;
  void wait_all() override;

  // After a failure: drops queued messages, sends an abort frame carrying (class, reason) to
  // every peer whose stream is at a frame boundary, and ends our side of every stream. Best
  // effort, never blocks, never throws.
  void abort(ErrorClass error_class, const std::string& reason);
  // Orderly end: sends bye to every peer, then discards what arrives until each peer has sent
  // bye or closed, or the deadline passes; then closes every socket. Never throws.
  void goodbye(Deadline deadline);

  const PeerInfo& peer_info(int rank) const { return conns_[static_cast<size_t>(rank)]->peer(); }
  // The connections, for the group's p2p channel.
  std::shared_ptr<MeshLinks> links() const { return links_; }

  // Every rank on a host that an op found unreachable (the ranks its error lists). Any thread.
  std::vector<int> unreachable_ranks() const;

 private:
  void progress();
  bool pump_buffered();
  void service(Connection& c, short revents);
  // [Early frames] A data frame from a peer this rank does not read from now (looked for once the
  // op has waited 50 ms): when it belongs to a collective with the current op's number but of
  // another kind, the ranks called collectives in a different order (throws MismatchError);
  // otherwise it waits for a later op's receive.
  void check_early_frame(Connection& c) const;
  // A close event on a connection this rank does not read from now (service() and finish_op()):
  // what the peer's stream ended with, acted on by on_close_event.
  void check_closed(Connection& c);
  void on_close_event(Connection& c, const PeerEvent& e);
  void complete(const std::vector<Request>& ids);
  void check_header(const Connection& c, const MessageHeader& got, uint64_t expected_bytes) const;
  Connection& conn(int peer, const char* what);
  [[noreturn]] void fail(Connection& c, const PeerEvent& e) const;
  [[noreturn]] void throw_failure(const Connection& c, const PeerEvent& e) const;
  [[noreturn]] void fail_timeout() const;
  std::string peer_text(const PeerInfo& p) const;
  std::string op_name() const;

  std::shared_ptr<MeshLinks> links_;
  std::vector<std::shared_ptr<Connection>>& conns_;  // links_->conns
  TransportIdentity id_;
  const Op* op_ = nullptr;
  Clock::time_point op_started_{};
  MessageHeader expected_{};       // data_header(*op_, 0)
  std::vector<uint8_t> finished_;  // per request id of the current op
  size_t outstanding_ = 0;
  std::vector<Request> done_;  // scratch for pump calls
  std::vector<pollfd> pollfds_;
  std::vector<Connection*> polled_;
  bool polled_this_op_ = false;    // whether progress() polled the sockets during the current op
  bool received_this_op_ = false;  // whether the current op posted a receive
  mutable std::mutex unreachable_mu_;
  mutable std::vector<int> unreachable_;  // recorded by throw_failure
};

}  // namespace lockstep::tcp
