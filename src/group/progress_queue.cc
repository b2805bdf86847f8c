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
    Entry entry{.ops = {}, .work = completion};
    entry.ops.push_back(std::move(op));
    run_entries({&entry, 1});
    lock.lock();
    running_op_ = false;
    idle_.notify_all();
    return work;
  }
  queue_.push_back(Entry{.ops = {std::move(op)}, .work = completion});
  lock.unlock();
  wake_.notify_one();
  return work;
}

WorkPtr ProgressQueue::push_group(std::vector<Op> ops, std::string description) {
  if (hooks_.recorder)
    for (Op& op : ops) op.record_id = hooks_.recorder->on_queued(op);
  auto [work, completion] = detail::WorkAccess::make(std::move(description));
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Entry{.ops = std::move(ops), .work = completion});
  }
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

bool ProgressQueue::fusible(const Entry& e) const {
  for (const Op& op : e.ops)
    if (!backend_.fuses_p2p(op)) return false;
  return !e.ops.empty();
}

void ProgressQueue::loop() {
  detail::WorkAccess::mark_progress_thread();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    std::vector<Entry> entries;
    entries.push_back(std::move(queue_.front()));
    queue_.pop_front();
    // [Fused p2p]: the sends and recvs already queued behind it join it.
    if (fusible(entries.front()))
      while (!queue_.empty() && fusible(queue_.front())) {
        entries.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    running_op_ = true;
    lock.unlock();
    run_entries(entries);
    lock.lock();
    running_op_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

void ProgressQueue::run_entries(std::span<const Entry> entries) {
  std::vector<Op> ops;  // every op, for run_p2p_group; a lone op runs from its entry
  const bool lone = entries.size() == 1 && entries.front().ops.size() == 1;
  if (!lone)
    for (const Entry& e : entries) ops.insert(ops.end(), e.ops.begin(), e.ops.end());
  const std::vector<Op>& all = lone ? entries.front().ops : ops;
  std::exception_ptr cause;
  std::string cause_op;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cause = broken_;
    cause_op = broken_op_;
  }
  if (cause) {
    for (const Entry& e : entries) {
      if (hooks_.recorder)
        for (const Op& op : e.ops) hooks_.recorder->on_ended(op, false);
      try {
        rethrow_as(cause,
                   detail::concat(e.ops.front().name(), ": not run, because the group broke at ",
                                  cause_op, ": ", what_of(cause)));
      } catch (...) {
        detail::WorkAccess::complete(e.work, std::current_exception());
      }
    }
    return;
  }
  if (hooks_.recorder)
    for (const Op& op : all) hooks_.recorder->on_started(op);
  try {
    if (lone && !backend_.fuses_p2p(all.front()))
      backend_.run(all.front());
    else
      backend_.run_p2p_group(all);
    if (hooks_.recorder)
      for (const Op& op : all) hooks_.recorder->on_ended(op, true);
    for (const Entry& e : entries) detail::WorkAccess::complete(e.work);
  } catch (...) {
    auto error = std::current_exception();
    if (hooks_.recorder)
      for (const Op& op : all) hooks_.recorder->on_ended(op, false);
    error = explained(hooks_, all.front(), error);
    {
      std::lock_guard<std::mutex> lock(mu_);
      broken_ = error;
      broken_op_ = all.front().name();
    }
    // Not logged here: the caller sees it through its Work ([Errors once] in comm/work.cc).
    backend_.abort(what_of(error));
    for (const Entry& e : entries) detail::WorkAccess::complete(e.work, error);
  }
}

}  // namespace lockstep
