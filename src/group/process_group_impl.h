// What a ProcessGroup holds behind its public header: the composition of one group (its backend,
// the debug layer's watchdog and the progress queue) and the counters that number its calls.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "comm/backend.h"
#include "comm/group_config.h"
#include "debug/issue_order.h"
#include "debug/watchdog.h"
#include "group/progress_queue.h"
#include "lockstep/group/process_group.h"

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

  // Starts the watchdog (unless LOCKSTEP_FLIGHT_RECORDER_SIZE=0); returns the queue's hooks.
  QueueHooks start_watchdog();
  // Checks op (the backend's check, on the caller's thread), numbers it (collective or per-pair
  // p2p sequence), sets its deadline and queues it.
  WorkPtr enqueue(Op op, std::chrono::milliseconds timeout);
};

}  // namespace lockstep
