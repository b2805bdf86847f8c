// Deadlines: every blocking call in lockstep has one.
#pragma once

#include <algorithm>
#include <chrono>

namespace lockstep {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A point in time after which a blocking call gives up with TimeoutError.
class Deadline {
 public:
  explicit Deadline(Clock::time_point at) : at_(at) {}
  static Deadline after(milliseconds timeout) { return Deadline(Clock::now() + timeout); }
  Clock::time_point at() const { return at_; }
  bool expired() const { return Clock::now() >= at_; }
  // Time left, never negative.
  milliseconds remaining() const {
    auto left = std::chrono::duration_cast<milliseconds>(at_ - Clock::now());
    return std::max(left, milliseconds(0));
  }
  // Milliseconds left for poll(2)-style calls, capped at cap_ms and at least 0.
  int poll_ms(int cap_ms = 1 << 30) const {
    return static_cast<int>(std::min<long long>(remaining().count(), cap_ms));
  }

 private:
  Clock::time_point at_;
};

}  // namespace lockstep
