#include "shmem/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace lockstep::shmem {

void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::nanoseconds timeout) {
  if (timeout.count() <= 0) return;
  timespec ts{.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000),
              .tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000)};
  // EAGAIN (the value changed), EINTR and ETIMEDOUT all mean "re-check": nothing to report.
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr,
            0);
}

}  // namespace lockstep::shmem
