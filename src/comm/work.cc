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
  explicit WorkState(Description d) : made(std::move(d)) {}
  const Description made;
  // The text of `made`, built on the first call.
  const std::string& description() {
    std::call_once(described, [this] { text = made.text(); });
    return text;
  }
  std::once_flag described;
  std::string text;
  std::mutex mu;
  std::condition_variable done_cv;
  // Written under mu; also read without it (release/acquire) by a waiter's poll loop.
  std::atomic<bool> done{false};
  std::exception_ptr error;
  std::vector<std::function<void(std::exception_ptr)>> callbacks;
  // [Quiet completion] A success with no callback and nobody blocked in wait() completes with one
  // store, without the lock. on_complete raises has_callbacks, and a blocking waiter `blocked`,
  // under the lock before it looks at done; complete() stores done before it looks at them (all
  // seq_cst): either it sees them and takes the lock, or they see done.
  std::atomic<bool> has_callbacks{false};
  std::atomic<int> blocked{0};
  // Someone saw the outcome: wait, exception() or a callback. Atomic: once done, wait() and the
  // handle's destruction read and write it without the lock (the fast path of a finished op).
  std::atomic<bool> observed{false};
  bool handle_alive = true;          // the caller's Work still exists
  int source_rank = -1;              // a recv from any source: the rank it received from
  std::weak_ptr<WaitPoller> poller;  // see work_access.h; may be empty
};

namespace {

// [Errors once] An op's error reaches the caller through wait() (or exception(), or a callback),
// and is not logged as well. Only an error nobody can see any more, of an op whose handle was
// dropped unobserved, is logged, once.
void log_unobserved(WorkState& s) {
  log_line(LogLevel::error, detail::concat(what_of(s.error), " (the error of ", s.description(),
                                           ", whose Work was dropped without wait())"));
}

}  // namespace

namespace {
thread_local bool on_progress_thread = false;
}  // namespace

std::pair<WorkPtr, WorkCompletion> WorkAccess::make(Description description,
                                                    std::weak_ptr<WaitPoller> poller) {
  auto state = std::make_shared<WorkState>(std::move(description));
  state->poller = std::move(poller);
  return {std::make_shared<Work>(WorkKey{}, state), state};
}

namespace {

// A finished op's handle and state in one allocation (the fast path of every small send): the
// handle holds its state without owning it, since both live and die together.
struct CompletedWork {
  CompletedWork(WorkKey key, Description description)
      : state(std::move(description)),
        work(key, std::shared_ptr<WorkState>(std::shared_ptr<void>(), &state)) {
    state.done.store(true, std::memory_order_relaxed);
  }
  WorkState state;
  Work work;  // destroyed first
};

}  // namespace

WorkPtr WorkAccess::make_completed(Description description) {
  auto block = std::make_shared<CompletedWork>(WorkKey{}, std::move(description));
  return WorkPtr(block, &block->work);
}

bool WorkAccess::complete_quietly(const WorkCompletion& s) {
  s->done.store(true, std::memory_order_seq_cst);
  return !s->has_callbacks.load(std::memory_order_seq_cst) &&
         s->blocked.load(std::memory_order_seq_cst) == 0;
}

void WorkAccess::complete(const WorkCompletion& s, std::exception_ptr error) {
  if (!error && complete_quietly(s)) return;
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

const std::string& WorkAccess::description(const WorkCompletion& s) {
  return s->description();
}

void WorkAccess::mark_progress_thread() {
  on_progress_thread = true;
}

void WorkAccess::set_source_rank(const WorkCompletion& s, int rank) {
  std::lock_guard<std::mutex> lock(s->mu);
  s->source_rank = rank;
}

}  // namespace detail

Work::Work(detail::WorkKey, std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}

Work::~Work() {
  if (state_->done.load(std::memory_order_acquire)) {
    // complete() has run (it set done under the lock, after its own look at handle_alive): no
    // other thread reads handle_alive any more, and error is final.
    if (state_->error && !state_->observed.load()) detail::log_unobserved(*state_);
    return;
  }
  std::unique_lock<std::mutex> lock(state_->mu);
  // On a progress thread the op may be one this thread has yet to run: complete() logs its error.
  if (!detail::on_progress_thread) {
    // The progress thread completes every op by its deadline, so this wait is bounded too.
    state_->blocked.fetch_add(1);
    state_->done_cv.wait(lock, [&] { return state_->done.load(); });
    state_->blocked.fetch_sub(1);
  }
  state_->handle_alive = false;
  if (state_->done && state_->error && !state_->observed) detail::log_unobserved(*state_);
}

bool Work::is_completed() const {
  return state_->done.load(std::memory_order_acquire);
}

const std::string& Work::description() const {
  return state_->description();
}

int Work::source_rank() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done ? state_->source_rank : -1;
}

void Work::wait(std::chrono::milliseconds timeout) {
  if (!state_->done.load(std::memory_order_acquire)) {
    if (auto poller = state_->poller.lock())
      poller->poll_while([s = state_.get()] { return s->done.load(std::memory_order_acquire); });
  }
  if (state_->done.load(std::memory_order_acquire)) {  // error was set before done: final
    // Relaxed: only this handle's own destruction reads it now, on this thread or after a
    // hand-off that orders it. (A seq_cst store here would stall on the stores of a send just
    // made, until the peer's core took their cache lines.)
    state_->observed.store(true, std::memory_order_relaxed);
    if (state_->error) std::rethrow_exception(state_->error);
    return;
  }
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->blocked.fetch_add(1);  // before the predicate's look at done: [Quiet completion]
  bool finished = true;
  if (timeout.count() < 0) {
    // The progress thread completes every op by its deadline, so this wait is bounded too.
    state_->done_cv.wait(lock, [&] { return state_->done.load(); });
  } else {
    finished = state_->done_cv.wait_for(lock, timeout, [&] { return state_->done.load(); });
  }
  state_->blocked.fetch_sub(1);
  if (!finished) {
    throw TimeoutError(detail::concat(state_->description(), ": not finished after ",
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
    state_->has_callbacks.store(true);  // before the look at done: [Quiet completion]
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
