// MemoryTransport: a Transport (algorithms/transport.h) between ranks of one process, over the
// links of a FaultController, so that tests steer every delivery. One per rank, each used by its
// rank's thread only.
//
// Wire: every message is one packet, the real MessageHeader (algorithms/message_header.h) then
// the payload, as the tcp transport frames it; abort and bye are control frames likewise. A
// receive checks the header with header_mismatch, the tcp transport's check, so that a header
// that differs from what the op expects is the same MismatchError, before any payload byte is
// copied.
//
// Errors of wait() and wait_all(), looked for in this order each round:
//   - a cut connection to any peer (FaultController::cut): NetworkError "<op>: lost connection
//     to rank P: <cut reason>", whether or not this rank reads from P now (the tcp transport
//     watches every peer's socket for a close likewise);
//   - a receive's header mismatch: MismatchError;
//   - a peer's abort frame, next on its link (read from or not): the peer's error class (as
//     peer_class narrows it) and text, relayed ("... (relayed by rank P to rank R in <op>)");
//   - a peer's bye while a receive from it is pending: NetworkError;
//   - the op's deadline: TimeoutError naming the peers still owed data.
// Sends complete when posted (the link takes the packet whole); a send on a cut link throws the
// cut's NetworkError at once. Unlike the tcp transport, a data frame of another op from a peer
// this rank does not read from now is never looked at ([Early frames]): it waits on its link.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/message_header.h"
#include "algorithms/transport.h"
#include "comm/failure.h"
#include "testing/fault_controller.h"

namespace lockstep::testing {

class MemoryTransport final : public Transport {
 public:
  MemoryTransport(std::shared_ptr<FaultController> faults, int rank);

  int rank() const override { return rank_; }
  int size() const override { return faults_->size(); }

  // Makes op the current op until end_op (as TcpTransport's). op must outlive end_op.
  void begin_op(const Op& op);
  void end_op();

  Request post_send(int peer, const void* data, size_t bytes) override;
  Request post_recv(int peer, void* data, size_t bytes) override;
  void wait(Request r) override;
  void wait_all() override;

  // After a failure: an abort frame carrying (class, reason) to every peer. Never throws.
  void abort(ErrorClass error_class, const std::string& reason);
  // Orderly end: a bye frame to every peer. Never throws.
  void goodbye();

 private:
  struct Recv {
    Request id;
    void* data;
    size_t bytes;
  };

  void check_peer(int peer, const char* what) const;
  // One round: completes what the links allow; throws the errors listed above.
  void progress();
  void receive(int peer, const Packet& p);
  void check_unread_peer(int peer);
  void send_control(int peer, FrameType frame, const std::string& payload);
  [[noreturn]] void fail_cut(int peer) const;
  [[noreturn]] void fail_timeout() const;
  void block();  // waits for the next change, at most until the op's deadline
  std::string op_name() const;

  std::shared_ptr<FaultController> faults_;
  const int rank_;
  const Op* op_ = nullptr;
  std::vector<uint8_t> finished_;  // per request id of the current op
  size_t outstanding_ = 0;
  std::vector<std::vector<Recv>> recvs_;  // per peer, in post order
  uint64_t seen_ = 0;                     // faults_->epoch() before the round's look
};

}  // namespace lockstep::testing
