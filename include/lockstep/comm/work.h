// Work: the handle every collective returns. The op runs on the group's progress thread; the
// caller overlaps its own work and then waits.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace lockstep {

namespace detail {
struct WorkAccess;  // the completion side, for the group's progress thread (src/comm/work_access.h)
}

class Work {
 public:
  static constexpr std::chrono::milliseconds kOpTimeout{-1};

  // Whether the op has finished, successfully or not. Never blocks.
  bool is_completed() const;
  // Blocks until the op finishes and rethrows its error, if any. With a timeout other than
  // kOpTimeout, throws TimeoutError when the op has not finished by then (the op itself goes on
  // until its own deadline). kOpTimeout waits as long as the op's own deadline allows.
  void wait(std::chrono::milliseconds timeout = kOpTimeout);
  // The op's error once it has failed; null while running or after success.
  std::exception_ptr exception() const;
  // "all_reduce #12 (f32 x 1000, sum)".
  const std::string& description() const { return description_; }

  // Runs fn(error) once the op has finished (error is null on success): at once, on this thread,
  // when it already has; otherwise on the thread that completes it (the group's progress thread,
  // or the caller's for an op that ran inline), after the waiters were woken. fn must not wait
  // for other ops of the group. Used to complete futures (the torch backend's getFuture()).
  void on_complete(std::function<void(std::exception_ptr)> fn);

 private:
  friend struct detail::WorkAccess;
  explicit Work(std::string description) : description_(std::move(description)) {}
  // Called once, by the thread that ran the op.
  void complete(std::exception_ptr error);

  std::string description_;
  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::vector<std::function<void(std::exception_ptr)>> callbacks_;
};

using WorkPtr = std::shared_ptr<Work>;

}  // namespace lockstep
