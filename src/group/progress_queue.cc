#include "group/progress_queue.h"

#include "comm/failure.h"
#include "comm/work_access.h"
#include "debug/flight_recorder.h"
#include "lockstep/core/error.h"

namespace lockstep {

namespace {

// The first failure, with the message hooks.explain_failure gives it (same error type).
std::exception_ptr explained(const QueueHooks& hooks, const Op& op, std::exception_ptr error) {
  if (!hooks.explain_failure) return error;
  std::string what = what_of(error);
  std::string better =
      hooks.explain_failure(op, what, error_class_of(error) == ErrorClass::timeout);
  if (better == what) return error;
  try {
    rethrow_as(error, better);
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace

ProgressQueue::ProgressQueue(Backend& backend, QueueHooks hooks)
    : backend_(backend), hooks_(std::move(hooks)) {
  thread_ = std::thread([this] { loop(); });
}

ProgressQueue::~ProgressQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

WorkPtr ProgressQueue::push(Op op) {
  if (hooks_.recorder) op.record_id = hooks_.recorder->on_queued(op);
  auto [work, completion] = detail::WorkAccess::make(op.describe());
  std::unique_lock<std::mutex> lock(mu_);
  // [Inline ops] With nothing queued or running, a small op on a low-latency backend runs on the
  // caller's thread: issue order is kept (the caller holds the group's issue lock), and the
  // hand-off to the progress thread, which costs more than the op, is saved.
  if (queue_.empty() && !running_op_ && backend_.prefers_inline(op)) {
    running_op_ = true;
    lock.unlock();
    run_one(op, completion);
    lock.lock();
    running_op_ = false;
    idle_.notify_all();
    return work;
  }
  queue_.emplace_back(std::move(op), completion);
  lock.unlock();
  wake_.notify_one();
  return work;
}

void ProgressQueue::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [&] { return queue_.empty() && !running_op_; });
}

bool ProgressQueue::broken() const {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_ != nullptr;
}

void ProgressQueue::loop() {
  detail::WorkAccess::mark_progress_thread();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    auto [op, work] = std::move(queue_.front());
    queue_.pop_front();
    running_op_ = true;
    lock.unlock();
    run_one(op, work);
    lock.lock();
    running_op_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

void ProgressQueue::run_one(const Op& op, const detail::WorkCompletion& work) {
  std::exception_ptr cause;
  std::string cause_op;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cause = broken_;
    cause_op = broken_op_;
  }
  if (cause) {
    if (hooks_.recorder) hooks_.recorder->on_ended(op, false);
    try {
      rethrow_as(cause, detail::concat(op.name(), ": not run, because the group broke at ",
                                       cause_op, ": ", what_of(cause)));
    } catch (...) {
      detail::WorkAccess::complete(work, std::current_exception());
    }
    return;
  }
  if (hooks_.recorder) hooks_.recorder->on_started(op);
  try {
    backend_.run(op);
    if (hooks_.recorder) hooks_.recorder->on_ended(op, true);
    detail::WorkAccess::complete(work);
  } catch (...) {
    auto error = std::current_exception();
    if (hooks_.recorder) hooks_.recorder->on_ended(op, false);
    error = explained(hooks_, op, error);
    {
      std::lock_guard<std::mutex> lock(mu_);
      broken_ = error;
      broken_op_ = op.name();
    }
    // Not logged here: the caller sees it through its Work ([Errors once] in comm/work.cc).
    backend_.abort(what_of(error));
    detail::WorkAccess::complete(work, error);
  }
}

}  // namespace lockstep
