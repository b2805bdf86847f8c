// One RPC connection, either side. An outgoing one carries this process's calls to one worker and
// their answers back (pending: the calls waiting); an incoming one carries another worker's calls
// to this process (strands: its calls waiting to run, by lane). Only the thread that holds the
// connection reads it (read_mu); any thread may send, one frame at a time (send_mu).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "lockstep/rpc/rpc.h"
#include "net/socket.h"
#include "rpc/frame.h"
#include "rpc/future_state.h"
#include "rpc/handshake.h"

namespace lockstep::rpc {

struct PendingCall {
  std::shared_ptr<internal::FutureState> state;
  std::string what;  // "rpc_sync('worker1', 'add')", for errors
  Clock::time_point started;
  Clock::time_point deadline;  // max() for none
};

struct Strand {
  std::deque<Frame> queue;
  bool running = false;
};

class Connection {
 public:
  enum class Side { outgoing, incoming };
  Connection(Side side, net::Fd fd, uint64_t id, int peer)
      : side(side), fd(std::move(fd)), id(id), peer(peer), established(side == Side::outgoing) {}

  const Side side;
  net::Fd fd;
  const uint64_t id;      // the poller's key
  std::atomic<int> peer;  // the worker's rank (incoming: known once its handshake is done)
  // Incoming, until its handshake is done (then established): the poller event's holder only.
  std::unique_ptr<ServerHandshake> handshake;
  std::atomic<bool> established;
  Clock::time_point handshake_until{};  // when an unfinished handshake is dropped

  std::timed_mutex send_mu;
  std::mutex read_mu;  // held by whoever reads: a pool thread, or a caller in wait_reading
  FrameReader reader;  // read_mu

  std::mutex mu;
  bool ended = false;
  bool goodbye = false;                               // the peer said goodbye before its end
  std::unordered_map<uint64_t, PendingCall> pending;  // outgoing
  std::unordered_map<uint32_t, Strand> strands;       // incoming

  // Sends one frame (send_mu held, waiting up to deadline); 0 or the errno that broke it.
  int send(FrameKind kind, uint64_t call_id, uint32_t lane, const Message& message,
           Deadline deadline);
};

}  // namespace lockstep::rpc
