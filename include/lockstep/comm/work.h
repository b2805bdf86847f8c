// Work: the handle every collective returns. The op runs on the group's progress thread (or, when
// it is small and nothing else is queued, on the caller's thread before the call returns); the
// caller overlaps its own work and then waits.
//
// [The rule] The buffers an op names belong to it until its Work completes: read or write them
// only after wait() (or is_completed()) says so. `pg.all_reduce(view(x))->wait()` is the
// synchronous call (torch.distributed's default). A call may block until its peers arrive, so
// every rank must issue the collectives of all its groups in the same order: two ranks that use
// two groups in opposite orders may wait for each other until the ops' deadlines (a TimeoutError
// naming the ranks each waited for; under LOCKSTEP_DEBUG=DETAIL, at once a MismatchError naming
// both groups). Whether an op runs inline or on the progress thread never changes what a program
// that keeps these rules sees.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>

namespace lockstep {

namespace detail {
struct WorkState;   // shared by the handle and the thread that runs the op (src/comm/work.cc)
struct WorkAccess;  // the completion side, for the group's progress thread (src/comm/work_access.h)
// Only WorkAccess makes one: a Work is made by the library, never by its users.
class WorkKey {
  friend struct WorkAccess;
  WorkKey() = default;
};
}  // namespace detail

class Work {
 public:
  // For std::make_shared (one allocation for the handle): the key is the library's alone.
  Work(detail::WorkKey, std::shared_ptr<detail::WorkState> state);
  static constexpr std::chrono::milliseconds kOpTimeout{-1};

  // [Dropped handles] Destroying the last handle of an op that is still in flight waits for the
  // op to finish (as the future of std::async does), so that the buffers it names are never used
  // after the caller has let them go. Errors are not rethrown from here: an op's error reaches the
  // caller once, through wait(), exception() or an on_complete callback, and only the error of an
  // op whose handle was dropped before anyone looked is logged (once) instead.
  ~Work();
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // Whether the op has finished, successfully or not. Never blocks.
  bool is_completed() const;
  // Blocks until the op finishes and rethrows its error, if any. With a timeout other than
  // kOpTimeout, throws TimeoutError when the op has not finished by then (the op itself goes on
  // until its own deadline). kOpTimeout waits as long as the op's own deadline allows.
  void wait(std::chrono::milliseconds timeout = kOpTimeout);
  // The op's error once it has failed; null while running or after success.
  std::exception_ptr exception() const;
  // "all_reduce #12 (f32 x 1000, sum)".
  const std::string& description() const;
  // For a recv from any source (ProcessGroup::recv_any) that has completed: the rank whose
  // message it received. -1 otherwise (any other op, or not completed yet).
  int source_rank() const;

  // Runs fn(error) once the op has finished (error is null on success): at once, on this thread,
  // when it already has; otherwise on the thread that completes it (the group's progress thread,
  // or the caller's for an op that ran inline), after the waiters were woken. fn must not wait
  // for other ops of the group. Used to complete futures (the torch backend's getFuture()).
  void on_complete(std::function<void(std::exception_ptr)> fn);

 private:
  friend struct detail::WorkAccess;

  std::shared_ptr<detail::WorkState> state_;
};

using WorkPtr = std::shared_ptr<Work>;

}  // namespace lockstep
