#include "backends/mpi/wait.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "backends/mpi/errors.h"
#include "backends/mpi/runtime.h"
#include "comm/failure.h"
#include "lockstep/core/error.h"

namespace lockstep::mpi {

namespace {

// [Waiting] The yield window: 2 ms, plus the time the op's bytes take at 0.5 GB/s.
constexpr std::chrono::nanoseconds kMinYield = milliseconds(2);
constexpr uint64_t kYieldNanosPerByte = 2;
constexpr std::chrono::microseconds kFirstSleep{20};
constexpr std::chrono::microseconds kMaxSleep{1000};
constexpr milliseconds kAbortCheckEvery{100};
// [Waiting] Polls without pause before the first yield (on a host that is not oversubscribed).
constexpr std::chrono::microseconds kSpin{50};

[[noreturn]] void throw_timeout(const WaitContext& c) {
  throw TimeoutError(detail::concat(
      "mpi backend: ", c.what_text(), " on rank ", c.rank, " of group '", c.group,
      "' timed out: not every rank of the group reached it before the deadline. MPI cannot name "
      "the missing ranks; check that every rank calls the same collectives in the same order, "
      "and raise LOCKSTEP_TIMEOUT (or the op's timeout) if a rank is merely slow"));
}

// Throws when a peer left an abort note for the group.
void check_abort_note(const WaitContext& c) {
  if (!c.store) return;
  std::optional<std::string> note;
  try {
    if (!c.store->check({abort_key(c.group)})) return;
    note = read_abort_note(*c.store, c.group, milliseconds(100));
  } catch (const std::exception&) {
    return;  // the store is gone: keep waiting, the deadline still bounds the wait
  }
  if (note)
    throw NetworkError(detail::concat("mpi backend: ", c.what_text(), " on rank ", c.rank,
                                      " failed: the group was aborted by ", *note));
}

}  // namespace

void wait_until(const std::function<bool()>& poll, const WaitContext& c) {
  if (poll()) return;
  const auto start = Clock::now();
  if (!c.oversubscribed) {
    const auto spin_until = start + kSpin;
    for (unsigned round = 1;; ++round) {
      if (poll()) return;
      if (round % 16 == 0 && Clock::now() >= spin_until) break;
    }
  }
  const auto yield_until =
      start + kMinYield + std::chrono::nanoseconds(c.bytes * kYieldNanosPerByte);
  auto next_check = start + kAbortCheckEvery;
  std::chrono::microseconds pause = kFirstSleep;
  while (!poll()) {
    const auto now = Clock::now();
    if (now >= c.deadline.at()) throw_timeout(c);
    if (now >= next_check) {
      check_abort_note(c);
      next_check = now + kAbortCheckEvery;
    }
    if (now < yield_until) {
      ::sched_yield();
    } else {
      std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(pause, c.deadline.at() - now));
      pause = std::min(pause * 2, kMaxSleep);
    }
  }
}

void wait_request(MPI_Request& request, const WaitContext& c, const char* call,
                  MPI_Status* status) {
  MPI_Status local;
  try {
    wait_until(
        [&] {
          int done = 0;
          check_call(MPI_Test(&request, &done, &local), c, call);
          return done != 0;
        },
        c);
  } catch (...) {
    adopt_leftover(request);  // [Leftover requests]
    request = MPI_REQUEST_NULL;
    throw;
  }
  if (status) *status = local;
}

}  // namespace lockstep::mpi
