// Transport: the small point-to-point interface that the algorithms in this folder are written
// against. The tcp backend implements it (backends/tcp/tcp_transport.h), and the hier backend
// runs its leaders' stage on a subset of it (backends/hier/subset_transport.h); an algorithm
// posts sends and receives of the current op and waits for them.
//
// Every message carries a header with the op's identity (see MessageHeader). A receive checks the
// header against what its own op expects and throws MismatchError naming both ranks, the op and
// both values on any difference, before a single payload byte is interpreted.
#pragma once

#include <cstddef>
#include <cstdint>

#include "comm/op.h"

namespace lockstep {

class Transport {
 public:
  using Request = uint64_t;

  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Starts sending `bytes` bytes at data to peer, as one message of the current op. data stays
  // valid and unchanged until the request completes. Messages to one peer arrive in post order.
  virtual Request post_send(int peer, const void* data, size_t bytes) = 0;
  // Starts receiving the next message from peer into data, which must be exactly `bytes` long:
  // a message of another size is a MismatchError.
  virtual Request post_recv(int peer, void* data, size_t bytes) = 0;
  // Progresses every posted request until r has completed. Throws NetworkError (a peer died or
  // closed its connection: names the peer and its host), MismatchError or TimeoutError (the op's
  // deadline passed: names the peers still owed data).
  virtual void wait(Request r) = 0;
  // Progresses until every posted request has completed.
  virtual void wait_all() = 0;
};

}  // namespace lockstep
