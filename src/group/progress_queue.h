// ProgressQueue: the group's progress thread. Runs queued ops on the backend, one at a time, in
// issue order, and completes their Work handles.
//
// [Fused p2p] A backend whose sends and recvs must progress together (Backend::fuses_p2p: nccl)
// gets every run of such ops queued back to back in one run_p2p_group call: a batch from
// push_group (batch_isend_irecv, one Work), and next to it any single sends and recvs already
// waiting in the queue (each keeping its own Work). Ops are never held back to wait for more.
//
// [Broken groups] The first op that fails aborts the backend and breaks the queue: every queued
// and later op fails at once with an error of the same class (comm/failure.h) that names its own
// op and repeats the original cause. Argument errors never get here: the front end and
// Backend::check raise them on the caller's thread, before an op is queued.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "comm/backend.h"
#include "comm/op.h"
#include "comm/work_access.h"
#include "lockstep/comm/work.h"

namespace lockstep {

namespace debug {
class FlightRecorder;
}

// Observers from the debug layer (src/debug/watchdog.h); both optional.
struct QueueHooks {
  // Sees every op queued, started and ended.
  debug::FlightRecorder* recorder = nullptr;
  // Called once, on the group's first failure, before the peers are told: returns the message to
  // raise instead of `what` (same error type). timed_out: the error is a TimeoutError.
  std::function<std::string(const Op& op, const std::string& what, bool timed_out)> explain_failure;
};

class ProgressQueue {
 public:
  explicit ProgressQueue(Backend& backend, QueueHooks hooks = {});
  // Finishes every queued op (each bounded by its deadline), then stops the thread.
  ~ProgressQueue();

  // Queues op; returns its Work. Thread-safe.
  WorkPtr push(Op op);
  // Queues sends and recvs that run as one group ([Fused p2p]); one Work, described by
  // `description`, completes when all have. Thread-safe.
  WorkPtr push_group(std::vector<Op> ops, std::string description);
  // Blocks until every queued op has completed.
  void drain();
  // Whether an op has failed (the group is broken).
  bool broken() const;

 private:
  // One push: its ops (one, or a push_group's batch) and their Work.
  struct Entry {
    std::vector<Op> ops;
    detail::WorkCompletion work;
  };

  void loop();
  // Whether every op of e may join a fused p2p group.
  bool fusible(const Entry& e) const;
  // Runs entries: one entry's single op through Backend::run, else all their ops through
  // Backend::run_p2p_group. Completes every entry's Work.
  void run_entries(std::span<const Entry> entries);

  Backend& backend_;
  QueueHooks hooks_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<Entry> queue_;
  bool running_op_ = false;
  bool stop_ = false;
  std::exception_ptr broken_;  // the first failure
  std::string broken_op_;      // its op's name
  std::thread thread_;
};

}  // namespace lockstep
