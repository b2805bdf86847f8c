// Futex wait and wake on a 32-bit word that lives in memory shared between processes.
//
// The words are std::atomic<uint32_t> inside a MAP_SHARED mapping, so the calls use the shared
// (not FUTEX_PRIVATE) forms: the kernel keys them by the backing page, and a waiter in one process
// is woken by a waker in another.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace lockstep::shmem {

static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words must be plain 32-bit words");
static_assert(sizeof(std::atomic<uint32_t>) == 4, "futex words must be plain 32-bit words");

// Sleeps while word still holds `expected`, for at most `timeout`. Returns when woken, when the
// value differs already, on a signal, or at the timeout: callers re-check their condition.
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::nanoseconds timeout);
// Wakes every waiter sleeping on word.
void futex_wake_all(std::atomic<uint32_t>& word);

}  // namespace lockstep::shmem
