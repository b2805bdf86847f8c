// What a ProcessGroup holds behind its public header: the composition of one group (its backend,
// the debug layer's watchdog and the progress queue) and the counters that number its calls.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "comm/backend.h"
#include "comm/group_config.h"
#include "debug/issue_order.h"
#include "debug/watchdog.h"
#include "group/progress_queue.h"
#include "lockstep/group/process_group.h"
#include "p2p/engine.h"

namespace lockstep {

struct ProcessGroup::Impl {
  GroupConfig config;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<debug::Watchdog> watchdog;  // flight recorder, status keys, stall warnings
  std::unique_ptr<ProgressQueue> queue;
  std::unique_ptr<debug::IssueOrder> issue_order;  // LOCKSTEP_DEBUG=DETAIL only
  std::mutex issue_mu;  // numbering and queueing are one step, so queue order = number order
  uint64_t seq = 0;
  uint64_t subgroups = 0;
  uint64_t monitored_barriers = 0;
  uint64_t allocations = 0;  // allocate calls so far (numbers them, the same on every rank)
  std::vector<uint64_t> send_seq, recv_seq;
  uint64_t any_recv_seq = 0;
  uint64_t p2p_batches = 0;  // batch_isend_irecv calls so far (names them)
  // Sends and recvs, with progress of their own (src/p2p/engine.h); null for a backend that moves
  // its own (nccl), whose p2p ops go through the queue.
  std::unique_ptr<p2p::Engine> p2p;

  // Starts the watchdog (unless LOCKSTEP_FLIGHT_RECORDER_SIZE=0); returns the queue's hooks.
  QueueHooks start_watchdog();
  // An op's timeout: the given one, or the group's for kGroupTimeout (negative).
  std::chrono::milliseconds timeout_or_group(std::chrono::milliseconds timeout) const {
    return timeout.count() < 0 ? config.timeout : timeout;
  }
  // Throws InvalidArgument when the backend cannot reach op's buffers: "<call>: rank R passed a
  // cuda:0 buffer<context>, but <why>".
  void check_device(const Op& op, std::string_view call, std::string_view context = "") const;
  // The front door of every op: checks it (the backend's check, on the caller's thread), numbers
  // it (the group's sequence, or per pair and direction for p2p), sets its deadline, gives it its
  // flight-recorder entry and hands it on: a collective to the progress queue, a send or recv to
  // enqueue_p2p.
  WorkPtr enqueue(Op op, std::chrono::milliseconds timeout);
  // Sends and recvs (src/group/p2p.cc): to the p2p engine, or, without one or for CUDA buffers,
  // to the progress queue. batch: ops is one batch_isend_irecv (one Work; every op is checked
  // before any takes a number); else one op.
  WorkPtr enqueue_p2p(std::span<Op> ops, std::chrono::milliseconds timeout, bool batch);

  // src/group/p2p.cc: makes the engine (when the backend has a channel), and closes it, telling
  // peers `failure` when it is not empty (this rank failed) or that the group was destroyed.
  void start_p2p();
  void close_p2p(const std::string& failure);
  // The argument checks every send and recv passes (peer in range and not this rank unless
  // any_source; data for a non-empty buffer); returns the op's buffer.
  ConstBufferView check_p2p(const P2POp& op, bool any_source) const;
};

}  // namespace lockstep
