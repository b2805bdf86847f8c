#include "lockstep/comm/work.h"

#include <condition_variable>
#include <mutex>
#include <vector>

#include "comm/work_access.h"
#include "lockstep/core/error.h"

namespace lockstep {

namespace detail {

struct WorkState {
  explicit WorkState(std::string d) : description(std::move(d)) {}
  const std::string description;
  std::mutex mu;
  std::condition_variable done_cv;
  bool done = false;
  std::exception_ptr error;
  std::vector<std::function<void(std::exception_ptr)>> callbacks;
};

namespace {
thread_local bool on_progress_thread = false;
}  // namespace

std::pair<WorkPtr, WorkCompletion> WorkAccess::make(std::string description) {
  auto state = std::make_shared<WorkState>(std::move(description));
  return {WorkPtr(new Work(state)), state};
}

void WorkAccess::complete(const WorkCompletion& s, std::exception_ptr error) {
  std::vector<std::function<void(std::exception_ptr)>> callbacks;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->error = std::move(error);
    s->done = true;
    callbacks.swap(s->callbacks);
  }
  s->done_cv.notify_all();
  for (auto& fn : callbacks) fn(s->error);
}

void WorkAccess::mark_progress_thread() { on_progress_thread = true; }

}  // namespace detail

Work::Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}

Work::~Work() {
  if (detail::on_progress_thread) return;
  // The progress thread completes every op by its deadline, so this wait is bounded too.
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->done_cv.wait(lock, [&] { return state_->done; });
}

bool Work::is_completed() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done;
}

const std::string& Work::description() const { return state_->description; }

void Work::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state_->mu);
  if (timeout.count() < 0) {
    // The progress thread completes every op by its deadline, so this wait is bounded too.
    state_->done_cv.wait(lock, [&] { return state_->done; });
  } else if (!state_->done_cv.wait_for(lock, timeout, [&] { return state_->done; })) {
    throw TimeoutError(detail::concat(state_->description, ": not finished after ",
                                      timeout.count(),
                                      " ms of Work::wait (the op itself continues until its own "
                                      "deadline)"));
  }
  if (state_->error) std::rethrow_exception(state_->error);
}

std::exception_ptr Work::exception() const {
  std::lock_guard<std::mutex> lock(state_->mu);
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
  }
  fn(error);
}

}  // namespace lockstep
