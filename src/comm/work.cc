#include "lockstep/comm/work.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "comm/failure.h"
#include "comm/work_access.h"
#include "core/log.h"
#include "lockstep/core/error.h"

namespace lockstep {

namespace detail {

struct WorkState {
  explicit WorkState(std::string d) : description(std::move(d)) {}
  const std::string description;
  std::mutex mu;
  std::condition_variable done_cv;
  // Written under mu; also read without it (release/acquire) by a waiter's poll loop.
  std::atomic<bool> done{false};
  std::exception_ptr error;
  std::vector<std::function<void(std::exception_ptr)>> callbacks;
  bool observed = false;       // someone saw the outcome: wait, exception() or a callback
  bool handle_alive = true;    // the caller's Work still exists
  int source_rank = -1;        // a recv from any source: the rank it received from
  std::weak_ptr<WaitPoller> poller;  // see work_access.h; may be empty
};

namespace {

// [Errors once] An op's error reaches the caller through wait() (or exception(), or a callback),
// and is not logged as well. Only an error nobody can see any more, of an op whose handle was
// dropped unobserved, is logged, once.
void log_unobserved(const WorkState& s) {
  log_line(LogLevel::error, detail::concat(what_of(s.error), " (the error of ", s.description,
                                           ", whose Work was dropped without wait())"));
}

}  // namespace

namespace {
thread_local bool on_progress_thread = false;
}  // namespace

std::pair<WorkPtr, WorkCompletion> WorkAccess::make(std::string description,
                                                    std::weak_ptr<WaitPoller> poller) {
  auto state = std::make_shared<WorkState>(std::move(description));
  state->poller = std::move(poller);
  return {WorkPtr(new Work(state)), state};
}

WorkPtr WorkAccess::make_completed(std::string description) {
  auto state = std::make_shared<WorkState>(std::move(description));
  state->done.store(true, std::memory_order_relaxed);
  return WorkPtr(new Work(std::move(state)));
}

void WorkAccess::complete(const WorkCompletion& s, std::exception_ptr error) {
  std::vector<std::function<void(std::exception_ptr)>> callbacks;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->error = std::move(error);
    s->done.store(true, std::memory_order_release);
    callbacks.swap(s->callbacks);
    if (!callbacks.empty()) s->observed = true;
    if (s->error && !s->handle_alive && !s->observed) log_unobserved(*s);
  }
  s->done_cv.notify_all();
  for (auto& fn : callbacks) fn(s->error);
}

const std::string& WorkAccess::description(const WorkCompletion& s) { return s->description; }

void WorkAccess::mark_progress_thread() { on_progress_thread = true; }

void WorkAccess::set_source_rank(const WorkCompletion& s, int rank) {
  std::lock_guard<std::mutex> lock(s->mu);
  s->source_rank = rank;
}

}  // namespace detail

Work::Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}

Work::~Work() {
  std::unique_lock<std::mutex> lock(state_->mu);
  // On a progress thread the op may be one this thread has yet to run: complete() logs its error.
  if (!detail::on_progress_thread) {
    // The progress thread completes every op by its deadline, so this wait is bounded too.
    state_->done_cv.wait(lock, [&] { return state_->done.load(); });
  }
  state_->handle_alive = false;
  if (state_->done && state_->error && !state_->observed) detail::log_unobserved(*state_);
}

bool Work::is_completed() const { return state_->done.load(std::memory_order_acquire); }

const std::string& Work::description() const { return state_->description; }

int Work::source_rank() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done ? state_->source_rank : -1;
}

void Work::wait(std::chrono::milliseconds timeout) {
  if (!state_->done.load(std::memory_order_acquire)) {
    if (auto poller = state_->poller.lock())
      poller->poll_while(
          [s = state_.get()] { return s->done.load(std::memory_order_acquire); });
  }
  std::unique_lock<std::mutex> lock(state_->mu);
  if (timeout.count() < 0) {
    // The progress thread completes every op by its deadline, so this wait is bounded too.
    state_->done_cv.wait(lock, [&] { return state_->done.load(); });
  } else if (!state_->done_cv.wait_for(lock, timeout, [&] { return state_->done.load(); })) {
    throw TimeoutError(detail::concat(state_->description, ": not finished after ",
                                      timeout.count(),
                                      " ms of Work::wait (the op itself continues until its own "
                                      "deadline)"));
  }
  state_->observed = true;
  if (state_->error) std::rethrow_exception(state_->error);
}

std::exception_ptr Work::exception() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->done) state_->observed = true;
  return state_->error;
}

void Work::on_complete(std::function<void(std::exception_ptr)> fn) {
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!state_->done) {
      state_->callbacks.push_back(std::move(fn));
      return;
    }
    error = state_->error;
    state_->observed = true;
  }
  fn(error);
}

}  // namespace lockstep
