#include "lockstep/comm/work.h"

#include "lockstep/core/error.h"

namespace lockstep {

bool Work::is_completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void Work::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (timeout.count() < 0) {
    // The progress thread completes every op by its deadline, so this wait is bounded too.
    done_cv_.wait(lock, [&] { return done_; });
  } else if (!done_cv_.wait_for(lock, timeout, [&] { return done_; })) {
    throw TimeoutError(detail::concat(description_, ": not finished after ", timeout.count(),
                                      " ms of Work::wait (the op itself continues until its own "
                                      "deadline)"));
  }
  if (error_) std::rethrow_exception(error_);
}

std::exception_ptr Work::exception() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void Work::on_complete(std::function<void(std::exception_ptr)> fn) {
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!done_) {
      callbacks_.push_back(std::move(fn));
      return;
    }
    error = error_;
  }
  fn(error);
}

void Work::complete(std::exception_ptr error) {
  std::vector<std::function<void(std::exception_ptr)>> callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::move(error);
    done_ = true;
    callbacks.swap(callbacks_);
  }
  done_cv_.notify_all();
  for (auto& fn : callbacks) fn(error_);
}

}  // namespace lockstep
