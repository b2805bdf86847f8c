// The completion side of Work, which the public header keeps private: only the thread that runs
// an op (the group's progress thread, or the caller's for an inline op) completes it.
#pragma once

#include <cstddef>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "lockstep/comm/work.h"

namespace lockstep::detail {

using WorkCompletion = std::shared_ptr<WorkState>;

// An op's description (Work::description()): its text, or what makes the text, built only when
// someone asks (an error, a log line, the caller). The fast paths of point-to-point format no
// text per message: that alone was ~80 ns of a 4-byte send.
class Description {
 public:
  Description(std::string text) : text_(std::move(text)) {}  // NOLINT: implicit on purpose
  Description(const char* text) : text_(text) {}             // NOLINT
  // The text Fn(args) makes, when asked. T is copied bytewise.
  template <auto Fn, class T>
  static Description later(const T& args) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= kArgsBytes);
    Description d;
    d.make_ = [](const std::byte* p) {
      T t;
      std::memcpy(static_cast<void*>(&t), p, sizeof t);
      return std::string(Fn(t));
    };
    std::memcpy(d.args_, &args, sizeof args);
    return d;
  }
  std::string text() const { return make_ ? make_(args_) : text_; }

 private:
  static constexpr size_t kArgsBytes = 64;
  Description() = default;
  std::string text_;
  std::string (*make_)(const std::byte*) = nullptr;
  alignas(8) std::byte args_[kArgsBytes];
};

// What a thread that waits for an op may run to drive the op's progress itself for a short while
// (the p2p engine: no hand-off between threads on a fast path). poll_while returns once done() is
// true or its own budget is spent; Work::wait then blocks as usual. Works hold it weakly: a Work
// may outlive its group.
class WaitPoller {
 public:
  virtual ~WaitPoller() = default;
  virtual void poll_while(const std::function<bool()>& done) = 0;
};

struct WorkAccess {
  // A new op's handle, for the caller, and its completion side, for the thread that runs it.
  static std::pair<WorkPtr, WorkCompletion> make(Description description,
                                                 std::weak_ptr<WaitPoller> poller = {});
  // The handle of an op that finished successfully before anyone could wait for it.
  static WorkPtr make_completed(Description description);
  // Called once per op: wakes the waiters, then runs the on_complete callbacks.
  static void complete(const WorkCompletion& work, std::exception_ptr error = nullptr);
  // Completes a successful op at once when nothing more is to be done (no callback, nobody
  // blocked in wait): true. False: complete(work) must still run (callbacks, wake-ups), outside
  // any lock a callback might need. Never runs a callback itself, so callers may hold locks.
  static bool complete_quietly(const WorkCompletion& work);
  // Marks the calling thread as a group's progress thread: a handle dropped there (by an
  // on_complete callback, say) does not wait, since this thread may be the one that must run the
  // op.
  static void mark_progress_thread();
  // The op's description (Work::description()), for the thread that runs it.
  static const std::string& description(const WorkCompletion& work);
  // A recv from any source: the rank it received from (before complete()).
  static void set_source_rank(const WorkCompletion& work, int rank);
};

}  // namespace lockstep::detail
