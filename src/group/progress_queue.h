// ProgressQueue: the group's progress thread. Runs queued ops on the backend, one at a time, in
// issue order, and completes their Work handles.
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
#include <string>
#include <thread>

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
  // Blocks until every queued op has completed.
  void drain();
  // Whether an op has failed (the group is broken).
  bool broken() const;

 private:
  void loop();
  void run_one(const Op& op, const detail::WorkCompletion& work);

  Backend& backend_;
  QueueHooks hooks_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<std::pair<Op, detail::WorkCompletion>> queue_;
  bool running_op_ = false;
  bool stop_ = false;
  std::exception_ptr broken_;  // the first failure
  std::string broken_op_;      // its op's name
  std::thread thread_;
};

}  // namespace lockstep
